-- `kopt compare`: strategy variants (NAME@K=V+K=V), the per-space rank table,
-- the leave-one-space-out selection and the cost table, on hand-made reports whose answers
-- are worked out below, then once through the CLI on the 15-configuration
-- vector_add space.
local T = require("testlib")
local cjson = require("cjson")
local compare = require("kopt.commands.compare")

local function res(name, base, fr) return { name = name, base = base, fraction = fr } end

-- Variant names.
local label, kv = compare.split_variant("mcgs@pw_c=1+model=false")
T.eq(label, "mcgs", "variant label")
T.eq(#kv, 2, "variant options")
T.eq(kv[1][1] .. "=" .. kv[1][2] .. " " .. kv[2][1] .. "=" .. kv[2][2], "pw_c=1 model=false", "variant pairs")
label, kv = compare.split_variant("strategies/mcgs.lua")
T.eq(label, "strategies/mcgs.lua", "no variant: label unchanged")
T.eq(#kv, 0, "no variant: no options")

-- Ranks: two budgets. Space 1: a > b at both; space 2: a = b (equal to 3
-- decimals: 0.9001 vs 0.9004) at budget 1, b > a at budget 2; c always last.
local report = { budgets = { 10, 20 }, spaces = {
  { name = "s1", results = { res("a", "a", { 0.9, 0.95 }), res("b", "b", { 0.8, 0.9 }), res("c", "c", { 0.5, 0.6 }) } },
  { name = "s2", results = { res("a", "a", { 0.9001, 0.9 }), res("b", "b", { 0.9004, 0.99 }), res("c", "c", { 0.1, 0.2 }) } },
} }
local ranks, mean = compare.ranks(report)
T.eq(ranks[1][1], 1, "s1: a first at both budgets")
T.eq(ranks[1][2], 2, "s1: b second")
T.eq(ranks[2][1], (1.5 + 2) / 2, "s2: a tied at budget 1 (1.5), second at budget 2")
T.eq(ranks[2][2], (1.5 + 1) / 2, "s2: b tied, then first")
T.eq(ranks[2][3], 3, "s2: c last")
T.eq(mean[1], (1 + 1.75) / 2, "mean rank of a")
T.eq(mean[3], 3, "mean rank of c")

-- Ranked as printed (%.3f): 0.8125 and 0.8121 both print 0.812 and tie;
-- 0.8128 prints 0.813 and is first (a half rounds to even in print)
ranks = compare.ranks({ budgets = { 10 }, spaces = {
  { name = "s", results = { res("a", "a", { 0.8125 }), res("b", "b", { 0.8121 }), res("c", "c", { 0.8128 }) } } } })
T.eq(ranks[1][3], 1, "0.813 first")
T.eq(ranks[1][1], 2.5, "0.812 (0.8125) tied second")
T.eq(ranks[1][2], 2.5, "0.812 (0.8121) tied second")

-- A chart of one budget (`--budgets 1`): an x axis of one value is
-- widened, so no coordinate is NaN
local chart = require("kopt.svg").line_chart({ title = "t", xlabel = "x", ylabel = "y", xmin = 1, xmax = 1, ymin = 0.5,
  ymax = 1, xlog = true, series = { { name = "a", points = { { 1, 0.7 } } } } })
T.check(not chart:lower():find("%f[%w]nan%f[%W]") and not chart:lower():find("%f[%w]inf%f[%W]"),
        "a one-budget chart has NaN coordinates")

-- Leave-one-space-out: strategy m has variants m@x (good on s1 and s2, bad
-- on s3) and m@y (mediocre everywhere). Held out s3, m@x is picked (best on
-- s1+s2) and scores its bad s3 value; held out s1 or s2, the choice is made
-- on the other two spaces.
report = { budgets = { 10 }, spaces = {
  { name = "s1", results = { res("m@x", "m", { 0.99 }), res("m@y", "m", { 0.90 }), res("r", "r", { 0.5 }) } },
  { name = "s2", results = { res("m@x", "m", { 0.98 }), res("m@y", "m", { 0.90 }), res("r", "r", { 0.5 }) } },
  { name = "s3", results = { res("m@x", "m", { 0.70 }), res("m@y", "m", { 0.90 }), res("r", "r", { 0.95 }) } },
} }
local groups = compare.loo(report)
T.eq(#groups, 2, "two strategies after grouping variants")
T.eq(groups[1].name, "m", "group name is the strategy")
-- held out s1: s2+s3 give x 1.68, y 1.80 -> y; s2: s1+s3 x 1.69, y 1.80 -> y;
-- s3: s1+s2 x 1.97, y 1.80 -> x
T.eq(groups[1].pick[1], "m@y", "held out s1: m@y")
T.eq(groups[1].pick[2], "m@y", "held out s2: m@y")
T.eq(groups[1].pick[3], "m@x", "held out s3: m@x")
T.eq(groups[1].fraction[3][1], 0.70, "held out s3: scored with m@x's own value there")
T.eq(groups[2].pick[1], "r", "a single variant is its own pick")
local md = compare.loo_markdown(report) .. compare.rank_markdown(report)
T.check(md:find("### Leave-one-space-out", 1, true) ~= nil, "markdown has the leave-one-out table")
-- m: mean (0.90 + 0.90 + 0.70) / 3, worst 0.70, worst gap 0.70 - 0.95 on s3
T.check(md:find("| m | 0.833 | 0.700 | -0.250 (s3) |", 1, true) ~= nil, "leave-one-out row of m:\n%s", md)
T.check(md:find("### Rank per space", 1, true) ~= nil, "markdown has the rank table")

-- Through the CLI: a variant runs with its options and is reported under
-- its label; benchmark.json carries the ranks and the leave-one-out picks.
-- The cost table: CPU time per evaluation and the strategies' counters per
-- 100 evaluations, summed over spaces.
local cost = compare.cost_markdown({ spaces = {
  { results = { { name = "a", cpu_s = 1, evals = 1000, stats = {} },
                { name = "b", cpu_s = 3, evals = 1000, stats = { expert_calls = 10 } } } },
  { results = { { name = "a", cpu_s = 1, evals = 1000, stats = {} },
                { name = "b", cpu_s = 1, evals = 1000, stats = { expert_calls = 30 } } } },
} })
T.check(cost:find("| a | 1.000 | |", 1, true) ~= nil, "a: 2 s over 2000 evaluations, no counter: %s", cost)
T.check(cost:find("| b | 2.000 | 2.00 |", 1, true) ~= nil, "b: 4 s and 40 calls over 2000: %s", cost)
T.check(cost:find("expert calls", 1, true) ~= nil, "the counter is a column: %s", cost)

local tmp = T.tmpdir("compare_rank")
local code, _, stderr = T.run(string.format(
  "compare --strategies random,random@tries=50 --spaces tests/data/vector_add_A4000.json,"
  .. "tests/data/softmax_h200.t4.json --seeds 2 --budgets 5,10 --out %s/o -q", tmp))
T.eq(code, 0, "kopt compare with a variant: exit code (" .. stderr .. ")")
local out = cjson.decode(T.slurp(tmp .. "/o/benchmark.json"))
T.eq(out.spaces[1].strategies[3].name, "random@tries=50", "variant reported under its label")
T.eq(#out.mean_rank, 2, "mean rank per strategy")
T.eq(#out.loo, 1, "variants of one strategy form one leave-one-out group")
T.check(out.spaces[1].strategies[2].evaluations == 20 and out.spaces[1].strategies[2].cpu_s >= 0,
        "benchmark.json has each run's evaluations and CPU time")
code, _, stderr = T.run(string.format("compare --strategies random@nosuch=1 --spaces tests/data/vector_add_A4000.json "
  .. "--seeds 1 --out %s/bad -q", tmp))
T.eq(code, 2, "unknown variant option: usage error")
T.check(stderr:find("nosuch", 1, true) ~= nil, "the message names the option: %s", stderr)

-- a short curve (budgets up to 10) is drawn whole: its axis came from the
-- last point alone, and everything below 0.9 was drawn on the floor
do
  local cmp = require("kopt.commands.compare")
  local curve = { 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0 }
  local path = os.tmpname()
  cmp.write_svg(path, { name = "short", results = { { name = "r", curve = curve } }, exact = { curve = curve } }, 10)
  local text = T.slurp(path)
  os.remove(path)
  T.check(text:find(">0.2<", 1, true), "a short curve's axis reaches down to its values")
end

return T.done()
