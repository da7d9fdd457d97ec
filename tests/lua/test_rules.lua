-- The rules strategy (greedy local search + tabu + restarts) through the real
-- binary on recorded spaces:
--  1. on the A100 convolution space it gets closer to the optimum than random
--     search at 100 evaluations, averaged over 8 seeds;
--  2. it is deterministic: the same seed gives the same evaluations;
--  3. every evaluation of a move is a one-knob rule move from an evaluated
--     state (or a start, initial sample or restart), and transitions.jsonl
--     records them;
--  4. a tiny space is exhausted cleanly; SIGKILL + --resume gives the same
--     evaluations as an uninterrupted run;
--  5. the user strategy in examples/ runs with a user move generator;
--  6. the rule vocabulary: knob families from tags and names, and the moves
--     proposed for one state; moves.collect_lists and its C loop
--     (graph.one_knob_moves), with and without records of shared moves.
local T = require("testlib")
local cjson = require("cjson")

local conv = "tests/data/convolution_A100.json"
local tmp = T.tmpdir("rules")

local function read_events(dir) return (T.events(dir)) end

local function best_of(evals)
  local best = math.huge
  for _, ev in ipairs(evals) do
    if ev.result.status == "ok" and ev.result.time_ms < best then best = ev.result.time_ms end
  end
  return best
end

local raw = cjson.decode(T.slurp(conv))
local opt = math.huge
for _, e in pairs(raw.cache) do
  if type(e.time) == "number" and e.time < opt then opt = e.time end
end

-- 1. quality
local seeds = 8
local frac = { rules = 0, random = 0 }
for _, strat in ipairs({ "rules", "random" }) do
  for seed = 1, seeds do
    local dir = string.format("%s/q-%s-%d", tmp, strat, seed)
    local code = T.run(string.format("%s --backend replay:%s --budget 100 --seed %d --out %s -q", strat, conv, seed, dir))
    T.eq(code, 0, strat .. " exit code")
    frac[strat] = frac[strat] + opt / best_of(read_events(dir)) / seeds
  end
end
io.stdout:write(string.format("fraction of optimum at 100: rules %.3f, random %.3f\n", frac.rules, frac.random))
T.check(frac.rules > frac.random, "rules (%.3f) should beat random (%.3f)", frac.rules, frac.random)

-- 2. determinism
local again = tmp .. "/again"
T.eq((T.run(string.format("rules --backend replay:%s --budget 100 --seed 3 --out %s -q", conv, again))), 0, "rerun")
local a, b = read_events(tmp .. "/q-rules-3"), read_events(again)
T.eq(#b, #a, "rerun evaluations")
for i = 1, #a do
  if a[i].key ~= b[i].key then T.check(false, "rerun differs at evaluation %d", i) break end
end

-- 3. moves are one-knob changes from evaluated states
local evaluated = {}
for _, ev in ipairs(a) do
  local o = ev.origin
  if o.method ~= "start" and o.method ~= "restart" and o.method ~= "sample" then
    T.check(o.parent and evaluated[o.parent] ~= nil, "move %s at %d comes from an evaluated state", o.method, ev.n)
    local p = evaluated[o.parent]
    if p then
      local diff = 0
      for k, v in pairs(ev.config) do if p[k] ~= v then diff = diff + 1 end end
      T.eq(diff, 1, "knobs changed by " .. o.method)
    end
  end
  evaluated[ev.key] = ev.config
end
local lines = 0
for _ in io.lines(tmp .. "/q-rules-3/transitions.jsonl") do lines = lines + 1 end
T.eq(lines, 100, "transitions recorded")

-- 4. tiny space; resume
do
  local dir = tmp .. "/tiny"
  local code, out = T.run("rules --backend replay:tests/data/vector_add_A4000.json --budget 100 -q --out " .. dir)
  T.eq(code, 0, "tiny space exit code")
  T.eq(#read_events(dir), 15, "tiny space: every config once")
  T.check(out:find("stopped: strategy finished", 1, true) ~= nil, "tiny space should finish: %s", out)
  local args = "rules --backend replay:" .. conv .. " --budget 90 --seed 4 -q --out "
  T.eq((T.run(args .. tmp .. "/full")), 0, "uninterrupted")
  T.run(args .. tmp .. "/killed", "KOPT_TEST_SIGKILL_AFTER=41")
  T.eq((T.run(args .. tmp .. "/killed --resume")), 0, "resumed")
  local x, y = read_events(tmp .. "/full"), read_events(tmp .. "/killed")
  T.eq(#y, #x, "evaluations after resume")
  for i = 1, math.min(#x, #y) do
    if x[i].key ~= y[i].key then T.check(false, "resumed run differs at evaluation %d", i) break end
  end
end

-- 5. the example user strategy, with the example generator next to the rules
do
  local dir = tmp .. "/example"
  local code = T.run("examples/my_strategy.lua --backend replay:" .. conv ..
                     " --budget 80 --seed 2 -q --opt moves=rules,examples/my_moves.lua --out " .. dir)
  T.eq(code, 0, "example strategy exit code")
  local ev = read_events(dir)
  T.eq(#ev, 80, "example strategy evaluations")
  local methods = {}
  for _, e in ipairs(ev) do methods[e.origin.method] = true end
  T.check(methods.block_wider or methods.block_taller, "example generator used by the example strategy")
  T.check(opt / best_of(ev) > 0.5, "example strategy found something reasonable")
end

-- 6. the rule vocabulary: families from tags (most specific tag wins) and
--    names, and the moves of one state
do
  local R = require("kopt.moves.rules")
  local cases = {
    { { name = "BLOCK_M", tags = { "tile", "tile_m" } }, "tile_m", "tile_m" },
    { { name = "block_size_y" }, "block", "block_y" },
    { { name = "tile_size_x" }, "tile", "tile_x" },
    { { name = "WORK_GROUP_SIZE_X" }, "block", "block_x" },
    { { name = "use_shmem" }, "shmem", "shmem" },
    { { name = "read_only" }, "cache", "cache" },
    { { name = "VECTOR_SIZE" }, "vector", "vector" },
    { { name = "STAGES" }, "stages", "stages" },
    { { name = "num_warps" }, "warps", "warps" },
    { { name = "INNER_UNROLL_FACTOR" }, "unroll", "unroll" },
    { { name = "between_method" }, "knob", "between_method" },
    { { name = "X", tags = { "async" } }, "async", "async" },
  }
  for _, c in ipairs(cases) do
    local fam, stem = R.classify(c[1])
    T.eq(fam, c[2], "family of " .. c[1].name)
    T.eq(stem, c[3], "stem of " .. c[1].name)
  end
  local space = require("kopt.space").new({ knobs = {
    { name = "block_size_x", values = { 16, 32, 48, 64, 80, 96, 112, 128, 144, 160 } },
    { name = "use_shmem", values = { 0, 1 } },
    { name = "between_method", values = { 0, 1, 2, 3 } },
  } })
  local ctx = { space = space }
  function ctx:key(c) return space:key(c) end
  function ctx:log() end
  local props = require("kopt.moves").propose(ctx, { config = { block_size_x = 48, use_shmem = 0, between_method = 3 },
                                                     key = "48,0,3" }, { R })
  local by = {}
  for _, m in ipairs(props) do by[m.key] = m end
  T.check(by["64,0,3"] and by["64,0,3"].method == "block_x_up", "one step up")
  T.check(by["32,0,3"] and by["32,0,3"].method == "block_x_down", "one step down")
  T.check(by["96,0,3"] and by["96,0,3"].method == "block_x_up", "doubling")
  T.check(by["48,1,3"] and by["48,1,3"].method == "toggle_shmem", "toggle")
  T.check(by["48,0,0"] and by["48,0,0"].method == "between_method_set", "short list: any value")
  T.check(by["160,0,3"] ~= nil, "long list: any value, with a small prior")
  T.check(by["160,0,3"].prior < by["64,0,3"].prior, "set moves rank below steps")
  local sum = 0
  for _, m in ipairs(props) do sum = sum + m.prior end
  T.check(math.abs(sum - 1) < 1e-9, "priors normalised (%g)", sum)
  T.eq(#props, 9 + 1 + 3, "one move per other value of every knob")
  -- collect_lists: the same moves as lists; a move proposed twice is merged
  -- (priors summed, the larger single prior's method kept)
  local twice = { name = "twice", propose = function()
    return { { changes = { use_shmem = 1 }, method = "a", prior = 1 },
             { changes = { use_shmem = 1 }, method = "b", prior = 3 },
             { changes = { use_shmem = 0 }, method = "c", prior = 1 } }  -- the state itself: dropped
  end }
  local moves = require("kopt.moves")
  local state = { config = { block_size_x = 48, use_shmem = 0, between_method = 3 }, key = "48,0,3" }
  local l = moves.collect_lists(ctx, state, { R })
  T.eq(l.n, #props, "collect_lists: the same number of moves")
  local same = true
  for j = 1, l.n do
    local m = props[j]
    same = same and moves.key_of(l, j) == m.key and l.action[j] == m.action and l.method[j] == m.method
      and math.abs(l.prior[j] - m.prior) < 1e-12 and l.generator[j] == "rules"
  end
  T.check(same, "collect_lists: the same moves in the same order")
  l = moves.collect_lists(ctx, state, { R, twice })
  T.eq(l.n, #props, "collect_lists: the moves of both generators merged")
  local j = 0
  for i = 1, l.n do if moves.key_of(l, i) == "48,1,3" then j = i end end
  local mv = moves.collect(ctx, state, { R, twice })[j]
  T.check(mv and mv.key == "48,1,3" and mv.method == "b" and l.method[j] == "b", "merged: the larger prior's method")
  -- one-knob moves of a valid state in an unconstrained space carry no key
  -- string (knob, value and the state's parts instead). A move of several
  -- changes that changes one knob in effect is that knob's move (merged with
  -- it, no key string); one that changes two has a key string, and the
  -- one-knob moves after it keep theirs lazy; a patch turns every key into a
  -- string, and moves are merged across the switch
  T.check(l.key[j] == nil and l.knob[j] == 2 and l.value[j] == "1" and table.concat(l.parts, ",") == "48,0,3",
          "a one-knob move as knob and value")
  local other = { name = "other", propose = function()
    return { { changes = { block_size_x = 64 }, method = "d", prior = 1 },
             { changes = { block_size_x = 64, use_shmem = 0 }, method = "e", prior = 5 },  -- the same state
             { changes = { block_size_x = 64, use_shmem = 1 }, method = "g", prior = 1 },  -- two knobs
             { changes = { block_size_x = 64, use_shmem = 1 }, method = "h", prior = 2 },  -- the same two
             { changes = { block_size_x = 65, use_shmem = 1 }, method = "bad", prior = 1 },  -- not allowed
             { changes = { use_shmem = 1 }, method = "f", prior = 1 } }
  end }
  l = moves.collect_lists(ctx, state, { other })
  T.eq(l.n, 3, "several changes: merged with the one-knob move they amount to, and with each other")
  T.check(l.key[1] == nil and l.knob[1] == 1 and moves.key_of(l, 1) == "64,0,3" and l.method[1] == "e"
          and math.abs(l.prior[1] - 6 / 10) < 1e-12, "one knob in effect: that knob's move, the larger prior's method")
  T.check(l.key[2] == "64,1,3" and l.method[2] == "h" and math.abs(l.prior[2] - 3 / 10) < 1e-12
          and l.config[2] and l.config[2].block_size_x == 64 and l.config[2].use_shmem == 1,
          "two knobs: a string key and its config (%s %s)", tostring(l.key[2]), tostring(l.method[2]))
  T.check(l.key[3] == nil and moves.key_of(l, 3) == "48,1,3", "the one-knob move after them keeps its lazy key")
  other.propose = function()
    return { { changes = { block_size_x = 64 }, method = "d", prior = 1 },
             { changes = { block_size_x = 64 }, method = "p", patch = "diff", prior = 1 },
             { changes = { block_size_x = 64, use_shmem = 0 }, method = "e", prior = 5 },  -- the first's state
             { changes = { use_shmem = 1 }, method = "f", prior = 1 } }
  end
  l = moves.collect_lists(ctx, state, { other })
  T.eq(l.n, 3, "merged across the switch to string keys")
  T.check(l.key[1] == "64,0,3" and l.method[1] == "e" and math.abs(l.prior[1] - 6 / 8) < 1e-12
          and l.key[2]:find("#", 1, true) and l.key[3] == "48,1,3", "string keys after a patch: %s %s %s",
          tostring(l.key[1]), tostring(l.method[1]), tostring(l.key[3]))
  -- the loop over one-knob moves runs in C (kopt.graph.one_knob_moves) and
  -- decides as the Lua loop does: the same lists as for the same moves
  -- behind a metatable, which the C loop leaves to Lua; it stops at a patch
  local function mixed_moves()
    return { { changes = { use_shmem = 1 }, method = "a", prior = "2", expert = "x" },
             { changes = { use_shmem = 1 }, method = "b", prior = 3 },         -- merged, larger prior
             { changes = { use_shmem = 0 }, method = "own", prior = 1 },       -- the state: dropped
             { changes = { block_size_x = 50 }, method = "bad", prior = 1 },   -- not allowed: dropped
             { changes = { nope = 1 }, method = "bad", prior = 1 },            -- unknown: dropped
             { changes = { between_method = 0 }, prior = -1, chain = "c", repair = 2 },
             { changes = { block_size_x = 64 }, method = "p", patch = "diff" },
             { changes = { between_method = 1 }, method = "after" } }
  end
  local mixed = { name = "mixed", propose = mixed_moves }
  local behind = { name = "mixed", propose = function() return setmetatable(mixed_moves(), {}) end }
  local r_behind = { name = "rules", propose = function(...) return setmetatable(R.propose(...), {}) end }
  local lc, ll = moves.collect_lists(ctx, state, { R, mixed }), moves.collect_lists(ctx, state, { r_behind, behind })
  local fields = { "action", "method", "prior", "generator", "expert", "chain", "repair", "knob", "value", "config",
                   "patch" }
  local same_c = lc.n == ll.n and lc.n == #props + 1  -- the patch's state is new
  for i = 1, lc.n do
    same_c = same_c and moves.key_of(lc, i) == moves.key_of(ll, i)
    for _, f in ipairs(fields) do same_c = same_c and lc[f][i] == ll[f][i] end
    for k, v in pairs(lc.changes[i]) do same_c = same_c and ll.changes[i][k] == v end
  end
  T.check(same_c, "the C loop's lists are the Lua loop's (%d and %d moves)", lc.n, ll.n)
  local j1 = 0
  for i = 1, lc.n do if moves.key_of(lc, i) == "48,1,3" then j1 = i end end
  T.check(lc.method[j1] == "b" and lc.expert[j1] == nil and lc.key[lc.n]:find("#", 1, true)
          and lc.method[lc.n] == "p", "merged in the C loop: the larger prior's method and expert; then a patch")
  local out = { action = {}, method = {}, prior = {}, changes = {}, generator = {}, expert = {}, chain = {},
                repair = {}, knob = {}, value = {}, parts = { "48", "0", "3" } }
  local fast_tables = { fmt = {}, act = {}, code = {} }
  for i, k in ipairs(space.knobs) do
    fast_tables.fmt[i], fast_tables.act[i], fast_tables.code[i] = {}, {}, {}
    for v, pos in pairs(space.index[k.name].pos) do
      fast_tables.fmt[i][v], fast_tables.act[i][v], fast_tables.code[i][v] = tostring(v), k.name .. "=" .. v,
        i * 100 + pos
    end
  end
  local graph_mod = require("kopt.graph")
  local mm = mixed_moves()
  local n, nxt = graph_mod.one_knob_moves(out, mm, #mm, "mixed", 0, fast_tables, space.index, true, {}, {})
  T.check(n == 2 and nxt == 7 and out.method[1] == "b" and out.prior[1] == 5 and out.prior[2] == 1e-3
          and out.knob[2] == 3 and out.value[2] == "0" and out.chain[2] == "c" and out.repair[2] == 2
          and out.generator[2] == "mixed", "one_knob_moves: 2 moves, stops at the patch (%s, %s)", n, nxt)
  -- with `derived` (the move tables shared and unchanging): a record of
  -- each valid move the first time (the state's own included, the unknown
  -- knob and value not), read instead of the table from then on; the same
  -- lists every time (collect_lists passes it for the rule moves, so lc
  -- above came through it too)
  local derived, rounds = {}, {}
  local function with_derived()
    local o = { action = {}, method = {}, prior = {}, changes = {}, generator = {}, expert = {}, chain = {},
                repair = {}, knob = {}, value = {}, parts = { "48", "0", "3" } }
    local n2, nxt2 = graph_mod.one_knob_moves(o, mm, #mm, "mixed", 0, fast_tables, space.index, true, {}, {},
                                              derived)
    return { o = o, n = n2, nxt = nxt2 }
  end
  rounds[1], rounds[2] = with_derived(), with_derived()
  local records = 0
  for _ in pairs(derived) do records = records + 1 end
  T.eq(records, 4, "one_knob_moves: a record per valid move")
  local same_d = true
  for _, r in ipairs(rounds) do
    same_d = same_d and r.n == n and r.nxt == nxt
    for _, f in ipairs({ "action", "method", "prior", "changes", "generator", "expert", "chain", "repair", "knob",
                         "value" }) do
      for i = 1, n do same_d = same_d and r.o[f][i] == out[f][i] end
    end
  end
  T.check(same_d, "one_knob_moves with records: the same lists, the first time and the next")
  mm[2].prior = 100  -- against the contract, to show that the record is read
  T.eq(with_derived().o.prior[1], 5, "a recorded move's table is not read again")
  local ok1, err = pcall(graph_mod.one_knob_moves, { action = {} }, mm, #mm, "mixed", 0, fast_tables, space.index,
                         true, {}, {})
  T.check(not ok1 and tostring(err):find("out.method", 1, true), "lists missing: %s", tostring(err))
  local g = require("kopt.graph").new()
  local p = g:add("48,0,3")
  l = moves.collect_lists(ctx, state, { R })
  local rank = {}
  for i = 1, l.n do rank[i] = i end
  local _, child = g:add_children(p, l, rank)
  local ok = true
  for i = 1, l.n do ok = ok and g:key(-child[i]) == moves.key_of(l, i) end
  T.check(ok, "g:add_children builds the keys moves.key_of gives")
  g:close()
end

-- 7. a knob of thousands of values: every value a set move made each state
-- thousands of moves (rules kept them all per position, MCGS linked them all
-- as edges: 116 s for 200 evaluations of a 30000-value knob); now a bounded
-- spread reaches every part of the list
do
  local R = require("kopt.moves.rules")
  local vals = {}
  for i = 1, 20000 do vals[i] = i end
  local space = require("kopt.space").new({ knobs = { { name = "n", values = vals } } })
  local ctx = { space = space }
  function ctx:key(c) return space:key(c) end
  local list = R.propose(ctx, { config = { n = 10000 }, key = "10000" })
  T.check(#list < 600, "a 20000-value knob: %d moves from one state", #list)
  local lo, hi = math.huge, -math.huge
  for _, m in ipairs(list) do
    lo, hi = math.min(lo, m.changes.n), math.max(hi, m.changes.n)
  end
  T.check(lo <= 100 and hi >= 19900, "the moves reach both ends of the list: %d to %d", lo, hi)
  local short = require("kopt.space").new({ knobs = { { name = "n", values = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 } } } })
  local sctx = { space = short }
  function sctx:key(c) return short:key(c) end
  T.eq(#R.propose(sctx, { config = { n = 6 }, key = "6" }), 11, "a short list: every other value a move")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
