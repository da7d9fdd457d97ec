-- Rule-based search: greedy local search over the rule moves (and any other
-- move generators), with a tabu list and restarts. No LLM needed.
--
-- It first measures `init` states (the start state, then uniform samples)
-- and starts from the best. From the current state it evaluates the proposed
-- moves in order of prior (ties in seeded random order) and moves to the
-- first batch's best improvement (first-improvement hill climbing). At a
-- local optimum (every move evaluated, none better) the state goes on the
-- tabu list; at the first local optimum the search may step to the best
-- non-tabu neighbour (`escapes` times in a row without a new best of the
-- descent; later local optima restart at once), and then restarts: from a
-- random perturbation of the best state so far (`perturb` random moves;
-- iterated local search) with probability `p_perturb`, else from a uniform
-- random sample.
local moves_mod = require("kopt.moves")
local experience = require("kopt.experience")

local S = {
  name = "rules",
  description = "greedy local search over rule moves with a tabu list and restarts",
  options = {
    moves = { default = "rules", help = "move generators, comma-separated (names or .lua files)" },
    init = { default = 20, min = 0, help = "random configs measured first (the first is the start state); the search starts from the best" },
    escapes = { default = 1, min = 0, help = "non-improving steps to the best non-tabu neighbour before the first restart" },
    tabu = { default = 50, min = 0, help = "length of the tabu list (states not to step back to)" },
    p_perturb = { default = 0.5, min = 0, max = 1, help = "probability that a restart perturbs the best state instead of sampling" },
    perturb = { default = 3, min = 0, help = "random moves applied to the best state for a perturbation restart" },
    start = { default = "default", choices = { "default", "random" },
              help = "first state: the spec's default config (when it has one) or a random sample" },
    priors = { default = "", help = "method statistics from `kopt regraph` (JSON) to weight move priors" },
  },
}

local INF = math.huge

local function fitness(r)
  local t = r and (r.cost or r.time_ms)  -- (cost: the spec's objective as a time; kopt.engine)
  if r and r.status == "ok" and type(t) == "number" then return t end
  return INF
end

function S.init(ctx)
  local o = ctx.options
  local st = {
    gens = moves_mod.resolve(o.moves),
    known = {},      -- key -> fitness (INF for failures)
    n_init = 0,      -- initial samples asked
    asked = {},      -- key -> true once proposed
    method_of = {},  -- key -> the method that produced the state
    tabu = {}, tabu_set = {},
    cur = nil,       -- { key=, config=, fit= }
    queue = nil,     -- untried moves of cur, in order
    escapes = 0, descent_best = INF,
    restarts = 0,
    props_of = {},   -- key -> the state's proposals, kept when an expensive generator (an LLM) is in use
  }
  st.cheap = {}
  for _, g in ipairs(st.gens) do
    if g.expensive then st.expensive = true else st.cheap[#st.cheap + 1] = g end
  end
  if o.priors ~= "" then
    local f, err = experience.load_priors(o.priors)
    if not f then require("kopt.errors").usage("--opt priors: %s", err) end
    st.prior_mult = f
  end
  st.exp = experience.open(ctx, S.name)
  ctx.rules = st
end

local function push_tabu(st, key, len)
  if st.tabu_set[key] then return end
  st.tabu[#st.tabu + 1] = key
  st.tabu_set[key] = true
  while #st.tabu > len do
    st.tabu_set[table.remove(st.tabu, 1)] = nil
  end
end

-- Moves of the current state in evaluation order: prior (times the learned
-- multiplier) descending, ties in a seeded random order.
local function build_queue(ctx, st)
  -- (a state with a code edit keeps it: its rule moves tune the edited kernel)
  st.patch_of = st.patch_of or {}
  local state = { config = st.cur.config, key = st.cur.key, result = st.cur.result, patch = st.patch_of[st.cur.key] }
  -- (an expensive generator is asked once per state: the state becomes
  -- current again at each local optimum and after each restart near it)
  local function copies(list)
    local out = {}
    for i, m in ipairs(list) do
      out[i] = {}
      for k, v in pairs(m) do out[i][k] = v end
    end
    return out
  end
  local props = st.expensive and st.props_of[state.key]
  if props then
    props = copies(props)
  else
    props = moves_mod.propose(ctx, state, st.gens)
    if st.expensive then st.props_of[state.key] = copies(props) end
  end
  for _, m in ipairs(props) do
    if m.patch and m.key then st.patch_of[m.key] = m.patch end
  end
  local order = {}
  for i = 1, #props do order[i] = i end
  ctx.rng:shuffle(order)
  local rank = {}
  for r, i in ipairs(order) do rank[i] = r end
  local from = st.method_of[st.cur.key]
  for i, m in ipairs(props) do
    m.rank = rank[i]
    if st.prior_mult then m.prior = m.prior * st.prior_mult(from, m.method) end
  end
  table.sort(props, function(a, b)
    if a.prior ~= b.prior then return a.prior > b.prior end
    return a.rank < b.rank
  end)
  st.queue = props
end

local function set_current(st, key, config, fit)
  st.cur = { key = key, config = config, fit = fit }
  st.queue = nil
end

-- A new starting point that nobody asked for yet, or nil.
local function restart_point(ctx, st)
  local o = ctx.options
  for _ = 1, 50 do
    local c
    if st.best and ctx.rng:uniform() < o.p_perturb then
      c = st.best.config
      for _ = 1, o.perturb do
        -- (the cheap generators: a perturbation asks no LLM)
        local props = moves_mod.propose(ctx, { config = c, key = ctx:key(c) }, st.cheap)
        if #props == 0 then break end
        c = ctx.rng:choice(props).config
      end
    else
      c = ctx.space:sample(ctx.rng)
    end
    if c and not st.asked[ctx:key(c)] then return c end
  end
  -- the neighbourhoods are exhausted: any config not yet asked
  for _ = 1, 200 do
    local c = ctx.space:sample(ctx.rng)
    if c == nil then return nil end
    if not st.asked[ctx:key(c)] then return c end
  end
  -- samples keep finding asked ones: a small space is scanned once
  -- (Space:scanner) for the rest (a large one ends here)
  if st.scan == nil then st.scan = ctx.space:scanner() or false end
  if st.scan then return st.scan(function(_, key) return not st.asked[key] end) end
  return nil
end

-- Decides where to go when the current state has no untried move: to a
-- better known neighbour, to the best non-tabu neighbour (escape), or to a
-- restart. Returns a candidate to evaluate, or nil when the state changed to
-- a known one (the caller loops), or false when the space is exhausted.
local function advance(ctx, st)
  local best_key, best_fit, best_cfg = nil, INF, nil
  for _, m in ipairs(st.queue) do
    local f = st.known[m.key]
    if f and f < best_fit and not st.tabu_set[m.key] then best_key, best_fit, best_cfg = m.key, f, m.config end
  end
  push_tabu(st, st.cur.key, ctx.options.tabu)
  if best_key and best_fit < st.cur.fit then
    set_current(st, best_key, best_cfg, best_fit)
    return nil
  end
  -- escapes pay off around the first local optimum; later ones restart at once
  if best_key and best_fit < INF and st.restarts == 0 and st.escapes < ctx.options.escapes then
    st.escapes = st.escapes + 1
    set_current(st, best_key, best_cfg, best_fit)
    return nil
  end
  st.escapes, st.descent_best = 0, INF
  st.restarts = st.restarts + 1
  local c = restart_point(ctx, st)
  if not c then return false end
  local key = ctx:key(c)
  st.cur = nil
  st.pending_start = key
  return { config = c, origin = { method = "restart", parent = nil } }
end

-- The initial sample: the start state, then uniform samples.
local function init_batch(ctx, st, n)
  local out = {}
  while #out < n and st.n_init < ctx.options.init do
    local c
    if st.n_init == 0 and ctx.options.start == "default" then c = ctx.space:default() end
    for _ = 1, 50 do
      if c and not st.asked[ctx:key(c)] then break end
      c = ctx.space:sample(ctx.rng)
    end
    if not c or st.asked[ctx:key(c)] then break end
    st.asked[ctx:key(c)] = true
    st.n_init = st.n_init + 1
    out[#out + 1] = { config = c, origin = { method = st.n_init == 1 and "start" or "sample" }, init = true }
  end
  return out
end

function S.ask(ctx, n)
  local st = ctx.rules
  if st.n_init < ctx.options.init and not st.started then
    local out = init_batch(ctx, st, n)
    if #out > 0 then return out end
  end
  if not st.started and st.best then
    -- the initial sample is in: descend from its best
    st.started = true
    set_current(st, st.best.key, st.best.config, st.best.fit)
    st.descent_best = st.best.fit
  end
  local out = {}
  local guard = 0
  while #out < n and guard < 10000 do
    guard = guard + 1
    if st.pending_start then break end  -- wait for the start state's result
    if not st.cur then
      local c
      if not st.started then
        st.started = true
        c = ctx.options.start == "default" and ctx.space:default() or nil
        c = c or ctx.space:sample(ctx.rng)
        if not c then break end
        local cand = { config = c, origin = { method = "start" } }
        st.pending_start = ctx:key(c)
        st.asked[st.pending_start] = true
        out[#out + 1] = cand
        break
      end
      local cand = advance(ctx, st)
      if cand == false then break end
      if cand then
        st.asked[st.pending_start] = true
        out[#out + 1] = cand
        break
      end
    else
      if not st.queue then build_queue(ctx, st) end
      -- a known better neighbour is a free step
      local moved = false
      for _, m in ipairs(st.queue) do
        local f = st.known[m.key]
        if f and f < st.cur.fit and not st.tabu_set[m.key] then
          set_current(st, m.key, m.config, f)
          moved = true
          break
        end
      end
      if not moved then
        local picked = false
        local m
        for i, x in ipairs(st.queue) do
          if not st.asked[x.key] then m = x table.remove(st.queue, i) break end
        end
        if m then
          st.asked[m.key] = true
          st.method_of[m.key] = st.method_of[m.key] or m.method
          out[#out + 1] = { config = m.config, patch = m.patch,
                            origin = { method = m.method, expert = m.expert, parent = st.cur.key } }
          st.inflight_from = st.cur.key
          picked = true
        end
        if not picked then
          if #out > 0 then break end  -- let this batch come back first
          -- every move asked: rebuild with the known results and decide
          build_queue(ctx, st)
          local cand = advance(ctx, st)
          if cand == false then break end
          if cand then
            st.asked[st.pending_start] = true
            out[#out + 1] = cand
            break
          end
        end
      end
    end
  end
  return out
end

function S.tell(ctx, results)
  local st = ctx.rules
  local improved_key, improved_fit, improved_cfg
  for i, r in ipairs(results) do
    local key = r.key
    local f = fitness(r)
    st.known[key] = f
    local cand = st.last_batch and st.last_batch[i]
    if f < (st.best and st.best.fit or INF) then st.best = { key = key, config = cand and cand.config, fit = f } end
  end
  -- results come in the order of the last ask; the engine passes candidates
  -- back only through results, so ask() keeps them in last_batch
  for i, r in ipairs(results) do
    local cand = st.last_batch and st.last_batch[i]
    local f = fitness(r)
    if cand then
      local parent = cand.origin.parent
      local pf = parent and st.known[parent]
      st.exp:add({ from = parent and st.method_of[parent] or "start", to = cand.origin.method, status = r.status,
                   speedup = (pf and pf < INF and f < INF) and pf / f or nil,
                   reward = (pf and pf < INF and f < INF) and math.log(pf / f) or -1, n = ctx.evaluations }, r)
      if r.key == st.pending_start then
        st.pending_start = nil
        st.method_of[r.key] = st.method_of[r.key] or cand.origin.method
        set_current(st, r.key, cand.config, f)
        if f < st.descent_best then st.descent_best = f end
      elseif st.cur and parent == st.cur.key and f < st.cur.fit and f < (improved_fit or INF) then
        improved_key, improved_fit, improved_cfg = r.key, f, cand.config
      end
    end
  end
  if improved_key then
    set_current(st, improved_key, improved_cfg, improved_fit)
    if improved_fit < st.descent_best then
      st.descent_best = improved_fit
      st.escapes = 0
    end
  end
end

-- ask() remembers its batch so tell() can match results to candidates.
local ask = S.ask
S.ask = function(ctx, n)
  local out = ask(ctx, n)
  ctx.rules.last_batch = out
  return out
end

return S
