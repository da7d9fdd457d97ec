-- MCGS's rollout_gain: a rollout step that beats its anchor by less than
-- rollout_gain still becomes the anchor, but counts as a miss, so a
-- rollout ends after rollout_misses such steps in a row.
-- A space of 1600 configs where knob F (40 values) gains 0.1 % per step
-- towards F = 40 (inside a GPU's noise) and knob G (40 values) a real 3 %
-- per step towards G = 1. Without rollout_gain a rollout can walk F one
-- step at a time to rollout_depth; with it the walk ends within
-- rollout_misses + 1 steps. The walk is read from the evaluations: a run of
-- consecutive evaluations each one F step from the one before and faster.
local T = require("testlib")

local tmp = T.tmpdir("mcgs_rollout_gain")
local space = T.grid_space(tmp .. "/fine.json", { { "F", 40 }, { "G", 40 } },
  function(f, g) return (1 + 0.03 * (g - 1)) * (1 - 0.001 * f) end)

-- the longest run of evaluations each one F step from the previous, same G,
-- and faster than it
local function longest_f_walk(evals)
  local longest, run = 0, 0
  for i = 2, #evals do
    local a, b = evals[i - 1], evals[i]
    local step = a.config and b.config and a.config.G == b.config.G and math.abs(a.config.F - b.config.F) == 1
    local faster = step and b.result.status == "ok" and a.result.status == "ok" and b.result.time_ms < a.result.time_ms
    run = faster and run + 1 or 0
    longest = math.max(longest, run)
  end
  return longest
end

local without, with = 0, 0
for seed = 1, 4 do
  -- (model_kind=forest: its rollouts take F steps one by one, where a GP
  -- may jump along the smooth slope)
  without = math.max(without, longest_f_walk(T.mcgs_replay(tmp, space, 120, seed, "--opt rollout_gain=0 --opt model_kind=forest --opt moves=rules")))
  with = math.max(with, longest_f_walk(T.mcgs_replay(tmp, space, 120, seed, "--opt rollout_gain=0.005 --opt model_kind=forest --opt moves=rules")))
end
T.check(without >= 8, "without rollout_gain a rollout walks F step by step: longest walk %d", without)
T.check(with <= 6, "with rollout_gain 0.5 %% the walk ends after rollout_misses (5) gains in the noise: longest %d", with)

return T.done()
