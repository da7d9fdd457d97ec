-- Helpers shared by the classic strategies (anneal, genetic, surrogate): a
-- memory of the configurations already proposed, fitness of a result, knob
-- value indices, and "a configuration nobody has asked for yet".
--
-- A strategy never proposes a key twice: the engine would answer a repeat
-- from its cache without spending budget, and a strategy that keeps asking
-- for cached configurations would never finish. When no new configuration is
-- left the helpers return nil and the strategy answers {} (done).
local errors = require("kopt.errors")
local gp = require("kopt.gp")

local M = {}

-- Objective to minimise: the time of a successful result, +inf otherwise
-- (every failure kind is equally useless as a kernel).
function M.fitness(result)
  local t = result and (result.cost or result.time_ms)  -- (cost: the spec's objective as a time; kopt.engine)
  if result and result.status == "ok" and type(t) == "number" then return t end
  return math.huge
end

local Memory = {}
Memory.__index = Memory

-- A memory over ctx.space. `seen[key]` is true once proposed, `fit[key]` the
-- fitness once told; `order` lists told entries in arrival order so every
-- iteration over them is deterministic.
function M.memory(space)
  local knobs = space.knobs
  local index = {}
  for j, k in ipairs(knobs) do
    index[j] = {}
    for i, v in ipairs(k.values) do index[j][v] = i end
  end
  return setmetatable({ space = space, knobs = knobs, index = index, seen = {}, fit = {},
                        order = {}, queue = {}, pending = 0, unseen = nil,
                        nb_cache = {} }, Memory)
end

function Memory:key(config) return self.space:key(config) end
function Memory:is_seen(config) return self.seen[self.space:key(config)] ~= nil end

-- Marks a configuration as proposed; returns false if it already was.
function Memory:claim(config)
  local k = self.space:key(config)
  if self.seen[k] then return false end
  self.seen[k] = true
  self.pending = self.pending + 1
  self.queue[#self.queue + 1] = config
  return true
end

-- The configuration a told result belongs to. The engine tells results in
-- the order of the candidates, so claimed configurations form a FIFO.
function Memory:told_config(result)
  local c = table.remove(self.queue, 1)
  return result.config or c
end

-- Records a told result; returns its fitness. Results the engine answered
-- from its cache (cached = true) are recorded the same way.
function Memory:record(config, result)
  local k = self.space:key(config)
  local f = M.fitness(result)
  if self.fit[k] == nil then
    self.order[#self.order + 1] = { config = config, f = f }
    if self.seen[k] then self.pending = self.pending - 1 end
  end
  self.seen[k], self.fit[k] = true, f
  return f
end

-- The fitness of a told configuration, or nil.
function Memory:fitness_of(config) return self.fit[self.space:key(config)] end

-- Ordinal vector of a configuration: the index of each knob's value.
function Memory:vector(config)
  local x = {}
  for j, k in ipairs(self.knobs) do x[j] = self.index[j][config[k.name]] or 1 end
  return x
end

function Memory:config(x)
  local c = {}
  for j, k in ipairs(self.knobs) do c[k.name] = k.values[x[j]] end
  return c
end

-- The n best told entries ({config, f}), best first; ties keep arrival order.
function Memory:best(n)
  local list = {}
  for i, e in ipairs(self.order) do
    if e.f < math.huge then list[#list + 1] = { config = e.config, f = e.f, i = i } end
  end
  table.sort(list, function(a, b) if a.f ~= b.f then return a.f < b.f end return a.i < b.i end)
  for i = #list, (n or #list) + 1, -1 do list[i] = nil end
  return list
end

-- Enumeration is the fallback once sampling keeps hitting seen
-- configurations; spaces larger than this are never enumerated.
M.ENUMERATE_LIMIT = 200000

-- A valid configuration not proposed yet, uniformly at random, or nil when
-- none is left (or none could be found in a space too large to enumerate;
-- a recorded space is a list, so it is always enumerated, however sparse
-- its configurations are in the product of its knobs' values).
-- Sampling draws knob values itself rather than calling space:sample, so the
-- sequence depends only on the seed and the knob order, never on the order in
-- which a recording happened to list its configurations.
function Memory:fresh(rng)
  local knobs, space = self.knobs, self.space
  for _ = 1, 64 do
    local c = {}
    for _, k in ipairs(knobs) do c[k.name] = k.values[rng:random(1, #k.values)] end
    if not self.seen[space:key(c)] and space:is_valid(c) then return c end
  end
  if self.unseen == nil and space.list == nil and space:size_raw() > M.ENUMERATE_LIMIT then
    -- too large to list: the space's own sampler finds the rare valid
    -- configurations of a constrained space
    for _ = 1, 64 do
      local c = space:sample(rng)
      if c == nil then return nil end
      if not self.seen[space:key(c)] then return c end
    end
    return nil
  end
  if self.unseen == nil then
    local list, keys = {}, {}
    for i, c in ipairs(space:enumerate()) do list[i] = c; keys[c] = space:key(c) end
    table.sort(list, function(a, b) return keys[a] < keys[b] end)
    self.unseen = list
  end
  -- Pick uniformly among the rest, swap-removing seen entries on the way.
  local list = self.unseen
  while #list > 0 do
    local i = rng:random(1, #list)
    local c = list[i]
    if not self.seen[space:key(c)] then return c end
    list[i] = list[#list]
    list[#list] = nil
  end
  return nil
end

-- The space's neighbours of `config`, remembered (walks come back often).
-- The list is shared: callers must not change it.
function Memory:neighbours(config, kind)
  kind = kind or "adjacent"
  local k = kind .. ":" .. self.space:key(config)
  local nb = self.nb_cache[k]
  if nb == nil then
    nb = self.space:neighbours(config, kind)
    self.nb_cache[k] = nb
  end
  return nb
end

-- Neighbours of `config` not proposed yet, in the space's order.
function Memory:fresh_neighbours(config, kind)
  local out = {}
  for _, c in ipairs(self:neighbours(config, kind)) do
    if not self.seen[self.space:key(c)] then out[#out + 1] = c end
  end
  return out
end

-- A random forest of regression trees (the surrogate strategy's model, also
-- MCGS's value model). X holds ordinal vectors (Memory:vector), y the
-- targets; o: trees, features (fraction of the free knobs a split may
-- choose from), min_leaf, max_depth, free (indices of knobs with more than
-- one value), knobs. Each tree grows on a bootstrap sample; splits are
-- "knob index <= v" by variance reduction. Flat arrays, node 1 the root.
local function build_tree(o, rng, X, y, idx)
  local free, knobs = o.free, o.knobs
  local T = { f = {}, t = {}, l = {}, r = {}, v = {} }
  local mtry = math.max(1, math.ceil(#free * o.features))
  local function grow(rows, depth)
    local node = #T.v + 1
    local n, sum = #rows, 0
    for _, i in ipairs(rows) do sum = sum + y[i] end
    T.v[node] = sum / n
    if n < 2 * o.min_leaf or depth >= o.max_depth then return node end
    local cand = {}
    for i = 1, #free do cand[i] = free[i] end
    local best_score, bf, bt = sum * sum / n + 1e-12, nil, nil
    for c = 1, math.min(mtry, #cand) do
      local pick = rng:random(c, #cand)
      cand[c], cand[pick] = cand[pick], cand[c]
      local j = cand[c]
      local nv = #knobs[j].values
      -- the thresholds worth scoring are the values these rows hold, in
      -- order: all of them when the knob has few values, else only those
      -- present (a knob of thousands of values would cost that many steps
      -- per node; the splits found are the same)
      local cnt, s, order = {}, {}, nil
      if nv > 2 * n then
        order = {}
        for _, i in ipairs(rows) do
          local v = X[i][j]
          if not cnt[v] then cnt[v], s[v], order[#order + 1] = 0, 0, v end
          cnt[v], s[v] = cnt[v] + 1, s[v] + y[i]
        end
        table.sort(order)
      else
        for v = 1, nv do cnt[v], s[v] = 0, 0 end
        for _, i in ipairs(rows) do
          local v = X[i][j]
          cnt[v], s[v] = cnt[v] + 1, s[v] + y[i]
        end
      end
      local nl, sl = 0, 0
      for q = 1, order and #order or nv - 1 do
        local t = order and order[q] or q
        nl, sl = nl + cnt[t], sl + s[t]
        local nr = n - nl
        if nl >= o.min_leaf and nr >= o.min_leaf and cnt[t] > 0 then
          local score = sl * sl / nl + (sum - sl) ^ 2 / nr
          if score > best_score then best_score, bf, bt = score, j, t end
        end
      end
    end
    if not bf then return node end
    local L, R = {}, {}
    for _, i in ipairs(rows) do
      if X[i][bf] <= bt then L[#L + 1] = i else R[#R + 1] = i end
    end
    T.f[node], T.t[node] = bf, bt
    T.l[node] = grow(L, depth + 1)
    T.r[node] = grow(R, depth + 1)
    return node
  end
  grow(idx, 0)
  return T
end

function M.forest(rng, X, y, o)
  local forest = {}
  for t = 1, o.trees do
    local idx = {}
    for i = 1, #X do idx[i] = rng:random(1, #X) end
    forest[t] = build_tree(o, rng, X, y, idx)
  end
  return forest
end

-- A Gaussian process (kopt.gp) over the same vectors, the free knobs'
-- value indices scaled to [0,1]: classic.predict reads it like a forest.
-- The grids: length scales in that unit cube (neighbouring values of an
-- 8-value knob are 1/7 apart) and noise variances of the standardised
-- targets; then, with o.ard, a length scale per knob. The choice is made
-- again by marginal likelihood each time the data has doubled since the
-- last one (on the subset below, past GP_MAX_POINTS), kept in `cache` (a table the caller keeps between fits); in
-- between, the last choice is refitted.
local GP_SCALES = { 0.05, 0.1, 0.2, 0.4, 0.8, 1.6 }
local GP_NOISES = { 1e-4, 1e-2, 0.1 }

-- The points a GP is fitted on, at most GP_MAX_POINTS of them (its cost
-- grows with the cube of their number): half the best targets, the rest the
-- most recent of the others (where the search is now).
local GP_MAX_POINTS = 256

local function gp_subset(X, y)
  local n = #X
  if n <= GP_MAX_POINTS then return X, y end
  local order = {}
  for i = 1, n do order[i] = i end
  table.sort(order, function(a, b) if y[a] ~= y[b] then return y[a] < y[b] end return a < b end)
  local keep = {}
  for r = 1, GP_MAX_POINTS // 2 do keep[order[r]] = true end
  local left = GP_MAX_POINTS - GP_MAX_POINTS // 2
  for i = n, 1, -1 do
    if left == 0 then break end
    if not keep[i] then keep[i], left = true, left - 1 end
  end
  local Xs, ys = {}, {}
  for i = 1, n do
    if keep[i] then Xs[#Xs + 1], ys[#ys + 1] = X[i], y[i] end
  end
  return Xs, ys
end

function M.gp(cache, X, y, o)
  local total = #X
  X, y = gp_subset(X, y)
  local opts = { cols = o.free, levels = {}, scales = GP_SCALES, noises = GP_NOISES, ard = o.ard }
  for i, j in ipairs(o.free) do opts.levels[i] = #o.knobs[j].values end
  local model, err
  if cache.choice and total < 2 * cache.choice.n then
    opts.fixed = cache.choice
    model = gp.fit(X, y, opts)
    -- (the last choice no longer factorises: choose again over the grids)
    opts.fixed = nil
  end
  if not model then
    model, err = gp.fit(X, y, opts)
    if not model then error("value model: " .. err, 0) end
    local scales, noise = model:params()
    cache.choice = { n = total, scales = scales, noise = noise }
  end
  return { gp = model }
end

-- Whether a GP can model the free knobs `free` (1 to kopt.gp.MAX_COLUMNS).
function M.gp_fits(free)
  return #free >= 1 and #free <= gp.MAX_COLUMNS
end

-- Mean and spread of the trees' answers for the ordinal vector x (or of a
-- Gaussian process's posterior, for a model from M.gp; or of the mixture
-- of the two, for a model from M.gp whose field `with` holds a forest).
function M.predict(forest, x)
  if forest.gp then
    local mu, sd = forest.gp:predict(x)
    if not forest.with then return mu, sd end
    -- a mixture of the GP and a forest, equal weights: the mean of the two
    -- means, and the spread of the mixture (each one's and their gap)
    local mf, sf = M.predict(forest.with, x)
    local gap = (mu - mf) / 2
    return (mu + mf) / 2, math.sqrt((sd * sd + sf * sf) / 2 + gap * gap)
  end
  local s1, s2 = 0, 0
  for _, T in ipairs(forest) do
    local node = 1
    while T.f[node] do
      if x[T.f[node]] <= T.t[node] then node = T.l[node] else node = T.r[node] end
    end
    local p = T.v[node]
    s1, s2 = s1 + p, s2 + p * p
  end
  local mu = s1 / #forest
  return mu, math.sqrt(math.max(0, s2 / #forest - mu * mu))
end

local function normal_cdf(z)
  -- Abramowitz and Stegun 7.1.26 for erf, |error| < 1.5e-7.
  local x = math.abs(z) / math.sqrt(2)
  local t = 1 / (1 + 0.3275911 * x)
  local erf = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
                   + 0.254829592) * t * math.exp(-x * x)
  return z >= 0 and 0.5 * (1 + erf) or 0.5 * (1 - erf)
end

-- Expected improvement below `target` of a normal (mu, sd) (minimisation).
function M.expected_improvement(target, mu, sd)
  local gain = target - mu
  if sd < 1e-9 then return math.max(gain, 0) end
  local z = gain / sd
  return gain * normal_cdf(z) + sd * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
end

-- Sorts candidates scored as { ei =, mu =, i = } best first: the larger
-- expected improvement, then the faster predicted time, then the earlier
-- candidate, so the order never depends on the sort's stability.
local function ei_before(a, b)
  if a.ei ~= b.ei then return a.ei > b.ei end
  if a.mu ~= b.mu then return a.mu < b.mu end
  return a.i < b.i
end

function M.sort_by_ei(scored)
  table.sort(scored, ei_before)
  return scored
end

-- Options with defaults applied; ctx.options may hold strings from --opt.
function M.options(S, ctx)
  local o = {}
  local given = ctx.options or {}
  for name, decl in pairs(S.options) do
    local v = given[name]
    if v == nil then v = decl.default end
    if type(decl.default) == "number" and tonumber(v) == nil then
      errors.usage("%s: option %s expects a number, got '%s'", S.name, name, tostring(v))
    end
    if type(decl.default) == "number" then v = tonumber(v) end
    o[name] = v
  end
  return o
end

return M
