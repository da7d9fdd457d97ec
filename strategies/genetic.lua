-- Steady-state genetic algorithm.
--
-- A population of the best distinct configurations measured so far (the first
-- `population` evaluations are random). Each child takes two parents chosen
-- by tournament, mixes them knob by knob (uniform crossover), then mutates
-- each knob with probability `mutation`: usually to an adjacent value, with
-- probability `jump` to any value. A child that is invalid or was measured
-- before is bred again; after `retries` failures a random configuration is
-- measured instead. A measured child replaces the worst member if it is
-- faster (elitist, one child at a time), so any number of candidates can be
-- in flight.
local classic = require("kopt.classic")

local S = {
  name = "genetic",
  description = "steady-state genetic algorithm: tournament, uniform crossover, adjacent/jump mutation",
  options = {
    population = { default = 20, min = 2, help = "population size; the first `population` evaluations are random" },
    tournament = { default = 3, min = 1, max = 1000, help = "members drawn per parent; the fastest of them becomes the parent" },
    crossover = { default = 0.8, min = 0, max = 1, help = "probability that a child mixes two parents rather than copying one" },
    mutation = { default = 0.15, min = 0, max = 1, help = "per-knob probability of a mutation (at least one knob always mutates)" },
    jump = { default = 0.25, min = 0, max = 1, help = "probability that a mutation takes any value of the knob, not an adjacent one" },
    retries = { default = 40, min = 1, max = 100000, help = "attempts to breed a new valid child before measuring a random configuration" },
  },
}

function S.init(ctx)
  local st = { o = classic.options(S, ctx), mem = classic.memory(ctx.space), pop = {} }
  if math.tointeger(st.o.population) == nil or st.o.population < 2 then
    require("kopt.errors").usage("--opt population: expected a whole number of at least 2, got %s", tostring(st.o.population))
  end
  if math.tointeger(st.o.tournament) == nil or st.o.tournament < 1 then
    require("kopt.errors").usage("--opt tournament: expected a whole number of at least 1, got %s", tostring(st.o.tournament))
  end
  st.free = {} -- indices of knobs with more than one value
  for j, k in ipairs(ctx.space.knobs) do if #k.values > 1 then st.free[#st.free + 1] = j end end
  ctx.genetic = st
end

local function parent(st, rng)
  local best
  for _ = 1, st.o.tournament do
    local m = st.pop[rng:random(1, #st.pop)]
    if best == nil or m.f < best.f then best = m end
  end
  return best
end

local function mutate(st, rng, x, force)
  local knobs, o = st.mem.knobs, st.o
  local changed = false
  for _, j in ipairs(st.free) do
    if rng:uniform() < o.mutation then
      local nv = #knobs[j].values
      if rng:uniform() < o.jump then
        local v = rng:random(1, nv - 1)
        x[j] = v >= x[j] and v + 1 or v
      else
        x[j] = (x[j] == 1 or (x[j] < nv and rng:uniform() < 0.5)) and x[j] + 1 or x[j] - 1
      end
      changed = true
    end
  end
  if force and not changed and #st.free > 0 then
    local j = st.free[rng:random(1, #st.free)]
    local v = rng:random(1, #knobs[j].values - 1)
    x[j] = v >= x[j] and v + 1 or v
  end
  return x
end

local function breed(ctx, st)
  local rng, mem = ctx.rng, st.mem
  for _ = 1, st.o.retries do
    local a = mem:vector(parent(st, rng).config)
    if rng:uniform() < st.o.crossover then
      local b = mem:vector(parent(st, rng).config)
      for j = 1, #a do if rng:uniform() < 0.5 then a[j] = b[j] end end
    end
    local c = mem:config(mutate(st, rng, a, true))
    if ctx.space:is_valid(c) and not mem:is_seen(c) then return c end
  end
  return nil
end

function S.ask(ctx, n)
  local st, mem, out = ctx.genetic, ctx.genetic.mem, {}
  while #out < n do
    local c, method = nil, "genetic"
    if #mem.order + mem.pending >= st.o.population and #st.pop >= 2 then c = breed(ctx, st) end
    if c == nil then c, method = mem:fresh(ctx.rng), "random" end
    if c == nil then break end
    mem:claim(c)
    out[#out + 1] = { config = c, origin = { method = method } }
  end
  return out
end

function S.tell(ctx, results)
  local st = ctx.genetic
  local pop = st.pop
  for _, r in ipairs(results) do
    local config = st.mem:told_config(r)
    local f = st.mem:record(config, r)
    if f < math.huge and (#pop < st.o.population or f < pop[#pop].f) then
      if #pop >= st.o.population then pop[#pop] = nil end
      local i = #pop + 1
      while i > 1 and pop[i - 1].f > f do pop[i] = pop[i - 1]; i = i - 1 end
      pop[i] = { config = config, f = f }
    end
  end
end

return S
