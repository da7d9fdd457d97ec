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
local experience = require("kopt.experience")
local json = require("kopt.json")
local sys = require("kopt.sys")

local M = { summary = "aggregate search transitions of runs into method statistics (MCGS priors)" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--help" }

local USAGE = [[
usage: kopt regraph RUN_OR_FILE... [-o FILE]
  RUN_OR_FILE  a run directory (its transitions.jsonl) or a .jsonl dataset
  -o FILE      write the statistics there (default: print them to stdout)
Load the result into a search with --opt priors=FILE (mcgs, rules).
MCGS with expert moves builds the same statistics itself at the start of a
run from $KOPT_EXPERIENCE (--opt regraph).
]]

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
  local agg = experience.aggregator()
  local seen = {}
  for _, src in ipairs(sources) do
    if not sys.stat(src) then errors.usage("regraph: %s: no such file or directory", src) end
    -- (a run given twice, or as its folder and its file, would count twice)
    local file = sys.realpath(sys.stat(src) == "dir" and (src .. "/transitions.jsonl") or src) or src
    if seen[file] then errors.usage("regraph: %s is given twice (as %s and %s)", file, seen[file], src) end
    seen[file] = src
    local n, why = agg:read(src)
    if not n then errors.usage("regraph: %s (expected a run directory of mcgs, rules or experts, or a .jsonl file)", why) end
    if n == 0 then
      errors.usage("regraph: %s: no transitions (expected a run directory of mcgs, rules or experts, or a .jsonl file)", src)
    end
  end
  local res = agg:result()
  res.sources = sources
  local total = res.transitions_read
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
