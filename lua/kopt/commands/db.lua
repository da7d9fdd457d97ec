-- `kopt db list | show PROBLEM | export PROBLEM`: what the experience
-- database (kopt.expdb, docs/DATABASE.md) holds. PROBLEM is a problem's
-- number from `kopt db list`, its name when only one problem has it, the
-- beginning of its key, or the beginning of its name when only one problem's
-- name begins so. The file is opened read-only.
local errors = require("kopt.errors")
local expdb = require("kopt.expdb")
local json = require("kopt.json")
local rundir_mod = require("kopt.rundir")
local sys = require("kopt.sys")

local M = { summary = "list, show and export (T4) what the experience database holds" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--help" }

local USAGE = [[
usage: kopt db [--db PATH] list
       kopt db [--db PATH] show PROBLEM [--run N]
       kopt db [--db PATH] export PROBLEM [--run N] [-o FILE]
  list      every problem: its number, name, device, toolkit, runs, evaluations, best time
  show      a problem's identity, its runs and its ten best configurations (--run N: that run's evaluations)
  export    T4 JSON (the format of a run's results.json): every state measured for the problem,
            its latest measurement (--run N: that run's evaluations in order); stdout unless -o FILE
  PROBLEM   a number from `kopt db list`, a name only one problem has, the beginning of a key (4 hex digits or more), or the
            beginning of a name only one problem has
  --db PATH the database (default: $KOPT_DB, else $XDG_DATA_HOME/kopt/experience.db,
            else ~/.local/share/kopt/experience.db)
]]

local function parse(argv)
  local o, pos, i = {}, {}, 1
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then
      o.help = true
    elseif a == "--db" or a == "--run" or a == "-o" then
      local v = argv[i + 1]
      if not v then errors.usage("db: %s needs a value", a) end
      if a == "--run" then
        o.run = math.tointeger(tonumber(v))
        if not o.run then errors.usage("db: --run: expected a run number, got '%s'", v) end
      else
        o[a == "--db" and "db" or "out"] = v
      end
      i = i + 1
    elseif a:sub(1, 1) == "-" then
      errors.usage("db: unknown option '%s' (see kopt db --help)", a)
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return o, pos
end

-- The latest measurement of each state of problem ? (the one served and
-- exported: a state measured again by a --fresh run has two), as a WHERE
-- clause over evaluations.
local LATEST = [[id IN (SELECT max(id) FROM evaluations WHERE problem_id = ? AND served_from IS NULL GROUP BY state)]]

-- Whether the file keeps the names problems were run under (a file of
-- schema version 2, read-only, is read as it is).
local function has_names(db)
  return #db:rows("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'problem_names'") > 0
end

local function find_problem(db, what)
  local n = math.tointeger(tonumber(what))
  local rows = n and db:rows("SELECT * FROM problems WHERE id = ?", n) or {}
  -- (by any name it was run under: a renamed spec is the same problem)
  local named = has_names(db) and "SELECT * FROM problems WHERE %s OR id IN (SELECT problem_id FROM problem_names WHERE %s)"
    or "SELECT * FROM problems WHERE %s OR (0 AND %s)"
  if #rows == 0 then rows = db:rows(named:format("name = ?", "name = ?"), what, what) end
  -- (the start of a key, hex digits only: LIKE would read '_' and '%' as wildcards)
  if #rows == 0 and what:match("^%x%x%x%x+$") then
    rows = db:rows("SELECT * FROM problems WHERE substr(key, 1, length(?)) = ?", what, what)
  end
  -- the start of a name ("softmax" for softmax_f32_8192), when it is unique
  if #rows == 0 then
    local prefix = "substr(name, 1, length(?)) = ?"
    rows = db:rows(named:format(prefix, prefix), what, what, what, what)
  end
  if #rows == 0 then errors.usage("db: no problem '%s' in %s (see kopt db list)", what, db.path) end
  if #rows > 1 then
    local ids = {}
    for i, r in ipairs(rows) do ids[i] = tostring(r.id) end
    errors.usage("db: '%s' names %d problems (%s); give the number", what, #rows, table.concat(ids, ", "))
  end
  return rows[1]
end

-- s padded to w characters (not bytes: a name in UTF-8 lines up too)
local function cell(s, w)
  s = tostring(s)
  return s .. string.rep(" ", w - (utf8.len(s) or #s))
end

local function fmt_ms(v) return type(v) == "number" and string.format("%.5g", v) or "-" end

local function config_text(text)
  local c = json.decode(text or "") or {}
  local keys = {}
  for k in pairs(c) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. "=" .. tostring(c[k]) end
  return table.concat(parts, ", ")
end

local function list(db)
  local rows = db:rows([[SELECT p.id, p.name, p.device, p.toolkit, p.key,
      (SELECT count(*) FROM runs r WHERE r.problem_id = p.id) AS runs,
      (SELECT count(*) FROM evaluations e WHERE e.problem_id = p.id AND e.served_from IS NULL) AS measured
    FROM problems p ORDER BY p.id]])
  -- (the best by the spec's objective when it has one: its time)
  for _, r in ipairs(rows) do
    local best = db:best_rows(1, LATEST, r.id)[1]
    r.best = best and best.time_ms
  end
  local out = { string.format("%s: %d problem%s", db.path, #rows, #rows == 1 and "" or "s"),
                string.format("  %-4s %-28s %-24s %-26s %5s %9s %-11s %s", "#", "name", "device", "toolkit", "runs",
                              "measured", "best (ms)", "key") }
  for _, r in ipairs(rows) do
    out[#out + 1] = string.format("  %-4d %s %s %s %5d %9d %-11s %s", r.id, cell(r.name or "?", 28),
                                  cell(r.device or "?", 24), cell(r.toolkit or "?", 26), r.runs, r.measured,
                                  fmt_ms(r.best), r.key:sub(1, 12))
  end
  return table.concat(out, "\n") .. "\n"
end

-- The other names problem p was run under, as " (also run as a, b)".
local function other_names(db, p)
  local names = {}
  if not has_names(db) then return "" end
  for _, r in ipairs(db:rows("SELECT name FROM problem_names WHERE problem_id = ? ORDER BY last_seen, name", p.id)) do
    if r.name ~= p.name then names[#names + 1] = r.name end
  end
  return #names > 0 and (" (also run as " .. table.concat(names, ", ") .. ")") or ""
end

local function show(db, p, run)
  local out = {
    string.format("problem %d: %s%s", p.id, p.name or "?", other_names(db, p)),
    string.format("  key %s (spec %s, source %s, space %s)", p.key, p.spec_hash, p.source_hash, p.space_hash),
    string.format("  device %s, %s; first seen %s", p.device, p.toolkit, p.first_seen or "?"),
    "",
    string.format("  %-4s %-10s %-5s %-7s %6s %9s %-18s %-10s %s", "run", "strategy", "seed", "budget", "evals",
                  "measured", "stopped", "best (ms)", "started, folder"),
  }
  for _, r in ipairs(db:rows("SELECT * FROM runs WHERE problem_id = ? ORDER BY id", p.id)) do
    out[#out + 1] = string.format("  %-4d %-10s %-5s %-7s %6s %9s %-18s %-10s %s, %s", r.id, r.strategy or "?",
                                  tostring(r.seed), r.budget and tostring(r.budget) or "none",
                                  tostring(r.evaluations or "-"), tostring(r.measured or "-"),
                                  r.stop_reason or "(unfinished)", fmt_ms(r.best_ms), r.started or "?", r.out_dir or "?")
  end
  out[#out + 1] = ""
  local evs
  if run then
    evs = db:rows("SELECT * FROM evaluations WHERE problem_id = ? AND run_id = ? ORDER BY n", p.id, run)
    if #evs == 0 then errors.usage("db: problem %d has no run %d with evaluations", p.id, run) end
    out[#out + 1] = string.format("  run %d: %d evaluations", run, #evs)
  else
    evs = db:best_rows(10, LATEST, p.id)
    out[#out + 1] = string.format("  the %d best configurations measured", #evs)
  end
  out[#out + 1] = string.format("  %-4s %-5s %-12s %-10s %-9s %-14s %s", "run", "n", "status", "time (ms)", "p90 (ms)",
                                "method", "config")
  for _, e in ipairs(evs) do
    -- (an edited or written kernel is told by its source hash: the same
    -- knobs, or none, with other code)
    local variant = type(e.state) == "string" and e.state:match("#(%x+)$")
    local config = config_text(e.config)
    if variant then config = (config ~= "" and (config .. " ") or "") .. "(kernel " .. variant:sub(1, 8) .. ")" end
    out[#out + 1] = string.format("  %-4s %-5s %-12s %-10s %-9s %-14s %s%s", tostring(e.run_id), tostring(e.n),
                                  e.status or "?", fmt_ms(e.time_ms), fmt_ms(e.p90_ms), e.method or "-", config,
                                  e.served_from and " (served)" or "")
  end
  local n = db:rows([[SELECT count(*) AS n FROM llm_attempts a JOIN evaluations e ON a.evaluation_id = e.id
                      WHERE e.problem_id = ?]], p.id)[1].n
  if n > 0 then out[#out + 1] = string.format("  %d LLM attempts on record", n) end
  return table.concat(out, "\n") .. "\n"
end

local function export(db, p, run)
  local evs
  if run then
    evs = db:rows("SELECT * FROM evaluations WHERE problem_id = ? AND run_id = ? ORDER BY n", p.id, run)
    if #evs == 0 then errors.usage("db: problem %d has no run %d with evaluations", p.id, run) end
  else
    evs = db:rows("SELECT * FROM evaluations WHERE " .. LATEST .. " ORDER BY id", p.id)
  end
  local records = {}
  for i, e in ipairs(evs) do
    -- (the state key: an edited kernel's carries its source hash, written
    -- as its variant, so a replay of the export tells it from the spec's)
    records[i] = { config = json.decode(e.config or "") or {}, result = json.decode(e.result or "") or { status = e.status },
                   timestamp = e.timestamp, eval_s = e.eval_s, key = e.state }
  end
  return rundir_mod.t4(records, { kopt = sys.version, problem = p.name, key = p.key, device = p.device,
                                  toolkit = p.toolkit, run = run, database = db.path, timeunit = "milliseconds" })
end

function M.main(argv)
  local o, pos = parse(argv)
  if o.help or #pos == 0 then
    io.stdout:write(USAGE)
    return o.help and 0 or errors.USAGE
  end
  local cmd = pos[1]
  if cmd ~= "list" and cmd ~= "show" and cmd ~= "export" then
    errors.usage("db: unknown command '%s' (list, show or export)", cmd)
  end
  if cmd ~= "list" and not pos[2] then errors.usage("db %s: which PROBLEM? (see kopt db list)", cmd) end
  if #pos > (cmd == "list" and 1 or 2) then errors.usage("db %s: too many arguments", cmd) end
  -- (an option the command does not use is refused, not ignored)
  if o.out and cmd ~= "export" then errors.usage("db %s: -o is for export only", cmd) end
  if o.run and cmd == "list" then errors.usage("db list: --run is for show and export") end
  local path = expdb.path({ db = o.db })
  if not path then errors.usage("db: the experience database is off (KOPT_DB=off); name one with --db PATH") end
  local db = expdb.open(path, true)
  local text
  if cmd == "list" then
    text = list(db)
  elseif cmd == "show" then
    text = show(db, find_problem(db, pos[2]), o.run)
  else
    local t4 = export(db, find_problem(db, pos[2]), o.run)
    if o.out then
      if o.out == "" or sys.stat(o.out) == "dir" then
        errors.usage("db export: -o %s: expected a file name", o.out == "" and "''" or o.out)
      end
      json.write_file(o.out, t4)
      text = string.format("kopt: %d evaluations written to %s (T4)\n", #t4.results, o.out)
    else
      text = json.encode(t4) .. "\n"
    end
  end
  db:close()
  io.stdout:write(text)
  return 0
end

return M
