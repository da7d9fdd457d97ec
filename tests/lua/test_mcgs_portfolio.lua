-- MCGS's portfolio of arms (kopt.mcgs_portfolio, --opt portfolio=...):
--  1. the arm list: "tree" alone is plain MCGS (nil), names split at spaces
--     and commas, an unknown arm is a usage error;
--  2. the bandit: every arm is tried once, then the arm whose evaluations
--     ranked near the top is preferred, and an arm that only failed drops
--     behind; a new best pays 1, the slowest success and a failure 0; the
--     ranking of successes (kept in blocks) gives the ranks and order of
--     one sorted list, ties included;
--  3. the proposals: the jump arm changes one knob of the best state by at
--     least two steps, the cross arm's children are valid and unmeasured;
--     the rollout bandit pays the choice of each rollout step;
--     the maximin initial design spreads its samples over a knob's values;
--  4. a portfolio run on the 300-config matmul space is deterministic given
--     the seed, measures no config twice, measures candidates of the ei and
--     cross arms (origin method), and differs from plain MCGS, as does a run
--     with the rollout bandit alone.
local T = require("testlib")
local P = require("kopt.mcgs_portfolio")
local rng_mod = require("kopt.rng")
local space_mod = require("kopt.space")

-- 1. arm lists
T.eq(P.parse("tree"), nil, "tree alone is plain MCGS")
local arms = P.parse("tree ei,cross")
T.eq(table.concat(arms, "|"), "tree|ei|cross", "arms split at spaces and commas")
local ok = pcall(P.parse, "tree warp")
T.check(not ok, "an unknown arm is refused")

-- 2. the bandit
local knobs = { { name = "A", values = { 1, 2, 3, 4, 5, 6 } }, { name = "B", values = { 1, 2, 3 } } }
local space = space_mod.new({ knobs = knobs })
local ctx = { space = space, rng = rng_mod.new(7), key = function(_, c) return space:key(c) end,
              options = { arm_c = 0.3, arm_power = 4, arm_discount = 0.99, arm_top = 5, arm_population = 20,
                          arm_xi = 0.05, model_pool = 16 } }
local p = P.new(ctx, { "tree", "ei", "cross" })
local first = {}
for i = 1, 3 do
  first[i] = P.choose(ctx, p)
  P.record(ctx, p, first[i], 100 + i, 10 + i) -- each slower than the one before
end
T.eq(table.concat(first, "|"), "tree|ei|cross", "every arm is tried once, in order")
T.eq(P.nth(p, 1).t, 11, "the fastest success first")
-- from now on the ei arm finds new bests, the cross arm fails, the tree
-- finds states in the middle
local t, counts = 10, { tree = 0, ei = 0, cross = 0 }
for i = 1, 60 do
  local a = P.choose(ctx, p)
  counts[a] = counts[a] + 1
  if a == "ei" then
    t = t * 0.99
    P.record(ctx, p, a, 200 + i, t)
  elseif a == "cross" then
    P.record(ctx, p, a, 200 + i, nil)
  else
    P.record(ctx, p, a, 200 + i, 50 + i)
  end
end
T.check(counts.ei > counts.tree and counts.ei > counts.cross, "the paying arm is chosen most: %d %d %d",
        counts.ei, counts.tree, counts.cross)
T.check(counts.cross < 15, "an arm that only fails is seldom chosen: %d", counts.cross)
local q = P.new(ctx, { "tree", "ei" })
P.record(ctx, q, "tree", 1, 5)
T.eq(q.s.tree, 1, "the first success pays 1")
P.record(ctx, q, "ei", 2, 9)
T.eq(q.s.ei, 0, "the slowest success pays 0")
P.record(ctx, q, "ei", 3, 4)
T.check(math.abs(q.s.ei - 1) < 1e-12, "a new best pays 1: %s", q.s.ei)
P.record(ctx, q, "ei", 4, nil)
T.check(q.n.ei > 2.9 and math.abs(q.s.ei - 0.99) < 1e-12, "a failure pays 0 and counts: %s %s", q.n.ei, q.s.ei)

-- the ranking in blocks against one sorted list (slowest first, an entry
-- before the first not strictly slower), over thousands of inserts with
-- many ties, so blocks split and inserts land in every block
local ranking, list, trng = P.new_ranking(), {}, rng_mod.new(5)
local ranks_ok, order_ok = true, true
for i = 1, 3000 do
  local item = { id = i, t = trng:random(1, 400) / 8 }
  local lo, hi = 1, #list
  while lo <= hi do
    local mid = (lo + hi) // 2
    if list[mid].t > item.t then lo = mid + 1 else hi = mid - 1 end
  end
  table.insert(list, lo, item)
  if P.rank_insert(ranking, item) ~= lo - 1 then ranks_ok = false end
  if i % 97 == 0 or i == 3000 then
    for j = 1, #list do if P.rank_nth(ranking, j) ~= list[#list - j + 1] then order_ok = false end end
  end
end
T.check(ranks_ok, "each insert's count of slower entries is the sorted list's")
T.check(order_ok, "the i-th fastest is the sorted list's, ties in measurement order")
T.check(#ranking.blocks > 10 and ranking.n == 3000, "the ranking split into blocks: %d", #ranking.blocks)
T.eq(P.rank_nth(ranking, 3001), nil, "past the last entry: nil")
T.eq(P.rank_nth(P.new_ranking(), 1), nil, "an empty ranking has no entries")

-- the rollout bandit: model first, then the prior, each paid by its steps
local rb = P.new(ctx, { "tree" }, true)
T.eq(P.rollout_choice(ctx, rb), "model", "the rollout bandit tries the model's child first")
P.record(ctx, rb, "tree", 1, 5, "model")
T.eq(rb.roll.s.model, 1, "a rollout step pays its choice")
T.eq(P.rollout_choice(ctx, rb), "prior", "then the highest prior's child")

-- 3. proposals, on a stand-in search state: node 1 is the best
local st = { cfg = { { A = 3, B = 2 }, { A = 5, B = 1 }, { A = 1, B = 3 } } }
local r = P.new(ctx, { "tree", "jump", "cross" })
P.record(ctx, r, nil, 1, 1.0)
P.record(ctx, r, nil, 2, 2.0)
P.record(ctx, r, nil, 3, 3.0)
local measured = { ["3,2"] = true, ["5,1"] = true, ["1,3"] = true }
local function idle(c) return not measured[c.A .. "," .. c.B] end
for _ = 1, 20 do
  local c = P.propose(ctx, st, r, "jump", idle)
  local da, db = math.abs(c.A - 3), math.abs(c.B - 2)
  T.check((da >= 2 and db == 0) or (db >= 2 and da == 0), "a jump moves one knob by two steps or more: %d,%d",
          c.A, c.B)
  local x = P.propose(ctx, st, r, "cross", idle)
  T.check(x and space:is_valid(x) and idle(x), "a child is valid and unmeasured")
end
T.eq(P.propose(ctx, st, r, "tree", idle), nil, "the tree arm proposes nothing itself")

-- the maximin initial design: five samples of a five-valued knob are the
-- five values (each the farthest of 64 candidates from those drawn)
local one = space_mod.new({ knobs = { { name = "A", values = { 1, 2, 3, 4, 5 } }, { name = "B", values = { 7 } } } })
local dctx = { space = one, rng = rng_mod.new(11), options = { design_pool = 64 } }
local dst, got = {}, {}
for _ = 1, 5 do
  local c = P.spread_sample(dctx, dst)
  got[c.A] = (got[c.A] or 0) + 1
end
local distinct = 0
for _ in pairs(got) do distinct = distinct + 1 end
T.eq(distinct, 5, "maximin samples cover the knob's values")

-- 4. runs
local tmp = T.tmpdir("mcgs_portfolio")
local mm = "tests/data/matmul_f16_h200.t4.json"
local function run(dir, opts)
  local code, _, err = T.run(string.format("mcgs --backend replay:%s --budget 150 --seed 3 -q %s --out %s/%s",
                                           mm, opts, tmp, dir))
  T.eq(code, 0, dir .. " exit code (" .. err .. ")")
  return (T.events(tmp .. "/" .. dir))
end
local a = run("a", "--opt portfolio=tree,ei,cross,jump")
local b = run("b", "--opt portfolio=tree,ei,cross,jump")
local c = run("c", "--opt portfolio=tree")
local d = run("d", "--opt rollout_bandit=true")
T.eq(#a, 150, "portfolio run: evaluations")
local same, differ, seen, twice, by = true, false, {}, 0, {}
for i = 1, #a do
  if a[i].key ~= (b[i] and b[i].key) then same = false end
  if a[i].key ~= (c[i] and c[i].key) then differ = true end
  if seen[a[i].key] then twice = twice + 1 end
  seen[a[i].key] = true
  local m = a[i].origin and a[i].origin.method
  if m then by[m] = (by[m] or 0) + 1 end
end
T.check(same, "two portfolio runs with one seed measure the same configs in the same order")
T.check(differ, "the portfolio changes what is measured")
T.eq(twice, 0, "no config measured twice")
local rdiffer = false
for i = 1, #c do if c[i].key ~= (d[i] and d[i].key) then rdiffer = true end end
T.check(rdiffer, "the rollout bandit changes what is measured")
T.check((by.ei or 0) > 0 and (by.cross or 0) > 0, "ei and cross candidates measured: %s %s", by.ei, by.cross)

-- a maximin design of no candidates per sample picked nothing: with a
-- failing first sample the search ended after one evaluation
do
  local code, _, err = T.run("mcgs --backend replay:tests/data/pnpoly_RTX_3090.json --opt init_design=maximin " ..
                             "--opt design_pool=0 --no-db -q --out " .. T.tmpdir("dp0") .. "/run")
  T.check(code == 2 and err:find("design_pool: expected an integer from 1", 1, true), "design_pool=0: %d %s", code, err)
end

return T.done()
