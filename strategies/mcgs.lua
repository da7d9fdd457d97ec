-- Monte Carlo Graph Search over kernel states.
--
-- Nodes are states (configs, or a config plus a source patch) in the graph
-- store kopt.graph, keyed by state hash, so a state reached along two paths
-- is one node; edges are moves from the move generators (rules, heuristics)
-- and carry N, the value sum and max, the prior and the failure count.
--
-- An iteration descends from a virtual root by PUCT
--     Q(s,a) + c_puct * P(s,a) * sqrt(sum_b N(s,b) + 1) / (1 + N(s,a))
-- with Q = (1 - beta_max) * mean + beta_max * max over the values backed up
-- through the edge, and an unvisited edge valued at its parent's reward
-- minus fpu_reduction. A node considers only its first
-- k = ceil(pw_c * (visits + 1)^pw_alpha) edges by prior (progressive
-- widening). Expansion registers every proposed move of the cheap
-- generators; expensive ones (LLM experts) are asked about a state only as it
-- earns visits (expert_c, expert_max), and their moves stay selectable.
-- The descent ends at the first state not yet measured: the candidate. Its
-- reward (log-speedup over the baseline, the first valid measurement,
-- clipped; a fixed negative value per failure kind) is backed up along the
-- path (mean, and max).
--
-- A new leaf that beats its parent starts a rollout: a greedy descent that
-- measures unmeasured children of its best state so far (epsilon-greedy on
-- Q - lambda * N, never a measured or pending state, so it cannot cycle),
-- moving on whenever a child is faster, until `rollout_misses` steps in a
-- row bring no gain of `rollout_gain` or `rollout_depth` steps are spent.
-- Every rollout step is a real evaluation, backed up along its own path.
--
-- The virtual root holds the start state (the spec's default config, or a
-- sample) and random restart states: the first `init_samples` iterations
-- measure the start and samples only; later a fraction `p_sample` of
-- selections measures a fresh sample (which starts a descent only when it
-- comes close to the best), and `patience` evaluations without a new best
-- force a restart, from a perturbation of the best state (`p_perturb`) or a
-- sample. Batches use virtual loss so ask(ctx, n) returns n distinct states.
--
-- The value model (`model`, on by default): a random forest of log(time)
-- over the measured states, a failure standing for the slowest success
-- plus `fail_penalty` (kopt.classic), and beside it a Gaussian process of
-- the successes with a failure classifier; refitted as data grows, the one
-- that ranked the recent fast results better is read (`model_kind=auto`). A rollout step measures
-- the child it expects fastest (optimistically: mu - model_kappa * spread), and after
-- the initial samples a fresh sample is the best of `model_pool` random
-- configurations by expected improvement. With `model_prior` it also
-- weighs the priors of new moves, exp(predicted gain / model_tau), and
-- pushes moves predicted to gain less than `min_pred_gain` to the back
-- (`prune_factor`); the leave-one-space-out benchmark left that off.
--
-- The portfolio (`portfolio`, kopt.mcgs_portfolio; on by default): after
-- the initial samples a bandit gives each free iteration to the tree (this
-- descent), to the value model's expected-improvement proposal over random
-- configs and the one-knob neighbours of the best states (the surrogate
-- strategy's move), or to a crossover of the best states (the genetic
-- strategy's); their proposals join the root like fresh samples. With
-- `rollout_bandit` a second bandit decides per rollout step between the
-- model's child and the highest prior's. A search without progress for
-- `stall` evaluations gives its free iterations to region descents or the
-- expected-improvement proposal, chosen by a bandit (`stall_move`). A region
-- descent: first the best state's other settings of its small knobs alone
-- (`stall_sweep`; already after `sweep_at` evaluations when no expensive
-- generator is in use), then a knob of the best state set to another value
-- and held while a rollout retunes the others, by turns (`region_order`).
--
-- Deterministic given the seed and the results: a resumed run replays the
-- same questions and rebuilds the same graph. The graph is snapshotted to
-- <run dir>/graph.kgr (kopt.graph format) and summarised in graph.json; every
-- evaluated transition goes to <run dir>/transitions.jsonl (kopt.experience).
local graph_mod = require("kopt.graph")
local moves_mod = require("kopt.moves")
local experience = require("kopt.experience")
local json = require("kopt.json")
local model_mod = require("kopt.mcgs_model")
local edits = require("kopt.mcgs_edits")
local portfolio = require("kopt.mcgs_portfolio")
local X = require("kopt.experts")

local S = {
  name = "mcgs",
  description = "Monte Carlo Graph Search over move generators (PUCT, progressive widening, rollouts)",
  options = require("kopt.mcgs_options"),
}

-- Node flags (kopt.graph keeps them per node; bits are ours).
local PENDING, DEAD, ONPATH, EXPANDED, EXHAUSTED, MEASURED = 1, 2, 4, 8, 16, 32
local BLOCK = PENDING | DEAD | ONPATH | EXHAUSTED

-- the option that holds a failure's reward, by status (any other: fail_crash)
local FAIL_OPTION = { invalid = "fail_invalid", compile_error = "fail_compile", launch_error = "fail_launch",
                      wrong = "fail_wrong", suspect = "fail_wrong", timeout = "fail_timeout" }
local function fail_reward(o, status) return o[FAIL_OPTION[status] or "fail_crash"] end

local function set_flag(g, id, bit) g:set_flags(id, g:flags(id) | bit) end
local function clear_flag(g, id, bit) g:set_flags(id, g:flags(id) & ~bit) end

function S.init(ctx)
  local o = ctx.options
  -- (clip_lo >= clip_hi would give every success the same reward: a blind search)
  if o.clip_lo >= o.clip_hi then require("kopt.errors").usage("mcgs: --opt clip_lo must be below clip_hi") end
  local st = {
    g = graph_mod.new(1024),
    gens = {}, cheap = {}, expensive = {},
    cfg = nil,         -- node id -> config table (below)
    cfg_base = {},     -- node id -> its first parent's config, until cfg is read
    cfg_changes = {},  -- node id -> the changes of the move that first reached it
    patch = {},        -- node id -> patch (states with a source change)
    method_in = {},    -- node id -> method of the move that first reached it
    edge_method = {},  -- edge id -> method
    edge_expert = {}, edge_label = {},  -- (an expert's own name for its move)
    mstats = {},       -- method -> { n, gain } (this run)
    learned_mult = {}, -- method -> its learned prior multiplier while its mstats stand
                       -- (add_moves, when no other factor depends on the parent)
    queue = {},        -- rollout continuations waiting for ask()
    measured = {},     -- node id -> true once its result is in
    time = {},         -- node id -> measured time (ms) of a successful state
    expert_calls = {}, -- node id -> calls of the expensive generators
    edge_chain = {},   -- edge id -> LLM conversation of an edit move (kopt.experts), for repairs
    edge_gen = {},     -- edge id -> name of the generator that proposed it
    path_to = {},      -- node id -> the path by which it was first measured
    repairs = {},      -- failed LLM edits waiting for their repair turn
    fixes = {},        -- failed patch -> the moves its repair turn gave
    baseline = nil,    -- time of the first valid measurement
    restarts = 0,
    iterations = 0,    -- selections that produced a candidate
  }
  -- A node added by an expansion keeps its parent's config and the move's
  -- changes until its own config is first read: most are never measured.
  st.cfg = setmetatable({}, { __index = function(t, id)
    local base = st.cfg_base[id]
    if base == nil then return nil end
    local c = moves_mod.changed_config(ctx.space, base, st.cfg_changes[id])
    st.cfg_base[id], st.cfg_changes[id] = nil, nil
    rawset(t, id, c)
    return c
  end })
  st.gens = moves_mod.resolve(o.moves)
  st.gen_by_name = {}
  for _, gen in ipairs(st.gens) do
    table.insert(gen.expensive and st.expensive or st.cheap, gen)
    st.gen_by_name[gen.name] = gen
  end
  -- for stats(): calls of the expensive generators, the edges they
  -- proposed (new, or a cheap move they seconded) and evaluations of those
  st.expensive_calls, st.expensive_evals, st.expert_edge = 0, 0, {}
  if o.priors ~= "" then
    local f, err = experience.load_priors(o.priors)
    if not f then require("kopt.errors").usage("--opt priors: %s", err) end
    st.prior_mult = f
  end
  if o.tools ~= "" then X.tool_options(ctx, { config = {} }) end  -- a bad tools file fails now
  st.noise_rng = ctx.rng:fork()
  if o.model then
    st.rollout_score, st.rollout_fit = {}, {}  -- node id -> the model's rollout score, and its fit
    st.model = model_mod.new(ctx)
  end
  local arms = portfolio.parse(o.portfolio)
  if arms or o.rollout_bandit then
    st.portfolio = portfolio.new(ctx, arms or { "tree" }, o.model and o.model_rollout and o.rollout_bandit)
  end
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
  -- ReGraph online: expert moves get priors from the transitions of earlier
  -- runs, and with regraph_filter every expansion keeps the methods that
  -- have followed the state's own with a speedup
  if o.regraph ~= "off" and (#st.expensive > 0 or o.regraph_filter == "on") then
    local rg, line = experience.regraph_for_run(ctx, o.regraph)
    st.regraph, st.regraph_filter = rg, rg and o.regraph_filter == "on"
    ctx:log("%s", line)
  end
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
  -- kept until the method's statistics change (every expansion asks again)
  if m.mult then return m.mult end
  local mean = m.gain / m.n
  m.mult = math.exp(w * math.max(ctx.options.learn_floor, math.min(1, mean)) * m.n / (m.n + 3))
  return m.mult
end

local model_record, model_get, model_weigh = model_mod.record, model_mod.get, model_mod.weigh

-- A model sample: a state neither measured nor in flight.
local function model_sample(ctx, st)
  return model_mod.sample(ctx, st, function(id) return not evaluated(st, id) and st.g:flags(id) & PENDING == 0 end)
end

-- Registers the proposals of some generators as edges of node id, in order of
-- prior (ties in seeded random order), so widening admits the best first.
-- The moves i of lists (kopt.moves.collect_lists) for which keep(i), as lists.
local function select_moves(lists, keep)
  local out = { n = 0 }
  for name, l in pairs(lists) do
    if type(l) == "table" and name ~= "parts" then out[name] = {} end
  end
  for i = 1, lists.n do
    if keep(i) then
      out.n = out.n + 1
      for name, o in pairs(out) do
        if name ~= "n" then o[out.n] = lists[name][i] end
      end
    end
  end
  out.parts = lists.parts  -- the state's, for the keys of one-knob moves
  return out
end

local function add_moves(ctx, st, id, gens, noise, always)
  local state = { config = st.cfg[id], key = st.g:key(id), patch = st.patch[id] }
  local props = moves_mod.collect_lists(ctx, state, gens)
  if props.n == 0 then return 0 end
  local from = st.method_in[id]
  if st.regraph_filter then
    local set = st.regraph.followers(from)
    if set then
      local canonical = st.regraph.canonical
      local keep = select_moves(props, function(i) return set[canonical(props.method[i])] end)
      if keep.n > 0 then props = keep end
    end
  end
  local n = props.n
  local methods, priors = props.method, props.prior
  local tie = ctx.rng:permutation(n)
  local sum = 0
  local weigh = not always and ctx.options.model_prior
  local prior_mult, regraph_mult = st.prior_mult, always and st.regraph and st.regraph.mult
  -- method -> multiplier: kept from one expansion to the next unless a factor
  -- depends on the parent's method
  local mult = (prior_mult or regraph_mult) and {} or st.learned_mult
  for i = 1, n do
    local method = methods[i]
    local f = mult[method]
    if not f then
      f = learned(ctx, st, method)
      if prior_mult then f = f * prior_mult(from, method) end
      if regraph_mult then f = f * regraph_mult(from, method) end
      mult[method] = f
    end
    local p = priors[i] * f
    priors[i], sum = p, sum + p
  end
  if weigh then
    model_weigh(ctx, st, id, props)
    sum = 0
    for i = 1, n do sum = sum + priors[i] end
  end
  -- order: prior descending, ties by the shuffled rank (priors are far
  -- apart compared with the 1e-9 offsets): g:add_children ranks by
  -- -(prior / scale - tie * 1e-9)
  props.tie = tie
  if noise and ctx.options.dirichlet_eps > 0 then
    for i = 1, n do priors[i] = priors[i] / sum end
    local eta, total = st.noise_rng:gammas(n, ctx.options.dirichlet_alpha)
    local eps = ctx.options.dirichlet_eps
    for i = 1, n do priors[i] = (1 - eps) * priors[i] + eps * eta[i] / total end
  else
    props.scale = sum  -- the priors normalised there
  end
  -- child[i] < 0: a new node; edge[i] > 0: a new edge, < 0: one that was there
  local added, child_of, edge_of = st.g:add_children(id, props, nil, always)
  -- a new node or edge has nothing in these tables yet, so fields a move
  -- lacks (nil) need no write
  local cfg, cfg_base, cfg_changes, patch = st.cfg, st.cfg_base, st.cfg_changes, st.patch
  local edge_method, edge_expert, edge_chain, edge_gen, method_in = st.edge_method, st.edge_expert, st.edge_chain,
    st.edge_gen, st.method_in
  local configs, changes, patches, gens_of, experts, chains = props.config, props.changes, props.patch,
    props.generator, props.expert, props.chain
  local base = state.config
  -- the lists with holes are mostly empty (rule moves have no config, patch,
  -- expert or chain): not read per move then
  local any_config, any_patch = next(configs) ~= nil, next(patches) ~= nil
  local any_expert, any_chain = next(experts) ~= nil, next(chains) ~= nil
  for i = 1, n do
    local child, e = child_of[i], edge_of[i]
    if child < 0 then
      child = -child
      local c = any_config and configs[i]
      if c then
        cfg[child] = c
      else
        cfg_base[child], cfg_changes[child] = base, changes[i]
      end
      if any_patch and patches[i] ~= nil then patch[child] = patches[i] end
    end
    if always and e ~= 0 then st.expert_edge[e < 0 and -e or e] = true end
    if e > 0 then
      local method = methods[i]
      edge_method[e] = method
      if any_expert and experts[i] ~= nil then edge_expert[e], st.edge_label[e] = experts[i], props.label[i] end
      -- the generator is asked again only for a repair, which needs a chain
      if any_chain and chains[i] ~= nil then edge_chain[e], edge_gen[e] = chains[i], gens_of[i] end
      if method_in[child] == nil then method_in[child] = method end
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
  -- (as an integer: a huge pw_c gives a float past 2^63 that no count is)
  local k = math.min(c * (visits + 1) ^ ctx.options.pw_alpha, 2 ^ 31)
  return math.max(1, math.tointeger(math.ceil(k)) or 1), edges
end

-- The next state no sample found: near the end of a small space, random
-- samples keep hitting measured states, so the space is scanned once
-- (Space:scanner) for one not measured or pending. Nil when none is left,
-- or the space is too large to list (then sampling is all there is).
local function next_unmeasured(ctx, st)
  if st.scan == nil then st.scan = ctx.space:scanner() or false end
  if not st.scan then return nil end
  return st.scan(function(_, key)
    local id = st.g:find(key)
    return not id or (not evaluated(st, id) and st.g:flags(id) & PENDING == 0)
  end)
end

-- A restart state: a uniform sample, or (when `perturb` is set and there is
-- a best state) the best state after a few random moves. Nil when nothing
-- new turns up.
local function restart_config(ctx, st, perturb)
  local o = ctx.options
  for _ = 1, 20 do
    local c, method, patch
    if perturb and st.best_id then
      c, method, patch = st.cfg[st.best_id], "perturb", st.patch[st.best_id]  -- (an edit of the best stays)
      for _ = 1, o.perturb do
        -- a random move (rng:choice's draw); its lists, not a table per move
        local state = { config = c, key = ctx:key(c), patch = patch }
        local l = moves_mod.collect_lists(ctx, state, st.cheap)
        if l.n == 0 then break end
        local j = ctx.rng:random(1, l.n)
        c = l.config[j] or moves_mod.changed_config(ctx.space, c, l.changes[j])
      end
    else
      c, method = nil, "restart"
      if st.iterations >= o.init_samples then c = model_sample(ctx, st) end
      if c then
        method = "model"
      elseif o.init_design == "maximin" and st.iterations < o.init_samples then
        c = portfolio.spread_sample(ctx, st)
      else
        c = ctx.space:sample(ctx.rng)
      end
    end
    if not c then return nil end
    local child = S.node_for(ctx, st, c, patch, patch and ctx:key(c) .. (st.g:key(st.best_id):match("#.*$") or ""))
    if not evaluated(st, child) and st.g:flags(child) & PENDING == 0 then return child, method end
  end
  -- (twenty samples all measured: the space is nearly done)
  local c = next_unmeasured(ctx, st)
  if c then return S.node_for(ctx, st, c, nil), "restart" end
end

-- Root widening: a new random restart state joins when the root's limit k
-- passes its `have` edges (inner states grow by their expansions).
local function grow(ctx, st, id, k, have, perturb)
  if k <= have then return end
  if id == st.root then
    local child, method = restart_config(ctx, st, perturb)
    if child then
      st.restarts = st.restarts + 1
      local e = st.g:link(st.root, "restart:" .. st.restarts, child, ctx.options.restart_prior)
      st.edge_method[e] = method
      st.method_in[child] = st.method_in[child] or method
    end
  end
end

-- Expensive generators (LLM experts) are asked about a measured state only
-- as it proves worth visiting: the n-th call once
-- expert_c * (visits + 1)^pw_alpha reaches n. `now`: a state with nothing
-- else left to select asks them at once (up to expert_max), rather than
-- being closed as exhausted before it earned the visits (with experts as
-- the only generator, no state ever did, and no expert move was measured).
-- Returns whether they were asked.
local function ask_expensive(ctx, st, id, now)
  if #st.expensive == 0 or id == st.root or not st.measured[id] then return false end
  local visits = st.g:counts(id)
  local allowed = now and math.huge or math.floor(ctx.options.expert_c * (visits + 1) ^ ctx.options.pw_alpha)
  local done = st.expert_calls[id] or 0
  if done < allowed and done < ctx.options.expert_max then
    st.expert_calls[id] = done + 1
    st.expensive_calls = st.expensive_calls + 1
    add_moves(ctx, st, id, st.expensive, false, true)
    return true
  end
  return false
end

local fresh_root_edge

local function puct(ctx, st, id, limit)
  local o = ctx.options
  return st.g:select(id, o.c_puct, value_of(st, id) - o.fpu_reduction, o.beta_max, o.vl_value, limit, BLOCK)
end

-- During the initial sampling: the first root edge (start, then restarts)
-- whose state is neither measured nor pending, adding a restart if needed.
fresh_root_edge = function(ctx, st, have, perturb)
  local g = st.g
  for _ = 1, 2 do
    local e = g:first_eligible(st.root, BLOCK | MEASURED)
    if e then return e end
    grow(ctx, st, st.root, have + 1, have, perturb)
    have = have + 1
  end
  return nil
end

-- One selection: returns a pending record {path=, leaf=} or nil.
local function select_one(ctx, st, temp)
  local g = st.g
  local sampled = false
  local path, visited = {}, { st.root }
  local s = st.root
  set_flag(g, s, ONPATH)
  local rec
  for depth = 0, ctx.options.max_depth do
    expand(ctx, st, s, depth)
    local k, have = widen_limit(ctx, st, s)
    grow(ctx, st, s, k, have)
    ask_expensive(ctx, st, s)
    local e
    if s == st.root then
      if st.iterations < ctx.options.init_samples or st.force_restart then
        e = fresh_root_edge(ctx, st, have, st.force_restart and ctx.rng:uniform() < ctx.options.p_perturb)
        st.force_restart = nil
      elseif ctx.options.p_sample > 0 and ctx.rng:uniform() < ctx.options.p_sample then
        e = fresh_root_edge(ctx, st, have, false)
        sampled = e ~= nil
      end
    end
    -- the root's edges are all eligible: its widening only decides when
    -- a new restart state joins (initial samples and forced restarts join
    -- regardless)
    e = e or puct(ctx, st, s, s ~= st.root and k or nil)
    if not e then e = puct(ctx, st, s, nil) end
    if not e and ask_expensive(ctx, st, s, true) then e = puct(ctx, st, s, nil) end
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
      rec = { path = path, leaf = child, sample = sampled or nil }
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
  st.g:descend(rec.path)  -- a virtual loss per edge, a visit per parent
end

local function candidate_of(st, rec)
  local e = rec.path[#rec.path]
  local _, parent = st.g:ends(e)
  return { config = st.cfg[rec.leaf], patch = st.patch[rec.leaf],
           origin = { method = st.edge_method[e], expert = st.edge_expert[e], label = st.edge_label[e],
                      parent = parent ~= st.root and st.g:key(parent) or nil,
                      rollout = rec.rollout and true or nil, repair = rec.repair,
                      region = rec.freeze and portfolio.region_key(rec.freeze) } }
end

-- The search's own steps, for the code moves (kopt.mcgs_edits) and the
-- portfolio's arms (kopt.mcgs_portfolio).
local rollout_step
local edit_ops = {
  node_for = function(...) return S.node_for(...) end,
  rollout_step = function(...) return rollout_step(...) end,
  expand = expand, add_moves = add_moves, start_pending = start_pending,
  idle = function(st, id) return not evaluated(st, id) and st.g:flags(id) & PENDING == 0 end,
  skip = BLOCK | MEASURED,
}

function S.ask(ctx, n)
  local st = ctx.mcgs
  local out, recs = {}, {}
  local o = ctx.options
  if o.patience > 0 and st.last_improve and #st.queue == 0
     and ctx.evaluations - st.last_improve >= o.patience then
    st.force_restart = true
    st.last_improve = ctx.evaluations
  end
  while #out < n and #st.queue > 0 do
    local rec = table.remove(st.queue, 1)
    out[#out + 1] = candidate_of(st, rec)
    recs[#recs + 1] = rec
  end
  while #out < n and #st.repairs > 0 and ctx.evaluations + #out < (ctx.budget or math.huge) do
    local rec = edits.repair_rec(ctx, st, table.remove(st.repairs, 1), edit_ops)
    if rec then
      start_pending(st, rec)
      out[#out + 1] = candidate_of(st, rec)
      recs[#recs + 1] = rec
    end
  end
  local temp = {}
  local tries = 0
  while #out < n and tries < 8 * n + 8 do
    tries = tries + 1
    local rec, arm = portfolio.arm_rec(ctx, st, edit_ops)
    if not rec then
      rec = select_one(ctx, st, temp)
      if rec and st.portfolio then rec.arm = arm and "tree" end
    end
    if rec then
      -- the initial samples only measure; descents start once PUCT chooses
      rec.init = st.iterations < o.init_samples or nil
      st.iterations = st.iterations + 1
      start_pending(st, rec)
      out[#out + 1] = candidate_of(st, rec)
      recs[#recs + 1] = rec
    end
  end
  -- Descents can all end blocked (every widened move of the states on the
  -- way dead, pending or on the path) while the space still holds unmeasured
  -- states; an empty answer would end the run, so restart from a fresh
  -- sample instead.
  local restarts = 0
  while #out == 0 and restarts < 4 do
    restarts = restarts + 1
    st.force_restart = true
    local rec = select_one(ctx, st, temp)
    st.force_restart = nil
    if rec then
      st.iterations = st.iterations + 1
      start_pending(st, rec)
      out[#out + 1] = candidate_of(st, rec)
      recs[#recs + 1] = rec
    end
  end
  if #out == 0 then
    for _, rec in ipairs(edits.frontier(ctx, st, n, edit_ops)) do
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
  local t = r.cost or r.time_ms  -- (cost: the spec's objective as a time; kopt.engine)
  if r.status == "ok" and type(t) == "number" and t > 0 and t < math.huge then
    return tonumber(string.format("%.12g", t))
  end
end

-- (t: time_of(r))
local function reward_of(ctx, st, r, t)
  if t then
    if not st.baseline then st.baseline = t end
    local x = math.log(st.baseline / t)
    return math.max(ctx.options.clip_lo, math.min(ctx.options.clip_hi, x)), false
  end
  return fail_reward(ctx.options, r.status), true
end

-- A rollout is a greedy descent: each step measures one unmeasured, idle
-- child of the rollout's anchor (its best state so far) chosen epsilon-greedily
-- on Q - lambda * N; a faster child becomes the anchor. It ends after
-- rollout_misses steps in a row without a new anchor, or rollout_depth steps.
-- Measured states and states in flight are never chosen: no cycles.
-- freeze (a region descent of the portfolio's stall): { name =, value = },
-- a knob the descent keeps at its value, so it explores that region.
function rollout_step(ctx, st, anchor, apath, steps, misses, freeze)
  local g, o = st.g, ctx.options
  expand(ctx, st, anchor, #apath)
  local best, eligible = g:greedy(anchor, o.rollout_lambda, value_of(st, anchor) - o.fpu_reduction,
                                  o.beta_max, BLOCK | MEASURED)
  if eligible == 0 then return nil end
  -- (the list of eligible children only where a choice reads it)
  local children
  if freeze then
    children = portfolio.region_children(st, anchor, g:eligible(anchor, BLOCK | MEASURED), freeze)
    if not children then return nil end
    best = children[1]
  end
  -- rarm: how this step chose, when a bandit decided it (kopt.mcgs_portfolio)
  local p, how, rarm = st.portfolio, nil, nil
  if ctx.rng:uniform() < o.rollout_eps then
    best = ctx.rng:choice(children or g:eligible(anchor, BLOCK | MEASURED))
  elseif freeze or o.model_rollout then
    how = "model"
    if not freeze and p and p.roll and model_get(ctx, st) then
      rarm = portfolio.rollout_choice(ctx, p)
      how = rarm
    end
  end
  if how == "model" then
    -- the unmeasured child the model expects fastest (optimistically, and
    -- weighted by its chance of success); ties keep the greedy choice
    local m = model_get(ctx, st)
    if m then
      local lbest
      local w = o.rollout_prior
      local score, fit = st.rollout_score, st.rollout_fit
      for _, e in ipairs(children or g:eligible(anchor, BLOCK | MEASURED)) do
        -- a child's score holds until the next fit: the anchor of a
        -- rollout is asked about the same children at every step
        local id = (g:ends(e))
        local lt = score[id]
        if fit[id] ~= m.fits then
          lt = model_mod.score(ctx, m, st.cfg[id])
          score[id], fit[id] = lt, m.fits
        end
        if w > 0 then lt = lt - w * math.log(math.max(g:edge(e).prior, 1e-9)) end
        if not lbest or lt < lbest then best, lbest = e, lt end
      end
    end
  end
  if freeze then portfolio.region_tried(st, anchor, best, freeze) end
  local path = table.move(apath, 1, #apath, 1, {})
  path[#path + 1] = best
  return { path = path, leaf = (g:ends(best)), rollout = steps, anchor = anchor, anchor_path = apath,
           misses = misses, rarm = rarm, freeze = freeze }
end

local function save_snapshot(ctx, st)
  if not ctx.run_dir then return end
  local ok, err = st.g:save(ctx.run_dir .. "/graph.kgr")
  if not ok then ctx:log("graph snapshot failed: %s", err) return end
  local nodes, edges = st.g:size()
  -- checked and atomic like every summary file: a failed write stops the run
  local model = model_mod.summary(st.model)
  json.write_file(ctx.run_dir .. "/graph.json", json.encode({ nodes = nodes, edges = edges, digest = st.g:digest(),
    evaluations = ctx.evaluations, baseline_ms = st.baseline, restarts = st.restarts, model = model }) .. "\n", true)
end

function S.tell(ctx, results)
  local st, g, o = ctx.mcgs, ctx.mcgs.g, ctx.options
  local batch = st.batch or {}
  st.batch = nil
  for i, r in ipairs(results) do
    local rec = batch[i]
    if rec then
      local leaf = rec.leaf
      local t = time_of(r)
      local v, failed = reward_of(ctx, st, r, t)
      g:set(leaf, { status = tostring(r.status), time_ms = t, reward = v,
                    config = ctx.space:json(st.cfg[leaf]) })
      g:set_flags(leaf, (g:flags(leaf) & ~PENDING) | MEASURED)
      st.measured[leaf] = true
      st.time[leaf] = t
      st.path_to[leaf] = st.path_to[leaf] or rec.path
      model_record(st, st.cfg[leaf], t)
      if st.portfolio then portfolio.record(ctx, st.portfolio, rec.arm, leaf, t, rec.rarm) end
      if failed then set_flag(g, leaf, DEAD); edits.fix_failed(st, leaf) end
      g:backup_path(rec.path, v, failed)  -- and the virtual losses taken back
      local ch = st.edge_chain[rec.path[#rec.path]]
      if failed and ch and X.REPAIRABLE[r.status] then
        if ch.attempt < o.repairs then
          st.repairs[#st.repairs + 1] = { chain = ch, gen = st.edge_gen[rec.path[#rec.path]], path = rec.path,
                                          failed_patch = st.patch[leaf], feedback = X.feedback_of(r) }
        elseif o.repairs > 0 then
          ctx:log("repair chain of %s/%s ends after %d attempts: %s", ch.expert, tostring(ch.method), ch.attempt,
                  tostring(r.status))
        end
      end
      if st.expert_edge[rec.path[#rec.path]] then st.expensive_evals = st.expensive_evals + 1 end
      local _, parent = g:ends(rec.path[#rec.path])
      local method = st.edge_method[rec.path[#rec.path]]
      local pv = parent ~= st.root and g:reward(parent) or nil
      -- the parent's time as its node holds it (st.time: each state is
      -- measured once)
      local ptime = parent ~= st.root and st.time[parent] or nil
      local gain = pv and (v - pv) or nil
      if gain and method then
        local m = st.mstats[method] or { n = 0, gain = 0 }
        m.n, m.gain, m.mult = m.n + 1, m.gain + math.max(-1, math.min(1, gain)), nil
        st.mstats[method], st.learned_mult[method] = m, nil
      end
      local speedup = (ptime and t) and ptime / t or nil
      st.exp:add({ from = st.method_in[parent] or "root", to = method, status = r.status, speedup = speedup,
                   reward = v, n = ctx.evaluations, label = st.edge_label[rec.path[#rec.path]] }, r)
      if not failed and (not st.best_v or v > st.best_v) then
        st.best_v, st.best_id, st.last_improve = v, leaf, ctx.evaluations
        -- progress, for the portfolio's stall: a new best by stall_gain
        if not st.progress_v or v > st.progress_v + o.stall_gain then
          st.progress_v, st.progress_at = v, ctx.evaluations
        end
      end
      -- rollout: start from a fresh leaf, or go on from the anchor
      local anchor, apath, misses, steps
      if rec.rollout then
        anchor, apath, misses, steps = rec.anchor, rec.anchor_path, rec.misses, rec.rollout
        local av = g:reward(anchor) or -math.huge
        if not failed and v > av then
          if rec.freeze then portfolio.region_moved(st, rec.freeze, anchor, leaf) end
          -- (a gain within the noise moves the anchor but counts as a miss)
          anchor, apath, misses = leaf, rec.path, v - av < math.log(1 + o.rollout_gain) and misses + 1 or 0
        else
          misses = misses + 1
        end
      elseif rec.freeze and (not failed or o.region_repair) then
        -- (a region's start descends whatever its time; region_repair: failed too)
        anchor, apath, misses, steps = leaf, rec.path, failed and 1 or 0, 0
      elseif not failed and (not rec.init and (not o.rollout_improving or not pv or v > pv)
             and (not rec.sample or v >= (st.best_v or 0) - (rec.strict and 0 or o.sample_margin))) then
        -- (a strict proposal descends only as a new best: v is best_v then)
        anchor, apath, misses, steps = leaf, rec.path, 0, 0
      end
      -- (a region descent that stays far behind the best gives up early)
      local behind = rec.freeze and o.region_steps > 0 and steps and steps >= o.region_steps and
        (g:reward(anchor) or -math.huge) < (st.best_v or 0) - o.sample_margin
      if anchor and not behind and steps < o.rollout_depth and
         misses < (rec.freeze and rec.freeze.misses or o.rollout_misses) then
        local nxt = rollout_step(ctx, st, anchor, apath, steps + 1, misses, rec.freeze)
        if nxt then
          nxt.arm = rec.arm
          start_pending(st, nxt)
          st.queue[#st.queue + 1] = nxt
        end
      end
    end
  end
  local every = o.snapshot_every
  if every > 0 and ctx.evaluations % every == 0 then save_snapshot(ctx, st) end
end
function S.finish(ctx) if ctx.mcgs then save_snapshot(ctx, ctx.mcgs) end end  -- (however the run stopped)

-- Counters for benchmarks (kopt compare sums them over seeds): calls of the
-- expensive generators (an LLM expert: one request each), evaluations through
-- an edge they proposed (their moves, repairs, and cheap moves whose priors
-- they raised); model_kind=auto's fits that chose the GP.
function S.stats(ctx)
  local st = ctx.mcgs
  if not st then return {} end
  local out = st.portfolio and portfolio.stats(st.portfolio) or {}
  out.expert_calls, out.expert_evals, out.model_gp_fits = st.expensive_calls, st.expensive_evals, st.model and st.model.chose_gp
  return out
end

return S
