-- kopt script perseed.lua STRATEGY SEEDS BUDGET SPACE [K=V...] -> quantiles of final fraction
local benchstats = require("kopt.benchstats")
local replay = require("kopt.backends.replay")
local engine_mod = require("kopt.engine")
local strategy_mod = require("kopt.strategy")
local name, seeds, budget, file = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4]
local pl = {}
for i = 5, #arg do local k, v = arg[i]:match("^([%w_]+)=(.*)$"); pl[#pl+1] = {k, v} end
local backend = replay.open(nil, { file = file })
local opt = benchstats.space_facts(backend.rec.entries).opt
local fr = {}
for seed = 1, seeds do
  local s = strategy_mod.load(name)
  local options = strategy_mod.options(s, pl)
  local best, bc = math.huge, nil
  engine_mod.run({ strategy = s, strategy_name = s.name, options = options, space = backend.space,
    backend = backend, budget = budget, seed = seed, quiet = true,
    on_eval = function(_, rec) local r = rec.result
      if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms < best then best = r.time_ms; bc = rec.config end end })
  if os.getenv("PERCFG") then local ks = {} for _, k in ipairs(backend.space.knobs) do if #k.values > 1 then ks[#ks+1] = tostring(bc[k.name]) end end
    CFG = CFG or {}; local key = string.format("%.3f ", opt/best) .. table.concat(ks, ","); CFG[key] = (CFG[key] or 0) + 1; if os.getenv("PERCFG") == "2" then print(seed, key) end end
  fr[#fr+1] = opt / best
end
local sum = 0; for _, f in ipairs(fr) do sum = sum + f end
local sorted = {table.unpack(fr)}; table.sort(sorted)
local q = function(p) return sorted[math.max(1, math.floor(p * #sorted + 0.5))] end
local hit = 0; for _, f in ipairs(fr) do if f >= 0.999 then hit = hit + 1 end end
print(string.format("%s %s mean %.3f q10 %.3f q25 %.3f q50 %.3f q75 %.3f opt%% %.2f", name, file:match("([^/]+)%.json$"), sum/#fr, q(.1), q(.25), q(.5), q(.75), hit/#fr))
if os.getenv("PERSEED") then for i, f in ipairs(fr) do io.write(string.format("%.3f ", f)) end print() end

if CFG then local rows = {} for k, n in pairs(CFG) do rows[#rows+1] = {k, n} end table.sort(rows, function(a, b) return a[2] > b[2] end)
  for i = 1, math.min(12, #rows) do print(rows[i][2], rows[i][1]) end end
