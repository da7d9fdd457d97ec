-- A quick screen of a strategy's first evaluations on recorded spaces:
--   kopt script tools/early_curve.lua STRATEGY SEEDS BUDGET SPACE.json[,SPACE.json...] [KEY=VALUE ...]
-- runs STRATEGY (a built-in name or a .lua path) with the given options for
-- seeds 1..SEEDS on each space (replay backend), BUDGET evaluations each,
-- and prints per space the mean fraction of the optimum (t_opt / t_best,
-- 0 while nothing succeeded) at every tenth evaluation and at BUDGET.
-- Unlike `kopt compare`, the runs stop at BUDGET (compare runs on to the
-- space's methodology cutoff for its score), so a 120-seed screen of 12
-- spaces at 50 evaluations takes about a minute. A strategy that plans with
-- its budget (anneal) plans with BUDGET here, as in compare's run of that
-- budget; the fractions at the tenths before it are from the same runs.
-- For MCGS it also counts, per run, the evaluations of each kind (initial
-- samples, rollout steps by model or prior, the portfolio's arms, the
-- stall's sweep and regions) and the log-gain of those that set a new best.
local benchstats = require("kopt.benchstats")
local replay = require("kopt.backends.replay")
local engine_mod = require("kopt.engine")
local strategy_mod = require("kopt.strategy")
local experience = require("kopt.experience")
local relabel = require("kopt.relabel")

-- (a benchmark neither writes the user's dataset and method map nor learns
-- from them, as `kopt compare`: its figures must not depend on the runs
-- before it, and its synthetic runs must not skew the user's later ones)
experience.set_persistent(false)
relabel.set_persistent(false)

local USAGE = "usage: kopt script tools/early_curve.lua STRATEGY SEEDS BUDGET SPACE.json[,...] [KEY=VALUE ...]"
local name, seeds, budget, files = arg[1], math.tointeger(tonumber(arg[2] or "")),
  math.tointeger(tonumber(arg[3] or "")), arg[4]
if not name or not seeds or seeds < 1 or not budget or budget < 1 or not files then
  io.stderr:write(USAGE, "\n")
  os.exit(2)
end
local pairs_list = {}
for i = 5, #arg do
  local k, v = arg[i]:match("^([%w_]+)=(.*)$")
  if not k then
    io.stderr:write(string.format("early_curve: expected KEY=VALUE, got '%s'\n%s\n", arg[i], USAGE))
    os.exit(2)
  end
  pairs_list[#pairs_list + 1] = { k, v }
end

-- The kind of each candidate MCGS asked for (its pending records; nil for
-- other strategies).
local function kind_of(rec, init_samples, index)
  if index <= init_samples then return "initial sample" end
  if rec.arm == "region" then return rec.freeze and "stall region" or "stall sweep" end
  if rec.rollout then return "rollout step (" .. tostring(rec.rarm or "other") .. ")" end
  return (rec.arm or "tree") .. (rec.sample and " proposal" or " descent")
end

local function screen(file)
  local backend = replay.open(nil, { file = file })
  -- (the optimum as `kopt compare` takes it)
  local opt = benchstats.space_facts(backend.rec.entries).opt
  local at, count, gain = {}, {}, {}
  for seed = 1, seeds do
    local s = strategy_mod.load(name)
    local options = strategy_mod.options(s, pairs_list)
    local kinds = {}
    if s.name == "mcgs" then
      local ask = s.ask
      s.ask = function(ctx, n)
        local out = ask(ctx, n)
        for i, rec in ipairs(ctx.mcgs.batch or {}) do
          kinds[#kinds + 1] = kind_of(rec, options.init_samples, ctx.evaluations + i)
        end
        return out
      end
    end
    local best, k = math.huge, 0
    engine_mod.run({ strategy = s, strategy_name = s.name, options = options, space = backend.space,
      backend = backend, budget = budget, seed = seed, quiet = true,
      profiler = require("kopt.profiling").new({ mode = "none", backend = backend, quiet = true }),
      on_eval = function(_, rec)
        k = k + 1
        local r, c = rec.result, kinds[k]
        if c then count[c] = (count[c] or 0) + 1 end
        if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms < best then
          if c and best < math.huge then gain[c] = (gain[c] or 0) + math.log(best / r.time_ms) end
          best = r.time_ms
        end
        at[k] = (at[k] or 0) + (best < math.huge and opt / best or 0)
      end })
    -- (a run that ran out of space stops early: its best holds to BUDGET)
    for j = k + 1, budget do at[j] = (at[j] or 0) + (best < math.huge and opt / best or 0) end
  end
  backend:close()
  local line = {}
  for b = 10, budget, 10 do line[#line + 1] = string.format("@%d %.3f", b, at[b] / seeds) end
  if budget % 10 ~= 0 then line[#line + 1] = string.format("@%d %.3f", budget, at[budget] / seeds) end
  print(string.format("%-28s %s", file:match("([^/]+)%.json$") or file, table.concat(line, "  ")))
  local rows = {}
  for c in pairs(count) do rows[#rows + 1] = c end
  table.sort(rows, function(a, b) return count[a] > count[b] or (count[a] == count[b] and a < b) end)
  for _, c in ipairs(rows) do
    print(string.format("    %-26s %5.1f evaluations per run, log-gain %.3f per run", c, count[c] / seeds,
      (gain[c] or 0) / seeds))
  end
end

for file in files:gmatch("[^,]+") do screen(file) end
