-- `kopt regraph RUNS... [-o FILE]`: aggregates the transitions recorded by
-- strategies (mcgs, rules, experts: <run dir>/transitions.jsonl, or any
-- .jsonl dataset such as the one KOPT_EXPERIENCE names) into method-transition
-- statistics, which MCGS and rules load as prior multipliers with
-- `--opt priors=FILE`.
--
-- Output (JSON):
--   { "version": 1, "sources": [...], "transitions_read": N,
--     "methods":     { TO: STATS },             -- every move method, whatever came before
--     "transitions": { FROM: { TO: STATS } },   -- method after method
--     "canonical": { "methods": {...}, "transitions": {...} } }
-- "methods"/"transitions" count the labels as recorded; "canonical" counts
-- the same lines by canonical method (kopt.relabel): a record's
-- from_method/to_method, or for lines written before those existed, its
-- from/to mapped now. Kernels are counted by name and source hash.
-- STATS = { count, ok, success (ok / count), mean_reward,
--           mean_log_speedup (over ok transitions with a speedup), improved
--           (fraction of ok transitions with speedup > 1), kernels }
local errors = require("kopt.errors")
local json = require("kopt.json")
local relabel = require("kopt.relabel")
local sys = require("kopt.sys")

local M = { summary = "aggregate search transitions of runs into method statistics (MCGS priors)" }

local USAGE = [[
usage: kopt regraph RUN_OR_FILE... [-o FILE]
  RUN_OR_FILE  a run directory (its transitions.jsonl) or a .jsonl dataset
  -o FILE      write the statistics there (default: print them to stdout)
Load the result into a search with --opt priors=FILE (mcgs, rules).
]]

local function new_stats() return { count = 0, ok = 0, reward_sum = 0, ls_sum = 0, ls_n = 0, up = 0, kernels = {} } end

local function add(s, t)
  s.count = s.count + 1
  if t.status == "ok" then s.ok = s.ok + 1 end
  if type(t.reward) == "number" then s.reward_sum = s.reward_sum + t.reward end
  if t.status == "ok" and type(t.speedup) == "number" and t.speedup > 0 then
    s.ls_sum = s.ls_sum + math.log(t.speedup)
    s.ls_n = s.ls_n + 1
    if t.speedup > 1 then s.up = s.up + 1 end
  end
  if t.kernel then s.kernels[t.kernel .. "#" .. tostring(t.source_hash or "")] = true end
end

local function finish(s)
  local kernels = {}
  for k in pairs(s.kernels) do kernels[#kernels + 1] = k end
  table.sort(kernels)
  return { count = s.count, ok = s.ok, success = s.count > 0 and s.ok / s.count or 0,
           mean_reward = s.count > 0 and s.reward_sum / s.count or 0,
           mean_log_speedup = s.ls_n > 0 and s.ls_sum / s.ls_n or 0,
           improved = s.ls_n > 0 and s.up / s.ls_n or 0, kernels = #kernels }
end

-- Reads one source; returns the number of transitions, or raises a usage error.
local function tally(methods, trans, from, to, t)
  methods[to] = methods[to] or new_stats()
  add(methods[to], t)
  trans[from] = trans[from] or {}
  trans[from][to] = trans[from][to] or new_stats()
  add(trans[from][to], t)
end

local function read_source(path, methods, trans, canon)
  local kind = sys.stat(path)
  if kind == "dir" then path = path .. "/transitions.jsonl" end
  local f = io.open(path, "r")
  if not f then
    errors.usage("regraph: %s: no transitions (expected a run directory of mcgs, rules or experts, or a .jsonl file)", path)
  end
  local n, lineno = 0, 0
  for line in f:lines() do
    lineno = lineno + 1
    if line:match("%S") then
      local t = json.decode(line)
      -- a run killed mid-write may end with a partial line: skip it
      if type(t) == "table" and type(t.to) == "string" then
        local from = type(t.from) == "string" and t.from or "?"
        tally(methods, trans, from, t.to, t)
        local cfrom = type(t.from_method) == "string" and t.from_method or relabel.canonical(from)
        local cto = type(t.to_method) == "string" and t.to_method or relabel.canonical(t.to)
        tally(canon.methods, canon.transitions, cfrom, cto, t)
        n = n + 1
      end
    end
  end
  f:close()
  return n
end

function M.main(argv)
  local sources, out = {}, nil
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      io.stdout:write(USAGE)
      return 0
    elseif a == "-o" or a == "--out" then
      i = i + 1
      out = argv[i]
      if not out then errors.usage("regraph: %s needs a file name", a) end
    elseif a:sub(1, 1) == "-" then
      errors.usage("regraph: unknown option '%s'", a)
    else
      sources[#sources + 1] = a
    end
    i = i + 1
  end
  if #sources == 0 then errors.usage("regraph: no runs given (usage: kopt regraph RUN... [-o FILE])") end
  local methods, trans, total = {}, {}, 0
  local canon = { methods = {}, transitions = {} }
  for _, src in ipairs(sources) do total = total + read_source(src, methods, trans, canon) end
  local function finished(ms, tr)
    local out_m, out_t = {}, {}
    for m, s in pairs(ms) do out_m[m] = finish(s) end
    for from, row in pairs(tr) do
      out_t[from] = {}
      for to, s in pairs(row) do out_t[from][to] = finish(s) end
    end
    return out_m, out_t
  end
  local res = { version = 1, sources = sources, transitions_read = total, canonical = {} }
  res.methods, res.transitions = finished(methods, trans)
  res.canonical.methods, res.canonical.transitions = finished(canon.methods, canon.transitions)
  local text = json.encode(res) .. "\n"
  if out then
    json.write_file(out, text, true)
    -- a short table of the most used methods on stderr, for the human
    local names = {}
    for m in pairs(res.methods) do names[#names + 1] = m end
    table.sort(names, function(a, b)
      local x, y = res.methods[a], res.methods[b]
      if x.count ~= y.count then return x.count > y.count end
      return a < b
    end)
    io.stderr:write(string.format("regraph: %d transitions from %d source(s), %d methods -> %s\n", total, #sources,
                                  #names, out))
    io.stderr:write(string.format("  %-22s %7s %8s %9s %9s\n", "method", "count", "success", "improved", "mean log"))
    for j = 1, math.min(#names, 12) do
      local s = res.methods[names[j]]
      io.stderr:write(string.format("  %-22s %7d %8.2f %9.2f %+9.3f\n", names[j], s.count, s.success, s.improved,
                                    s.mean_log_speedup))
    end
  else
    io.stdout:write(text)
  end
  return 0
end

return M
