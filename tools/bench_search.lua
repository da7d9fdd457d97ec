-- Overhead of the search machinery, without any kernel:
--   kopt script tools/bench_search.lua [NODES] [profile] [KEY=VALUE ...]
-- 1. kopt.graph from Lua: NODES (default 10^6) g:add then g:find of 64-hex keys.
-- 2. MCGS on a synthetic space (6 knobs x 10 values, a smooth bowl with
--    noise), driven through its ask/tell callbacks with a minimal ctx until the
--    graph holds 10^5 nodes; then the mean time of one iteration (ask + tell:
--    selection, expansion, backup, rollout bookkeeping) over the next 2000,
--    split into the move generators (the rules' and the heuristics'
--    proposals), the checking and
--    merging of proposals (kopt.moves.collect_lists), the value model's fits and
--    predictions, and the rest (MCGS itself: selection, graph updates,
--    backup, rollout choice).
--    KEY=VALUE arguments are MCGS options (model=false: without the value
--    model). "profile" adds a sampling profile of 2000 more iterations by
--    function (VM instructions, so C time is under-counted).
-- Times are CPU seconds of this process (os.clock), which a busy shared
-- machine disturbs less than wall time; the wall time is printed beside.
-- The parts inside ask and tell (the generator, the checking) are timed by
-- the monotonic clock instead: os.clock is a system call here (1.6 us), and
-- four of them per expansion inside the timed span added about 0.004 ms to
-- the iteration; kopt.sys.now costs 0.04 us.
-- The last line is a digest of every candidate asked, in order: a change
-- that must not alter the search's decisions must leave it unchanged.
local graph = require("kopt.graph")
local sys = require("kopt.sys")
local space_mod = require("kopt.space")
local rng_mod = require("kopt.rng")
local strategy_mod = require("kopt.strategy")
local moves = require("kopt.moves")
local experience = require("kopt.experience")
local relabel = require("kopt.relabel")

-- (a benchmark neither writes the user's dataset and method map nor learns
-- from them, as `kopt compare`: its figures must not depend on the runs
-- before it, and its synthetic runs must not skew the user's later ones)
experience.set_persistent(false)
relabel.set_persistent(false)

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
local function time_of(c, rng)
  local s = 1
  for i = 1, 6 do s = s + ((c["K" .. i] / 16 - (i + 2)) ^ 2) * 0.05 end
  return s * (1 + 0.05 * rng:uniform())
end

-- Time in the move generators and in kopt.moves' checking and merging of
-- their proposals (whichever entry point the strategy calls)
local clock, now = os.clock, sys.now
local t_gen, t_moves = 0, 0
local function timed(f, add)
  return function(...)
    local t = now()
    local a, b = f(...)
    add(now() - t)
    return a, b
  end
end
-- every built-in generator a run may use (the default's heuristics too)
for _, name in ipairs({ "rules", "heuristics", "experts" }) do
  local gen = moves.get(name)
  gen.propose = timed(gen.propose, function(dt) t_gen = t_gen + dt end)
end
for _, name in ipairs({ "collect_lists" }) do  -- collect and propose go through it
  if moves[name] then moves[name] = timed(moves[name], function(dt) t_moves = t_moves + dt end) end
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
-- CPU time inside ask and tell: the CPU time of a run of iterations less
-- that of their synthetic evaluation, done again apart on the configs they
-- asked (the same work: key, time, result table). No clock is read inside
-- an iteration: brackets of os.clock (a system call, 1.6 us here) around
-- ask and tell counted about one call each, 0.003 ms an iteration.
local asked, window = {}, {}
local function iterate()
  local cands = S.ask(ctx, 1)
  local res = {}
  for i, c in ipairs(cands) do
    ctx.evaluations = ctx.evaluations + 1
    local key = space:key(c.config)
    asked[#asked + 1] = key
    window[#window + 1] = c
    res[i] = { status = "ok", time_ms = time_of(c.config, noise), key = key }
  end
  S.tell(ctx, res)
  return #cands
end
-- CPU seconds of the evaluation part of iterate() for the candidates in
-- `cands` (one a call), with a generator of its own
local function evaluation_cpu(cands)
  local rng, replay_keys, seen, results = rng_mod.new(7), {}, {}, {}
  local one, evaluations = {}, 0
  local t = clock()
  for j = 1, #cands do
    one[1] = cands[j]
    local res = {}
    for i, c in ipairs(one) do
      evaluations = evaluations + 1
      local key = space:key(c.config)
      replay_keys[#replay_keys + 1] = key
      seen[#seen + 1] = c
      res[i] = { status = "ok", time_ms = time_of(c.config, rng), key = key }
    end
    results[j] = res
  end
  local dt = clock() - t
  assert(evaluations == #cands and #replay_keys == #cands and #seen == #results)
  return dt
end
local target = 100000
local it = 0
local w0, c0 = sys.now(), clock()
while (ctx.mcgs.g:size()) < target do
  if iterate() == 0 then break end
  it = it + 1
end
local cgrow, wgrow = clock() - c0 - evaluation_cpu(window), sys.now() - w0
local nodes, edges = ctx.mcgs.g:size()
local model = ctx.mcgs.model
local fit0, fits0, pred0, preds0 = 0, 0, 0, 0
if model then fit0, fits0, pred0, preds0 = model.fit_s, model.fits, model.predict_s, model.predicts end
local m = 2000
local calls0 = ctx.mcgs.expensive_calls
t_gen, t_moves, window = 0, 0, {}
local w3, c3 = sys.now(), clock()
for _ = 1, m do iterate() end
local c4, w4 = clock(), sys.now()
local t_mcgs = c4 - c3 - evaluation_cpu(window)
local nodes2, edges2 = ctx.mcgs.g:size()
print(string.format("mcgs: %d iterations to reach %d nodes / %d edges (%.2f s CPU in ask + tell, %.3f ms each; wall %.2f s)", it,
                    nodes, edges, cgrow, cgrow * 1e3 / it, wgrow))
local per = t_mcgs * 1e3 / m
local fit, pred = 0, 0
if model then fit, pred = (model.fit_s - fit0) * 1e3 / m, (model.predict_s - pred0) * 1e3 / m end
local gen, mv = t_gen * 1e3 / m, (t_moves - t_gen) * 1e3 / m
print(string.format("mcgs at %d-%d nodes (%d-%d edges): %.3f ms CPU per iteration (in ask + tell, mean of %d;"
                    .. " wall %.3f ms with the synthetic evaluation)", nodes, nodes2, edges, edges2, per, m,
                    (w4 - w3) * 1e3 / m))
print(string.format("  move generator %.3f ms, checking and merging its proposals %.3f ms, value model fits %.3f ms,"
                    .. " predictions %.3f ms, MCGS itself (selection, expansion into the graph, backup, rollout"
                    .. " choice) %.3f ms", gen, mv, fit, pred, per - gen - mv - fit - pred))
if ctx.mcgs.expensive_calls > 0 then
  print(string.format("  expensive generators (heuristics, experts): %d calls in these %d iterations",
                      ctx.mcgs.expensive_calls - calls0, m))
end
if model then
  print(string.format("  value model in these %d iterations: %d fits (%.1f ms each), %d predictions (%.1f us each);"
                      .. " whole run (%d measured states): %d fits, %.1f ms each; %d predictions, %.1f us each;"
                      .. " %d weak moves pruned", m, model.fits - fits0,
                      (model.fit_s - fit0) * 1e3 / math.max(1, model.fits - fits0), model.predicts - preds0,
                      (model.predict_s - pred0) * 1e6 / math.max(1, model.predicts - preds0), #model.X, model.fits,
                      model.fit_s * 1e3 / math.max(1, model.fits), model.predicts,
                      model.predict_s * 1e6 / math.max(1, model.predicts), model.pruned))
end

if profile then
  local counts, total = {}, 0
  debug.sethook(function()
    total = total + 1
    local info = debug.getinfo(2, "S")
    if info then
      local k = info.short_src:match("[^/]*$") .. ":" .. info.linedefined
      counts[k] = (counts[k] or 0) + 1
    end
  end, "", 100)
  local c5 = clock()
  for _ = 1, m do iterate() end
  local c6 = clock()
  debug.sethook()
  local list = {}
  for k, v in pairs(counts) do list[#list + 1] = { k, v } end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  print(string.format("profile of %d iterations (%.3f ms each with the hook), by function (file:first line):", m,
                      (c6 - c5) * 1e3 / m))
  for i = 1, math.min(25, #list) do
    print(string.format("  %5.1f%%  %s", 100 * list[i][2] / total, list[i][1]))
  end
end
print(string.format("decisions: %d candidates, digest %s", #asked, sys.sha256(table.concat(asked, "\n")):sub(1, 16)))
