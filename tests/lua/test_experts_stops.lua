-- The experts strategy (heuristic experts, on recorded spaces made here)
-- searches until its budget, its `iterations`, its `patience` or the space
-- runs out, and its trace says which. Cases:
-- 1. a 6x5 space where one config runs: no run ends before it is measured
--    (draws that all hit measured configs emptied the queue, and the search
--    ended silently with the only good config unmeasured);
-- 2. a space where nothing runs: the search ends after `iterations` rounds
--    of `init` new configs each, saying so (it ended without a word; a
--    round's draws asked before were dropped, so rounds measured fewer);
-- 3. a 16x16 space, all of it fast to measure: with iterations and patience
--    out of the way, every config is measured (the exploration step's random
--    draws all hit measured configs near the end, and the search ended
--    with configs left).
local T = require("testlib")

local tmp = T.tmpdir("experts-stops")
local NO_CAPS = "--opt iterations=100000 --opt patience=100000"

-- Runs experts on a recording; returns the evaluations, the config keys
-- measured (a set) and the trace's "stopping:" line.
local function run(space, name, seed, budget, opts)
  local dir = string.format("%s/%s-%d", tmp, name, seed)
  local code, _, err = T.run(string.format("experts --backend replay:%s --budget %d --seed %d -q %s --out %s",
                                           space, budget, seed, opts, dir))
  T.eq(code, 0, name .. " seed " .. seed .. ": exit code (" .. err .. ")")
  local evals = T.events(dir)
  local measured = {}
  for _, ev in ipairs(evals) do measured[ev.key] = true end
  return evals, measured, T.slurp(dir .. "/trace.md"):match("stopping: ([^\n]*)")
end

-- 1. One good config among 30.
local only = T.grid_space(tmp .. "/only.json", { { "a", 6 }, { "b", 5 } }, function(a, b)
  return (a == 5 and b == 4) and 1.0 or "RuntimeFailedConfig"
end)
for seed = 1, 4 do
  local evals, measured, stopping = run(only, "only", seed, 100, NO_CAPS)
  T.check(measured["5,4"], "one good config, seed %d: never measured in %d evaluations (stopping: %s)", seed, #evals,
          tostring(stopping))
  T.eq(#evals, 30, "one good config, seed " .. seed .. ": evaluations")
  T.eq(stopping, "no expert has anything new to propose, and every configuration has been measured",
       "one good config, seed " .. seed .. ": the trace's reason")
end

-- 2. Nothing runs: `iterations` rounds of `init` new configs after the
-- first (draws that repeat one are made up from the configs not asked yet).
local none = T.grid_space(tmp .. "/none.json", { { "a", 6 }, { "b", 5 } }, function() return "RuntimeFailedConfig" end)
do
  local evals, _, stopping = run(none, "none", 1, 100, "--opt iterations=2")
  T.eq(#evals, 12, "nothing runs: evaluations in three rounds of 4 new configs")
  T.eq(stopping, "no configuration ran in 2 iterations", "nothing runs: the trace's reason")
  -- without a cap on the rounds: the whole space, then the reason
  evals, _, stopping = run(none, "none-all", 1, 100, NO_CAPS)
  T.eq(#evals, 30, "nothing runs, no caps: evaluations")
  T.eq(stopping, "every configuration has been measured", "nothing runs, no caps: the trace's reason")
end

-- 3. A 16x16 needle: every config measured before the search ends.
local needle = T.grid_space(tmp .. "/needle.json", { { "a", 16 }, { "b", 16 } }, function(a, b)
  if a == 11 and b == 7 then return 0.1 end
  return 1 + ((a * 7 + b * 13) % 17) / 100
end)
for seed = 1, 3 do
  local evals, measured, stopping = run(needle, "needle", seed, 1000, NO_CAPS)
  T.eq(#evals, 256, "needle, seed " .. seed .. ": evaluations")
  T.check(measured["11,7"], "needle, seed %d: the needle was never measured", seed)
  T.eq(stopping, "no expert has anything new to propose, and every configuration has been measured",
       "needle, seed " .. seed .. ": the trace's reason")
end

return T.done()
