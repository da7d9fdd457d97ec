-- MCGS through the real binary on recorded spaces:
--  1. quality: on the A100 convolution space (few good configs), MCGS at 100
--     evaluations gets closer to the optimum than random search, averaged
--     over 12 seeds, and reaches a mean fraction of optimum >= 0.78 (0.86
--     over 50 seeds; random search 0.72);
--  2. SIGKILL at evaluation 37 + --resume ends with the same graph (digest of
--     every node, edge and statistic) and the same evaluations as an
--     uninterrupted run; the snapshot holds every evaluated state;
--  3. a batch backend (8 slots, in process) gets distinct candidates;
--  4. a space smaller than the budget is exhausted cleanly;
--  5. a user move generator from examples/ is used, and a bad option is a usage error;
--  6. an expensive generator is called sparingly and its moves are measured;
--  7. g:add_children (expansion in one call, moves as lists) links in rank order, reports new
--     nodes and edges, keeps existing edges, and raises on a missing rank;
--     g:first_eligible; a move given as knob and value gets its key from the state's parts;
--     graph.permutation and rng:shuffle are Fisher-Yates by rng:random; g:descend and
--     g:backup_path do per path what g:vloss, g:visit and g:backup do per edge; graph.new_lists;
--     g:add_children without ranks ranks by prior and lists.tie; rng:gammas is the Lua gamma;
--     graph.normalise; a graph method given anything but an open graph raises (the
--     metatable compared through the methods' upvalue, then luaL_checkudata's message).
local T = require("testlib")
local cjson = require("cjson")
local graph = require("kopt.graph")

local conv = "tests/data/convolution_A100.json"
local tmp = T.tmpdir("mcgs")

local function read_events(dir) return (T.events(dir)) end

local function best_of(dir)
  local best = math.huge
  for _, ev in ipairs(read_events(dir)) do
    if ev.result.status == "ok" and ev.result.time_ms < best then best = ev.result.time_ms end
  end
  return best
end

-- optimum from an independent read of the cache
local raw = cjson.decode(T.slurp(conv))
local opt = math.huge
for _, e in pairs(raw.cache) do
  if type(e.time) == "number" and e.time < opt then opt = e.time end
end

-- 1. quality against random search
local seeds, budget = 12, 100
local frac = { mcgs = 0, random = 0 }
for _, strat in ipairs({ "mcgs", "random" }) do
  for seed = 1, seeds do
    local dir = string.format("%s/q-%s-%d", tmp, strat, seed)
    local code = T.run(string.format("%s --backend replay:%s --budget %d --seed %d --out %s -q", strat, conv, budget,
                                     seed, dir))
    T.eq(code, 0, strat .. " exit code")
    frac[strat] = frac[strat] + opt / best_of(dir) / seeds
  end
end
io.stdout:write(string.format("fraction of optimum at %d: mcgs %.3f, random %.3f\n", budget, frac.mcgs, frac.random))
T.check(frac.mcgs > frac.random, "mcgs (%.3f) should beat random (%.3f)", frac.mcgs, frac.random)
T.check(frac.mcgs >= 0.78, "mcgs mean fraction of optimum %.3f < 0.78", frac.mcgs)

-- 2. SIGKILL + resume
local full, killed = tmp .. "/full", tmp .. "/killed"
local args = "mcgs --backend replay:" .. conv .. " --budget 80 --seed 5 -q --out "
T.eq((T.run(args .. full)), 0, "uninterrupted run")
local code = T.run(args .. killed, "KOPT_TEST_SIGKILL_AFTER=37")
T.check(code ~= 0, "the killed run should not exit 0")
T.eq(#read_events(killed), 37, "evaluations recorded before the kill")
T.eq((T.run(args .. killed .. " --resume")), 0, "resumed run")
local a, b = read_events(full), read_events(killed)
T.eq(#b, #a, "evaluations after resume")
for i = 1, math.min(#a, #b) do
  if a[i].key ~= b[i].key then T.check(false, "evaluation %d differs: %s vs %s", i, a[i].key, b[i].key) break end
end
local ga, gb = assert(graph.load(full .. "/graph.kgr")), assert(graph.load(killed .. "/graph.kgr"))
T.eq(gb:digest(), ga:digest(), "graph digest after resume")
local ja, jb = cjson.decode(T.slurp(full .. "/graph.json")), cjson.decode(T.slurp(killed .. "/graph.json"))
T.eq(jb.digest, ja.digest, "graph.json digest")
T.eq(jb.nodes, ja.nodes, "graph nodes")
-- every evaluated state is a measured node with its time
for _, ev in ipairs(a) do
  local id = ga:find(ev.key)
  if not T.check(id ~= nil, "evaluated state %s missing from the graph", ev.key) then break end
  local node = ga:node(id)
  T.eq(node.status, ev.result.status, "status of " .. ev.key)
  if ev.result.status == "ok" then
    T.check(math.abs(node.time_ms - ev.result.time_ms) <= 1e-9 * ev.result.time_ms, "time of %s", ev.key)
  end
end
-- the root's edge statistics account for every evaluation
local root = ga:find("^root")
local n = 0
for _, e in ipairs(ga:edges(root)) do n = n + ga:edge(e).n end
T.eq(n, 80, "visits through the root")

-- 3. batches: in process, 8 slots
do
  local engine = require("kopt.engine")
  local replay = require("kopt.backends.replay")
  local strategy_mod = require("kopt.strategy")
  local be = replay.open(nil, { file = conv, slots = 8 })
  local strat = strategy_mod.load("mcgs")
  local sizes, seen, dups = {}, {}, 0
  local ask = strat.ask
  strat.ask = function(ctx, k)
    local out = ask(ctx, k)
    sizes[#sizes + 1] = #out
    for _, c in ipairs(out) do
      local key = ctx:key(c.config)
      if seen[key] then dups = dups + 1 end
      seen[key] = true
    end
    return out
  end
  local eng = engine.run({ strategy = strat, strategy_name = "mcgs", options = strategy_mod.options(strat, {}),
                           space = be.space, backend = be, budget = 96, seed = 2, quiet = true })
  T.check(eng.error == nil, "batch run error: %s", tostring(eng.error))
  T.eq(eng.evaluations, 96, "batch run evaluations")
  T.eq(dups, 0, "candidates proposed twice")
  local full_batches = 0
  for _, s in ipairs(sizes) do if s == 8 then full_batches = full_batches + 1 end end
  T.check(full_batches >= #sizes - 2, "batches should be full: %d of %d", full_batches, #sizes)
end

-- 4. a 15-config space with a budget of 100
do
  local dir = tmp .. "/tiny"
  local code2, out = T.run("mcgs --backend replay:tests/data/vector_add_A4000.json --budget 100 -q --out " .. dir)
  T.eq(code2, 0, "tiny space exit code")
  T.eq(#read_events(dir), 15, "tiny space: every config once")
  T.check(out:find("stopped: strategy finished", 1, true) ~= nil, "tiny space should finish: %s", out)
end

-- 5. user move generator; options
do
  local dir = tmp .. "/user"
  local code3 = T.run("mcgs --backend replay:" .. conv .. " --budget 150 -q --seed 1 --opt moves=examples/my_moves.lua --out " .. dir)
  T.eq(code3, 0, "user generator run")
  local methods = {}
  for _, ev in ipairs(read_events(dir)) do methods[ev.origin.method] = true end
  T.check(methods.block_wider or methods.block_taller, "moves of examples/my_moves.lua were used")
  local code4, _, err = T.run("mcgs --backend replay:" .. conv .. " --opt c_puct=lots -q --out " .. tmp .. "/bad")
  T.eq(code4, 2, "bad option exit code")
  T.check(err:find("c_puct", 1, true) ~= nil, "bad option message names it: %s", err)
  local code5, _, err5 = T.run("mcgs --backend replay:" .. conv .. " --opt moves=nope -q --out " .. tmp .. "/bad2")
  T.eq(code5, 2, "unknown generator exit code")
  T.check(err5:find("nope", 1, true) ~= nil, "unknown generator message names it: %s", err5)
  local code6, help = T.run("mcgs --help")
  T.eq(code6, 0, "mcgs --help")
  T.check(help:find("pw_alpha", 1, true) and help:find("rollout_depth", 1, true), "options listed: %s", help)
end

-- 6. an expensive generator (as an LLM expert would be) is called only on
--    states that earn visits, far fewer times than there are evaluations, and
--    its moves get measured although they come after the rule moves
do
  local gen = tmp .. "/slow_expert.lua"
  T.write(gen, [[
return { name = "slow_expert", expensive = true, propose = function(ctx, state)
  io.stderr:write("slow_expert call\n")
  local a, b = ctx.space.knobs[1], ctx.space.knobs[3]
  local pa = ctx.space.index[a.name].pos[state.config[a.name] ]
  local pb = ctx.space.index[b.name].pos[state.config[b.name] ]
  return { { changes = { [a.name] = a.values[pa % #a.values + 1], [b.name] = b.values[pb % #b.values + 1] },
             method = "expert_diagonal", prior = 1 } }
end }
]])
  local dir = tmp .. "/expert"
  local code7, _, err = T.run("mcgs --backend replay:" .. conv .. " --budget 120 -q --seed 3 --opt moves=rules," .. gen ..
                              " --out " .. dir)
  T.eq(code7, 0, "run with an expensive generator")
  local calls = select(2, err:gsub("slow_expert call", ""))
  local used = 0
  for _, ev in ipairs(read_events(dir)) do
    if ev.origin.method == "expert_diagonal" then used = used + 1 end
  end
  io.stdout:write(string.format("expensive generator: %d calls, %d of its moves measured in 120 evaluations\n", calls, used))
  T.check(calls > 0 and calls < 60, "expensive generator called sparingly (%d calls)", calls)
  T.check(used > 0, "moves of the expensive generator were measured")
end

-- 7. the graph's batch expansion
do
  local g = graph.new()
  local p = g:add("p")
  local known = g:add("b")
  local e0 = g:link(p, "K=9", g:add("z"), 0.1)
  -- "p": the parent itself (no edge); "z": an existing edge
  local moves = { key = { "a", "b", "c", "p", "z" }, action = { "K=1", "K=2", "K=3", "K=4", "K=9" },
                  prior = { 0.2, 0.5, 0.3, 0.1, 0.9 } }
  local made, child, edge = g:add_children(p, moves, { 2, 1, 2, 0, 3 })  -- equal ranks: list order
  T.check(made == 3, "three new edges (%s)", tostring(made))
  local actions = {}
  for _, e in ipairs(g:edges(p)) do actions[#actions + 1] = g:edge(e).action end
  T.check(table.concat(actions, " ") == "K=9 K=2 K=1 K=3", "edges in rank order: %s", table.concat(actions, " "))
  T.check(child[2] == known and edge[2] > 0, "known node, new edge")
  T.check(child[1] < 0 and edge[1] > 0 and g:key(-child[1]) == "a", "new node a, new edge")
  T.check(child[4] == p and edge[4] == 0, "the parent gets no edge to itself")
  T.check(edge[5] == -e0 and g:edge(e0).prior == 0.1, "existing edge kept")
  made = g:add_children(p, { key = { "z" }, action = { "K=9" }, prior = { 0.9 } }, { 0 }, true)
  T.check(made == 0 and g:edge(e0).prior == 0.9 and g:edge(e0).flags == graph.edge_always,
          "always: flagged, prior raised")
  T.check(g:first_eligible(p, 4) == e0, "first eligible edge")
  g:set_flags(g:edge(e0).child, 4)
  T.check(g:first_eligible(p, 4) == edge[2], "next eligible edge")
  local ok, err = pcall(g.add_children, g, p, { key = { "x" }, action = { "K=5" }, prior = { 1 } }, {})
  T.check(not ok and tostring(err):find("ranks", 1, true), "a move without a rank raises: %s", tostring(err))
  ok, err = pcall(g.add_children, g, p, { key = { "x" }, action = { "K=5" } }, { 0 })
  T.check(not ok and tostring(err):find("lists.prior", 1, true), "lists without priors raise: %s", tostring(err))
  -- keys from the state's parts: "1,x,3" with part 2 replaced, or the last
  local q = g:add("1,x,3")
  made, child = g:add_children(q, { n = 3, key = { [2] = "k" }, action = { "A", "B", "C" }, prior = { 1, 1, 1 },
                                    knob = { 2, nil, 3 }, value = { "y", nil, "long value" },
                                    parts = { "1", "x", "3" } }, { 1, 2, 3 })
  T.check(made == 3 and g:key(-child[1]) == "1,y,3" and g:key(-child[2]) == "k"
          and g:key(-child[3]) == "1,x,long value", "keys from parts")
  T.check(g:add_children(q, { n = 1, key = {}, action = { "D" }, prior = { 1 }, knob = { 1 }, value = { "1" },
                              parts = { "1", "x", "3" } }, { 0 }) == 0, "the parent's own key: no edge")
  ok, err = pcall(g.add_children, g, q, { n = 1, key = {}, action = { "E" }, prior = { 1 } }, { 0 })
  T.check(not ok and tostring(err):find("key[1] is missing", 1, true), "no key and no knob raises: %s", tostring(err))
  ok, err = pcall(g.add_children, g, q, { n = 1, key = {}, action = { "E" }, prior = { 1 }, knob = { 4 },
                                          value = { "v" }, parts = { "1", "x", "3" } }, { 0 })
  T.check(not ok and tostring(err):find("knob[1]", 1, true), "a knob beyond the parts raises: %s", tostring(err))
  T.eq(g:flags(q), 0, "a graph method on its graph")
  for _, bad in ipairs({ io.stdout, {}, 1 }) do
    ok, err = pcall(g.flags, bad, 1)
    T.check(not ok and tostring(err):find("kopt.Graph expected", 1, true), "a method on %s raises: %s",
            tostring(bad), tostring(err))
  end
  g:close()
  ok, err = pcall(g.flags, g, 1)
  T.check(not ok and tostring(err):find("graph is closed", 1, true), "a method on a closed graph raises: %s",
          tostring(err))
  local rng = require("kopt.rng")
  -- rng:permutation and rng:shuffle (C) against Fisher-Yates written here
  -- from rng:random: the same lists and the same draws
  for _, len in ipairs({ 0, 1, 2, 54, 1000 }) do
    local r0, r1, r2 = rng.new(len), rng.new(len), rng.new(len)
    local want, l = {}, {}
    for i = 1, len do want[i], l[i] = i, ("v" .. i) end
    for i = len, 2, -1 do
      local j = r0:random(1, i)
      want[i], want[j] = want[j], want[i]
    end
    r1:shuffle(l)
    local p2 = r2:permutation(len)
    local same = #p2 == len and #l == len
    for i = 1, len do same = same and p2[i] == want[i] and l[i] == "v" .. want[i] end
    local state = r0:next64()
    T.check(same and r1:next64() == state and r2:next64() == state,
            "permutation(%d) and shuffle are Fisher-Yates by rng:random", len)
  end
  -- rng:gammas (graph.gammas) draws what MCGS's Lua gamma() drew: the same
  -- variates, bit for bit, and the same generator state after
  local function gamma(r, shape)
    if shape < 1 then return gamma(r, shape + 1) * r:uniform() ^ (1 / shape) end
    local d = shape - 1 / 3
    local c = 1 / math.sqrt(9 * d)
    while true do
      local x, v
      repeat
        x = r:normal()
        v = 1 + c * x
      until v > 0
      v = v * v * v
      local u = r:uniform()
      if u < 1 - 0.0331 * x ^ 4 or math.log(u) < 0.5 * x * x + d * (1 - v + math.log(v)) then return d * v end
    end
  end
  local same_g = true
  for _, shape in ipairs({ 0.3, 0.05, 1, 2.5 }) do
    local r1, r2 = rng.new(7), rng.new(7)
    local total = 0
    local gs, sum = r2:gammas(200, shape)
    for i = 1, 200 do
      local x = gamma(r1, shape)
      total = total + x
      same_g = same_g and gs[i] == x
    end
    same_g = same_g and sum == total and r1:next64() == r2:next64()
  end
  T.check(same_g, "gammas: the Lua gamma's variates")
  ok, err = pcall(graph.permutation, { 1, 2, 3 }, 4)
  T.check(not ok and tostring(err):find("generator state", 1, true), "a bad state raises: %s", tostring(err))
  -- without ranks: priors prior / scale, ranked by -(prior / scale - tie * 1e-9)
  local g3 = graph.new()
  local r3 = g3:add("r")
  g3:add_children(r3, { key = { "a", "b", "c" }, action = { "A", "B", "C" }, prior = { 2, 4, 2 }, tie = { 2, 3, 1 },
                        scale = 8 })
  local got = {}
  for _, e in ipairs(g3:edges(r3)) do got[#got + 1] = g3:edge(e).action .. "=" .. g3:edge(e).prior end
  T.check(table.concat(got, " ") == "B=0.5 C=0.25 A=0.25", "ranked by prior and tie: %s", table.concat(got, " "))
  ok, err = pcall(g3.add_children, g3, r3, { key = { "d" }, action = { "D" }, prior = { 1 } })
  T.check(not ok and tostring(err):find("lists.tie", 1, true), "neither ranks nor tie raises: %s", tostring(err))
  g3:close()
  -- graph.normalise: divided by the sum taken in order, as a Lua loop does
  local xs, ys = { 1, 0.1, 3, 0.2, 7 }, { 1, 0.1, 3, 0.2, 7 }
  graph.normalise(xs, 4)
  local sy = 0
  for i = 1, 4 do sy = sy + ys[i] end
  T.check(xs[1] == 1 / sy and xs[2] == 0.1 / sy and xs[4] == 0.2 / sy and xs[5] == 7, "normalise")
  ok, err = pcall(graph.normalise, { 1, "x" }, 2)
  T.check(not ok and tostring(err):find("list[2]", 1, true), "normalise: a non-number raises: %s", tostring(err))
  -- graph.new_lists: empty lists, distinct, in a given table or a new one
  local nl = graph.new_lists(64, { "a", "b" }, { n = 0 })
  nl.a[1] = 1
  T.check(#nl.a == 1 and #nl.b == 0 and nl.n == 0 and next(graph.new_lists(0, {})) == nil, "new_lists")
  ok, err = pcall(graph.new_lists, 5, { 1 })
  T.check(not ok and tostring(err):find("names[1]", 1, true), "a name that is no string raises: %s", tostring(err))
  -- g:descend and g:backup_path: per edge of a path, g:vloss(e, 1) and
  -- g:visit(parent), then g:vloss(e, -1) and g:backup(e, value, failed)
  local h = graph.new()
  local ha, hb, hc = h:add("a"), h:add("b"), h:add("c")
  local e1, e2 = h:link(ha, "x", hb), h:link(hb, "y", hc)
  h:descend({ e1, e2 })
  T.check(h:edge(e1).vloss == 1 and h:edge(e2).vloss == 1 and h:node(ha).visits == 1 and h:node(hb).visits == 1
          and h:node(hc).visits == 0, "descend: virtual losses and visits")
  h:backup_path({ e1, e2 }, 0.5, true)
  local x1, x2 = h:edge(e1), h:edge(e2)
  T.check(x1.vloss == 0 and x1.n == 1 and x1.w == 0.5 and x1.fails == 1 and x2.max == 0.5 and x2.vloss == 0
          and h:node(ha).edge_visits == 1, "backup_path: values backed up, virtual losses taken back")
  ok, err = pcall(h.descend, h, { e1, 99 })
  T.check(not ok and tostring(err):find("path[2]", 1, true) and h:edge(e1).vloss == 0,
          "a bad id raises before any change: %s", tostring(err))
  h:close()
end

-- A widening constant past 2^63 / (visits + 1): the limit was a float no
-- count is, and the run stopped with "number has no integer representation"
-- after its first samples
do
  local ev = T.mcgs_replay(tmp .. "/pw", conv, 30, 1, "--opt pw_c=1e308")
  local evals = 0
  for _, e in ipairs(ev) do if e.event == "eval" then evals = evals + 1 end end
  T.eq(evals, 30, "pw_c=1e308: evaluations")
end

-- the graph snapshot is written however the run stops: by --time-limit
-- (it was written only at the budget and every snapshot_every evaluations)
do
  local out = tmp .. "/timelimit"
  local tcode = T.run(string.format("mcgs --backend replay:tests/data/convolution_A100.json --time-limit 20 --budget 500 " ..
                                   "--out %s -q", out))
  local _, stop = T.events(out)
  T.check(tcode == 0 and stop and stop.reason == "time limit", "mcgs stops by its time limit")
  T.check(T.exists(out .. "/graph.kgr") and T.exists(out .. "/graph.json"), "graph.kgr and graph.json written")
end

-- a spec replayed on its recording: transitions are filed under the
-- recording's GPU, not the assumed one
do
  local out = tmp .. "/recdev"
  T.run(string.format("mcgs tests/data/specs/vector_add.json --budget 10 --out %s -q", out))
  local line = T.slurp(out .. "/transitions.jsonl"):match("[^\n]+") or ""
  T.check(line:find('"device":"NVIDIA RTX A4000"', 1, true), "transitions name the recording's GPU: %s", line)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
