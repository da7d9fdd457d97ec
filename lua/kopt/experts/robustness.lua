-- Robustness expert: conservative, hardware-friendly choices. Tile and block
-- sizes that are multiples of the tensor-core and warp granules, two or three
-- pipeline stages, values away from the extremes of their ranges, and an
-- occasional bolder jump so the search does not sit in one basin.
local X = require("kopt.experts")

local E = { name = "robustness", temperature = 0.3,
            summary = "tensor-core-friendly, conservative, balanced choices" }

E.persona = "You favour robust choices that compile, stay correct and perform well across sizes."
E.focus = "robustness. Prefer conservative, hardware-friendly configurations: tile sizes that are multiples " ..
  "of 16 (tensor-core fragments) and of the warp size, thread counts that are multiples of 32, 2 to 3 " ..
  "pipeline stages, balanced tile shapes, nothing at the extreme of its range unless the data say so. " ..
  "Avoid configurations near resource limits."

function E.prompt(view) return X.messages(E, view) end
function E.parse(value, view) return X.parse(value, view, E.name) end

local GRANULE = { tile_m = 16, tile_n = 16, tile_k = 16, tile = 16, block = 32 }

local function pow2(v) return v >= 1 and v == math.floor(v) and (math.floor(v) & (math.floor(v) - 1)) == 0 end

-- The allowed value nearest to v, other than v, that is a multiple of g and,
-- when there is one, a power of two; ties go to the smaller (cheaper) value.
local function aligned(k, v, g)
  local best, dist, best_pow2
  for _, x in ipairs(k.values) do
    if type(x) == "number" and x ~= v and math.tointeger(x) and x % g == 0 then
      local p2, d = pow2(x), math.abs(x - v)
      local better = not best or (p2 and not best_pow2) or (p2 == best_pow2 and (d < dist or (d == dist and x < best)))
      if better then best, dist, best_pow2 = x, d, p2 end
    end
  end
  return best
end

local function set(moves, name, value, method)
  moves[#moves + 1] = { changes = { [name] = value }, method = method }
end

function E.heuristic(view, rng)
  local moves = {}
  local c = view.config
  for _, k in ipairs(view.knobs) do
    local v, g = c[k.name], GRANULE[k.family]
    if g and type(v) == "number" and (v % g ~= 0 or not pow2(v)) then
      local x = aligned(k, v, g)
      if x then set(moves, k.name, x, "tensor_core_align") end
    end
  end
  for _, k in ipairs(X.knobs_in(view, { "stages" })) do
    local v = c[k.name]
    if type(v) == "number" and (v < 2 or v > 3) then
      for _, want in ipairs({ 2, 3 }) do
        if X.pos(k, want) then set(moves, k.name, want, "conservative") break end
      end
    end
  end
  for _, k in ipairs(X.knobs_in(view, { "warps" })) do
    if c[k.name] ~= 4 and X.pos(k, 4) then set(moves, k.name, 4, "conservative") end
  end
  for _, k in ipairs(X.knobs_in(view, { "padding" })) do
    if #k.values == 2 and c[k.name] == k.values[1] then set(moves, k.name, k.values[2], "conservative") end
  end
  -- Balanced tiles: the larger of the M and N tiles down to the smaller.
  local tm, tn = X.knobs_in(view, { "tile_m" })[1], X.knobs_in(view, { "tile_n" })[1]
  if tm and tn and type(c[tm.name]) == "number" and type(c[tn.name]) == "number" and c[tm.name] ~= c[tn.name] then
    local big, small = tm, tn
    if c[tn.name] > c[tm.name] then big, small = tn, tm end
    if X.pos(big, c[small.name]) then set(moves, big.name, c[small.name], "rebalance") end
  end
  -- Knobs at an end of their range step one towards the middle, the most
  -- extreme first.
  local ends = {}
  for _, k in ipairs(view.knobs) do
    local p = X.pos(k, view.config[k.name])
    if p and #k.values >= 3 then
      local mid = (#k.values + 1) / 2
      if math.abs(p - mid) >= 1 then
        ends[#ends + 1] = { k = k, dist = math.abs(p - mid), dir = p > mid and -1 or 1 }
      end
    end
  end
  table.sort(ends, function(a, b)
    if a.dist ~= b.dist then return a.dist > b.dist end
    return a.k.name < b.k.name
  end)
  for _, e in ipairs(ends) do
    local mv = X.step(view, e.k, e.dir, "rebalance")
    if mv then moves[#moves + 1] = mv end
  end
  -- Bolder jumps: one knob to a random other value each, so the search can
  -- leave a basin the step-wise experts circle in.
  for _ = 1, 4 do
    local k = view.knobs[rng:random(1, #view.knobs)]
    if #k.values > 1 then
      local x = k.values[rng:random(1, #k.values)]
      if x ~= c[k.name] then set(moves, k.name, x, "conservative") end
    end
  end
  return moves
end

return E
