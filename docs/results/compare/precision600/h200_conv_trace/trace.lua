-- kopt script trace.lua SPACE STRATEGY SEED BUDGET [K=V...]: one line per evaluation of one
-- replayed run: its index, which MCGS arm proposed it (tree, ei, cross, region; /roll: a rollout
-- step and how its child was chosen; /s: a fresh sample), the config, its fraction of the
-- optimum, and * at a new best.
local replay = require("kopt.backends.replay")
local engine_mod = require("kopt.engine")
local strategy_mod = require("kopt.strategy")
local benchstats = require("kopt.benchstats")
local file, strat, seed, budget = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local kv = {}
for i = 5, #arg do local k, v = arg[i]:match("^([^=]+)=(.*)$"); kv[#kv + 1] = { k, v } end
local backend = replay.open(nil, { file = file })
local opt = benchstats.space_facts(backend.rec.entries).opt
local s = strategy_mod.load(strat)
local options = strategy_mod.options(s, kv)
local kinds = {}
local ask = s.ask
s.ask = function(ctx, n)
  local out = ask(ctx, n)
  for i, rec in ipairs(ctx.mcgs and ctx.mcgs.batch or {}) do
    kinds[ctx.evaluations + i] = (rec.arm or "tree") .. (rec.rollout and "/roll:" .. tostring(rec.rarm) or "") .. (rec.sample and "/s" or "") .. (rec.freeze and "/frz" or "")
  end
  return out
end
local k, best = 0, math.huge
engine_mod.run({ strategy = s, strategy_name = strat, options = options, space = backend.space,
  backend = backend, budget = budget, seed = seed, quiet = true,
  on_eval = function(_, rec)
    k = k + 1
    local r = rec.result
    local ks = {}
    for _, kn in ipairs(backend.space.knobs) do if #kn.values > 1 then ks[#ks+1] = tostring(rec.config[kn.name]) end end
    local f = r.status == "ok" and opt / r.time_ms or 0
    local nb = ""
    if r.status == "ok" and r.time_ms < best then best = r.time_ms; nb = " *" end
    print(string.format("%3d %-22s %-26s %.3f%s", k, kinds[k] or "", table.concat(ks, ","), f, nb))
  end })
