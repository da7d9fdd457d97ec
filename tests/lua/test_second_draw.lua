-- Check 2 reads a second draw of every generated input (docs/TRUST.md,
-- step 4): Spec:args(config, set_seed) draws each generator that is not
-- `fixed` again from a seed mixed of the spec's and the input set's, chains
-- the second draws through ctx.inputs, and gives r.data_b only where that
-- draw differs. A generator that ignores ctx.rng (a structure, not a draw)
-- gives no second file; the cuda backend names the file in a<i>.file_b.
local T = require("testlib")
local spec_mod = require("kopt.spec")
local hostdata = require("kopt.hostdata")
local dir = os.getenv("KOPT_TEST_TMP") or os.tmpname() .. ".d"
os.execute("mkdir -p '" .. dir .. "'")

local function write_spec(fixed)
  local spec = {
    name = "second_draw", kernel = { source = "k.cu", entry = "k" },
    problem = { N = 64 }, knobs = { { name = "B", values = { 32, 64 } } },
    launch = { grid = { "N / B", 1, 1 }, block = { "B", 1, 1 } },
    args = {
      { name = "perm", type = "i32", shape = { "N" },
        init = { generate = "return function(ctx) local p = ctx.rng:permutation(ctx.n) for i = 1, #p do p[i] = p[i] - 1 end return p end",
                 seed = 3, fixed = fixed } },
      -- chained: reads perm (its own draw's perm in each draw)
      { name = "inv", type = "i32", shape = { "N" },
        init = { generate = "return function(ctx) local o = {} for i, v in ipairs(ctx.inputs.perm) do o[v + 1] = i - 1 end return o end" } },
      -- a structure: the same in every draw
      { name = "tr", type = "i32", shape = { "N" },
        init = { generate = "return function(ctx) local o = {} for i = 1, ctx.n do o[i] = (i * 7) % ctx.n end return o end" } },
      { name = "y", type = "f32", shape = { "N" }, output = true },
    },
  }
  local f = assert(io.open(dir .. "/k.cu", "w"))
  f:write('extern "C" __global__ void k(const int *perm, const int *inv, const int *tr, float *y) {}\n')
  f:close()
  local path = dir .. "/spec" .. (fixed and "_fixed" or "") .. ".json"
  f = assert(io.open(path, "w"))
  f:write(require("kopt.json").encode(spec))
  f:close()
  return spec_mod.load(path)
end

local spec = write_spec(nil)
local plain = spec:args({ B = 32 })
T.check(plain[1].data ~= nil and plain[1].data_b == nil, "%s", "without a set seed there is one draw")

local a1 = spec:args({ B = 32 }, 11)
T.eq(a1[1].data, plain[1].data, "the first draw is the spec's seed's, as before")
T.check(a1[1].data_b ~= nil and a1[1].data_b ~= a1[1].data, "%s", "perm: a second draw that differs")
local p = hostdata.unpack(a1[1].data_b, "i32")
local seen, n = {}, 0
for _, v in ipairs(p) do if not seen[v] and v >= 0 and v < 64 then seen[v] = true; n = n + 1 end end
T.eq(n, 64, "the second draw is the generator's output (a permutation of 0..63)")
T.check(a1[2].data_b ~= nil, "%s", "inv: follows perm's second draw")
local inv = hostdata.unpack(a1[2].data_b or a1[2].data, "i32")
local ok = true
for i, v in ipairs(p) do ok = ok and inv[v + 1] == i - 1 end
T.check(ok, "%s", "inv's second draw inverts perm's second draw (ctx.inputs chained per draw)")
T.check(a1[3].data_b == nil, "%s", "tr: a generator that ignores ctx.rng gives no second file")

local a2 = spec:args({ B = 64 }, 11)
T.eq(a2[1].data_b, a1[1].data_b, "the same set seed gives the same second draw (a knob the generator ignores)")
local a3 = spec:args({ B = 32 }, 12)
T.check(a3[1].data_b ~= a1[1].data_b and a3[1].data_b ~= a3[1].data, "%s", "another set seed, another draw")
T.check(a3[1].seed_b ~= 3 and a3[1].seed_b ~= a1[1].seed_b, "%s", "the second draw's seed is neither the spec's nor the last set's")

local fixed = write_spec(true)
local f1 = fixed:args({ B = 32 }, 11)
T.check(f1[1].data_b == nil and f1[2].data_b == nil, "%s", "perm fixed: its draw is the contract, and inv follows it")

-- the request names the second file for the worker
local cuda = require("kopt.backends.cuda")
local be = cuda._offline(spec, { seed = 11 })
be.data_dir = dir
local msg, why = be:request(1, { B = 32 }, "x.cubin", "k")
T.check(msg ~= nil, "the request: %s", tostring(why))
msg = msg or {}
T.check(msg["a1.file_b"] and msg["a1.file_b"] ~= msg["a1.file"], "%s", "a1.file_b: the second draw's file")
T.check(msg["a3.file_b"] == nil, "%s", "a3: no file_b")
local fb = io.open(msg["a1.file_b"] or "", "rb")
T.eq(fb and fb:read("a"), a1[1].data_b, "the file holds the second draw")
if fb then fb:close() end

-- a spec with "fixed" on a generator that is not a boolean
local bad = io.open(dir .. "/bad.json", "w")
bad:write('{"name":"b","kernel":{"source":"k.cu","entry":"k"},"knobs":[{"name":"B","values":[32]}],'
  .. '"launch":{"grid":[1,1,1],"block":["B",1,1]},"args":[{"name":"perm","type":"i32","shape":[4],'
  .. '"init":{"generate":"return function(ctx) return {0,1,2,3} end","fixed":"yes"}},'
  .. '{"name":"y","type":"f32","shape":[4],"output":true}]}')
bad:close()
local okb, err = pcall(spec_mod.load, dir .. "/bad.json")
T.check(not okb and tostring(err):find("args%[1%]%.init%.fixed: expected true or false"), "fixed 'yes': %s", tostring(err))
os.execute("rm -rf '" .. dir .. "'")
return T.done()
