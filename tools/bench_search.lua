-- Overhead of the search machinery, without any kernel:
--   kopt script tools/bench_search.lua [NODES]
-- 1. kopt.graph from Lua: NODES (default 10^6) g:add then g:find of 64-hex keys.
-- 2. MCGS on a synthetic space (6 knobs x 10 values, a smooth bowl with
--    noise), driven through its ask/tell callbacks with a minimal ctx until the
--    graph holds 10^5 nodes; then the mean time of one iteration (ask + tell:
--    selection, expansion, backup, rollout bookkeeping) over the next 2000.
--    With a second argument "profile", a sampling hook then attributes the
--    time of 2000 more iterations to the functions of strategies/mcgs.lua
--    (expansion, i.e. add_moves with the generator, against the rest).
--    Further arguments KEY=VALUE are MCGS options (model=false: without the
--    value model); the value model's fits and predictions are timed apart.
local graph = require("kopt.graph")
local sys = require("kopt.sys")
local space_mod = require("kopt.space")
local rng_mod = require("kopt.rng")
local strategy_mod = require("kopt.strategy")

local n = tonumber(arg[1]) or 1000000
local keys = {}
for i = 1, n do keys[i] = string.format("%016x%016x%016x%016x", i * 2654435761, i, i * 40503, i ~ 0x5bd1e995) end
local g = graph.new()
local t0 = sys.now()
for i = 1, n do g:add(keys[i]) end
local t1 = sys.now()
local found = 0
for i = 1, n do if g:find(keys[i]) == i then found = found + 1 end end
local t2 = sys.now()
assert(found == n)
print(string.format("graph from Lua: %d adds %.3f s (%.0f ns each), %d finds %.3f s (%.0f ns each)",
                    n, t1 - t0, (t1 - t0) * 1e9 / n, n, t2 - t1, (t2 - t1) * 1e9 / n))
g:close()

local knobs = {}
for i = 1, 6 do
  local vals = {}
  for v = 1, 10 do vals[v] = v * 16 end
  knobs[i] = { name = "K" .. i, values = vals }
end
local space = space_mod.new({ knobs = knobs })
local noise = rng_mod.new(7)
local function time_of(c)
  local s = 1
  for i = 1, 6 do s = s + ((c["K" .. i] / 16 - (i + 2)) ^ 2) * 0.05 end
  return s * (1 + 0.05 * noise:uniform())
end
-- time spent in the move generator (kopt.moves.propose), to tell the
-- search machinery's own overhead from the generator's
local moves = require("kopt.moves")
local propose, t_gen = moves.propose, 0
moves.propose = function(...)
  local t = sys.now()
  local out = propose(...)
  t_gen = t_gen + sys.now() - t
  return out
end
local S = strategy_mod.load("mcgs")
local opts, profile = {}, false
for i = 2, #arg do
  local k, v = arg[i]:match("^([%w_]+)=(.*)$")
  if k then opts[#opts + 1] = { k, v } elseif arg[i] == "profile" then profile = true end
end
local ctx = { space = space, rng = rng_mod.new(1), options = strategy_mod.options(S, opts), budget = math.huge,
              evaluations = 0, run_dir = nil }
function ctx:log() end
function ctx:key(c) return space:key(c) end
S.init(ctx)
local function iterate()
  local cands = S.ask(ctx, 1)
  local res = {}
  for i, c in ipairs(cands) do
    ctx.evaluations = ctx.evaluations + 1
    res[i] = { status = "ok", time_ms = time_of(c.config), key = space:key(c.config) }
  end
  S.tell(ctx, res)
  return #cands
end
local target = 100000
local it = 0
local tb = sys.now()
while (ctx.mcgs.g:size()) < target do
  if iterate() == 0 then break end
  it = it + 1
end
local tgrow = sys.now() - tb
local nodes, edges = ctx.mcgs.g:size()
local m = 2000
t_gen = 0
local t3 = sys.now()
for _ = 1, m do iterate() end
local t4 = sys.now()
local nodes2 = ctx.mcgs.g:size()
print(string.format("mcgs: %d iterations to reach %d nodes / %d edges (%.2f s, %.3f ms each)", it, nodes, edges,
                    tgrow, tgrow * 1e3 / it))
print(string.format("mcgs at %d-%d nodes: %.3f ms per iteration (ask + tell, mean of %d), of which %.3f ms in the"
                    .. " move generator and %.3f ms in MCGS itself (selection, graph updates, backup, rollout choice)",
                    nodes, nodes2, (t4 - t3) * 1e3 / m, m, t_gen * 1e3 / m, (t4 - t3 - t_gen) * 1e3 / m))

local model = ctx.mcgs.model
if model then
  print(string.format("value model over the whole run (%d measured states): %d fits, %.2f ms each (%.3f ms per"
                      .. " iteration); %d predictions, %.1f us each (%.3f ms per iteration); %d weak moves pruned",
                      #model.X, model.fits, model.fit_s * 1e3 / math.max(1, model.fits),
                      model.fit_s * 1e3 / (it + m), model.predicts,
                      model.predict_s * 1e6 / math.max(1, model.predicts), model.predict_s * 1e3 / (it + m),
                      model.pruned))
end

if profile then
  local names = {}
  local lineno = 0
  for line in io.lines("strategies/mcgs.lua") do
    lineno = lineno + 1
    local name = line:match("^local function ([%w_]+)") or line:match("^function ([%w_.]+)")
    if name then names[lineno] = name end
  end
  local counts, total = {}, 0
  debug.sethook(function()
    total = total + 1
    for lvl = 2, 40 do
      local info = debug.getinfo(lvl, "S")
      if not info then break end
      if info.short_src:find("mcgs.lua", 1, true) then
        local k = names[info.linedefined] or ("line " .. info.linedefined)
        counts[k] = (counts[k] or 0) + 1
        return
      end
    end
    counts["(outside mcgs.lua)"] = (counts["(outside mcgs.lua)"] or 0) + 1
  end, "", 1000)
  local t5 = sys.now()
  for _ = 1, m do iterate() end
  local t6 = sys.now()
  debug.sethook()
  local list = {}
  for k, v in pairs(counts) do list[#list + 1] = { k, v } end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  print(string.format("profile of %d iterations (%.3f ms each with the hook), innermost mcgs.lua function:", m,
                      (t6 - t5) * 1e3 / m))
  for _, e in ipairs(list) do print(string.format("  %5.1f%%  %s", 100 * e[2] / total, e[1])) end
end
