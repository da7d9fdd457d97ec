-- Seeded random numbers for strategies: xoshiro256** on Lua's 64-bit
-- integers, one independent generator per run, so a run is reproducible from
-- its logged seed whatever else calls math.random.
local permutation, gammas = require("kopt.graph").permutation, require("kopt.graph").gammas

local M = {}
M.__index = M

local function splitmix(state)
  state = state + 0x9e3779b97f4a7c15
  local z = state
  z = (z ~ (z >> 30)) * 0xbf58476d1ce4e5b9
  z = (z ~ (z >> 27)) * 0x94d049bb133111eb
  return state, z ~ (z >> 31)
end

function M.new(seed)
  local s, st = {}, math.tointeger(seed) or 0
  for i = 1, 4 do st, s[i] = splitmix(st) end
  return setmetatable({ s = s, seed = seed }, M)
end

-- (rotl inlined: MCGS's Dirichlet noise draws several per proposed move)
function M:next64()
  local s = self.s
  local s1, s2, s3, s4 = s[1], s[2], s[3], s[4]
  local r = s2 * 5
  local result = ((r << 7) | (r >> 57)) * 9
  local t = s2 << 17
  s3 = s3 ~ s1
  s4 = s4 ~ s2
  s2 = s2 ~ s3
  s1 = s1 ~ s4
  s3 = s3 ~ t
  s[1], s[2], s[3], s[4] = s1, s2, s3, (s4 << 45) | (s4 >> 19)
  return result
end

-- Uniform float in [0, 1) from the top 53 bits.
function M:uniform()
  return (self:next64() >> 11) * (1.0 / 9007199254740992.0)
end

-- Uniform integer in [m, n] (or [1, m] with one argument), without modulo bias.
-- (a second argument given as nil, ctx.sizes.typo, is no one-argument call:
-- it read as [1, m])
function M:random(...)
  local m, n = ...
  if select("#", ...) < 2 then m, n = 1, m end
  local im, in_ = math.tointeger(m), math.tointeger(n)
  if not im or not in_ then
    error(string.format("rng:random(m, n): the bounds must be whole numbers, got %s and %s", tostring(m), tostring(n)), 2)
  end
  m, n = im, in_
  if n < m then error(string.format("rng:random(m, n): empty interval [%d, %d]", m, n), 2) end
  local span = n - m -- as an unsigned number, exact even where it wraps
  if span >= 0 and span < (-1 >> 1) then
    local range = span + 1
    local limit = (-1 >> 1) // range * range
    while true do
      local x = self:next64() >> 1
      if x < limit then return m + x % range end
    end
  end
  -- a span of 2^63 or more: 64-bit draws, kept when within it (half or more are)
  while true do
    local x = self:next64()
    if not math.ult(span, x) then return m + x end
  end
end

function M:normal()
  local u1, u2 = self:uniform(), self:uniform()
  if u1 < 1e-300 then u1 = 1e-300 end
  return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
end

function M:choice(list)
  assert(#list > 0, "rng:choice: empty list")
  return list[self:random(1, #list)]
end

-- Shuffles in place (Fisher-Yates: the draws of random(1, i) for
-- i = #list down to 2) and returns the list. The swaps depend only on the
-- indices, so the list is read through self:permutation(#list), the same
-- draws in C.
function M:shuffle(list)
  local n = #list
  if n < 2 then return list end
  local order, copy = permutation(self.s, n), table.move(list, 1, n, 1, {})
  for i = 1, n do list[i] = copy[order[i]] end
  return list
end

-- The list {1, ..., n} shuffled by Fisher-Yates, in C
-- (kopt.graph.permutation): MCGS draws one per expansion.
function M:permutation(n)
  return permutation(self.s, n)
end

-- n Gamma(a) variates (a > 0; Marsaglia-Tsang, boosted for a < 1, from
-- self:normal and self:uniform) and their sum, in C (kopt.graph.gammas):
-- MCGS draws one per move for its Dirichlet noise.
function M:gammas(n, a)
  return gammas(self.s, n, a)
end

-- An independent generator derived from this one, e.g. for Dirichlet noise.
function M:fork()
  return M.new(self:next64())
end

return M
