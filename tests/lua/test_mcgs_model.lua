-- MCGS's value model (--opt model=true) and the forest it shares with the
-- surrogate strategy (kopt.classic):
--  1. the forest and expected improvement on hand-made data: a tree learns a
--     step, the spread of the trees is zero where every bootstrap agrees, EI
--     of a certain outcome is the plain gain;
--  2. a model run (150 evaluations) on the 300-config matmul space is deterministic given the
--     seed (two runs, same evaluations), differs from the run without the
--     model, and measures model-chosen samples (origin method "model");
--  3. with the model, a space smaller than the budget is still exhausted
--     cleanly (every config once, "strategy finished");
--  4. the failure classifier (a forest on the failure indicator) learns a
--     failing corner of a hand-made space;
--  5. regression: a failed state keeps its place in the model's data. The
--     times were appended as `t[#t + 1] = t`, which stores nothing for a
--     failure (nil), so after the first failure every later time sat beside
--     the config measured before it: the forest learnt times of the wrong
--     configs and the classifier the wrong failures (on spaces with failures
--     only: pnpoly, the convolutions).
local T = require("testlib")
local classic = require("kopt.classic")
local rng_mod = require("kopt.rng")

-- 1. forest and EI
local knobs = { { name = "A", values = { 1, 2, 3, 4 } }, { name = "B", values = { 1, 2 } } }
local X, y = {}, {}
for a = 1, 4 do
  for b = 1, 2 do
    for _ = 1, 3 do
      X[#X + 1] = { a, b }
      y[#y + 1] = a <= 2 and 1.0 or 3.0 -- a step in knob A, B irrelevant
    end
  end
end
local forest = classic.forest(rng_mod.new(3), X, y, { trees = 8, features = 1, min_leaf = 2, max_depth = 6,
                                                      free = { 1, 2 }, knobs = knobs })
local mu_lo, sd_lo = classic.predict(forest, { 1, 2 })
local mu_hi = classic.predict(forest, { 4, 1 })
T.check(math.abs(mu_lo - 1) < 1e-9 and sd_lo < 1e-9, "low side of the step: %s +- %s", mu_lo, sd_lo)
T.check(math.abs(mu_hi - 3) < 1e-9, "high side of the step: %s", mu_hi)
T.eq(classic.expected_improvement(2, 1.5, 0), 0.5, "EI of a certain gain")
T.eq(classic.expected_improvement(1, 1.5, 0), 0, "EI of a certain loss")
local ei = classic.expected_improvement(1, 1, 0.5)
T.check(math.abs(ei - 0.5 / math.sqrt(2 * math.pi)) < 1e-6, "EI at the target is sd * phi(0): %s", ei)

-- 2. determinism and effect
local tmp = T.tmpdir("mcgs_model")
local mm = "tests/data/matmul_f16_h200.t4.json"
local function run(dir, opts, budget, space)
  local code, out, err = T.run(string.format("mcgs --backend replay:%s --budget %d --seed 4 -q %s --out %s/%s",
                                             space or mm, budget, opts, tmp, dir))
  T.eq(code, 0, dir .. " exit code (" .. err .. ")")
  return (T.events(tmp .. "/" .. dir)), out
end
local a = run("a", "--opt model=true --opt model_kind=forest", 150)
local b = run("b", "--opt model=true --opt model_kind=forest", 150)
local c = run("c", "--opt model=false", 150)
T.eq(#a, 150, "model run: evaluations")
local same, differ, model_samples = true, false, 0
for i = 1, #a do
  if a[i].key ~= (b[i] and b[i].key) then same = false end
  if a[i].key ~= (c[i] and c[i].key) then differ = true end
  if a[i].origin and a[i].origin.method == "model" then model_samples = model_samples + 1 end
end
T.check(same, "two model runs with one seed measure the same configs in the same order")
T.check(differ, "the model changes what is measured")
T.check(model_samples > 0, "model-chosen samples were measured (%d)", model_samples)

-- 3. a 15-config space with the model
local d, out = run("tiny", "--opt model=true", 100, "tests/data/vector_add_A4000.json")
T.eq(#d, 15, "tiny space with the model: every config once")
T.check(out:find("stopped: strategy finished", 1, true) ~= nil, "tiny space should finish: %s", out)

-- 4. the failure classifier is the same forest on a 0/1 target: trained on
-- a space where knob A = 4 fails, it gives the failing corner a high chance
-- of failure and the rest a low one
local fy = {}
for i, x in ipairs(X) do fy[i] = x[1] == 4 and 1 or 0 end
local cls = classic.forest(rng_mod.new(5), X, fy, { trees = 6, features = 1, min_leaf = 2, max_depth = 6,
                                                    free = { 1, 2 }, knobs = knobs })
local p_bad, p_good = classic.predict(cls, { 4, 2 }), classic.predict(cls, { 2, 1 })
T.check(p_bad > 0.8 and p_good < 0.2, "failure chance: failing corner %s, elsewhere %s", p_bad, p_good)

-- 5. failures keep the model's data aligned: A = 1 fails, A = 2 and 3 are
-- fast, A = 4 slow; the forest must say so (with the shift it put the slow
-- time on A = 3 and none on A = 4)
local model_mod = require("kopt.mcgs_model")
local space_mod = require("kopt.space")
local mspace = space_mod.new({ knobs = knobs })
local mctx = { space = mspace, rng = rng_mod.new(9),
               options = { model_min = 4, model_refit = 0.1, model_trees = 8, fail_model = true, model_kappa = 0,
                           fail_penalty = 0 } }
local mst = { model = model_mod.new(mctx) }
-- A = 1 fails, A = 2 and 3 take 1 ms, A = 4 takes 10; three times each
local function record_grid(st)
  for _ = 1, 3 do
    for bv = 1, 2 do
      model_mod.record(st, { A = 1, B = bv }, nil)
      model_mod.record(st, { A = 2, B = bv }, 1.0)
      model_mod.record(st, { A = 3, B = bv }, 1.0)
      model_mod.record(st, { A = 4, B = bv }, 10.0)
    end
  end
end
record_grid(mst)
local mm_ = model_mod.get(mctx, mst)
T.eq(#mm_.t, #mm_.X, "one outcome per measured config")
local lt3, ok3 = model_mod.predict(mctx, mm_, { A = 3, B = 1 })
local lt4 = model_mod.predict(mctx, mm_, { A = 4, B = 1 })
local _, ok1 = model_mod.predict(mctx, mm_, { A = 1, B = 2 })
T.check(math.abs(lt3) < 0.3 and lt4 > lt3 + 1, "log-times beside their configs: A=3 %s, A=4 %s", lt3, lt4)
T.check(ok1 < 0.2 and ok3 > 0.8, "the failing value fails, the others do not: %s %s", ok1, ok3)

-- 6. fail_penalty: the failures join the regression as the slowest success
-- (log 10) plus the penalty, so the failing value is predicted slowest of
-- all (without it, as above, the regression never saw A = 1 and prices it
-- like its fast neighbour); without the classifier every config's chance
-- of success is 1
local _, _, mu1_without = model_mod.predict(mctx, mm_, { A = 1, B = 1 })
T.check(mu1_without < lt4 - 1, "without the penalty A=1 is priced like A=2: %s", mu1_without)
mctx.options.fail_penalty, mctx.options.fail_model = 1.0, false
mst = { model = model_mod.new(mctx) }
record_grid(mst)
mm_ = model_mod.get(mctx, mst)
local _, okp, mu1 = model_mod.predict(mctx, mm_, { A = 1, B = 1 })
local _, _, mu4 = model_mod.predict(mctx, mm_, { A = 4, B = 2 })
local _, _, mu2 = model_mod.predict(mctx, mm_, { A = 2, B = 2 })
T.check(mu1 > math.log(10) and mu4 > mu2 + 1 and mu1 > mu4 + 0.5,
        "a failure stands for the slowest success plus the penalty: A=1 %s, A=4 %s, A=2 %s", mu1, mu4, mu2)
T.eq(okp, 1, "no classifier: no chance of failure")

-- 7. model_min=0 with failures only: no model yet (a forest of no times
-- would predict NaN, and the penalty would have no slowest success)
mctx.options.model_min = 0
mst = { model = model_mod.new(mctx) }
model_mod.record(mst, { A = 1, B = 1 }, nil)
model_mod.record(mst, { A = 2, B = 1 }, nil)
T.eq(model_mod.get(mctx, mst), nil, "no success: no model")
model_mod.record(mst, { A = 3, B = 1 }, 2.0)
local m0 = model_mod.get(mctx, mst)
local lt0 = m0 and model_mod.predict(mctx, m0, { A = 4, B = 2 })
T.check(lt0 and lt0 == lt0 and lt0 > -math.huge, "one success: a finite prediction, got %s", lt0)

return T.done()
