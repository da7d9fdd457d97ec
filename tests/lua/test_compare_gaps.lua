-- `kopt compare`'s gaps and seed noise: kopt.benchstats.gap_interval (the
-- gap of one strategy to the best of others, with a bootstrap interval
-- over the seeds) on lists whose answers are known, compare.gaps on a
-- hand-made report (variants of one strategy are not rivals), and the
-- section and JSON rows through the CLI.
local T = require("testlib")
local cjson = require("cjson")
local benchstats = require("kopt.benchstats")
local compare = require("kopt.commands.compare")
local rng_mod = require("kopt.rng")

-- n values spread evenly over [centre - width, centre + width]
local function spread(centre, width, n)
  local xs = {}
  for i = 1, n do xs[i] = centre - width + 2 * width * (i - 1) / (n - 1) end
  return xs
end

-- No spread: the interval is the gap itself.
local gap, lo, hi = benchstats.gap_interval({ 1, 1, 1 }, { { 0.5, 0.5, 0.5 } }, 500, rng_mod.new(1), 0.9)
T.eq(gap, 0.5, "constant lists: gap")
T.check(lo == 0.5 and hi == 0.5, "constant lists: interval [%s, %s] is the gap", lo, hi)

-- The gap is to the largest of the others' means.
gap = benchstats.gap_interval({ 0.8, 0.8 }, { { 0.5, 0.5 }, { 0.9, 0.9 }, { 0.7, 0.7 } }, 100, rng_mod.new(1), 0.9)
T.check(math.abs(gap + 0.1) < 1e-12, "gap to the best of three others: %s", gap)

-- Well apart (0.80 and 0.90, each +-0.01 over 20 seeds): clearly behind.
gap, lo, hi = benchstats.gap_interval(spread(0.80, 0.01, 20), { spread(0.90, 0.01, 20) }, 2000, rng_mod.new(1), 0.9)
T.check(math.abs(gap + 0.1) < 1e-12 and hi < 0 and lo > -0.12, "apart: gap %s in [%s, %s]", gap, lo, hi)

-- The same seeds twice: the interval holds zero, and is symmetric about it
-- to the bootstrap's precision.
local same = spread(0.9, 0.1, 20)
gap, lo, hi = benchstats.gap_interval(same, { same }, 2000, rng_mod.new(1), 0.9)
T.eq(gap, 0, "identical lists: gap")
T.check(lo < 0 and hi > 0 and math.abs(lo + hi) < 0.02, "identical lists: [%s, %s] holds 0", lo, hi)

-- Best of three identical rivals: the gap of the means is 0, but the
-- interval leans below zero (the largest of three resampled means is
-- biased upwards), and is wider below than above.
gap, lo, hi = benchstats.gap_interval(same, { same, same, same }, 2000, rng_mod.new(1), 0.9)
T.eq(gap, 0, "best of three identical: gap")
T.check(-lo > hi + 0.01, "best of three identical: [%s, %s] leans below zero", lo, hi)

-- Deterministic for one rng seed.
local a = { benchstats.gap_interval(same, { spread(0.85, 0.05, 20) }, 300, rng_mod.new(7), 0.9) }
local b = { benchstats.gap_interval(same, { spread(0.85, 0.05, 20) }, 300, rng_mod.new(7), 0.9) }
T.check(a[2] == b[2] and a[3] == b[3], "same rng seed, same interval")

-- compare.gaps: m@x and m@y are variants of m, so each is compared with r
-- only; r with the better of them. Budget 10 only.
local function res(name, base, per_seed)
  local sf = {}
  for s, f in ipairs(per_seed) do sf[s] = { f } end
  return { name = name, base = base, seed_fraction = sf, fraction = {} }
end
local report = { budgets = { 10 }, spaces = {
  { name = "s1", results = { res("m@x", "m", { 0.9, 0.9 }), res("m@y", "m", { 0.7, 0.7 }),
                             res("r", "r", { 0.8, 0.8 }) } },
} }
local by = {}
for _, g in ipairs(compare.gaps(report)) do by[g.name] = g end
T.check(math.abs(by["m@x"].gap - 0.1) < 1e-12, "m@x against r: %s", by["m@x"].gap)
T.check(math.abs(by["m@y"].gap + 0.1) < 1e-12, "m@y against r, not m@x: %s", by["m@y"].gap)
T.check(math.abs(by.r.gap + 0.1) < 1e-12, "r against the better variant of m: %s", by.r.gap)
local md = compare.gaps_markdown(report)
T.check(md:find("| m@y | 1 behind, 1 clearly; worst -0.100 [-0.100, -0.100] s1 |", 1, true) ~= nil,
        "m@y's row: %s", md)
T.check(md:find("| m@x | 0 behind, 0 clearly; worst +0.100", 1, true) ~= nil, "m@x's row: %s", md)
T.eq(compare.gaps_markdown({ budgets = { 10 }, spaces = { { name = "s", results = {
  { name = "a", base = "a", fraction = { 1 } }, { name = "b", base = "b", fraction = { 1 } } } } } }), "",
  "no per-seed fractions: no section")

-- Through the CLI: rows for every strategy, space and budget in
-- benchmark.json, and the section in benchmark.md.
local tmp = T.tmpdir("compare_gaps")
local code, _, stderr = T.run(string.format("compare --strategies random,anneal --spaces tests/data/vector_add_A4000.json"
  .. " --seeds 3 --budgets 3,6 --out %s/o -q", tmp))
T.eq(code, 0, "kopt compare exit code (" .. stderr .. ")")
local out = cjson.decode(T.slurp(tmp .. "/o/benchmark.json"))
T.eq(#out.gaps, 4, "gap rows: 2 strategies x 1 space x 2 budgets")
-- two strategies: each one's gap is the other's, negated
local gaps = {}
for _, g in ipairs(out.gaps) do
  gaps[string.format("%s@%d", g.name, g.budget)] = g.gap
  T.check(g.lo <= g.hi, "%s @%d: lo <= hi", g.name, g.budget)
end
for _, budget in ipairs({ 3, 6 }) do
  T.check(math.abs(gaps["random@" .. budget] + gaps["anneal@" .. budget]) < 1e-12, "@%d: random %s, anneal %s", budget,
          gaps["random@" .. budget], gaps["anneal@" .. budget])
end
T.check(T.slurp(tmp .. "/o/benchmark.md"):find("### Gaps and seed noise", 1, true) ~= nil, "benchmark.md has the section")

return T.done()
