-- The rule move generator: a canonical vocabulary of tuning moves mapped onto
-- whatever knobs a space has.
--
-- Each knob is put in a family, first by its spec tags, then by its name:
--   tile_m tile_n tile_k tile   tile sizes (BLOCK_M, TILE_N, tile_size_x, ...)
--   block                       threads per block (block_size_x, BLOCK_SIZE, WORK_GROUP_SIZE_Y)
--   warps                       warps per block (WARPS, num_warps)
--   stages                      pipeline depth (STAGES, num_stages, PIPELINE)
--   vector                      vector width of loads (VEC, VECTOR_SIZE)
--   async                       asynchronous copies (ASYNC, CP_ASYNC, TMA)
--   unroll                      unroll factors (UNROLL, loop_unroll_factor)
--   shmem cache padding layout  on/off or layout choices (use_shmem, read_only, use_padding, USE_SOA)
--   split                       split-K / split counts
--   knob                        anything else (the plain neighbour fallback)
-- An axis suffix (_x/_y/_z) is kept: block_size_y gives "block_y_up".
--
-- Moves, for every knob: one step up and down its value list ("<fam>_up",
-- "<fam>_down"), two steps, and for long value lists a quarter-range jump;
-- a knob with two values is toggled ("toggle_<fam>"); a knob whose values are
-- not numbers steps to each neighbour ("<fam>_next"/"_prev"). Priors favour
-- one-step moves and the families that matter most for GPU kernels; they are
-- plain data below so a user can change them (require("kopt.moves.rules").weights).
local symptoms = require("kopt.symptoms")

local R = { name = "rules" }

-- Family patterns over the upper-cased knob name; first match wins.
R.families = {
  { "async", { "ASYNC", "CP_ASYNC", "TMA" } },
  { "stages", { "STAGE", "PIPELINE", "NUM_BUFFERS", "PREFETCH" } },
  { "warps", { "WARPS" } },
  { "unroll", { "UNROLL" } },
  { "vector", { "VECTOR", "VEC", "_WIDTH" } },
  { "split", { "SPLIT" } },
  { "shmem", { "SHMEM", "SHARED", "SMEM" } },
  { "cache", { "READ_ONLY", "CMEM", "CONSTANT", "CACHE", "TEXTURE", "LDG" } },
  { "padding", { "PADDING", "PAD" } },
  { "layout", { "SOA", "SWIZZLE", "LAYOUT", "TRANSPOSE", "GROUP_M", "RASTER" } },
  { "tile_m", { "BLOCK_M", "TILE_M", "BM" } },
  { "tile_n", { "BLOCK_N", "TILE_N", "BN" } },
  { "tile_k", { "BLOCK_K", "TILE_K", "BK" } },
  { "tile", { "TILE", "ITERATIONS", "PER_THREAD", "WORK_PER", "COARSEN", "ITEMS" } },
  { "block", { "BLOCK_SIZE", "BLOCK", "THREADS", "WORK_GROUP", "BLOCKDIM" } },
}

-- Tags that name a family directly (spec knobs may carry them).
R.tag_families = {
  tile_m = "tile_m", tile_n = "tile_n", tile_k = "tile_k", tile = "tile", block = "block",
  threads = "block", warps = "warps", stages = "stages", pipeline = "stages", vector = "vector",
  vec = "vector", async = "async", unroll = "unroll", shmem = "shmem", cache = "cache",
  padding = "padding", layout = "layout", split = "split", split_k = "split",
}

-- Relative prior of a family's moves (1 = neutral). All neutral by default:
-- on the recorded spaces, favouring tile and block moves over toggles made
-- MCGS slower to find optima that hinge on a toggle (A4000 convolution).
R.weights = {
  tile_m = 1.0, tile_n = 1.0, tile_k = 1.0, tile = 1.0, block = 1.0, warps = 1.0, stages = 1.0,
  vector = 1.0, async = 1.0, unroll = 1.0, shmem = 1.0, cache = 1.0, padding = 1.0, layout = 1.0,
  split = 1.0, knob = 1.0,
}

-- Scale priors by the state's symptoms (set false for uniform family priors).
R.use_symptoms = true

-- Relative prior by step size.
R.step_weight = { [1] = 1.0, [2] = 0.45, jump = 0.2, double = 0.6, set = 0.08, set_short = 0.6, toggle = 1.0 }
-- value lists up to this long get every value as a move at set_short
R.short_list = 6
-- value lists up to this long get every value as a set move; a longer one
-- gets this many spread over it, and those at doubling distances
R.set_all = 256

local function axis_of(name)
  local a = name:lower():match("_([xyz])$")
  return a
end

-- The family and method stem of a knob: ("block", "block_x") for block_size_x.
function R.classify(knob)
  -- the most specific tag wins: "tile_m" over "tile" on a knob tagged both
  local fam, fam_len = nil, 0
  for _, t in ipairs(knob.tags or {}) do
    local tag = tostring(t):lower()
    local f = R.tag_families[tag]
    if f and #tag > fam_len then fam, fam_len = f, #tag end
  end
  local up = knob.name:upper()
  if not fam then
    for _, f in ipairs(R.families) do
      for _, pat in ipairs(f[2]) do
        if up:find(pat, 1, true) then fam = f[1] break end
      end
      if fam then break end
    end
  end
  fam = fam or "knob"
  local stem = fam
  local axis = axis_of(knob.name)
  if axis and not fam:match("_[mnk]$") then stem = fam .. "_" .. axis end
  if fam == "knob" then stem = knob.name:lower() end
  return fam, stem
end

local function all_numbers(values)
  for _, v in ipairs(values) do if type(v) ~= "number" then return false end end
  return true
end

-- Per-space classification, cached on the space table, with each knob's
-- moves by value position (filled as positions are met): the weights above
-- are read when a space is first used.
local function knob_info(space)
  if space._rule_info then return space._rule_info end
  local info = {}
  for i, k in ipairs(space.knobs) do
    local fam, stem = R.classify(k)
    info[i] = { knob = k, fam = fam, stem = stem, numeric = all_numbers(k.values),
                weight = R.weights[fam] or R.weights.knob, moves = {} }
  end
  space._rule_info = info
  return info
end
R.knob_info = knob_info

-- The moves of knob inf.knob at value position pos, as { value, method,
-- prior } in proposal order. A pure function of the knob, its position and
-- the weights, so it is computed once per (knob, position) and space.
local function knob_moves(inf, pos)
  local k = inf.knob
  local n = #k.values
  local list = {}
  local function add(v, method, w) list[#list + 1] = { v, method, w } end
  if n == 2 then
    add(k.values[3 - pos], "toggle_" .. inf.stem, inf.weight * R.step_weight.toggle)
    return list
  end
  local up, down = inf.stem .. "_up", inf.stem .. "_down"
  if not inf.numeric then up, down = inf.stem .. "_next", inf.stem .. "_prev" end
  -- value lists are declared in order; for numbers "up" means larger
  local dir = 1
  if inf.numeric and k.values[n] < k.values[1] then dir = -1 end
  local steps = { { 1, R.step_weight[1] }, { 2, R.step_weight[2] } }
  if n >= 8 then steps[#steps + 1] = { math.max(3, n // 4), R.step_weight.jump } end
  local covered = { [pos] = true }
  for _, s in ipairs(steps) do
    local d, w = s[1], s[2]
    if pos + d <= n then
      add(k.values[pos + d], dir > 0 and up or down, inf.weight * w)
      covered[pos + d] = true
    end
    if pos - d >= 1 then
      add(k.values[pos - d], dir > 0 and down or up, inf.weight * w)
      covered[pos - d] = true
    end
  end
  -- doubling and halving (to the nearest allowed value): the natural
  -- jump for tile and block sizes whose lists step linearly
  local cur = k.values[pos]
  if inf.numeric and type(cur) == "number" and cur > 0 then
    for _, f in ipairs({ 2, 0.5 }) do
      local want, best, bd = cur * f, nil, math.huge
      for j, v in ipairs(k.values) do
        local dist = math.abs(v - want)
        if dist < bd then best, bd = j, dist end
      end
      if best and not covered[best] and bd <= 0.25 * want then
        add(k.values[best], (f > 1) == (dir > 0) and up or down, inf.weight * R.step_weight.double)
        covered[best] = true
      end
    end
  end
  -- any other value, with a small prior: reachable once a node is
  -- visited often enough for widening to admit it
  -- (short lists are often choices of method rather than sizes, so
  -- every value of them is a plausible move)
  local w_set = n <= R.short_list and R.step_weight.set_short or R.step_weight.set
  if n <= R.set_all then
    for j = 1, n do
      if not covered[j] then add(k.values[j], inf.stem .. "_set", inf.weight * w_set) end
    end
  else
    -- a long list (thousands of values): every value a move would make
    -- every state thousands of edges (MCGS's expansions and these cached
    -- lists grew with the square of it); positions at doubling distances
    -- either way, and evenly spread ones, reach any part of it
    local function set_at(j)
      if j >= 1 and j <= n and not covered[j] then
        add(k.values[j], inf.stem .. "_set", inf.weight * w_set)
        covered[j] = true
      end
    end
    local d = 4
    while d < n do
      set_at(pos + d)
      set_at(pos - d)
      d = d * 2
    end
    for q = 0, R.set_all - 1 do set_at(1 + (q * (n - 1)) // (R.set_all - 1)) end
  end
  return list
end

-- The moves are shared between calls (cached per knob and value position):
-- read them, copy one to change it. The second result says so (true unless
-- symptoms weighed the priors, which makes new tables).
function R.propose(ctx, state)
  local space = ctx.space
  -- Profile-guided priors: with counters on the state, a move that addresses
  -- its bottleneck weighs more (kopt.symptoms.move_bias); neutral without.
  -- The state's result is the one given, else the engine's measurement of it.
  local res = state.result
  if res == nil and R.use_symptoms and ctx.lookup then res = ctx:lookup(state.config) end
  local syms = R.use_symptoms and res and res.symptoms
  if syms and #syms == 0 then syms = nil end
  local moves, infos = {}, knob_info(space)
  for ii = 1, #infos do
    local inf = infos[ii]
    local k = inf.knob
    local pos = #k.values > 1 and space.index[k.name].pos[state.config[k.name]]
    if pos then
      local list = inf.moves[pos]
      if not list then
        list = {}
        for i, x in ipairs(knob_moves(inf, pos)) do
          list[i] = { changes = { [k.name] = x[1] }, method = x[2], prior = x[3] }
        end
        inf.moves[pos] = list
      end
      if syms then
        for _, m in ipairs(list) do
          local v = m.changes[k.name]
          moves[#moves + 1] = { changes = m.changes, method = m.method,
                                prior = m.prior * symptoms.move_bias(syms, { method = m.method, knob = k.name,
                                                                             from = state.config[k.name], to = v }) }
        end
      else
        table.move(list, 1, #list, #moves + 1, moves)
      end
    end
  end
  return moves, syms == nil
end

return R
