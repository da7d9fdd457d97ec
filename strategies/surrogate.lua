-- Model-based search: a random-forest surrogate of log(time) (or, with
-- model=gp, a Gaussian process) with expected improvement.
--
-- After `init` random configurations, a forest of regression trees is fitted
-- on the measured ones (features: the index of each knob's value, so splits
-- are "knob <= value"; failures count as `failure_penalty` log-units slower
-- than the slowest success). The mean and the spread of the trees' answers
-- give expected improvement over a candidate pool: `pool` random unmeasured
-- configurations plus every unmeasured neighbour of the `local_top` best (a
-- knob of many values lends `span` near and `span` random ones).
-- The pool ranked by EI is measured in order; the forest is refitted once the
-- data grew by `refit` (a fraction) since the last fit, or when the ranking
-- is used up.
local classic = require("kopt.classic")

local S = {
  name = "surrogate",
  description = "random-forest model of log(time), expected improvement over random and neighbouring configs",
  options = {
    init = { default = 10, min = 0, help = "random configurations measured before the first model" },
    model = { default = "forest", choices = { "forest", "gp", "gp_iso" },
      help = "the surrogate: a random forest (forest), or a Gaussian process over the knobs' value indices scaled to [0,1] with a length scale per knob (gp) or one for every knob (gp_iso; kopt.classic.gp); past 64 varying knobs the forest, said in trace.md" },
    trees = { default = 16, min = 1, max = 1000, help = "trees in the forest" },
    features = { default = 0.5, gt = 0, max = 1, help = "fraction of the knobs each split may choose from" },
    min_leaf = { default = 2, min = 1, help = "fewest samples in a leaf" },
    max_depth = { default = 12, min = 1, help = "deepest split level" },
    pool = { default = 64, min = 0, max = 1000000, help = "random unmeasured configurations scored per fit" },
    local_top = { default = 5, min = 0, max = 100000, help = "the unmeasured neighbours of this many best configurations join the pool" },
    neighbourhood = { default = "hamming", choices = { "adjacent", "hamming" },
      help = "neighbours that join the pool: adjacent (one knob one step) or hamming (one knob any value)" },
    span = { default = 32, min = 1, max = 1000000,
      help = "hamming: a knob of more than 2*span+1 values gives the span/2 values either side and span others at random, not every value (the pool's size then does not grow with a knob's)" },
    explore = { default = 0.0, min = 0, max = 1,
      help = "probability of measuring a random configuration instead of the best-ranked one" },
    refit = { default = 0.05, min = 0,
      help = "refit once the measured set grew by this fraction since the last fit (1 new at least)" },
    xi = { default = 0.05, min = 0, help = "EI margin in log-time units; larger explores more" },
    failure_penalty = { default = 1.0, help = "log-time units added to the slowest success to stand for a failure" },
  },
}

function S.init(ctx)
  local mem = classic.memory(ctx.space)
  local free = {}
  for j, k in ipairs(ctx.space.knobs) do if #k.values > 1 then free[#free + 1] = j end end
  ctx.surrogate = { o = classic.options(S, ctx), mem = mem, free = free, X = {}, f = {},
                    ranked = {}, fitted_at = 0, ok = 0, gp_cache = {} }
end

local function fit_and_rank(ctx, st)
  local o, mem, rng = st.o, st.mem, ctx.rng
  local X, y, worst, best = st.X, {}, -math.huge, math.huge
  for i, f in ipairs(st.f) do
    if f < math.huge then
      y[i] = math.log(f)
      worst, best = math.max(worst, y[i]), math.min(best, y[i])
    end
  end
  for i, f in ipairs(st.f) do if f == math.huge then y[i] = worst + o.failure_penalty end end
  local fo = { trees = o.trees, features = o.features, min_leaf = o.min_leaf, max_depth = o.max_depth,
               free = st.free, knobs = mem.knobs }
  local forest
  if o.model ~= "forest" and classic.gp_fits(st.free) then
    fo.ard = o.model == "gp"
    forest = classic.gp(st.gp_cache, X, y, fo)
  else
    if o.model ~= "forest" and not st.gp_noted then
      -- (said once: the runs of model=gp and of the forest were the same, unsaid)
      st.gp_noted = true
      ctx:log("model=%s: %d knobs vary, past the Gaussian process's %d columns: the forest models this space",
              o.model, #st.free, require("kopt.gp").MAX_COLUMNS)
    end
    forest = classic.forest(rng, X, y, fo)
  end
  -- Candidate pool: random fresh configurations plus fresh neighbours of the best.
  local pool, inpool = {}, {}
  local function add(c)
    local k = mem:key(c)
    if not inpool[k] and not mem:is_seen(c) then inpool[k] = true; pool[#pool + 1] = c end
  end
  for _, b in ipairs(mem:best(o.local_top)) do
    -- (every value of a knob of 50,000 was scored at each refit: the
    -- run's time went into the pool, not the search)
    local near = o.neighbourhood == "hamming" and ctx.space:neighbours(b.config, "hamming", { span = o.span, rng = rng })
      or mem:fresh_neighbours(b.config, o.neighbourhood)
    for _, c in ipairs(near) do add(c) end
  end
  for _ = 1, o.pool do
    local c = mem:fresh(rng)
    if c == nil then break end
    add(c)
  end
  local scored = {}
  for i, c in ipairs(pool) do
    local mu, sd = classic.predict(forest, mem:vector(c))
    local ei = classic.expected_improvement(best - o.xi, mu, sd)
    scored[i] = { c = c, ei = ei, mu = mu, i = i }
  end
  classic.sort_by_ei(scored)
  st.ranked, st.next = scored, 1
  st.fitted_at = #st.X
end

function S.ask(ctx, n)
  local st, mem, out = ctx.surrogate, ctx.surrogate.mem, {}
  local o = st.o
  while #out < n do
    local c, method = nil, "surrogate"
    if #st.X >= o.init and st.ok >= 2 and not (o.explore > 0 and ctx.rng:uniform() < o.explore) then
      local grown = #st.X - st.fitted_at
      if st.fitted_at == 0 or grown >= math.max(1, math.floor(st.fitted_at * o.refit)) or st.next > #st.ranked then
        if grown > 0 or st.fitted_at == 0 then fit_and_rank(ctx, st) end
      end
      while st.next <= #st.ranked and c == nil do
        local cand = st.ranked[st.next].c
        st.next = st.next + 1
        if not mem:is_seen(cand) then c = cand end
      end
    end
    if c == nil then c, method = mem:fresh(ctx.rng), "random" end
    if c == nil then break end
    mem:claim(c)
    out[#out + 1] = { config = c, origin = { method = method } }
  end
  return out
end

function S.tell(ctx, results)
  local st = ctx.surrogate
  for _, r in ipairs(results) do
    local config = st.mem:told_config(r)
    local f = st.mem:record(config, r)
    st.X[#st.X + 1] = st.mem:vector(config)
    st.f[#st.f + 1] = f
    if f < math.huge then st.ok = st.ok + 1 end
  end
end

return S
