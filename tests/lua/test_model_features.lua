-- The columns of the value model (kopt.model_features, MCGS --opt
-- model_features):
--  1. which knobs get derived columns: a block size of 16..256 in steps of
--     16 gets both (power of two, trailing zeros); 1, 2, 4, 8 gets none (they
--     would repeat the ordinal); flags, floats, non-positive values and
--     strings get none; "ordinal" adds nothing; an unknown kind is an error;
--  2. the vector of a config: the ordinal first, then the derived levels;
--  3. what the columns buy: on a comb (powers of two fast, the values between
--     them slow), a forest fitted without the value 256 predicts it fast with
--     the bits and, from the ordinal alone, no faster than its slow
--     neighbour 240;
--  4. an MCGS run with model_features=bits is deterministic given the seed
--     and differs from the ordinal run on a space with such a knob.
local T = require("testlib")
local classic = require("kopt.classic")
local features = require("kopt.model_features")
local rng_mod = require("kopt.rng")

local function range(a, b, step)
  local out = {}
  for v = a, b, step do out[#out + 1] = v end
  return out
end

-- 1. which columns
local space = { knobs = {
  { name = "bsx", values = range(16, 256, 16) },
  { name = "pow", values = { 1, 2, 4, 8 } },
  { name = "flag", values = { 0, 1 } },
  { name = "frac", values = { 0.5, 1.5, 2.5 } },
  { name = "signed", values = { -4, 2, 6 } },
  { name = "name", values = { "a", "b", "c" } },
  { name = "tile", values = { 1, 2, 3, 4 } },
} }
local enc = features.encoder(space, "bits")
local names = {}
for j = #space.knobs + 1, #enc.knobs do names[#names + 1] = enc.knobs[j].name end
T.eq(table.concat(names, " "), "bsx:pow2 bsx:tz tile:pow2 tile:tz", "derived columns")
T.eq(#enc.free, #space.knobs + 4, "every column with two levels or more is free")
T.eq(#enc.knobs[#space.knobs + 2].values, 5, "bsx:tz levels (4, 5, 6, 7, 8 trailing zeros)")
local plain = features.encoder(space, "ordinal")
T.eq(#plain.knobs, #space.knobs, "ordinal: no derived columns")
T.check(not pcall(features.encoder, space, "binary"), "an unknown kind is refused")

-- 2. vectors
local x = enc:vector({ bsx = 96, pow = 4, flag = 1, frac = 2.5, signed = 6, name = "b", tile = 3 })
T.eq(table.concat(x, ","), "6,3,2,3,3,2,3,1,2,1,1", "vector of bsx=96 (not a power of two, 5 zeros), tile=3")
x = enc:vector({ bsx = 256.0, pow = 1, flag = 0, frac = 0.5, signed = -4, name = "a", tile = 4 })
T.eq(table.concat(x, ","), "16,1,1,1,1,1,4,2,5,2,3", "vector of bsx=256 (a float, as JSON gives it)")

-- 3. a comb: only powers of two are fast; 256 never measured
local comb = { knobs = { { name = "bsx", values = range(16, 256, 16) }, { name = "b", values = { 1, 2, 3 } } } }
local function fit_predict(kind)
  local e = features.encoder(comb, kind)
  local X, y = {}, {}
  for _, v in ipairs(comb.knobs[1].values) do
    for b = 1, 3 do
      if v ~= 256 then
        local fast = v == 16 or v == 32 or v == 64 or v == 128
        X[#X + 1] = e:vector({ bsx = v, b = b })
        y[#y + 1] = (fast and 0 or 1.2) + 0.1 * b
      end
    end
  end
  local f = classic.forest(rng_mod.new(5), X, y, { trees = 12, features = 0.5, min_leaf = 2, max_depth = 12,
                                                   free = e.free, knobs = e.knobs })
  return (classic.predict(f, e:vector({ bsx = 256, b = 1 }))), (classic.predict(f, e:vector({ bsx = 240, b = 1 })))
end
local b256, b240 = fit_predict("bits")
T.check(b256 < 0.5 and b240 > 0.9, "bits: 256 predicted fast (%.3f), 240 slow (%.3f)", b256, b240)
local o256, o240 = fit_predict("ordinal")
T.check(o256 > 0.9 and math.abs(o256 - o240) < 0.05, "ordinal: 256 (%.3f) no faster than 240 (%.3f)", o256, o240)

-- 4. MCGS runs
local tmp = T.tmpdir("model_features")
local conv = "tests/data/convolution_A4000.json"
T.option_changes_run(tmp, conv, 120, 2, "--opt model_features=bits", "model_features=bits")

return T.done()
