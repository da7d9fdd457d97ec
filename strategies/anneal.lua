-- Simulated annealing over the knob lattice.
--
-- The walk moves between neighbouring configurations (one knob, chosen
-- uniformly, to an adjacent value or, with probability `hamming`, to any
-- value) and accepts a slower one with probability
-- exp(-ln(t_new / t_cur) / T): the energy is the log of the time, so the
-- temperature reads as a relative slowdown whatever the kernel's scale. T cools
-- geometrically from t0 to t_end over the budget. Stepping onto a neighbour
-- that was already measured costs nothing, so those steps happen inside ask
-- without spending budget. When no new best turns up for `patience`
-- evaluations it restarts, from the best so far (probability restart_best)
-- or from a fresh random configuration; when the walk is boxed in by measured
-- neighbours it measures a fresh random one.
local classic = require("kopt.classic")

local S = {
  name = "anneal",
  description = "simulated annealing on log(time) over neighbouring configs, with restarts",
  -- (its cooling is spread over the budget: `kopt compare` runs it once per
  -- reported budget)
  plans_with_budget = true,
  options = {
    t0 = { default = 0.15, gt = 0,
      help = "initial temperature (log-time units: 0.15 accepts a 15 % slower neighbour with probability 1/e)" },
    t_end = { default = 0.005, gt = 0, help = "temperature reached when the budget is spent; cooling is geometric in between" },
    init = { default = 5, min = 0, help = "random configurations measured first; the walk starts from the best of them" },
    patience = { default = 50, min = 0,
      help = "evaluations without a new best after which the walk restarts from a random configuration" },
    hamming = { default = 0.4, min = 0, max = 1,
      help = "probability that a step may change one knob to any value, not only an adjacent one" },
    restart_best = { default = 0.5, min = 0, max = 1,
      help = "probability that a restart goes back to the best configuration so far instead of a random one" },
    free_steps = { default = 200, min = 0, max = 1000000, help = "most steps over already-measured neighbours taken inside one ask" },
  },
}

function S.init(ctx)
  local st = { o = classic.options(S, ctx), mem = classic.memory(ctx.space), cur = nil,
               since_best = 0, best = math.huge, restart = false, free = {} }
  for j, k in ipairs(ctx.space.knobs) do if #k.values > 1 then st.free[#st.free + 1] = j end end
  ctx.anneal = st
end

local function temperature(ctx, o)
  local budget = ctx.budget or 200
  local p = math.min(1, (ctx.evaluations or 0) / math.max(1, budget))
  return o.t0 * (o.t_end / o.t0) ^ p
end

local function accept(ctx, o, f_new, f_cur)
  if f_new == math.huge then return false end
  if f_new <= f_cur then return true end
  return ctx.rng:uniform() < math.exp(-math.log(f_new / f_cur) / temperature(ctx, o))
end

-- A random neighbour of `config`: a knob chosen uniformly (so a knob with
-- few values is moved as often as one with many), then an adjacent value, or
-- with probability `hamming` any other value. nil if none of a few draws is valid.
local function neighbour(ctx, st, config)
  local rng, knobs, index = ctx.rng, st.mem.knobs, st.mem.index
  if #st.free == 0 then return nil end
  for _ = 1, 20 do
    local j = st.free[rng:random(1, #st.free)]
    local k = knobs[j]
    local nv, x = #k.values, index[j][config[k.name]]
    local v
    if rng:uniform() < st.o.hamming then
      v = rng:random(1, nv - 1)
      if v >= x then v = v + 1 end
    else
      v = (x == 1 or (x < nv and rng:uniform() < 0.5)) and x + 1 or x - 1
    end
    local c = {}
    for name, val in pairs(config) do c[name] = val end
    c[k.name] = k.values[v]
    if ctx.space:is_valid(c) then return c end
  end
  return nil
end

-- Next configuration to measure from the walk, or nil when it is boxed in.
local function step(ctx, st)
  local o, mem = st.o, st.mem
  for _ = 1, o.free_steps do
    local c = neighbour(ctx, st, st.cur.config)
    if c == nil then break end
    if not mem:is_seen(c) then return c end
    local f = mem:fitness_of(c)
    if f and accept(ctx, o, f, st.cur.f) then st.cur = { config = c, f = f } end
  end
  -- Boxed in: measured neighbours only. Fall back to any fresh one.
  local fresh = mem:fresh_neighbours(st.cur.config, "hamming")
  if #fresh > 0 then return fresh[ctx.rng:random(1, #fresh)] end
  return nil
end

function S.ask(ctx, n)
  local st, mem, out = ctx.anneal, ctx.anneal.mem, {}
  while #out < n do
    local c, method = nil, "anneal"
    if st.restart and st.cur ~= nil and ctx.rng:uniform() < st.o.restart_best then
      local b = mem:best(1)[1]
      st.cur, st.restart = { config = b.config, f = b.f }, false
    end
    if st.cur ~= nil and not st.restart then c = step(ctx, st) end
    if c == nil then
      -- Sampling the start, restarting, or boxed in: a fresh random point.
      c, method = mem:fresh(ctx.rng), "random"
      if c == nil then break end
      if st.restart then st.restart, st.jump = false, mem:key(c) end
    end
    mem:claim(c)
    out[#out + 1] = { config = c, origin = { method = method } }
  end
  return out
end

function S.tell(ctx, results)
  local st = ctx.anneal
  local mem = st.mem
  for i, r in ipairs(results) do
    local config = mem:told_config(r, i)
    local f = mem:record(config, r)
    if f < st.best then st.best, st.since_best = f, 0 else st.since_best = st.since_best + 1 end
    if st.jump == mem:key(config) then
      st.jump = nil
      if f < math.huge then st.cur = { config = config, f = f } else st.restart = true end
    elseif st.cur == nil then
      local b = #mem.order >= st.o.init and mem:best(1)[1]
      if b then st.cur = { config = b.config, f = b.f } end
    elseif accept(ctx, st.o, f, st.cur.f) then
      st.cur = { config = config, f = f }
    end
    if st.since_best >= st.o.patience then st.since_best, st.restart = 0, true end
  end
end

return S
