-- A generator's array (`"init": {"generate": ...}`) is cached per config by
-- what it read: the sizes and knobs (ctx.sizes), its shape (ctx.shape) and
-- the other inputs' arrays (ctx.inputs). Keyed by the element count and the
-- sizes alone, a generator of b = -a (a scaled by a knob) and one of row
-- indices (a shape set by a knob) gave a config another config's array.
-- A generator that reads an input ctx.inputs does not hold is told why: one
-- generated later in args, or one drawn from a distribution (it was told to
-- move an input that no order brings into ctx.inputs).
local T = require("testlib")
local json = require("kopt.json")
local hostdata = require("kopt.hostdata")
local spec_mod = require("kopt.spec")

local tmp = T.tmpdir("gen-cache")
T.write(tmp .. "/k.cu", 'extern "C" __global__ void k(const float* a, const float* b, float* y, int n) {\n' ..
                        '  int i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = a[i] + b[i];\n}\n')
local function spec_with(knob, a_shape, a_gen, b_gen)
  json.write_file(tmp .. "/s.json", {
    name = "gen", kernel = { source = "k.cu", entry = "k" }, problem = { n = 8 },
    knobs = { { name = "BLOCK", values = { 32, 64 } }, { name = knob, values = { 2, 4 }, define = false } },
    launch = { grid = { "cdiv(n, BLOCK)" }, block = { "BLOCK" } },
    args = { { name = "a", type = "f32", shape = a_shape, init = { generate = a_gen } },
             { name = "b", type = "f32", shape = { "n" }, init = b_gen and { generate = b_gen } or nil },
             { name = "y", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } },
  })
  return spec_mod.load(tmp .. "/s.json")
end
local function arrays(spec, config)
  local args = spec:args(config)
  return hostdata.unpack(args[1].data, "f32"), args[2].data and hostdata.unpack(args[2].data, "f32")
end

-- b = -a, a scaled by the knob S
local s = spec_with("S", { "n" },
  "return function(ctx) local t = {} for i = 1, ctx.n do t[i] = i * ctx.sizes.S end return t end",
  "return function(ctx) local t = {} for i = 1, ctx.n do t[i] = -ctx.inputs.a[i] end return t end")
for _, v in ipairs({ 2, 4, 2 }) do
  local a, b = arrays(s, { BLOCK = 32, S = v })
  T.eq(b[3], -a[3], "S=" .. v .. ": b is -a")
  T.eq(a[3], 3 * v, "S=" .. v .. ": a is scaled by S")
end

-- row indices of a shape set by the knob ROWS
s = spec_with("ROWS", { "ROWS", "n // ROWS" },
  "return function(ctx) local t = {} for i = 1, ctx.n do t[i] = (i - 1) // ctx.shape[2] end return t end")
for _, v in ipairs({ 2, 4 }) do
  local a = arrays(s, { BLOCK = 32, ROWS = v })
  T.eq(a[8], v - 1, "ROWS=" .. v .. ": the last element is in the last row")
end
-- a knob the generator ignores still shares its array (one generation)
local a1 = s:args({ BLOCK = 32, ROWS = 2 })[1].data
local a2 = s:args({ BLOCK = 64, ROWS = 2 })[1].data
T.eq(a1, a2, "BLOCK (not read) shares the array")

-- a generator gets copies of string, math and table: setting string.format
-- there does not change kopt's own (its messages read "15")
s = spec_with("S", { "n" },
  "return function(ctx) string.format = function() return 'hijacked' end " ..
  "math.floor = nil local t = {} for i = 1, ctx.n do t[i] = i end return t end")
s:args({ BLOCK = 32, S = 2 })
T.eq(string.format("%d", 7), "7", "kopt's string.format after a generator set its own")
T.check(math.floor ~= nil, "kopt's math.floor after a generator removed its own")
-- generated values a type cannot hold as given: a fraction for an integer
-- type was rounded (2.4 -> 2), a value past a float type's largest became
-- infinity, without a word; and a later generator read ctx.inputs as given
-- (2.4), not as the kernel reads it
do
  local function gen_values(ty, values_lua)
    local g = hostdata.load_function("return function(ctx) return " .. values_lua .. " end", "gen")
    return hostdata.generate({ fn = g, seed = 1 }, { count = 4, shape = { 4 }, type = ty }, {}, {})
  end
  local b, err = gen_values("i32", "{ 0, 1.5, 2, 3 }")
  T.check(not b and err:find("value 2 (1.5) is not an integer, and the argument is i32", 1, true), "i32 of 1.5: %s", tostring(err))
  b, err = gen_values("f16", "{ 0, 1, 70000, 3 }")
  T.check(not b and err:find("value 3 (70000) is past the largest finite f16", 1, true), "f16 of 70000: %s", tostring(err))
  T.check(gen_values("f16", "{ 0, 1, 65510, 3 }") ~= nil, "f16 of 65510 rounds to 65504, a finite value")
  b, err = gen_values("f32", "{ 0, 1, 1e39, 3 }")
  T.check(not b and err:find("past the largest finite f32", 1, true), "f32 of 1e39: %s", tostring(err))
  local b2, _, values = gen_values("f32", "{ 2.4, 1, 2, 3 }")
  b = b2
  T.check(b and values and values[1] == hostdata.unpack(b, "f32")[1] and values[1] ~= 2.4,
          "ctx.inputs holds the f32 the kernel reads: %s", tostring(values and values[1]))
  b, err = gen_values("i32", "{ 0, 1, 2, 3.0 }")
  T.check(b ~= nil, "an integer written as a float (3.0) is an integer: %s", tostring(err))
end

-- a generator that reads an input generated after it: the message said its
-- place twice and not why ("args[1].init.generate: args[1].init.generate:1:
-- attempt to get length of a nil value (field 'b')")
do
  local sp = spec_with("S", { "n" }, "return function(ctx) local t = {} for i = 1, #ctx.inputs.b do t[i] = 1 end return t end",
                       "return function(ctx) local t = {} for i = 1, ctx.n do t[i] = i end return t end")
  local okg, gerr = pcall(sp.args, sp, { BLOCK = 32, S = 2 })
  local msg = require("kopt.errors").describe(gerr)
  T.check(not okg and msg:find("args[1].init.generate:1:", 1, true) and
          not msg:find("args[1].init.generate: args[1]", 1, true) and
          msg:find("b comes later in args (move it before a)", 1, true), "an input read before it is made: %s", msg)
end

-- a generator that reads an input drawn from a distribution: no order of
-- the arguments puts it in ctx.inputs
do
  local sp = spec_with("S", { "n" }, "return function(ctx) local t = {} for i = 1, #ctx.inputs.b do t[i] = 1 end return t end")
  local okg, gerr = pcall(sp.args, sp, { BLOCK = 32, S = 2 })
  local msg = require("kopt.errors").describe(gerr)
  T.check(not okg and msg:find("b has init 'normal', not a generator", 1, true) and
          not msg:find("comes later", 1, true), "an input that is not generated: %s", msg)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
