-- Monte Carlo Graph Search over kernel states.
--
-- Nodes are states (configs, or a config plus a source patch) in the graph
-- store kopt.graph, keyed by state hash, so a state reached along two paths
-- is one node; edges are moves from the move generators (rules by default)
-- and carry N, the value sum and max, the prior and the failure count.
--
-- One iteration: from a virtual root, descend by PUCT
--     Q(s,a) + c_puct * P(s,a) * sqrt(sum_b N(s,b) + 1) / (1 + N(s,a))
-- with Q = (1 - beta_max) * mean + beta_max * max, unvisited edges valued
-- at the parent's reward minus fpu_reduction. A node considers only its
-- first k = ceil(pw_c * (visits + 1)^pw_alpha) edges by prior (progressive
-- widening); expensive generators are called only when a node widens. The
-- descent ends at the first state not yet measured: that is the candidate.
-- After it is measured the reward (clipped log-speedup over the baseline, or
-- a fixed negative value per failure kind) is backed up along the path, and
-- a short rollout may continue from it: `rollout_depth` more states chosen
-- epsilon-greedily on Q - lambda * N among its unmeasured children, stopping
-- at the first failure (or, with rollout_improving, the first non-improvement).
-- The virtual root holds the start state (the spec's default config, or a
-- sample) and widens with random restart states. Batches use virtual loss
-- so ask(ctx, n) returns n distinct states.
--
-- Deterministic given the seed and the results: a resumed run replays the
-- same questions and rebuilds the same graph. The graph is snapshotted to
-- <run dir>/graph.kgr (kopt.graph format) and summarised in graph.json.
local graph_mod = require("kopt.graph")
local moves_mod = require("kopt.moves")
local experience = require("kopt.experience")
local json = require("kopt.json")

local S = {
  name = "mcgs",
  description = "Monte Carlo Graph Search over move generators (PUCT, progressive widening, rollouts)",
  options = {
    moves = { default = "rules", help = "move generators, comma-separated (names or .lua files)" },
    c_puct = { default = 0.6, help = "exploration weight of the PUCT term" },
    beta_max = { default = 0.7, help = "weight of the max backup in Q (0 = mean only, 1 = max only)" },
    fpu_reduction = { default = 0.05, help = "an unvisited move is valued at its parent's reward minus this" },
    pw_c = { default = 2.0, help = "progressive widening: a node considers ceil(pw_c * (N+1)^pw_alpha) moves" },
    pw_alpha = { default = 0.6, help = "progressive widening exponent" },
    dirichlet_alpha = { default = 0.3, help = "Dirichlet noise concentration on the priors of start states" },
    dirichlet_eps = { default = 0.25, help = "weight of the Dirichlet noise (0 = none)" },
    rollout_depth = { default = 4, help = "states a rollout may add after a new leaf (0 = no rollouts)" },
    rollout_eps = { default = 0.1, help = "rollout: probability of a random move instead of the greedy one" },
    rollout_lambda = { default = 0.05, help = "rollout: visit penalty in Q - lambda * N" },
    rollout_improving = { default = true, help = "rollout: stop at the first state that is no faster than its parent" },
    restart_prior = { default = 0.25, help = "prior of a random restart move at the virtual root (start = 1)" },
    restart_c = { default = 1.0, help = "root widening: ceil(restart_c * (N+1)^pw_alpha) start/restart moves" },
    clip_lo = { default = -2.0, help = "lower clip of the log-speedup reward" },
    clip_hi = { default = 2.3, help = "upper clip of the log-speedup reward (log 10)" },
    fail_invalid = { default = -0.5, help = "reward of an invalid state" },
    fail_compile = { default = -0.6, help = "reward of a compile error" },
    fail_launch = { default = -0.8, help = "reward of a launch error" },
    fail_wrong = { default = -1.2, help = "reward of a wrong result" },
    fail_crash = { default = -1.2, help = "reward of a crash" },
    fail_timeout = { default = -1.0, help = "reward of a timeout" },
    vl_value = { default = -1.0, help = "value of a virtual loss (pending evaluation) in Q" },
    learn = { default = 1.0, help = "weight of this run's per-method gains in new priors (0 = off)" },
    priors = { default = "", help = "method statistics from `kopt regraph` (JSON) to weight move priors" },
    start = { default = "default", choices = { "default", "random" },
              help = "start state: the spec's default config (when it has one) or a random sample" },
    max_depth = { default = 500, help = "longest selection path" },
    snapshot_every = { default = 50, help = "write the graph snapshot every N evaluations (0 = only at the end)" },
  },
}

-- Node flags (kopt.graph keeps them per node; bits are ours).
local PENDING, DEAD, ONPATH, EXPANDED, EXHAUSTED, MEASURED = 1, 2, 4, 8, 16, 32
local BLOCK = PENDING | DEAD | ONPATH | EXHAUSTED

local function fail_reward(o, status)
  if status == "invalid" then return o.fail_invalid end
  if status == "compile_error" then return o.fail_compile end
  if status == "launch_error" then return o.fail_launch end
  if status == "wrong" then return o.fail_wrong end
  if status == "timeout" then return o.fail_timeout end
  return o.fail_crash
end

-- Gamma(a) variate (Marsaglia-Tsang; boosted for a < 1), for Dirichlet noise.
local function gamma(rng, a)
  if a < 1 then return gamma(rng, a + 1) * rng:uniform() ^ (1 / a) end
  local d = a - 1 / 3
  local c = 1 / math.sqrt(9 * d)
  while true do
    local x, v
    repeat
      x = rng:normal()
      v = 1 + c * x
    until v > 0
    v = v * v * v
    local u = rng:uniform()
    if u < 1 - 0.0331 * x ^ 4 or math.log(u) < 0.5 * x * x + d * (1 - v + math.log(v)) then return d * v end
  end
end

local function set_flag(g, id, bit) g:set_flags(id, g:flags(id) | bit) end
local function clear_flag(g, id, bit) g:set_flags(id, g:flags(id) & ~bit) end

function S.init(ctx)
  local o = ctx.options
  local st = {
    g = graph_mod.new(1024),
    gens = {}, cheap = {}, expensive = {},
    cfg = {},          -- node id -> config table
    patch = {},        -- node id -> patch (states with a source change)
    method_in = {},    -- node id -> method of the move that first reached it
    edge_method = {},  -- edge id -> method
    edge_expert = {},
    mstats = {},       -- method -> { n, gain } (this run)
    queue = {},        -- rollout continuations waiting for ask()
    measured = {},     -- node id -> true once its result is in
    baseline = nil,    -- time of the first valid measurement
    restarts = 0,
  }
  st.gens = moves_mod.resolve(o.moves)
  for _, gen in ipairs(st.gens) do
    table.insert(gen.expensive and st.expensive or st.cheap, gen)
  end
  if o.priors ~= "" then
    local f, err = experience.load_priors(o.priors)
    if not f then require("kopt.errors").usage("--opt priors: %s", err) end
    st.prior_mult = f
  end
  st.noise_rng = ctx.rng:fork()
  st.root = st.g:add("^root")
  st.g:set(st.root, { status = "root", reward = 0, flags = EXPANDED })
  local c = o.start == "default" and ctx.space:default() or nil
  c = c or ctx.space:sample(ctx.rng)
  if c then
    local id = S.node_for(ctx, st, c, nil)
    st.method_in[id] = "start"
    local e = st.g:link(st.root, "start", id, 1.0)
    st.edge_method[e] = "start"
  end
  st.exp = experience.open(ctx, S.name)
  ctx.mcgs = st
end

-- The node of a state (created on first sight).
function S.node_for(ctx, st, config, patch, key)
  key = key or ctx:key(config)
  local id, created = st.g:add(key)
  if created then
    st.cfg[id] = config
    st.patch[id] = patch
  end
  return id
end

-- JSON of a config with the knobs in space order (Lua's table order varies
-- between processes; the snapshot must not).
function S.encode_config(space, config)
  local parts = {}
  for i, k in ipairs(space.knobs) do parts[i] = json.encode(k.name) .. ":" .. json.encode(config[k.name]) end
  -- (called once per measured state only)
  return "{" .. table.concat(parts, ",") .. "}"
end

local function value_of(st, id)
  return st.g:reward(id) or 0
end

local function evaluated(st, id)
  return st.measured[id] ~= nil
end

-- Prior multiplier from this run's per-method gains (a history heuristic).
local function learned(ctx, st, method)
  local w = ctx.options.learn
  local m = st.mstats[method]
  if w <= 0 or not m or m.n == 0 then return 1 end
  local mean = m.gain / m.n
  return math.exp(w * math.max(-1, math.min(1, mean)) * m.n / (m.n + 3))
end

-- Registers the proposals of some generators as edges of node id, in order of
-- prior (ties in seeded random order), so widening admits the best first.
local function add_moves(ctx, st, id, gens, noise)
  local state = { config = st.cfg[id], key = st.g:key(id), patch = st.patch[id] }
  local props = moves_mod.propose(ctx, state, gens)
  if #props == 0 then return 0 end
  local from = st.method_in[id]
  local tie = {}
  for i = 1, #props do tie[i] = i end
  ctx.rng:shuffle(tie)
  local mult = {}
  for i, m in ipairs(props) do
    m.tie = tie[i]
    local f = mult[m.method]
    if not f then
      f = learned(ctx, st, m.method)
      if st.prior_mult then f = f * st.prior_mult(from, m.method) end
      mult[m.method] = f
    end
    m.prior = m.prior * f
  end
  local sum = 0
  for _, m in ipairs(props) do sum = sum + m.prior end
  for _, m in ipairs(props) do m.prior = m.prior / sum end
  if noise and ctx.options.dirichlet_eps > 0 then
    local eta, total = {}, 0
    for i = 1, #props do
      eta[i] = gamma(st.noise_rng, ctx.options.dirichlet_alpha)
      total = total + eta[i]
    end
    local eps = ctx.options.dirichlet_eps
    for i, m in ipairs(props) do m.prior = (1 - eps) * m.prior + eps * eta[i] / total end
  end
  -- order: prior descending, ties by the shuffled rank (priors are far
  -- apart compared with the 1e-9 offsets)
  local sks, by_sk = {}, {}
  for i, m in ipairs(props) do
    local sk = -(m.prior - m.tie * 1e-9)
    sks[i], by_sk[sk] = sk, m
  end
  table.sort(sks)
  local added = 0
  for _, sk in ipairs(sks) do
    local m = by_sk[sk]
    local child = S.node_for(ctx, st, m.config, m.patch, m.key)
    if child ~= id then
      local e, created = st.g:link(id, m.action, child, m.prior)
      if created then
        added = added + 1
        st.edge_method[e] = m.method
        st.edge_expert[e] = m.expert
        st.method_in[child] = st.method_in[child] or m.method
      end
    end
  end
  return added
end

local function expand(ctx, st, id, depth)
  local flags = st.g:flags(id)
  if flags & EXPANDED ~= 0 then return end
  st.g:set_flags(id, flags | EXPANDED)
  add_moves(ctx, st, id, st.cheap, depth == 1)
end

local function widen_limit(ctx, st, id)
  local visits, edges = st.g:counts(id)
  local c = id == st.root and ctx.options.restart_c or ctx.options.pw_c
  local k = math.ceil(c * (visits + 1) ^ ctx.options.pw_alpha)
  if k < 1 then k = 1 end
  return k, edges
end

-- Widening beyond the registered moves: the root gets a random restart
-- state, other nodes ask their expensive generators (once per widening).
local function grow(ctx, st, id, k, have)
  if k <= have then return end
  if id == st.root then
    for _ = 1, 20 do
      local c = ctx.space:sample(ctx.rng)
      if not c then return end
      local child = S.node_for(ctx, st, c, nil)
      if not evaluated(st, child) and st.g:flags(child) & PENDING == 0 then
        st.restarts = st.restarts + 1
        local e = st.g:link(st.root, "restart:" .. st.restarts, child, ctx.options.restart_prior)
        st.edge_method[e] = "restart"
        st.method_in[child] = st.method_in[child] or "restart"
        return
      end
    end
  elseif #st.expensive > 0 then
    add_moves(ctx, st, id, st.expensive, false)
  end
end

local function puct(ctx, st, id, limit)
  local o = ctx.options
  return st.g:select(id, o.c_puct, value_of(st, id) - o.fpu_reduction, o.beta_max, o.vl_value, limit, BLOCK)
end

-- One selection: returns a pending record {path=, leaf=} or nil.
local function select_one(ctx, st, temp)
  local g = st.g
  local path, visited = {}, { st.root }
  local s = st.root
  set_flag(g, s, ONPATH)
  local rec
  for depth = 0, ctx.options.max_depth do
    expand(ctx, st, s, depth)
    local k, have = widen_limit(ctx, st, s)
    grow(ctx, st, s, k, have)
    local e = puct(ctx, st, s, k)
    if not e then e = puct(ctx, st, s, nil) end
    if not e and s == st.root then
      grow(ctx, st, s, have + 1, have)
      e = puct(ctx, st, s, nil)
    end
    if not e then
      -- nothing selectable below s now; permanently so when no child is
      -- pending or on the path
      local blocked_for_now = false
      for _, x in ipairs(g:edges(s)) do
        local c = g:ends(x)
        if g:flags(c) & (PENDING | ONPATH) ~= 0 or temp[c] then blocked_for_now = true break end
      end
      if s ~= st.root then
        set_flag(g, s, EXHAUSTED)
        if blocked_for_now then temp[s] = true end
      end
      break
    end
    path[#path + 1] = e
    local child = g:ends(e)
    if not evaluated(st, child) then
      rec = { path = path, leaf = child }
      break
    end
    s = child
    set_flag(g, s, ONPATH)
    visited[#visited + 1] = s
  end
  for _, id in ipairs(visited) do clear_flag(g, id, ONPATH) end
  return rec
end

local function start_pending(st, rec)
  set_flag(st.g, rec.leaf, PENDING)
  for _, e in ipairs(rec.path) do
    st.g:vloss(e, 1)
    local _, parent = st.g:ends(e)
    st.g:visit(parent)
  end
end

local function candidate_of(st, rec)
  local e = rec.path[#rec.path]
  local _, parent = st.g:ends(e)
  return { config = st.cfg[rec.leaf], patch = st.patch[rec.leaf],
           origin = { method = st.edge_method[e], expert = st.edge_expert[e],
                      parent = parent ~= st.root and st.g:key(parent) or nil,
                      rollout = rec.rollout and true or nil } }
end

function S.ask(ctx, n)
  local st = ctx.mcgs
  local out, recs = {}, {}
  while #out < n and #st.queue > 0 do
    local rec = table.remove(st.queue, 1)
    out[#out + 1] = candidate_of(st, rec)
    recs[#recs + 1] = rec
  end
  local temp = {}
  local tries = 0
  while #out < n and tries < 8 * n + 8 do
    tries = tries + 1
    local rec = select_one(ctx, st, temp)
    if rec then
      start_pending(st, rec)
      out[#out + 1] = candidate_of(st, rec)
      recs[#recs + 1] = rec
    end
  end
  for id in pairs(temp) do clear_flag(st.g, id, EXHAUSTED) end
  st.batch = recs
  return out
end

-- Times are rounded to 12 significant digits before use: the event log keeps
-- fewer digits than a double, and a resumed run must decide exactly as the
-- uninterrupted one did.
local function time_of(r)
  if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms > 0 then
    return tonumber(string.format("%.12g", r.time_ms))
  end
end

local function reward_of(ctx, st, r)
  local t = time_of(r)
  if t then
    if not st.baseline then st.baseline = t end
    local x = math.log(st.baseline / t)
    return math.max(ctx.options.clip_lo, math.min(ctx.options.clip_hi, x)), false
  end
  return fail_reward(ctx.options, r.status), true
end

-- The rollout step from a fresh leaf: epsilon-greedy on Q - lambda * N over
-- its unmeasured, idle children (never a state already measured or on the
-- path, so rollouts cannot cycle).
local function rollout_step(ctx, st, rec)
  local g, o = st.g, ctx.options
  expand(ctx, st, rec.leaf, #rec.path)
  local best, eligible = g:greedy(rec.leaf, o.rollout_lambda, value_of(st, rec.leaf) - o.fpu_reduction,
                                  o.beta_max, BLOCK | MEASURED)
  if eligible == 0 then return nil end
  if ctx.rng:uniform() < o.rollout_eps then best = ctx.rng:choice(g:eligible(rec.leaf, BLOCK | MEASURED)) end
  local path = {}
  for i, e in ipairs(rec.path) do path[i] = e end
  path[#path + 1] = best
  return { path = path, leaf = (g:ends(best)), rollout = (rec.rollout or 0) + 1 }
end

local function save_snapshot(ctx, st)
  if not ctx.run_dir then return end
  local ok, err = st.g:save(ctx.run_dir .. "/graph.kgr")
  if not ok then ctx:log("graph snapshot failed: %s", err) return end
  local nodes, edges = st.g:size()
  local f = io.open(ctx.run_dir .. "/graph.json", "w")
  if f then
    f:write(json.encode({ nodes = nodes, edges = edges, digest = st.g:digest(), evaluations = ctx.evaluations,
                          baseline_ms = st.baseline, restarts = st.restarts }), "\n")
    f:close()
  end
end

function S.tell(ctx, results)
  local st, g, o = ctx.mcgs, ctx.mcgs.g, ctx.options
  local batch = st.batch or {}
  st.batch = nil
  for i, r in ipairs(results) do
    local rec = batch[i]
    if rec then
      local leaf = rec.leaf
      local v, failed = reward_of(ctx, st, r)
      g:set(leaf, { status = tostring(r.status), time_ms = time_of(r), reward = v,
                    config = S.encode_config(ctx.space, st.cfg[leaf]) })
      g:set_flags(leaf, (g:flags(leaf) & ~PENDING) | MEASURED)
      st.measured[leaf] = true
      if failed then set_flag(g, leaf, DEAD) end
      for _, e in ipairs(rec.path) do
        g:vloss(e, -1)
        g:backup(e, v, failed)
      end
      local last = g:edge(rec.path[#rec.path])
      local parent = last.parent
      local method = st.edge_method[rec.path[#rec.path]]
      local pv = parent ~= st.root and g:reward(parent) or nil
      local pnode = parent ~= st.root and g:node(parent) or nil
      local gain = pv and (v - pv) or nil
      if gain and method then
        local m = st.mstats[method] or { n = 0, gain = 0 }
        m.n, m.gain = m.n + 1, m.gain + math.max(-1, math.min(1, gain))
        st.mstats[method] = m
      end
      local speedup = (pnode and pnode.time_ms and time_of(r)) and pnode.time_ms / time_of(r) or nil
      st.exp:add({ from = st.method_in[parent] or "root", to = method, status = r.status, speedup = speedup,
                   reward = v, n = ctx.evaluations }, r)
      -- rollout continuation
      local depth = rec.rollout or 0
      if o.rollout_depth > depth and not failed and (not o.rollout_improving or (pv and v > pv) or not pv) then
        local nxt = rollout_step(ctx, st, rec)
        if nxt then
          start_pending(st, nxt)
          st.queue[#st.queue + 1] = nxt
        end
      end
    end
  end
  local every = o.snapshot_every
  if (every > 0 and ctx.evaluations % every == 0) or ctx.evaluations >= (ctx.budget or math.huge) then
    save_snapshot(ctx, st)
  end
end

return S
