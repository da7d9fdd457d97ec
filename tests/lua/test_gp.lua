-- Gaussian-process regression (kopt.gp, core/gp.c) and MCGS's model_kind=gp:
--  1. on a smooth function of two knobs it interpolates the points it saw
--     (small spread there) and predicts the points it did not see within
--     0.05, with a larger spread far from every point;
--  2. the marginal likelihood chooses a long length scale for a smooth
--     function and a short one for a rugged one; with ard, a knob the
--     function ignores gets a longer scale than the one it follows, and a
--     refit with a fit's own parameters predicts as that fit did;
--  3. only the listed columns are read (a column left out changes nothing);
--  3b. kopt.classic.gp past its 256 points: a fit of 900 points takes the
--     best and the most recent, and still predicts the bowl's floor;
--  4. bad input: targets that are not finite and grid values that are not
--     positive give nil and the reason; malformed options raise;
--  5. an MCGS run with model_kind=gp is deterministic given the seed, differs
--     from the forest's run, and reports its fits in graph.json; mix and the
--     surrogate strategy's model=gp run and differ from the forest's too;
--  6. model_kind=auto (kopt.mcgs_model.choose): the forest until 8
--     successes were predicted, then the candidate that ordered the pairs
--     with a fast member better: a GP right about the fast configs wins
--     over a forest right only about the slow ones, a tie keeps the forest;
--     MCGS's default run (auto) reports how many fits chose the GP, some
--     but not all, and a run with model_kind=forest differs from it.
local T = require("testlib")
local gp = require("kopt.gp")
local json = require("kopt.json")

local SCALES = { 0.05, 0.1, 0.2, 0.4, 0.8, 1.6 }
local NOISES = { 1e-4, 1e-2, 0.1 }

local function grid_fit(f, keep, opts)
  local X, y = {}, {}
  for a = 1, 9 do
    for b = 1, 9 do
      if keep(a, b) then
        X[#X + 1] = { a, b, 1 }
        y[#y + 1] = f(a, b)
      end
    end
  end
  opts = opts or {}
  return gp.fit(X, y, { cols = opts.cols or { 1, 2 }, levels = opts.levels or { 9, 9 },
                        scales = opts.scales or SCALES, noises = opts.noises or NOISES, ard = opts.ard,
                        fixed = opts.fixed })
end

-- 1. a smooth bowl, every other point seen
local function bowl(a, b) return ((a - 6) / 4) ^ 2 + 0.5 * ((b - 3) / 4) ^ 2 end
local seen = function(a, b) return (a + b) % 2 == 0 end
local m = assert(grid_fit(bowl, seen))
local worst_seen, worst_new, sd_seen = 0, 0, 0
for a = 1, 9 do
  for b = 1, 9 do
    local mu, sd = m:predict({ a, b, 1 })
    if seen(a, b) then
      worst_seen, sd_seen = math.max(worst_seen, math.abs(mu - bowl(a, b))), math.max(sd_seen, sd)
    else
      worst_new = math.max(worst_new, math.abs(mu - bowl(a, b)))
    end
  end
end
T.check(worst_seen < 0.01, "seen points interpolated (worst error %.4f)", worst_seen)
T.check(worst_new < 0.05, "unseen points predicted (worst error %.4f)", worst_new)
local _, sd_far = assert(grid_fit(bowl, function(a) return a <= 3 end)):predict({ 9, 5, 1 })
T.check(sd_far > 5 * sd_seen, "spread far from the data (%.4f) above the spread at a point seen (%.4f)", sd_far, sd_seen)

-- 2. length scales
local smooth_scale = m:params()[1]
local rugged = assert(grid_fit(function(a, b) return ((a * 7 + b * 13) % 5) / 4 end, function() return true end))
local rugged_scale = rugged:params()[1]
T.check(smooth_scale >= 0.4, "smooth: long length scale (%.2f)", smooth_scale)
T.check(rugged_scale <= 0.1, "rugged: short length scale (%.2f)", rugged_scale)
local wiggle = function(a) return math.sin(a * 1.3) end
local iso = assert(grid_fit(wiggle, function() return true end))
local ard = assert(grid_fit(wiggle, function() return true end, { ard = true }))
local s_iso, s_ard = iso:params(), ard:params()
T.eq(s_iso[1], s_iso[2], "without ard one scale for both knobs")
T.check(s_ard[2] > 2 * s_ard[1], "ard: the ignored knob's scale (%.2f) above the followed one's (%.2f)",
        s_ard[2], s_ard[1])
local _, _, lml_iso = iso:params()
local _, noise, lml_ard = ard:params()
T.check(lml_ard >= lml_iso, "ard's likelihood (%.2f) at least the single scale's (%.2f)", lml_ard, lml_iso)
local again = assert(grid_fit(wiggle, function() return true end, { fixed = { scales = s_ard, noise = noise } }))
local mu_a, sd_a = ard:predict({ 4, 7, 1 })
local mu_b, sd_b = again:predict({ 4, 7, 1 })
T.check(math.abs(mu_a - mu_b) < 1e-9 and math.abs(sd_a - sd_b) < 1e-9, "a refit with the fit's parameters predicts the same")
local ok_fixed, msg_fixed = pcall(grid_fit, wiggle, function() return true end, { fixed = { scales = { 1 }, noise = 0.1 } })
T.check(not ok_fixed and msg_fixed:find("one per column"), "fixed scales: one per column (%s)", tostring(msg_fixed))

-- 3. columns: the third column is never read
local only = assert(grid_fit(bowl, seen))
local mu1 = only:predict({ 4, 4, 1 })
local mu2 = only:predict({ 4, 4, 99 })
T.eq(mu1, mu2, "a column not listed is not read")

-- 3b. many points
local classic = require("kopt.classic")
local big_knobs, values = {}, {}
for v = 1, 30 do values[v] = v end
big_knobs[1], big_knobs[2] = { name = "a", values = values }, { name = "b", values = values }
local BX, By = {}, {}
for a = 1, 30 do
  for b = 1, 30 do
    BX[#BX + 1], By[#By + 1] = { a, b }, ((a - 20) / 10) ^ 2 + ((b - 8) / 10) ^ 2
  end
end
local t0 = os.clock()
local cache = {}
local big = classic.gp(cache, BX, By, { free = { 1, 2 }, knobs = big_knobs, ard = true })
local secs = os.clock() - t0
T.eq(cache.choice.n, 900, "the choice counts every point")
local floor = classic.predict(big, { 20, 8 })
T.check(math.abs(floor) < 0.02, "900 points: the floor predicted (%.4f)", floor)
T.check(secs < 5, "900 points fitted in %.2f s", secs)

-- 4. bad input
local fit, err = gp.fit({ { 1 }, { 2 } }, { 0, 0 / 0 }, { cols = { 1 }, levels = { 2 }, scales = { 1 }, noises = { 1 } })
T.check(fit == nil and err:find("target 2 is not finite"), "a NaN target: %s", tostring(err))
fit, err = gp.fit({ { 1 }, { 2 } }, { 0, 1 }, { cols = { 1 }, levels = { 2 }, scales = { 0 }, noises = { 1 } })
T.check(fit == nil and err:find("length scale 1 is not a positive number"), "a zero scale: %s", tostring(err))
fit, err = gp.fit({}, {}, { cols = { 1 }, levels = { 2 }, scales = { 1 }, noises = { 1 } })
T.check(fit == nil and err:find("no points"), "no points: %s", tostring(err))
local ok, msg = pcall(gp.fit, { { 1 } }, { 0 }, { cols = { 1 }, levels = { 2 }, noises = { 1 } })
T.check(not ok and msg:find("options.scales"), "missing scales raise: %s", tostring(msg))
ok, msg = pcall(gp.fit, { { 1 } }, { 0, 1 }, { cols = { 1 }, levels = { 2 }, scales = { 1 }, noises = { 1 } })
T.check(not ok and msg:find("as many targets"), "more targets than vectors raise: %s", tostring(msg))
ok, msg = pcall(gp.fit, { { "x" } }, { 0 }, { cols = { 1 }, levels = { 2 }, scales = { 1 }, noises = { 1 } })
T.check(not ok and msg:find("vector 1: column 1 is not a number"), "a string in a vector raises: %s", tostring(msg))

-- 5. MCGS runs
local tmp = T.tmpdir("gp")
local conv = "tests/data/convolution_A4000.json"
local a, c = T.option_changes_run(tmp, conv, 120, 2, "--opt model_kind=gp", "model_kind=gp")
local f = assert(io.open(tmp .. "/a/s2-__opt_model_kind_gp/graph.json"))
local graph = json.decode(f:read("a"))
f:close()
T.check(graph.model and graph.model.fits > 5, "graph.json reports the GP's fits (%s)", tostring(graph.model and graph.model.fits))

local mix = T.mcgs_replay(tmp, conv, 120, 2, "--opt model_kind=mix")
local mixed = false
for i = 1, #mix do
  if mix[i].key ~= (c[i] and c[i].key) and mix[i].key ~= (a[i] and a[i].key) then mixed = true end
end
T.eq(#mix, 120, "mix run: evaluations")
T.check(mixed, "the mixture chooses unlike either model alone")
local function surrogate(model)
  local dir = string.format("%s/surrogate-%s", tmp, model)
  local code, _, stderr = T.run(string.format("surrogate --backend replay:%s --budget 60 --seed 2 -q --opt model=%s --out %s",
                                           conv, model, dir))
  T.eq(code, 0, "surrogate model=" .. model .. " (" .. stderr .. ")")
  return T.keys(dir)
end
local sg, sf = surrogate("gp"), surrogate("forest")
T.eq(#sg, 60, "surrogate model=gp: evaluations")
T.check(table.concat(sg, ";") ~= table.concat(sf, ";"), "surrogate: the GP chooses unlike the forest")

-- 6. model_kind=auto
local choose = require("kopt.mcgs_model").choose
local function window(n, gp_pred, forest_pred)
  local w = { n = n, actual = {}, gp = {}, forest = {} }
  for i = 1, math.min(n, 32) do
    w.actual[i], w.gp[i], w.forest[i] = i, gp_pred(i), forest_pred(i)
  end
  return w
end
local right = function(i) return i end
local reversed = function(i) return -i end
T.eq(choose(window(7, right, reversed)), "forest", "auto: the forest until 8 successes were predicted")
T.eq(choose(window(20, right, reversed)), "gp", "auto: the GP when it ranks and the forest reverses")
T.eq(choose(window(20, reversed, right)), "forest", "auto: the forest when it ranks and the GP reverses")
T.eq(choose(window(20, right, right)), "forest", "auto: a tie keeps the forest")
-- the GP orders the five fastest of 20 rightly and the rest backwards; the
-- forest the other way round: the fast pairs decide
local fast_only = function(i) return i <= 5 and i or 100 - i end
local slow_only = function(i) return i <= 5 and -i or i end
T.eq(choose(window(20, fast_only, slow_only)), "gp", "auto: ranking the fast configs counts, not the slow ones")
T.eq(choose(window(20, slow_only, fast_only)), "forest", "auto: the same, the other way round")
-- only the last 32 predictions are kept: n past 32 reads the ring as it is
T.eq(choose(window(100, right, reversed)), "gp", "auto: a full window")

local tmp_auto = T.tmpdir("gp-auto")
-- (auto is the default: the run without options, against the forest's)
local _, auto = T.option_changes_run(tmp_auto, conv, 120, 2, "--opt model_kind=forest", "model_kind=forest")
f = assert(io.open(tmp_auto .. "/s2-/graph.json"))
graph = json.decode(f:read("a"))
f:close()
T.eq(#auto, 120, "auto: evaluations")
T.check(graph.model and graph.model.gp_chosen and graph.model.gp_chosen >= 1 and graph.model.gp_chosen < graph.model.fits,
        "auto: graph.json reports fits that chose the GP (%s of %s)", tostring(graph.model and graph.model.gp_chosen),
        tostring(graph.model and graph.model.fits))

return T.done()
