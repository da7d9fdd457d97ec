-- Do profile-guided rule priors help MCGS? Runs MCGS on a recorded space with
-- counters (default: the KTT CoulombSum3d file) over several seeds, once with
-- uniform family priors (rules.use_symptoms = false) and once with priors
-- scaled by the symptoms of each state's counters, and prints how many
-- evaluations each needed to reach the optimum, 1% and 5% of it.
--
--   kopt script tools/profile_priors_experiment.lua [FILE] [SEEDS] [BUDGET] [STRATEGY]
local engine_mod = require("kopt.engine")
local strategy_mod = require("kopt.strategy")
local replay = require("kopt.backends.replay")
local profiling = require("kopt.profiling")
local rules = require("kopt.moves.rules")
local experience = require("kopt.experience")
local relabel = require("kopt.relabel")

-- (a benchmark neither writes the user's dataset and method map nor learns
-- from them, as `kopt compare`: its figures must not depend on the runs
-- before it, and its synthetic runs must not skew the user's later ones)
experience.set_persistent(false)
relabel.set_persistent(false)

local file = arg[1] or "tests/data/coulomb_2080.json"
local seeds = tonumber(arg[2]) or 20
local budget = tonumber(arg[3]) or 210
local strategy_name = arg[4] or "mcgs"

local optimum = math.huge
for _, e in ipairs(replay.open(nil, { file = file }).rec.entries) do
  if e.status == "ok" and e.time_ms < optimum then optimum = e.time_ms end
end

local function first_within(records, factor)
  for i, r in ipairs(records) do
    if r.result.status == "ok" and r.result.time_ms <= optimum * factor + 1e-12 then return i end
  end
  return nil
end

local function run(seed, guided)
  rules.use_symptoms = guided
  local backend = replay.open(nil, { file = file })
  local strategy = strategy_mod.load(strategy_name)
  local options = strategy_mod.options(strategy, {})
  local e = engine_mod.run({ strategy = strategy, strategy_name = strategy_name, options = options,
                             space = backend.space, backend = backend, budget = budget, seed = seed,
                             quiet = true, progress = false,
                             profiler = profiling.new({ mode = "none", backend = backend, quiet = true }) })
  assert(e.stop_reason ~= "error", tostring(e.error))
  return { opt = first_within(e.records, 1.0), p1 = first_within(e.records, 1.01),
           p5 = first_within(e.records, 1.05), n = e.evaluations }
end

local function summary(list, field)
  local xs, missed = {}, 0
  for _, r in ipairs(list) do
    if r[field] then xs[#xs + 1] = r[field] else missed = missed + 1 end
  end
  table.sort(xs)
  local sum = 0
  for _, x in ipairs(xs) do sum = sum + x end
  local med = #xs > 0 and (#xs % 2 == 1 and xs[(#xs + 1) // 2] or (xs[#xs // 2] + xs[#xs // 2 + 1]) / 2) or 0 / 0
  return string.format("mean %6.1f  median %5.1f  missed %d/%d", #xs > 0 and sum / #xs or 0 / 0, med, missed, #list)
end

print(string.format("%s on %s: %d seeds, budget %d, optimum %.5g ms", strategy_name, file, seeds, budget, optimum))
local out = {}
for _, guided in ipairs({ false, true }) do
  local list = {}
  for seed = 1, seeds do list[#list + 1] = run(seed, guided) end
  out[guided] = list
  local label = guided and "profile-guided" or "uniform"
  print(string.format("  %-15s to optimum: %s", label, summary(list, "opt")))
  print(string.format("  %-15s to 1%%:      %s", "", summary(list, "p1")))
  print(string.format("  %-15s to 5%%:      %s", "", summary(list, "p5")))
end
local wins, losses = 0, 0
for i = 1, seeds do
  local a, b = out[false][i].opt or math.huge, out[true][i].opt or math.huge
  if b < a then wins = wins + 1 elseif b > a then losses = losses + 1 end
end
print(string.format("  per seed (to optimum): guided fewer in %d, more in %d, equal in %d", wins, losses,
                    seeds - wins - losses))
rules.use_symptoms = true
return 0
