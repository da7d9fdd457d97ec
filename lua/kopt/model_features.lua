-- The columns a value model's trees split on (kopt.classic's forest). Each
-- knob gives its ordinal: the index of its value in the knob's list. With
-- kind "bits", a knob of positive integers also gives two derived columns:
-- whether the value is a power of two, and its count of trailing zero bits
-- (16 and 48 share 4, 32 and 96 share 5). A GPU kernel's speed often hinges
-- on such alignment (warp multiples, bank widths, vector loads), and an
-- ordinal split cannot isolate the fast values of a block size that
-- alternate with slow ones (64, 128, 256 fast; 80, 96, 112 slow). A derived
-- column is kept only where it orders the values differently from the list
-- (for 1, 2, 4, 8 it would repeat the ordinal).
local classic = require("kopt.classic")

local M = {}

local function is_positive_integer(v)
  return type(v) == "number" and v >= 1 and v == math.floor(v) and v < 2 ^ 53
end

local function trailing_zeros(v)
  local n = 0
  while v % 2 == 0 do v, n = v // 2, n + 1 end
  return n
end

local function is_power_of_two(v)
  while v % 2 == 0 do v = v // 2 end
  return v == 1 and 1 or 0
end

local function monotone(xs)
  local up, down = true, true
  for i = 2, #xs do
    if xs[i] < xs[i - 1] then up = false end
    if xs[i] > xs[i - 1] then down = false end
  end
  return up or down
end

-- Levels 1..n for the distinct numbers of xs, in ascending order: the
-- column's ordinal, as the trees split "column <= t".
local function ranks(xs)
  local distinct, seen = {}, {}
  for _, x in ipairs(xs) do
    if not seen[x] then seen[x], distinct[#distinct + 1] = true, x end
  end
  table.sort(distinct)
  local rank = {}
  for i, x in ipairs(distinct) do rank[x] = i end
  local out = {}
  for i, x in ipairs(xs) do out[i] = rank[x] end
  return out, #distinct
end

local DERIVED = { { name = "pow2", f = is_power_of_two }, { name = "tz", f = trailing_zeros } }

-- An encoder over `space`'s knobs: enc:vector(config) the columns of a
-- config, enc.knobs (each column's { name =, values = } with as many values
-- as the column has levels) and enc.free (the columns with more than one
-- level) as kopt.classic.forest takes them. kind: "ordinal" (the default)
-- or "bits".
function M.encoder(space, kind)
  kind = kind or "ordinal"
  local mem, knobs, cols, free = classic.memory(space), space.knobs, {}, {}
  for j, k in ipairs(knobs) do
    cols[j] = k
    if #k.values > 1 then free[#free + 1] = j end
  end
  local derived = {}
  if kind == "bits" then
    for j, k in ipairs(knobs) do
      local integers = #k.values >= 3
      for _, v in ipairs(k.values) do integers = integers and is_positive_integer(v) end
      if integers then
        for _, d in ipairs(DERIVED) do
          local xs = {}
          for i, v in ipairs(k.values) do xs[i] = d.f(math.tointeger(v)) end
          local level, n = ranks(xs)
          if n > 1 and not monotone(xs) then
            local values = {}
            for i = 1, n do values[i] = i end
            cols[#cols + 1] = { name = k.name .. ":" .. d.name, values = values }
            free[#free + 1] = #cols
            derived[#derived + 1] = { j = j, level = level }
          end
        end
      end
    end
  elseif kind ~= "ordinal" then
    error("model features: unknown kind '" .. tostring(kind) .. "' (ordinal, bits)", 2)
  end
  local nk = #knobs
  local enc = { knobs = cols, free = free }
  function enc.vector(_, config)
    local x = mem:vector(config)
    for c, d in ipairs(derived) do x[nk + c] = d.level[x[d.j]] end
    return x
  end
  return enc
end

return M
