-- Constraints over intervals (kopt.space_bounds), the sample's fallback walk:
--   * sound: on 400 random small spaces with random constraints (arithmetic,
--     // and %, ^, min/max/abs/floor/ceil/cdiv, and/or/not, c and x or y,
--     negative and float values, a boolean knob), the walk pruned by bounds
--     lists exactly the configs of the plain walk;
--   * useful: 26 flags whose sum is 2 (325 valid of 6.7e7; the plain walk
--     prunes nothing and the sample found none) are sampled in well under a
--     second, and so is a product over 8 knobs with a bound on a sum;
--   * what it cannot follow (strings, device fields, unknown helpers) never
--     prunes.
local T = require("testlib")
local space_mod = require("kopt.space")
local bounds = require("kopt.space_bounds")
local expr = require("kopt.expr")
local rng_mod = require("kopt.rng")

local rng = rng_mod.new(29)
local function pick(t) return t[rng:random(1, #t)] end

-- a random numeric term and condition over the knobs a, b, c, d
local function term(depth)
  if depth <= 0 or rng:uniform() < 0.3 then
    return pick({ "a", "b", "c", "d", "2", "3", "-1", "0.5", "7" })
  end
  local r = rng:random(1, 9)
  if r <= 4 then
    return "(" .. term(depth - 1) .. " " .. pick({ "+", "-", "*", "+", "-", "*", "/", "^" }) .. " " .. term(depth - 1) .. ")"
  elseif r == 5 then
    return "(" .. term(depth - 1) .. " " .. pick({ "//", "%" }) .. " " .. pick({ "2", "3", "4" }) .. ")"
  elseif r == 6 then
    return pick({ "min", "max" }) .. "(" .. term(depth - 1) .. ", " .. term(depth - 1) .. ")"
  elseif r == 7 then
    return pick({ "abs", "floor", "ceil" }) .. "(" .. term(depth - 1) .. ")"
  elseif r == 8 then
    return "cdiv(" .. term(depth - 1) .. ", " .. pick({ "2", "3", "b" }) .. ")"
  end
  return "(" .. "flag and " .. term(depth - 1) .. " or " .. term(depth - 1) .. ")"
end
local function condition(depth)
  local r = rng:random(1, 6)
  if depth > 0 and r == 1 then return "(" .. condition(depth - 1) .. " and " .. condition(depth - 1) .. ")" end
  if depth > 0 and r == 2 then return "(" .. condition(depth - 1) .. " or " .. condition(depth - 1) .. ")" end
  if depth > 0 and r == 3 then return "not (" .. condition(depth - 1) .. ")" end
  if r == 4 then return pick({ "flag", "not flag", "flag == true" }) end
  return term(2) .. " " .. pick({ "<", "<=", ">", ">=", "==", "~=" }) .. " " .. term(2)
end

local function keys(s, bounded)
  local out = {}
  local ok, err = pcall(s.walk, s, function(c) out[#out + 1] = s:key(c) end, nil, bounded)
  if not ok then return nil, err end
  table.sort(out)
  return table.concat(out, ";"), #out
end

local compared, differ, pruned_some = 0, 0, 0
for case = 1, 400 do
  local knobs = {
    { name = "a", values = { -2, 0, 1, 3 } },
    { name = "flag", values = { true, false } },
    { name = "b", values = { 1, 2, 4, 8, 16 } },
    { name = "c", values = { 0.5, 1.5, 2, 5 } },
    { name = "d", values = { -3, 7, 9 } },
  }
  local cons = {}
  for i = 1, rng:random(1, 3) do cons[i] = condition(2) end
  local ok_new, s = pcall(space_mod.new, { knobs = knobs, constraints = cons })
  if ok_new then
    local plain, n = keys(s)
    if plain then
      local s2 = space_mod.new({ knobs = knobs, constraints = cons })
      local with, m = keys(s2, true)
      compared = compared + 1
      if with ~= plain then
        differ = differ + 1
        if differ <= 3 then
          print(string.format("case %d: %d configs, with bounds %s: %s", case, n, tostring(m), table.concat(cons, " | ")))
        end
      end
      if n < 240 then pruned_some = pruned_some + 1 end
    end
  end
end
T.check(compared >= 300, "random spaces compared: %d", compared)
T.eq(differ, 0, "random spaces where the bounded walk lists other configs than the plain one")
T.check(pruned_some >= 100, "random spaces whose constraints remove configs: %d", pruned_some)
print(string.format("bounds: %d random spaces compared, %d with configs removed", compared, pruned_some))

-- 26 flags, two of them set
do
  local knobs, terms = {}, {}
  for i = 1, 26 do knobs[i], terms[i] = { name = "f" .. i, values = { 0, 1 } }, "f" .. i end
  local s = space_mod.new({ knobs = knobs, constraints = { table.concat(terms, " + ") .. " == 2" } })
  local t0 = os.clock()
  local c = s:sample(rng_mod.new(1))
  local took = os.clock() - t0
  T.check(c ~= nil and s:is_valid(c), "26 flags summing to 2: a valid sample")
  T.eq(s.list_cache and #s.list_cache, 325, "26 flags summing to 2: every valid config listed")
  T.check(took < 2, "26 flags summing to 2: sampled in %.2f s", took)
  print(string.format("bounds: 26 flags summing to 2 sampled in %.3f s", took))
end

-- a product held to a value and a bound on a sum, 8 knobs of 128 values
do
  local knobs = {}
  for i = 1, 8 do
    local v = {}
    for j = 1, 128 do v[j] = j end
    knobs[i] = { name = "k" .. i, values = v }
  end
  local s = space_mod.new({ knobs = knobs, constraints = { "k1 * k2 == 256", "k3 + k4 + k5 + k6 + k7 + k8 <= 7" } })
  local t0 = os.clock()
  local c = s:sample(rng_mod.new(2))
  T.check(c ~= nil and s:is_valid(c), "product and sum: a valid sample")
  -- k1 * k2 == 256 with both in 1..128: (2,128) (4,64) (8,32) (16,16) (32,8) (64,4) (128,2) = 7;
  -- six knobs of at least 1 summing to at most 7: 7 ways (all ones, or one of them 2)
  T.eq(s.list_cache and #s.list_cache, 49, "product and sum: every valid config listed")
  T.check(os.clock() - t0 < 2, "product and sum: sampled in %.2f s", os.clock() - t0)
end

-- what it cannot follow is "maybe"
do
  local function holds(text, lookup)
    local e = assert(expr.compile(text))
    local f = bounds.compile(e)
    return f == nil or f(lookup)
  end
  local open = function(name) if name == "x" then return 1, 8 end end
  T.check(holds("device.sm_count > 1000 and x > 100", open), "a device field is not followed")
  T.check(holds("mystery(x) == 3", open), "an unknown helper is not followed")
  T.check(holds("s == 'abc'", open), "a string is not followed")
  T.check(not holds("x > 8", open), "x in [1, 8] is never above 8")
  T.check(not holds("x * x == 100", open), "x * x is at most 64")
  T.check(holds("x * x == 49", open), "49 lies in the hull (a gap in the values is never used)")
  T.check(not holds("x // 2 == 5", open), "x // 2 is at most 4")
  T.check(not holds("(x > 4 and 1 or 2) > 2", open), "the choice is 1 or 2")
end

-- integers that wrap: 2^31 * 2^31 * c is negative for every c in 1..4 (the
-- product wraps), which a range of the ends' products would not hold
do
  local knobs = { { name = "a", values = { 1, 2 ^ 31 // 1 } }, { name = "b", values = { 1, 2 ^ 31 // 1 } },
                  { name = "c", values = { 1, 2, 3, 4 } } }
  local function count(bounded)
    local s = space_mod.new({ knobs = knobs, constraints = { "a * b * c < 0" } })
    local n = 0
    s:walk(function() n = n + 1 end, nil, bounded)
    return n
  end
  T.eq(count(true), count(false), "a wrapping product: the bounded walk keeps what the plain one does")
end
return T.done()
