-- `kopt compare` and strategies that plan with their budget: one that sets
-- `plans_with_budget` (or every one, with --per-budget) is run once per
-- reported budget, and its fraction at a budget is that of a run of that
-- many evaluations, checked here seed by seed against runs made directly
-- through the engine. A strategy that does not plan is read off its long
-- run, as before. --jobs gives the same report.
local T = require("testlib")
local cjson = require("cjson")
local engine_mod = require("kopt.engine")
local replay = require("kopt.backends.replay")
local strategy_mod = require("kopt.strategy")
local benchstats = require("kopt.benchstats")

local tmp = T.tmpdir("compare_budget")
local SPACE = "tests/data/pnpoly_RTX_3090.json"
local SEEDS, BUDGETS = 4, { 10, 30 }

-- A random search whose draws depend on its budget: it throws away
-- `budget` numbers first, so runs of 10 and of 30 evaluations sample
-- different configurations.
local function write_strategy(name, plans)
  T.write(tmp .. "/" .. name .. ".lua", string.format([[
local S = { name = %q, options = {}, plans_with_budget = %s }
function S.init(ctx) for _ = 1, ctx.budget do ctx.rng:uniform() end end
function S.ask(ctx, n)
  local out = {}
  for _ = 1, n do out[#out + 1] = { config = ctx.space:sample(ctx.rng) } end
  return out
end
return S
]], name, tostring(plans)))
  return tmp .. "/" .. name .. ".lua"
end
local planner = write_strategy("planner", true)
local walker = write_strategy("walker", false)

-- seed's best time after `at` evaluations of a run with budget `budget`
local backend = replay.open(nil, { file = SPACE })
local facts = benchstats.space_facts(backend.rec.entries)
local function direct(path, seed, budget, at)
  local s = strategy_mod.load(path)
  local best, n = math.huge, 0
  engine_mod.run({ strategy = s, strategy_name = s.name, options = strategy_mod.options(s, {}),
                   space = backend.space, backend = backend, budget = budget, seed = seed, quiet = true,
                   on_eval = function(_, rec)
                     n = n + 1
                     local r = rec.result
                     if n <= at and r.status == "ok" and r.time_ms < best then best = r.time_ms end
                   end })
  return best < math.huge and facts.opt / best or 0
end
local length = math.max(BUDGETS[#BUDGETS], benchstats.cutoff(facts, 0.95))

local function compare(out, extra)
  local code, _, err = T.run(string.format("compare --strategies %s,%s,anneal --spaces %s --seeds %d --budgets %s "
    .. "-q --out %s %s", planner, walker, SPACE, SEEDS, table.concat(BUDGETS, ","), out, extra or ""))
  T.eq(code, 0, "compare " .. (extra or "") .. " (" .. err .. ")")
  return cjson.decode(T.slurp(out .. "/benchmark.json")), T.slurp(out .. "/benchmark.md")
end

local report, md = compare(tmp .. "/one")
local rows = {}
for _, s in ipairs(report.spaces[1].strategies) do rows[s.name] = s end
T.check(rows.planner.per_budget == true and rows.anneal.per_budget == true, "planner and anneal plan with the budget")
T.check(rows.walker.per_budget == false, "the walker does not: %s", tostring(rows.walker.per_budget))
T.check(md:find("Run once per budget (they plan with it): planner, anneal.", 1, true) ~= nil, "the report names the planners:\n%s",
        md:sub(1, 600))
for s = 1, SEEDS do
  for i, b in ipairs(BUDGETS) do
    local want = direct(planner, s, b < length and b or length, b)
    T.check(math.abs(rows.planner.seed_fraction[s][i] - want) < 1e-12,
            "planner, seed %d @%d: the run of %d evaluations (%.6f against %.6f)", s, b, b,
            rows.planner.seed_fraction[s][i], want)
    want = direct(walker, s, length, b)
    T.check(math.abs(rows.walker.seed_fraction[s][i] - want) < 1e-12,
            "walker, seed %d @%d: read off the run of %d (%.6f against %.6f)", s, b, length,
            rows.walker.seed_fraction[s][i], want)
  end
end
-- (so the test can tell the two apart: a budget changes the planner's draws)
local differs = false
for s = 1, SEEDS do
  if math.abs(direct(planner, s, BUDGETS[1], BUDGETS[1]) - direct(planner, s, length, BUDGETS[1])) > 1e-12 then
    differs = true
  end
end
T.check(differs, "a run of %d and the long run differ at %d for some seed", BUDGETS[1], BUDGETS[1])
-- the extra runs count in the evaluations made
T.eq(rows.planner.evaluations, SEEDS * (length + BUDGETS[1] + BUDGETS[2]), "the planner's evaluations")
T.eq(rows.walker.evaluations, SEEDS * length, "the walker's evaluations")

-- --jobs: the same report, timings aside
local three = compare(tmp .. "/three", "--jobs 3")
T.same_tree(T.untimed(report), T.untimed(three), "--jobs 3: benchmark.json")

-- --per-budget: every strategy runs once per budget
local all = compare(tmp .. "/all", "--per-budget")
for _, s in ipairs(all.spaces[1].strategies) do
  if s.name ~= "random (exact)" then T.check(s.per_budget == true, "--per-budget: %s runs per budget", s.name) end
end
for s = 1, SEEDS do
  local want = direct(walker, s, BUDGETS[1], BUDGETS[1])
  T.check(math.abs(all.spaces[1].strategies[3].seed_fraction[s][1] - want) < 1e-12,
          "--per-budget: the walker's seed %d at %d is its run of %d", s, BUDGETS[1], BUDGETS[1])
end

-- a strategy that says it plans with something other than true or false
T.write(tmp .. "/vague.lua", [[
return { name = "vague", options = {}, plans_with_budget = "yes",
         ask = function(ctx) return { { config = ctx.space:sample(ctx.rng) } } end }
]])
local code, _, err = T.run("compare --strategies " .. tmp .. "/vague.lua --spaces " .. SPACE .. " --seeds 1 -q --out "
                           .. tmp .. "/vague")
T.eq(code, 2, "plans_with_budget = \"yes\" is a usage error")
T.check(err:find("'plans_with_budget' must be true or false, got string", 1, true) ~= nil, "the error says so: %s", err)

backend:close()
os.execute("rm -rf '" .. tmp .. "'")
T.done()
