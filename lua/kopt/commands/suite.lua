-- `kopt suite`: one strategy over a folder of specs (default specs/suite/),
-- each problem an ordinary run in its own sub-folder of --out (the run
-- machinery of kopt.run: events.jsonl, trace.md, best/, --resume), with a
-- per-problem budget and an optional target that stops a problem once its
-- best meets it. Then the report: suite.md, suite.json and suite.svg, with
-- speedups over PyTorch eager and torch.compile from a baselines file
-- (tools/suite_baselines.py) and fast_p (kopt.suite).
local errors = require("kopt.errors")
local expdb = require("kopt.expdb")
local json = require("kopt.json")
local recording = require("kopt.recording")
local rundir_mod = require("kopt.rundir")
local run = require("kopt.run")
local range_probe = require("kopt.range_probe")
local sanitize = require("kopt.sanitize")
local spec_mod = require("kopt.spec")
local strategy_mod = require("kopt.strategy")
local suite = require("kopt.suite")
local suite_report = require("kopt.suite_report")
local sys = require("kopt.sys")

local M = { summary = "run a strategy over a suite of specs (default specs/suite): speedups over PyTorch, fast_p" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--resume", "--no-db", "--fresh", "--help" }

M.DEFAULT_STRATEGY = "mcgs"
M.DEFAULT_BUDGET = 40
M.DEFAULT_DIR = "specs/suite"

local USAGE = [[
usage: kopt suite [STRATEGY] [DIR|SPEC ...] [options]
  STRATEGY          a built-in name or a Lua file (default mcgs)
  DIR|SPEC          folders of specs and spec files (default specs/suite)
  --only a,b        only these problems (spec names)
  --budget N        evaluations per problem (default 40)
  --time-limit S    seconds of evaluation time per problem
  --target T        stop a problem once its best meets T: Nx-eager, Nx-compile
                    (N times faster than PyTorch eager / torch.compile) or
                    N%-sol (N percent of the speed of light)
  --baselines FILE  PyTorch times (tools/suite_baselines.py); default the
                    baselines_<gpu>.json beside the specs that matches the GPU;
                    'none' for no speedups
  --out DIR         the suite's folder, one sub-folder per problem
                    (default runs/suite-<strategy>)
  --resume          continue the suite in --out: finished problems are read,
                    not run again; an interrupted one resumes
  --backend B       cuda; replay (each spec's own recording); replay:DIR (DIR/<problem>.t4.json
                    or DIR/<problem>.json)
  --seed N, --gpus LIST, --finalists K, --sanitize TOOLS, --range-probe MODE, --opt K=V, --db PATH, --no-db, --fresh,
  --replay-check strict|lenient, -q, -v
                    as for a run (--fresh: measure again what the experience
                    database already knows)
]]

-- "a,b" -> { "a", "b" }; an empty item (",", "a,,b", "") and an item given
-- twice are refused, naming the flag.
local function split_list(v, flag)
  local out, seen = {}, {}
  for item in (v .. ","):gmatch("([^,]*),") do
    if item == "" then errors.usage("suite: %s: an empty item in '%s'", flag, v) end
    if seen[item] then errors.usage("suite: %s: '%s' is given twice", flag, item) end
    seen[item], out[#out + 1] = true, item
  end
  return out
end

local function parse(argv)
  local o = { opt = {}, pos = {} }
  local i = 1
  local function value(flag)
    i = i + 1
    if argv[i] == nil then errors.usage("suite: %s needs a value", flag) end
    return argv[i]
  end
  local function count(flag)
    local n = math.tointeger(tonumber(value(flag)))
    if not n or n < 1 then errors.usage("suite: %s: expected a positive integer, got '%s'", flag, argv[i]) end
    return n
  end
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--only" then o.only = split_list(value(a), a)
    elseif a == "--budget" then o.budget = count(a)
    elseif a == "--time-limit" then
      o.time_limit = tonumber(value(a))
      if not o.time_limit or o.time_limit <= 0 then
        errors.usage("suite: --time-limit: expected a positive number of seconds, got '%s'", argv[i])
      end
    elseif a == "--target" then o.target = suite.parse_target(value(a))
    elseif a == "--baselines" then o.baselines = value(a)
    elseif a == "--out" then
      o.out = value(a)
      if not o.out:find("%S") then errors.usage("suite: --out: expected a folder name, got an empty string") end
    elseif a == "--resume" then o.resume = true
    elseif a == "--replay-check" then
      o.replay_check = recording.check_mode(value(a), "suite: --replay-check")
    elseif a == "--backend" then
      local v = value(a)
      if v ~= "cuda" and v ~= "replay" and not v:match("^replay:.+") then
        errors.usage("suite: --backend: expected cuda, replay or replay:DIR, got '%s'", v)
      end
      o.backend = v
    elseif a == "--seed" then  -- a non-negative integer, as for a run
      o.seed = math.tointeger(tonumber(value(a)))
      if not o.seed or o.seed < 0 then errors.usage("suite: --seed: expected a non-negative integer, got '%s'", argv[i]) end
      if o.seed > 2^53 then errors.usage("suite: --seed: %s is larger than 2^53", argv[i]) end
    elseif a == "--finalists" then o.finalists = count(a)
    elseif a == "--sanitize" then
      local list, why = sanitize.parse_tools(value(a))
      if not list then errors.usage("suite: --sanitize: %s", why) end
      o.sanitize = list
    elseif a == "--range-probe" then
      local mode, why = range_probe.parse_mode(value(a))
      if not mode then errors.usage("suite: --range-probe: %s", why) end
      o.range_probe = mode
    elseif a == "--gpus" then
      o.gpus = {}
      for _, g in ipairs(split_list(value(a), a)) do
        local n = math.tointeger(tonumber(g))
        if not n or n < 0 then errors.usage("suite: --gpus: expected a comma-separated list of GPU indices, got '%s'", argv[i]) end
        o.gpus[#o.gpus + 1] = n
      end
    elseif a == "--opt" then
      local k, v = value(a):match("^([%w_%-]+)=(.*)$")
      if not k then errors.usage("suite: --opt: expected key=value, got '%s'", argv[i]) end
      o.opt[#o.opt + 1] = { k, v }
    elseif a == "--db" then o.db = value(a)
    elseif a == "--no-db" then o.no_db = true
    elseif a == "--fresh" then o.fresh = true
    elseif a == "-q" then o.q = true
    elseif a == "-v" then o.v = true
    elseif a:sub(1, 1) == "-" then errors.usage("suite: unknown option '%s' (see kopt suite --help)", a)
    else o.pos[#o.pos + 1] = a end
    i = i + 1
  end
  if o.q and o.v then errors.usage("suite: -q and -v cannot be used together") end
  return o
end

-- The first positional argument is the strategy when it is not a spec or a
-- folder of specs.
local function strategy_and_paths(pos)
  local strategy, paths = M.DEFAULT_STRATEGY, {}
  for i, p in ipairs(pos) do
    if i == 1 and not (p:match("%.json$") or sys.stat(p) == "dir") then strategy = p
    else paths[#paths + 1] = p end
  end
  if #paths == 0 then paths = { M.DEFAULT_DIR } end
  return strategy, paths
end

-- The specs to run, loaded (a spec error stops everything before anything
-- runs), in order, filtered by --only.
local function load_problems(paths, only)
  local problems, by_name = {}, {}
  for _, f in ipairs(suite.spec_files(paths)) do
    local spec = spec_mod.load(f)
    if by_name[spec.name] then
      errors.usage("suite: two specs are named '%s': %s and %s", spec.name, by_name[spec.name].path, f)
    end
    local p = { name = spec.name, path = f, spec = spec }
    by_name[spec.name] = p
    problems[#problems + 1] = p
  end
  if not only then return problems end
  local chosen = {}
  for _, name in ipairs(only) do
    if not by_name[name] then
      local names = {}
      for _, p in ipairs(problems) do names[#names + 1] = p.name end
      errors.usage("suite: --only: no problem named '%s' (the suite has: %s)", name, table.concat(names, ", "))
    end
    chosen[#chosen + 1] = by_name[name]
  end
  return chosen
end

-- Where the GPU is, its facts (for the speed of light and the baselines'
-- file name); nil when the problems will be replayed.
local function live_device(o)
  if o.backend and o.backend ~= "cuda" then return nil end
  -- lazy: optional, a kopt built without the cuda backend still replays (as kopt.run)
  local ok, cuda = pcall(require, "kopt.backends.cuda")
  if not ok or not cuda.available() then
    if o.backend == "cuda" then errors.usage("suite: --backend cuda: no GPU can be used here") end
    return nil
  end
  local devices = require("kopt.gpu").devices()  -- lazy: only once the cuda backend loaded, as above
  return devices and devices[((o.gpus and o.gpus[1]) or 0) + 1]
end

-- The backend of one problem for kopt.run (nil: let the run choose).
local function backend_for(o, p)
  if not o.backend then return nil end
  if o.backend == "cuda" then return { kind = "cuda" } end
  if o.backend == "replay" then
    if not p.spec.recording then return nil, "--backend replay: the spec has no 'recording'" end
    return { kind = "replay", file = p.spec.recording }
  end
  local where = o.backend:match("^replay:(.+)$")
  if sys.stat(where) ~= "dir" then return { kind = "replay", file = where } end
  for _, f in ipairs({ where .. "/" .. p.name .. ".t4.json", where .. "/" .. p.name .. ".json" }) do
    if sys.stat(f) then return { kind = "replay", file = f } end
  end
  return nil, string.format("--backend %s: no %s.t4.json or %s.json there", o.backend, p.name, p.name)
end

-- A problem's folder: "done" (a stop event that was not an interruption or
-- an error), "partial" (events but no such stop) or "none".
-- The --opt pairs as "key=value" texts, sorted: how suite.json keeps them.
local function opt_texts(list)
  local out = {}
  for i, kv in ipairs(list or {}) do out[i] = kv[1] .. "=" .. kv[2] end
  table.sort(out)
  return out
end

local function state_of(dir)
  local ok, events = pcall(rundir_mod.read_events, dir .. "/events.jsonl")
  if not ok or not events or #events == 0 then return "none" end
  local first = events[1]
  local stop, probe
  for _, ev in ipairs(events) do
    -- (a line of the wrong shape: the problem's own --resume names it)
    if type(ev) ~= "table" then return "partial" end
    if ev.event == "stop" then stop = ev end
    if ev.event == "range_probe" then probe = ev end
    if ev.event == "resume" then stop, probe = nil, nil end
  end
  if stop and stop.reason ~= "interrupted" and stop.reason ~= "error" then
    -- (killed after its stop event, before results.json or best/ were
    -- written: resumed, which writes them)
    -- (an empty or unreadable results.json too: the resume writes it again)
    local results = json.read_file(dir .. "/results.json")
    if type(results) ~= "table" or (stop.best and not sys.stat(dir .. "/best/config.json")) then
      return "partial"
    end
    return "done", stop, probe, first
  end
  return "partial"
end

-- Whether the spec changed since its run began (`start`, the run's first
-- event, with its problem digest): a finished run of the old spec is not
-- this problem's.
local function spec_changed(p, start)
  if not (start and start.event == "start" and type(start.problem_digest) == "string") then return false end
  local okd, digest = pcall(function() return expdb.problem_digest(p.spec, run.build_space(p.spec)) end)
  return okd and digest ~= start.problem_digest
end

-- What a finished run left: its best (time, config) and how it stopped.
local function outcome(p, dir)
  local st, stop, probe = state_of(dir)
  if st ~= "done" then
    -- a run stopped by an error after it found correct configs: its best
    -- (measured and checked) is the row's, beside the error
    local ok, events = pcall(rundir_mod.read_events, dir .. "/events.jsonl")
    local last
    for _, ev in ipairs(ok and events or {}) do
      if type(ev) == "table" and ev.event == "stop" then last = ev end
    end
    if not (last and last.reason == "error" and type(last.best) == "table") then
      return { error = "the run did not finish" }
    end
    stop, probe = last, nil
  end
  local r = { evaluations = math.tointeger(stop.evaluations) or stop.evaluations, stop_reason = stop.reason }
  if st ~= "done" then r.error = "the run stopped on an error" end
  -- (kopt.range_probe's finding on the winner, for the report)
  if probe then
    r.range_probe = { scale = probe.scale, status = probe.status, log = probe.log, note = probe.note,
                      new_winner = probe.new_winner }
  end
  if stop.best and type(stop.best.time_ms) == "number" then
    r.time_ms = stop.best.time_ms
    local config = json.read_file(dir .. "/best/config.json")
    if type(config) == "table" then
      local ok, work = pcall(p.spec.work, p.spec, config)
      if ok then r.work = work end
      r.config = config
    end
  end
  return r
end

-- A problem the experience database answered: its known best, no run.
local function from_memory(p, hit)
  local r = { evaluations = 0, stop_reason = "known best (experience database; --fresh searches again)", from_db = true,
              time_ms = type(hit.time_ms) == "number" and hit.time_ms or nil, config = hit.config }
  if r.time_ms and type(hit.config) == "table" then
    local ok, work = pcall(p.spec.work, p.spec, hit.config)
    if ok then r.work = work end
  end
  return r
end

local function baseline_of(baselines, name)
  local b = baselines and baselines.problems[name]
  if not b then return nil end
  local function num(v) return type(v) == "number" and v > 0 and v or nil end
  local out = { eager = num(b.eager_ms), compile = num(b.compile_ms) }
  local errs = {}
  if type(b.eager_error) == "string" then errs[#errs + 1] = "eager: " .. b.eager_error end
  if type(b.compile_error) == "string" then errs[#errs + 1] = "torch.compile: " .. b.compile_error end
  out.error = #errs > 0 and table.concat(errs, "; ") or nil
  return out
end

-- One problem through kopt.run; returns the exit code, the error text (or
-- nil) and, when the experience database answered it without a run (no
-- folder written), what it knew (kopt.expdb's hit_summary).
local function run_problem(o, strategy, p, dir, resume, device, base)
  local backend, why = backend_for(o, p)
  if why then return nil, why end
  local work_of = function(c) return p.spec:work(c) end
  local ropts = { opt = o.opt, budget = o.budget or M.DEFAULT_BUDGET, time_limit = o.time_limit, out = dir,
                  resume = resume or nil, backend = backend, seed = o.seed, gpus = o.gpus,
                  finalists = o.finalists, sanitize = o.sanitize, range_probe = o.range_probe, q = o.q, v = o.v, db = o.db, no_db = o.no_db, fresh = o.fresh,
                  replay_check = o.replay_check,
                  stop_when = suite.stop_when(o.target, base, work_of, device, suite.precision(p.spec)) }
  local ok, rc = pcall(run.main, ropts, { strategy, p.path })
  if ok then return rc, nil, ropts.db_hit end
  if errors.is_user_error(rc) then return rc.code, rc.msg end
  if errors.is_interrupt(rc) then return errors.INTERRUPTED end
  return errors.RUNTIME, "internal error: " .. tostring(rc):match("^[^\n]*")
end

local function write_report(out, doc)
  json.write_file(out .. "/suite.json", doc)
  json.write_file(out .. "/suite.md", suite_report.markdown(doc), true)
  json.write_file(out .. "/suite.svg", suite_report.svg(doc), true)
end

function M.main(argv)
  local o = parse(argv)
  if o.help then
    io.stdout:write(USAGE)
    return 0
  end
  local strategy, paths = strategy_and_paths(o.pos)
  -- the strategy is loaded once now: a typo is one sentence, not a suite of
  -- failed problems
  strategy_mod.load(strategy)
  local problems = load_problems(paths, o.only)
  local out = o.out or ("runs/suite-" .. (strategy:match("([^/]+)$"):gsub("%.lua$", "")))
  local device = live_device(o)
  if o.sanitize and #o.sanitize > 0 and not device then
    errors.usage("suite: --sanitize: checks each winner on a GPU, and this suite replays recordings")
  end
  if o.range_probe and o.range_probe ~= "off" and not device then
    errors.usage("suite: --range-probe: checks each winner on a GPU, and this suite replays recordings")
  end
  if not device and not o.backend then
    local any = false
    for _, p in ipairs(problems) do any = any or p.spec.recording ~= nil end
    if not any then
      errors.usage("suite: no GPU can be used here and no spec has a 'recording' to replay: run it on a GPU, "
                   .. "or give --backend replay:DIR with recordings named after the problems")
    end
  end

  -- Baselines: given, or the file beside the specs that matches the GPU; a
  -- resumed suite keeps the file it began with (its rows were computed
  -- against it)
  local begun = o.resume and json.read_file(out .. "/suite.json")
  local begun_file = type(begun) == "table" and type(begun.baselines) == "table" and begun.baselines.file
  if type(begun_file) == "string" then
    if o.baselines and o.baselines ~= begun_file then
      errors.usage("suite: --resume: %s was started with --baselines %s, not %s", out, begun_file, o.baselines)
    end
    o.baselines = begun_file
  end
  local baselines, baselines_note
  if o.baselines == "none" then
    baselines_note = "--baselines none"
  elseif o.baselines then
    baselines = suite.read_baselines(o.baselines)
  else
    local dirs = {}
    for _, p in ipairs(paths) do dirs[#dirs + 1] = sys.stat(p) == "dir" and p or (p:match("^(.*)/[^/]*$") or ".") end
    local file = device and suite.find_baselines(dirs, device.name)
    if file then baselines = suite.read_baselines(file) end
    baselines_note = device and ("no baselines_" .. suite.gpu_slug(device.name) .. ".json beside the specs")
      or "no GPU here to match a baselines file to: give --baselines FILE"
  end
  -- Device facts for the speed of light: the GPU's, else those the
  -- baselines recorded (replay).
  local facts = device or (baselines and type(baselines.device) == "table" and baselines.device) or nil
  local device_name = device and device.name or (facts and facts.name) or (baselines and baselines.gpu)

  -- A suite folder is started once; --resume continues it.
  local previous = json.read_file(out .. "/suite.json")
  if o.resume then
    if type(previous) ~= "table" then errors.usage("suite: --resume: %s holds no suite to resume (no suite.json)", out) end
    if previous.strategy ~= strategy then
      errors.usage("suite: --resume: %s was started with strategy '%s', not '%s'", out, tostring(previous.strategy), strategy)
    end
    -- (the report states one budget and one backend for every problem)
    if o.budget and previous.budget and o.budget ~= previous.budget then
      errors.usage("suite: --resume: %s was started with --budget %s, not %d (its problems keep one budget)", out,
                   tostring(previous.budget), o.budget)
    end
    o.budget = o.budget or math.tointeger(previous.budget)
    if o.backend and previous.backend and o.backend ~= previous.backend then
      errors.usage("suite: --resume: %s was started with --backend %s, not %s", out, tostring(previous.backend),
                   o.backend)
    end
    -- (the suite's own backend, given or not: a resume on another machine,
    -- or without the flag, must not measure the rest elsewhere)
    if not o.backend and type(previous.backend) == "string" then o.backend = previous.backend end
    -- one seed, one target and one set of options for every problem, as one
    -- budget (suites begun before these were kept are not checked)
    if previous.seed ~= nil then
      if o.seed and o.seed ~= previous.seed then
        errors.usage("suite: --resume: %s was started with --seed %s, not %d", out, tostring(previous.seed), o.seed)
      end
      o.seed = o.seed or math.tointeger(previous.seed)
    end
    -- (left out, the suite's own target is taken back, as its seed is)
    if not o.target and type(previous.target) == "string" then o.target = suite.parse_target(previous.target) end
    local target = o.target and o.target.text
    if previous.opt ~= nil and target ~= previous.target then
      errors.usage("suite: --resume: %s was started with %s, not %s", out,
                   previous.target and ("--target " .. tostring(previous.target)) or "no --target",
                   target and ("--target " .. target) or "none")
    end
    if type(previous.opt) == "table" then
      local was, now = table.concat(previous.opt, " "), table.concat(opt_texts(o.opt), " ")
      if #o.opt > 0 and now ~= was then
        errors.usage("suite: --resume: %s was started with %s, not --opt %s", out,
                     was ~= "" and ("--opt " .. was) or "no --opt", now)
      end
      if #o.opt == 0 then
        for _, t in ipairs(previous.opt) do
          local k, v = tostring(t):match("^([^=]+)=(.*)$")
          if k then o.opt[#o.opt + 1] = { k, v } end
        end
      end
    end
  else
    if previous ~= nil then
      errors.usage("suite: %s already holds a suite run; continue it with --resume or choose another --out", out)
    end
    for _, p in ipairs(problems) do
      if state_of(out .. "/" .. p.name) ~= "none" then
        errors.usage("suite: %s/%s already holds a run; continue with --resume or choose another --out", out, p.name)
      end
    end
  end
  -- the suite's folder is one suite's at a time: a second suite (or a
  -- --resume) on it while one runs is refused, naming the holder's PID
  local suite_lock = rundir_mod.lock(out)
  local prev_rows = {}
  for _, r in ipairs(type(previous) == "table" and type(previous.rows) == "table" and previous.rows or {}) do
    if type(r) == "table" and type(r.name) == "string" then prev_rows[r.name] = r end
  end

  local doc = { strategy = strategy, budget = o.budget or M.DEFAULT_BUDGET, target = o.target and o.target.text,
                seed = o.seed or 1, opt = #o.opt > 0 and opt_texts(o.opt) or json.empty_array,
                backend = o.backend or (device and "cuda" or "replay"), device = device_name, kopt = sys.version,
                date = sys.utc_iso(), baselines_note = baselines_note,
                baselines = baselines and { file = baselines.file, gpu = baselines.gpu, torch = baselines.torch } or nil,
                only = o.only, rows = {}, state = "running" }
  local t_start = sys.now()
  local prior_wall = 0
  -- a resumed suite with another --only keeps the rows of the problems it
  -- does not run this time, in their place
  local current = {}
  for _, p in ipairs(problems) do current[p.name] = p end
  local function finish_doc(state)
    local rows, placed = {}, {}
    for _, r in ipairs(type(previous) == "table" and type(previous.rows) == "table" and previous.rows or {}) do
      if type(r) == "table" and type(r.name) == "string" and not placed[r.name] then
        local p = current[r.name]
        -- (a problem of this session not reached yet keeps its row: the
        -- report of a suite resumed and interrupted again lost them all)
        if not p or not p.row then rows[#rows + 1], placed[r.name] = r, true
        else rows[#rows + 1], placed[r.name] = p.row, true end
      end
    end
    for _, p in ipairs(problems) do if p.row and not placed[p.name] then rows[#rows + 1] = p.row end end
    doc.rows, doc.state = rows, state
    doc.fast_p = suite.fast_p(rows)
    doc.wall_s = prior_wall + (sys.now() - t_start)
    write_report(out, doc)
  end
  finish_doc("running")

  local rc_total = 0
  for i, p in ipairs(problems) do
    if i > 1 and sys.interrupted() then  -- a signal between two problems (kopt.run installed the handlers)
      finish_doc("interrupted")
      io.stderr:write("kopt: suite interrupted; continue with --resume (same command)\n")
      return errors.INTERRUPTED
    end
    local dir = out .. "/" .. p.name
    local base = baseline_of(baselines, p.name)
    local st, _, _, start = state_of(dir)
    local t0 = sys.now()
    local rc, err, hit
    if st ~= "done" then
      if not o.q then io.stdout:write(string.format("== [%d/%d] %s\n", i, #problems, p.name)) end
      rc, err, hit = run_problem(o, strategy, p, dir, st == "partial", facts, base)
      if rc == errors.INTERRUPTED then
        finish_doc("interrupted")
        io.stderr:write(string.format("kopt: suite interrupted in %s; continue with --resume (same command)\n", p.name))
        return errors.INTERRUPTED
      end
    elseif prev_rows[p.name] and type(prev_rows[p.name].wall_s) == "number" then
      prior_wall = prior_wall + prev_rows[p.name].wall_s
    end
    local res = hit and from_memory(p, hit) or outcome(p, dir)
    if st == "done" and spec_changed(p, start) then
      res = { error = string.format("the spec changed since its run in %s: that run is not this problem's (start " ..
                                    "the suite in another --out)", dir) }
      io.stderr:write(string.format("kopt: suite: %s: %s\n", p.name, res.error))
    end
    if err then res.error = err:match("^[^\n]*") end
    if res.error and st ~= "done" then
      io.stdout:flush()  -- (after the problem's own heading)
      io.stderr:write(string.format("kopt: suite: %s: %s\n", p.name, res.error))
    end
    if res.error and rc_total == 0 then rc_total = errors.RUNTIME end
    -- (a problem the database answered has no folder here: its row names
    -- the folder of the run that answered it, when that is on record whole)
    local answered_in = hit and type(hit.out_dir) == "string" and hit.out_dir:sub(1, 1) == "/" and hit.out_dir or nil
    res.name, res.precision = p.name, suite.precision(p.spec)
    if hit then res.run_dir = answered_in else res.run_dir = p.name end
    res.wall_s = st ~= "done" and (sys.now() - t0) or (prev_rows[p.name] and prev_rows[p.name].wall_s)
    res.kernelbench = p.spec.torch and p.spec.torch.kernelbench
    res.baseline_error = base and base.error
    p.row = suite.row(res, base, facts, o.target)
    finish_doc(i == #problems and "done" or "running")
  end
  if #problems == 0 then finish_doc("done") end
  io.stdout:write(M.summary_text(doc, out))
  suite_lock:close()
  return rc_total
end

-- The lines printed at the end.
function M.summary_text(doc, out)
  local correct = 0
  for _, r in ipairs(doc.rows) do if r.correct then correct = correct + 1 end end
  local L = { string.format("kopt suite: %s on %d problems, %d correct, %.0f s", doc.strategy, #doc.rows, correct,
                            doc.wall_s or 0) }
  local flagged = {}
  for _, r in ipairs(doc.rows) do
    if suite.probe_flagged(r) then flagged[#flagged + 1] = r.name end
  end
  if #flagged > 0 then
    L[#L + 1] = string.format("  range probe: %d winner(s) wrong on larger inputs: %s (suite.md, Notes)", #flagged,
                              table.concat(flagged, ", "))
  end
  for _, b in ipairs(suite.BASES) do
    local f = doc.fast_p[b]
    if f.n > 0 then
      local parts = {}
      for _, p in ipairs(suite.P) do
        parts[#parts + 1] = string.format("fast_%s %.0f%%", suite.p_key(p), f[suite.p_key(p)] * 100)
      end
      L[#L + 1] = string.format("  vs %s (%d problems): %s", suite.BASE_LABEL[b], f.n, table.concat(parts, ", "))
    end
  end
  L[#L + 1] = string.format("  report: %s/suite.md, suite.json, suite.svg", out)
  return table.concat(L, "\n") .. "\n"
end

return M
