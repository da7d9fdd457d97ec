-- MCGS's portfolio of move generators (strategies/mcgs.lua, --opt portfolio).
--
-- Each free iteration (not a rollout step, not an initial sample, not a
-- forced restart) is given to one of several arms:
--
--   tree   MCGS's own descent (PUCT over the graph, samples, restarts);
--   ei     the surrogate strategy's proposal: the unmeasured configuration
--          with the largest expected improvement under MCGS's value model,
--          among `model_pool` random ones and every one-knob (Hamming)
--          neighbour of the `arm_top` best states;
--   cross  the genetic strategy's child: uniform crossover of two
--          tournament-chosen states among the `arm_population` best,
--          then adjacent or jump mutation;
--   jump   one knob of the best state set to a value at least two steps
--          away (a far move along one axis);
--   sample a uniform random configuration (what the initial samples do).
--
-- Outside the bandit, a stalled search (`stall` evaluations without a new
-- best by `stall_gain`) gives its free iterations (`stall_share` of them) to
-- `stall_move` until it makes progress again: region descents (region_rec
-- below) or the ei arm, chosen by a bandit of their own (adaptive, the
-- default), region descents alone, two-knob moves of the best state
-- (propose_pair) or the ei arm alone.
--
-- The arm is chosen by a discounted UCB bandit on the reward of the
-- evaluations it caused (its own candidate, and the rollout steps that
-- candidate started): the rank quantile of the measured time among the
-- successes so far, raised to `arm_power` (1 for a new best, 0 for a
-- failure), so an arm is paid for proposals near the top and most for new
-- bests. A proposal of a non-tree arm joins the graph as a root edge and is
-- treated like a fresh sample: a rollout refines it when it comes within
-- sample_margin of the best. So the graph, its transpositions and rollouts
-- serve every arm, and MCGS spends its evaluations where they paid lately.
--
-- The search's state (st) is read, apart from the root edges that arm_rec
-- links; this module keeps its own in st.portfolio.
local classic = require("kopt.classic")
local errors = require("kopt.errors")
local model_mod = require("kopt.mcgs_model")
local moves_mod = require("kopt.moves")

local M = {}

local KNOWN = { tree = true, ei = true, cross = true, jump = true, sample = true }

-- "tree ei cross" (spaces or commas) -> list of arm names; nil when the
-- portfolio is only the tree (the plain MCGS).
function M.parse(spec)
  local arms, seen = {}, {}
  for name in tostring(spec):gmatch("[^%s,]+") do
    if not KNOWN[name] then
      errors.usage("--opt portfolio: unknown arm '%s' (tree, ei, cross, jump, sample)", name)
    end
    if not seen[name] then arms[#arms + 1], seen[name] = name, true end
  end
  if #arms == 0 or (#arms == 1 and arms[1] == "tree") then return nil end
  return arms
end

-- The successes so far, slowest first ({ id, t } entries; among equal
-- times the earlier measurement nearer the end, as the faster). Every
-- measured state enters and each insert needs its rank, but only the
-- fastest few are read back, so the order is kept in blocks of at most
-- 2 * BLOCK entries and an insert moves the entries of one block. (One
-- sorted list moved thousands per insert at 10^4 successes, about a fifth
-- of a search iteration's time: measured states are not mostly near the
-- best.) The searches read plain lists of numbers (each block's times, and
-- the last time of every block), not the entries, which lie all over a
-- large heap.
local BLOCK = 64

local function new_ranking() return { n = 0, blocks = {}, times = {}, sizes = {}, lasts = {} } end

-- Inserts item before the first entry not strictly slower; returns the
-- number of entries strictly slower.
local function rank_insert(r, item)
  local blocks, times, sizes, lasts, t = r.blocks, r.times, r.sizes, r.lasts, item.t
  local nb = #blocks
  -- the first block whose fastest (last) entry is not strictly slower
  local lo, hi = 1, nb
  while lo <= hi do
    local mid = (lo + hi) // 2
    if lasts[mid] > t then lo = mid + 1 else hi = mid - 1 end
  end
  local bi = lo
  if bi > nb then  -- slower than everything: the end of the last block
    bi = nb
    if nb == 0 then bi, nb, blocks[1], times[1], sizes[1] = 1, 1, {}, {}, 0 end
  end
  local ts, size = times[bi], sizes[bi]
  lo, hi = 1, size
  while lo <= hi do
    local mid = (lo + hi) // 2
    if ts[mid] > t then lo = mid + 1 else hi = mid - 1 end
  end
  -- the entries of the blocks before bi, counted from the nearer end
  local slower = lo - 1
  if bi <= nb // 2 then
    for i = 1, bi - 1 do slower = slower + sizes[i] end
  else
    slower = slower + r.n
    for i = bi, nb do slower = slower - sizes[i] end
  end
  local b = blocks[bi]
  table.insert(b, lo, item)
  table.insert(ts, lo, t)
  size = size + 1
  r.n = r.n + 1
  if size > 2 * BLOCK then
    table.insert(blocks, bi + 1, table.move(b, BLOCK + 1, size, 1, {}))
    local tail = table.move(ts, BLOCK + 1, size, 1, {})
    table.insert(times, bi + 1, tail)
    table.insert(sizes, bi + 1, size - BLOCK)
    table.insert(lasts, bi + 1, tail[size - BLOCK])
    for i = size, BLOCK + 1, -1 do b[i], ts[i] = nil, nil end
    size = BLOCK
  end
  sizes[bi], lasts[bi] = size, ts[size]
  return slower
end

-- The i-th fastest entry (1: the fastest), or nil.
local function rank_nth(r, i)
  local blocks, sizes = r.blocks, r.sizes
  for bi = #blocks, 1, -1 do
    local size = sizes[bi]
    if i <= size then return blocks[bi][size - i + 1] end
    i = i - size
  end
  return nil
end

M.new_ranking, M.rank_insert, M.rank_nth = new_ranking, rank_insert, rank_nth

local function bandit(arms)
  local b = { arms = arms, n = {}, s = {}, evals = {}, total = 0 }
  for _, a in ipairs(arms) do b.n[a], b.s[a], b.evals[a] = 0, 0, 0 end
  return b
end

-- rollout: true when the rollout steps' choice (the model's or the
-- prior's child) is a bandit of its own
function M.new(ctx, arms, rollout)
  local p = bandit(arms)
  p.top, p.mem, p.rng = new_ranking(), classic.memory(ctx.space), ctx.rng:fork()
  p.free, p.vec = {}, {}
  p.names = {}
  for j, k in ipairs(ctx.space.knobs) do
    p.names[j] = k.name
    if #k.values > 1 then p.free[#p.free + 1] = j end
  end
  if rollout then p.roll = bandit({ "model", "prior" }) end
  return p
end

-- The arm of bandit b for the next pull: an arm not yet paid is tried first
-- (in the listed order), then the largest discounted mean plus
-- arm_c * sqrt(log(total) / n).
local function choose(ctx, b)
  local c = ctx.options.arm_c
  local best, best_score
  for _, a in ipairs(b.arms) do
    local n = b.n[a]
    local score
    if n < 1e-9 then
      score = math.huge
    else
      score = b.s[a] / n + c * math.sqrt(math.log(math.max(b.total, 1) + 1) / n)
    end
    if not best or score > best_score then best, best_score = a, score end
  end
  return best
end

-- The arm for the next free iteration.
function M.choose(ctx, p) return choose(ctx, p) end

-- How the next rollout step chooses its child: "model" or "prior".
function M.rollout_choice(ctx, p) return choose(ctx, p.roll) end

local function pay(ctx, b, arm, reward)
  if not arm or b.n[arm] == nil then return end
  local g = ctx.options.arm_discount
  for _, a in ipairs(b.arms) do b.n[a], b.s[a] = b.n[a] * g, b.s[a] * g end
  b.n[arm], b.s[arm] = b.n[arm] + 1, b.s[arm] + reward
  b.evals[arm] = b.evals[arm] + 1
  b.total = b.total + 1
end

local function nth(p, i) return rank_nth(p.top, i) end
M.nth = nth

-- Pays arm `arm` (and the rollout choice `rarm`, when the evaluation was a
-- rollout step) for one evaluation: t the measured time (nil: failed), id
-- its node. Every state's time is recorded, whoever proposed it.
function M.record(ctx, p, arm, id, t, rarm)
  local reward = 0
  if t then
    local n_before = p.top.n
    local slower = rank_insert(p.top, { id = id, t = t })
    -- quantile among the successes before it: 1 for a new best
    local q = n_before == 0 and 1 or slower / n_before
    reward = q ^ ctx.options.arm_power
  end
  pay(ctx, p, arm, reward)
  if p.stall_bandit then pay(ctx, p.stall_bandit, arm, reward) end
  if p.roll and rarm then pay(ctx, p.roll, rarm, reward) end
end

-- Proposals. idle(c) says whether config c is neither measured nor in flight
-- (and valid); each returns a config or nil.

local function propose_ei(ctx, st, p, idle)
  local m = model_mod.get(ctx, st)
  if not m or p.top.n == 0 then return nil end
  local best = nth(p, 1)
  local stamp = m.fits .. ":" .. best.id
  if p.ranked_for ~= stamp then
    local o = ctx.options
    local pool, inpool = {}, {}
    local function add(c)
      local k = ctx:key(c)
      if not inpool[k] and idle(c, k) then inpool[k], pool[#pool + 1] = true, c end
    end
    for i = 1, math.min(o.arm_top, p.top.n) do
      for _, c in ipairs(p.mem:neighbours(st.cfg[nth(p, i).id], "hamming")) do add(c) end
    end
    for _ = 1, o.model_pool do
      local c = ctx.space:sample(p.rng)
      if not c then break end
      add(c)
    end
    local target = math.log(best.t) - o.arm_xi
    local scored = {}
    for i, c in ipairs(pool) do
      local _, p_ok, mu, sd = model_mod.predict(ctx, m, c)
      scored[i] = { c = c, ei = classic.expected_improvement(target, mu, sd) * p_ok, mu = mu, i = i }
    end
    classic.sort_by_ei(scored)
    p.ranked, p.next, p.ranked_for = scored, 1, stamp
  end
  while p.next <= #p.ranked do
    local c = p.ranked[p.next].c
    p.next = p.next + 1
    if idle(c) then return c end
  end
  return nil
end

local function tournament(p, rng, size)
  local best
  for _ = 1, 3 do
    local i = rng:random(1, size)
    if not best or i < best then best = i end
  end
  return nth(p, best)
end

local function propose_cross(ctx, st, p, idle)
  local size = math.min(ctx.options.arm_population, p.top.n)
  if size < 2 then return nil end
  local rng, mem, knobs = p.rng, p.mem, p.mem.knobs
  for _ = 1, 40 do
    local a = mem:vector(st.cfg[tournament(p, rng, size).id])
    if rng:uniform() < 0.8 then
      local b = mem:vector(st.cfg[tournament(p, rng, size).id])
      for j = 1, #a do if rng:uniform() < 0.5 then a[j] = b[j] end end
    end
    local changed = false
    for _, j in ipairs(p.free) do
      if rng:uniform() < 0.15 then
        local nv = #knobs[j].values
        if rng:uniform() < 0.25 then
          local v = rng:random(1, nv - 1)
          a[j] = v >= a[j] and v + 1 or v
        else
          a[j] = (a[j] == 1 or (a[j] < nv and rng:uniform() < 0.5)) and a[j] + 1 or a[j] - 1
        end
        changed = true
      end
    end
    if not changed and #p.free > 0 then
      local j = p.free[rng:random(1, #p.free)]
      local v = rng:random(1, #knobs[j].values - 1)
      a[j] = v >= a[j] and v + 1 or v
    end
    local c = mem:config(a)
    if ctx.space:is_valid(c) and idle(c) then return c end
  end
  return nil
end

local function propose_jump(ctx, st, p, idle)
  if p.top.n == 0 or #p.free == 0 then return nil end
  local rng, mem, knobs = p.rng, p.mem, p.mem.knobs
  local base = mem:vector(st.cfg[nth(p, 1).id])
  for _ = 1, 20 do
    local j = p.free[rng:random(1, #p.free)]
    local nv, pos = #knobs[j].values, base[j]
    local far = {}
    for v = 1, nv do if math.abs(v - pos) >= 2 then far[#far + 1] = v end end
    if #far > 0 then
      local a = {}
      for i, v in ipairs(base) do a[i] = v end
      a[j] = far[rng:random(1, #far)]
      local c = mem:config(a)
      if ctx.space:is_valid(c) and idle(c) then return c end
    end
  end
  return nil
end

local function propose_sample(ctx, _, p, idle)
  for _ = 1, 20 do
    local c = ctx.space:sample(p.rng)
    if not c then return nil end
    if idle(c) then return c end
  end
  return nil
end

-- Two-knob moves of the best state, for a stalled search (`stall`): a state
-- that no one-knob move improves can still be beaten by changing two knobs
-- together (a method knob whose other setting pays only with a larger tile,
-- say), and the value model, which has not seen the pair, ranks such a move
-- low. So the pairs of knobs are taken in turn (a seeded order, drawn again
-- whenever the best state changes), and from each the move is drawn
-- uniformly among the unmeasured configs that change both knobs and whose
-- pair of values the successes so far hold least often.
local function vector_of(st, p, id)
  local x = p.vec[id]
  if not x then
    x = p.mem:vector(st.cfg[id])
    p.vec[id] = x
  end
  return x
end

local function propose_pair(ctx, st, p, idle)
  if p.top.n == 0 or #p.free < 2 then return nil end
  local mem, knobs, free = p.mem, p.mem.knobs, p.free
  local best = nth(p, 1)
  local sw = p.sweep
  if not sw or sw.id ~= best.id then
    local all = {}
    for a = 1, #free do for b = a + 1, #free do all[#all + 1] = { free[a], free[b] } end end
    local list = {}
    for i, k in ipairs(p.rng:permutation(#all)) do list[i] = all[k] end
    sw = { id = best.id, pairs = list, next = 1, base = vector_of(st, p, best.id) }
    p.sweep = sw
  end
  local base = sw.base
  for _ = 1, #sw.pairs do
    local pr = sw.pairs[sw.next]
    sw.next = sw.next % #sw.pairs + 1
    local i, j = pr[1], pr[2]
    local ni = #knobs[i].values
    local count = {}
    for _, block in ipairs(p.top.blocks) do
      for _, e in ipairs(block) do
        local x = vector_of(st, p, e.id)
        local k = x[i] + ni * x[j]
        count[k] = (count[k] or 0) + 1
      end
    end
    local pick, least, ties = nil, nil, 0
    local x = {}
    for q, v in ipairs(base) do x[q] = v end
    for a = 1, ni do
      if a ~= base[i] then
        for b = 1, #knobs[j].values do
          if b ~= base[j] then
            x[i], x[j] = a, b
            local n = count[a + ni * b] or 0
            if not least or n <= least then
              local c = mem:config(x)
              if ctx.space:is_valid(c) and idle(c) then
                -- uniform among the least held (reservoir sampling)
                if not least or n < least then least, ties = n, 0 end
                ties = ties + 1
                if p.rng:random(1, ties) == 1 then pick = c end
              end
            end
          end
        end
      end
    end
    if pick then return pick end
  end
  return nil
end

-- A proposal joins the graph as a root edge, like a fresh sample: returns
-- the edge and the config's node.
local function root_edge(ctx, st, ops, c, method)
  local id = ops.node_for(ctx, st, c, nil)
  st.restarts = st.restarts + 1
  local e = st.g:link(st.root, "restart:" .. st.restarts, id, ctx.options.restart_prior)
  st.edge_method[e] = method
  st.method_in[id] = st.method_in[id] or method
  return e, id
end

-- Region descents, the other way out of a stall (stall_move=region): the
-- best state's knob set to another value and then held there while a
-- rollout descends over the other knobs, so the best of that region is
-- found, not just its first state. A method knob's other setting is often
-- slower as it stands and fastest once the tiles around it are retuned
-- (pnpoly's `use_method` with a larger tile; the convolution's `use_shmem`
-- with another block shape): a one-knob move measures only the former.
-- First the sweep: the best state's other settings of each knob of at most
-- `stall_sweep` values, measured alone (a rollout may have passed them by
-- because the model, fitted elsewhere, expected them slower). Then the
-- regions, the knobs taking turns (region_order=turns): each knob's most
-- promising value by the model, knobs with the fewest values first (settings
-- of an algorithm rather than steps of a size, ties in a seeded order), then
-- each knob's next value. The list is drawn again when the best state
-- changes, without the regions and sweep settings tried since the last
-- progress (region_memory): a gain smaller than stall_gain, such as a block
-- size one step over, would otherwise start the same descents again from a
-- state that differs by that step. region_rec returns a pending record.
local function region_start(ctx, p, base, name, value)
  local c = moves_mod.changed_config(ctx.space, base, { [name] = value })
  if ctx.space:is_valid(c) then return c end
  -- a constrained space: the valid sample of that region nearest the best
  local best, best_d
  for _ = 1, 64 do
    local x = ctx.space:sample(p.rng)
    if not x then break end
    if x[name] == value then
      local d = 0
      for k, v in pairs(base) do if x[k] ~= v then d = d + 1 end end
      if not best or d < best_d then best, best_d = x, d end
    end
  end
  return best
end

-- The name of the first knob (in the space's order, names) whose value
-- differs between configs a and b (the knob of a one-knob move), or "".
function M.changed_knob(a, b, names)
  for _, k in ipairs(names) do if a[k] ~= b[k] then return k end end
  return ""
end

-- A region descent's candidate children of anchor (edges), or nil: those
-- that keep the held knob, and of them the ones changing a knob tried
-- least from this anchor. The model, fitted mostly outside the region,
-- misjudges which knob to retune there, so the knobs take turns and the
-- model chooses within the knob.
function M.region_children(st, anchor, children, freeze)
  local g, cfg = st.g, st.cfg
  local kept = {}
  for _, e in ipairs(children) do
    if cfg[(g:ends(e))][freeze.name] == freeze.value then kept[#kept + 1] = e end
  end
  if #kept == 0 then return nil end
  local tried = freeze.tried[anchor] or {}
  freeze.tried[anchor] = tried
  local least, knob = nil, {}
  for i, e in ipairs(kept) do
    knob[i] = M.changed_knob(cfg[anchor], cfg[(g:ends(e))], freeze.names)
    local n = tried[knob[i]] or 0
    if not least or n < least then least = n end
  end
  local turn, onward = {}, {}
  for i, e in ipairs(kept) do
    if (tried[knob[i]] or 0) == least then
      turn[#turn + 1] = e
      local dir = freeze.dir and freeze.dir[knob[i]]
      if not dir or dir == M.direction(freeze.space, knob[i], cfg[anchor], cfg[(g:ends(e))]) then onward[#onward + 1] = e end
    end
  end
  -- a knob that gained by a step one way keeps going that way while it can
  return #onward > 0 and onward or turn
end

-- +1 or -1: whether config b has a later or earlier value of knob k than a.
function M.direction(space, k, a, b)
  local pos = space.index[k].pos
  return pos[b[k]] > pos[a[k]] and 1 or -1
end

-- A region descent moved its anchor from state `from` to the faster `to`:
-- the changed knob's direction is kept (region_children).
function M.region_moved(st, freeze, from, to)
  local a, b = st.cfg[from], st.cfg[to]
  local k = M.changed_knob(a, b, freeze.names)
  if k == "" then return end
  freeze.dir = freeze.dir or {}
  freeze.dir[k] = M.direction(freeze.space, k, a, b)
end

-- Counts the try of the child a region descent chose from anchor.
function M.region_tried(st, anchor, e, freeze)
  local tried, k = freeze.tried[anchor], M.changed_knob(st.cfg[anchor], st.cfg[(st.g:ends(e))], freeze.names)
  tried[k] = (tried[k] or 0) + 1
end

-- The start config of region r (drawn once: on a constrained space it is a sample)
local function region_config(ctx, p, base, r)
  if r.start == nil then r.start = region_start(ctx, p, base, r.name, r.value) or false end
  return r.start or nil
end

-- A region's name, "KNOB=VALUE": in the memory of tried regions
-- (region_memory) and on its descents' evaluations (origin.region).
function M.region_key(r) return r.name .. "=" .. tostring(r.value) end

-- The regions of knob k around config base, { name =, value = } each: its
-- other values, in list order (region_order=knob), or (turns) the most
-- promising first: the model's time of the region's start, or (region_score
-- = reach) of the fastest state one step into the region, since a method
-- knob's region pays only once another knob is retuned; by distance in the
-- value list from base's value when there is no model yet.
-- A knob with more values than MAX_REGIONS (a numeric range rather than a
-- choice of method) has its nearest MAX_REGIONS / 2 values and a random rest
-- scored, and a reach looks at the REACH_SPAN nearest values of such a knob
-- and as many random ones: the model's cost then grows with the number of
-- knobs, not with the square of a knob's values.
-- With more than REACH_KNOBS knobs a region is ranked by its start alone:
-- a reach scores a neighbourhood of every other knob for every region of
-- every knob, a cost of the cube of the knob count (300 knobs: 40 s for 100
-- evaluations, in the model).
local MAX_REGIONS, REACH_SPAN, REACH_KNOBS = 64, 16, 32

local function fewer_regions(rng, out)
  if #out <= MAX_REGIONS then return out end
  table.sort(out, function(a, b) if a.d ~= b.d then return a.d < b.d end return a.i < b.i end)
  local keep, rest = table.move(out, 1, MAX_REGIONS // 2, 1, {}), table.move(out, MAX_REGIONS // 2 + 1, #out, 1, {})
  local perm = rng:permutation(#rest)
  for i = 1, MAX_REGIONS - #keep do keep[#keep + 1] = rest[perm[i]] end
  return keep
end

local function region_values(ctx, st, p, base, k)
  local out, here = {}, ctx.space.index[k.name].pos[base[k.name]]
  for i, v in ipairs(k.values) do
    if v ~= base[k.name] then out[#out + 1] = { name = k.name, value = v, d = math.abs(i - here), i = i } end
  end
  if ctx.options.region_order == "knob" then return out end
  out = fewer_regions(p.rng, out)
  local m = model_mod.get(ctx, st)
  for _, r in ipairs(out) do
    r.score = math.huge
    if m then
      local c = region_config(ctx, p, base, r)
      if c then
        r.score = model_mod.score(ctx, m, c)
        if ctx.options.region_score == "reach" and #ctx.space.knobs <= REACH_KNOBS then
          -- the best the region's first step could reach, by the model
          for _, x in ipairs(ctx.space:neighbours(c, "hamming", { hold = r.name, span = REACH_SPAN, rng = p.rng })) do
            r.score = math.min(r.score, model_mod.score(ctx, m, x))
          end
        end
      end
    end
  end
  table.sort(out, function(a, b)
    if a.score ~= b.score then return a.score < b.score end
    if a.d ~= b.d then return a.d < b.d end
    return a.i < b.i
  end)
  return out
end

function M.region_rec(ctx, st, p, ops, sweep_only)
  if p.top.n == 0 or #p.free == 0 then return nil end
  local best, knobs = nth(p, 1), p.mem.knobs
  local rg = p.regions
  if not rg or rg.id ~= best.id then
    local order = p.rng:permutation(#p.free)
    local js = {}
    for i, k in ipairs(order) do js[i] = { j = p.free[k], tie = i } end
    table.sort(js, function(a, b)
      local na, nb = #knobs[a.j].values, #knobs[b.j].values
      if na ~= nb then return na < nb end
      return a.tie < b.tie
    end)
    -- the regions and sweep settings tried since the last progress (a new
    -- best by stall_gain): a smaller gain does not try them again
    if ctx.options.region_memory and (not p.region_done or p.region_done.at ~= st.progress_at) then
      p.region_done = { at = st.progress_at }
    end
    local done = ctx.options.region_memory and p.region_done or {}
    local base, list, sweep = st.cfg[best.id], {}, {}
    local per_knob = {}
    for i, x in ipairs(js) do
      local k = knobs[x.j]
      per_knob[i] = {}
      -- (every region is ranked, the tried ones too: on a constrained space
      -- ranking draws a region's start, and the draws are the search's
      -- random stream)
      for _, r in ipairs(region_values(ctx, st, p, base, k)) do
        local key = M.region_key(r)
        if not done[key] then
          per_knob[i][#per_knob[i] + 1] = r
          if ctx.options.region_order == "knob" then list[#list + 1] = r end
        end
        if #k.values <= ctx.options.stall_sweep and not done["sweep " .. key] then sweep[#sweep + 1] = r end
      end
    end
    if ctx.options.region_order == "turns" then
      -- the knobs take turns: each one's most promising value, then each one's next
      for round = 1, math.huge do
        local any = false
        for _, vs in ipairs(per_knob) do
          if vs[round] then list[#list + 1], any = vs[round], true end
        end
        if not any then break end
      end
    end
    rg = { id = best.id, base = base, list = list, next = 1, sweep = sweep, swept = 1 }
    p.regions = rg
  end
  -- first the sweep: the best state's other settings of its small knobs,
  -- measured alone (a descent only from a new best), so a setting that is
  -- faster as it stands is not left behind the descents of another knob
  while rg.swept <= #rg.sweep do
    local r = rg.sweep[rg.swept]
    rg.swept = rg.swept + 1
    if p.region_done then p.region_done["sweep " .. M.region_key(r)] = true end
    local c = region_config(ctx, p, rg.base, r)
    local id = c and st.g:find(ctx:key(c))
    if c and (not id or ops.idle(st, id)) then
      local e
      e, id = root_edge(ctx, st, ops, c, "region_sweep")
      return { path = { e }, leaf = id, sample = true, strict = true, arm = "region" }
    end
  end
  if sweep_only then return nil end
  while rg.next <= #rg.list do
    local r = rg.list[rg.next]
    rg.next = rg.next + 1
    if p.region_done then p.region_done[M.region_key(r)] = true end
    local c = region_config(ctx, p, rg.base, r)
    if c then
      -- a region descent may miss once per knob it retunes (rollout_misses at least)
      local freeze = { name = r.name, value = r.value, tried = {}, names = p.names, space = ctx.space,
                       misses = math.max(ctx.options.rollout_misses, #p.free - 1) }
      local id = st.g:find(ctx:key(c))
      if id and st.measured[id] then
        -- measured already (a one-knob move of the best, as a rule): the
        -- descent starts from it, if it succeeded (or with region_repair
        -- from its neighbours in the region: mcgs.lua's tell)
        if st.time[id] or ctx.options.region_repair then
          local rec = ops.rollout_step(ctx, st, id, st.path_to[id], 1, st.time[id] and 0 or 1, freeze)
          if rec then
            rec.arm = "region"
            return rec
          end
        end
      elseif not id or ops.idle(st, id) then
        local e
        e, id = root_edge(ctx, st, ops, c, "region")
        return { path = { e }, leaf = id, sample = true, arm = "region", freeze = freeze }
      end
    end
  end
  return nil
end

local PROPOSE = { pair = propose_pair, ei = propose_ei, cross = propose_cross, jump = propose_jump, sample = propose_sample }

-- A config from arm `arm`, or nil (the tree arm, or nothing new to give).
function M.propose(ctx, st, p, arm, idle)
  local f = PROPOSE[arm]
  if not f then return nil end
  return f(ctx, st, p, idle)
end

-- An initial sample spread over the space (init_design=maximin): of
-- `design_pool` uniform samples, the one farthest from the initial samples
-- drawn so far (the least, over them, of the L1 distance of knob-value
-- positions, each knob scaled to [0, 1]), so a few samples still cover
-- every knob's range. st.design keeps the samples drawn; works for listed
-- and constrained spaces alike (the candidates are the space's own samples).
function M.spread_sample(ctx, st)
  local d = st.design
  if not d then
    d = { mem = classic.memory(ctx.space), picked = {} }
    st.design = d
  end
  local knobs = d.mem.knobs
  local best, best_dist
  for _ = 1, ctx.options.design_pool do
    local c = ctx.space:sample(ctx.rng)
    if not c then break end
    local x = d.mem:vector(c)
    local dist = math.huge
    for _, y in ipairs(d.picked) do
      local s = 0
      for j, k in ipairs(knobs) do
        local nv = #k.values
        if nv > 1 then s = s + math.abs(x[j] - y[j]) / (nv - 1) end
      end
      if s < dist then dist = s end
    end
    if not best or dist > best_dist then best, best_dist = { c = c, x = x }, dist end
  end
  if not best then return nil end
  d.picked[#d.picked + 1] = best.x
  return best.c
end

-- A free iteration given to an arm other than the tree: its proposal joins
-- the root like a fresh sample. ops: the search's steps (node_for, idle;
-- strategies/mcgs.lua). Returns the pending record, or nil and the arm
-- (the tree's turn, or the arm had nothing new).
function M.arm_rec(ctx, st, ops)
  local p = st.portfolio
  if not p or st.iterations < ctx.options.init_samples or st.force_restart then return nil end
  -- stalled: no progress (a new best by stall_gain) for `stall` evaluations
  local o = ctx.options
  local stalled = o.stall > 0 and st.progress_at and ctx.evaluations - st.progress_at >= o.stall
  -- (stall_share < 1: the bandit keeps the rest of a stalled search's free
  -- iterations, so the arms that find a way out on their own keep finding it)
  if stalled and o.stall_share < 1 then stalled = p.rng:uniform() < o.stall_share end
  local arm
  local move = o.stall_move
  if stalled and move == "adaptive" then
    -- region descents or the ei arm's proposals, by a bandit of their own
    -- paid like the portfolio's (what each found lately, wherever it ran);
    -- stall_used counts the stalled iterations each move took, for stats()
    p.stall_bandit = p.stall_bandit or bandit({ "region", "ei" })
    p.stall_used = p.stall_used or { region = 0, ei = 0 }
    move = choose(ctx, p.stall_bandit)
  end
  if stalled and move == "region" then
    local rec = M.region_rec(ctx, st, p, ops)
    if rec then
      if p.stall_used then p.stall_used.region = p.stall_used.region + 1 end
      return rec
    end  -- (no region left: the bandit's turn)
  elseif not stalled and o.stall > 0 and (o.stall_move == "region" or o.stall_move == "adaptive") and o.sweep_at > 0 and #st.expensive == 0
         and st.progress_at and ctx.evaluations - st.progress_at >= o.sweep_at then
    -- (only without expensive generators: an early sweep takes the free
    -- iterations from the tree, and the tree is what asks them for moves)
    local rec = M.region_rec(ctx, st, p, ops, true)
    if rec then return rec end
  elseif stalled then
    arm = move  -- "pair", or "ei" (the surrogate strategy's move)
  end
  local strict = arm == "pair"
  arm = arm or M.choose(ctx, p)
  local c = M.propose(ctx, st, p, arm, function(config, key)
    local id = st.g:find(key or ctx:key(config))
    return not id or ops.idle(st, id)
  end)
  if not c then return nil, arm end
  if stalled and p.stall_used and arm == move then p.stall_used[arm] = p.stall_used[arm] + 1 end
  local e, id = root_edge(ctx, st, ops, c, arm)
  -- a two-knob move starts a descent only as a new best (strict): else the
  -- rollouts around the best state it missed would take the budget back
  return { path = { e }, leaf = id, sample = true, arm = arm, strict = strict or nil }
end

-- Counters for stats(): evaluations paid per arm and per rollout choice,
-- and the stall bandit's choices.
function M.stats(p)
  local out = {}
  for _, a in ipairs(p.arms) do out["arm_" .. a .. "_evals"] = p.evals[a] end
  if p.roll then
    for _, a in ipairs(p.roll.arms) do out["rollout_" .. a] = p.roll.evals[a] end
  end
  -- (stall_move=adaptive: how often a stalled iteration went to each move)
  if p.stall_bandit then
    for _, a in ipairs(p.stall_bandit.arms) do out["stall_" .. a] = p.stall_used[a] end
  end
  return out
end

return M
