-- The surrogate strategy's candidate pool on a knob of many values: the
-- Hamming neighbours of the best configs were every value of the knob, all
-- scored by the model at each refit (a knob of 50,000 values: 31 s for 100
-- evaluations, 0.7 s without them). A knob of more than 2*span+1 values now
-- lends span near values and span random ones; the count of configs scored
-- per fit is checked here, and that a knob of few values still lends all.
local T = require("testlib")
local classic = require("kopt.classic")
local engine_mod = require("kopt.engine")
local json = require("kopt.json")
local replay = require("kopt.backends.replay")
local strategy_mod = require("kopt.strategy")

local tmp = T.tmpdir("surrogate-pool")

-- A Kernel Tuner cache of one knob of n values, its time a valley at n/3.
local function cache(n, path)
  local values, entries = {}, {}
  for i = 1, n do
    values[i] = i
    entries[tostring(i)] = { x = i, time = 1 + math.abs(i - n / 3) / n }
  end
  json.write_file(path, { device_name = "X", kernel_name = "k", tune_params_keys = { "x" },
                          tune_params = { x = values }, objective = "time", cache = entries })
end

local fits, scored = 0, 0
local forest, predict = classic.forest, classic.predict
classic.forest = function(...) fits = fits + 1 return forest(...) end
classic.predict = function(...) scored = scored + 1 return predict(...) end

-- The most configs scored in one fit, over a run of `budget` evaluations.
local function pool_per_fit(n, budget)
  local file = string.format("%s/one%d.json", tmp, n)
  cache(n, file)
  local backend = replay.open(nil, { file = file, quiet = true })
  local S = strategy_mod.load("surrogate")
  fits, scored = 0, 0
  local e = engine_mod.run({ strategy = S, strategy_name = "surrogate", options = strategy_mod.options(S, {}),
                             space = backend.space, backend = backend, budget = budget, seed = 1, quiet = true,
                             out_dir = tmp .. "/run" .. n })
  T.eq(e.evaluations, budget, n .. " values: the budget spent")
  T.check(fits > 0, "%d values: the model was fitted", n)
  return scored / math.max(1, fits)
end

-- (64 random + 5 best x (33 near + 32 random) at most)
local big = pool_per_fit(3000, 30)
T.check(big <= 64 + 5 * 65, "a knob of 3000 values: %.0f configs scored per fit", big)
-- 40 values: every unmeasured one joins the pool, as before
local small = pool_per_fit(40, 20)
T.check(small >= 40 - 20, "a knob of 40 values: %.0f configs scored per fit", small)

classic.forest, classic.predict = forest, predict
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
