-- Spec values that read as something else, through `kopt compile`; each
-- compiled "ok" (or ran) before its check:
-- * a constraint that is a number past the first configs checked ("BS <= 512
--   or BS % 64": true to Lua for every BS past 512);
-- * true/false as a launch dimension ("n > BS": one block);
-- * `kopt compile` said "ok" for a block's z past 64, a grid that is not made
--   of whole clusters, and a reference launch past the limits (a run finds
--   such configs invalid on the GPU; compile now says so per config);
-- * a shape whose element count wraps past 2^63 (2^32 x 2^32 was 0);
-- * a work value that wraps to a negative number;
-- * a knob value or a problem size of 1e400 (inf), and a size past 2^53
--   that JSON's doubles cannot hold exactly;
-- * an argument's `constant` of "false" or 0 (true to Lua: the array became
--   a __constant__ symbol), and `param` or `scratch` on a scalar (ignored);
-- * an architecture NVRTC does not know in reference.arch or kernel.arch was
--   blamed on `--arch`, with the kernel's architecture or a flag not given.
local T = require("testlib")
local json = require("kopt.json")

local tmp = T.tmpdir("spec-values")
T.write(tmp .. "/k.cu", 'extern "C" __global__ void k(const float* a, float* b, int n) {\n' ..
                        '  int i = blockIdx.x * BS + threadIdx.x;\n  if (i < n) b[i] = a[i];\n}\n')

local function base()
  return {
    name = "t", kernel = { source = "k.cu", entry = "k" }, problem = { n = 1024 },
    knobs = { { name = "BS", values = { 32, 64, 128 } } }, constraints = {},
    launch = { grid = { "cdiv(n, BS)" }, block = { "BS" } },
    args = { { name = "a", type = "f32", shape = { "n" } }, { name = "b", type = "f32", shape = { "n" }, output = true },
             { name = "n", type = "i32", value = "n" } },
    work = { bytes = "8*n" },
  }
end

local function compile(spec, raw_text)
  T.write(tmp .. "/s.json", raw_text or json.encode(spec))
  return T.run("compile " .. tmp .. "/s.json --all")
end

local function refused(what, spec, pattern, raw_text)
  local code, out, err = compile(spec, raw_text)
  -- (a spec error on stderr; a config that cannot launch in compile's table)
  T.check(code ~= 0 and (err .. out):find(pattern, 1, true) and not err:find("internal error", 1, true),
          "%s: expected a refusal containing %q, got %d:\n%s%s", what, pattern, code, out, err)
end

local code, _, err = compile(base())
T.eq(code, 0, "the base spec compiles: " .. err)

-- an output left out of the comparison with no verify.check: nothing would
-- look at it (it was accepted, and a kernel that wrote nothing passed)
local nc = base()
nc.verify = { outputs = { b = { compare = false } } }
refused("compare false without a check", nc,
        "verify.outputs.b.compare: false leaves the output to verify.check, and the spec has none")

-- a NUL byte in the kernel source: NVRTC reads a C string, so what follows
-- it was cut off unseen (an #error past it compiled "ok")
T.write(tmp .. "/nul.cu", 'extern "C" __global__ void k(const float* a, float* b, int n) {}\n\0\n#error past the NUL\n')
local ns = base()
ns.kernel.source = "nul.cu"
refused("a NUL byte in the source", ns, "kernel.source: 'nul.cu' holds a NUL byte (line 2)")

-- a constant's value outside its element type: the worker clamped or
-- rounded it without a word (u8 300 became 255, i32 2.5 became 2)
local function const_arg(ty, value)
  local cs = base()
  cs.args[1] = { name = "a", type = ty, shape = { "n" }, init = { dist = "constant", value = value } }
  return cs
end
refused("a u8 constant of 300", const_arg("u8", 300), "args[1].init.value: 300 is not a value of type u8: expected an integer from 0 to 255")
refused("an i32 constant of 2.5", const_arg("i32", 2.5), "args[1].init.value: 2.5 is not a value of type i32")
refused("an f16 constant of 1e5", const_arg("f16", 1e5), "past the largest finite f16 (65504)")
T.eq((compile(const_arg("i8", -128))), 0, "an i8 constant of -128 is accepted")
-- a large float constant is a value like another (-1e30, a mask): it was
-- refused as "past 2^53, not exact"; past the type's largest it is refused
T.eq((compile(const_arg("f32", -1e30))), 0, "an f32 constant of -1e30 is accepted")
refused("an f32 constant of 1e39", const_arg("f32", 1e39), "past the largest finite f32")
T.write(tmp .. "/kf.cu", 'extern "C" __global__ void k(const float* a, float* b, float s) {\n' ..
                         '  int i = blockIdx.x * BS + threadIdx.x;\n  if (i < 1024) b[i] = a[i] * s;\n}\n')
local sc = base()
sc.kernel.source = "kf.cu"
sc.args[3] = { name = "s", type = "f32", value = "1e39" }
refused("a scalar f32 of 1e39", sc, "args[3].value: gave 1e+39, past the largest finite f32")
sc.args[3].value = "2.5"
T.eq((compile(sc)), 0, "a scalar f32 of 2.5 is accepted")

-- a knob value with a line break or a trailing backslash: a define is one
-- line, and the rest went into the source as code
local nl = base()
nl.knobs[2] = { name = "QUAL", values = { "1\n#error injected", "2" }, define = true }
refused("a line break in a knob value", nl, "knobs[2].values[1]: a line break in a value: a define is one line")
nl.knobs[2].values = { "a\\", "b" }
refused("a trailing backslash", nl, "knobs[2].values[1]: a trailing backslash in a value")

-- a float knob's options keyed as the value is written ("2.0"): the value
-- is read as 2, and the key was refused as no value of the knob
local fo = base()
fo.knobs[1] = { name = "BS", values = { 32, 64.0 }, options = { ["64.0"] = { "-lineinfo" } } }
local fcode, _, ferr = compile(fo)
T.eq(fcode, 0, "options keyed '64.0' for the value 64.0: " .. ferr)
fo.knobs[1].options["64"] = { "-lineinfo" }
refused("two keys for one value", fo, "a second entry for the value 64")

-- reference.arch was accepted and not used (the reference was built for
-- the kernel's target); reference.state and reference.launch.cluster were
-- accepted and ignored
T.write(tmp .. "/r90a.cu", '#ifndef __CUDA_ARCH_FEAT_SM90_ALL\n#error the reference needs sm_90a\n#endif\n' ..
                           'extern "C" __global__ void r(const float* a, float* b, int n) {\n' ..
                           '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) b[i] = a[i];\n}\n')
local ra = base()
ra.reference = { source = "r90a.cu", entry = "r", arch = "sm_90a" }
local racode, raout, raerr = compile(ra)
T.check(racode == 0 and raout:find("reference r", 1, true), "a reference built for its own arch (sm_90a): %s%s", raout, raerr)
ra.reference.arch = "sm_900"
refused("a reference.arch NVRTC does not know", ra, "reference.arch: sm_900: NVRTC")
local ka = base()
ka.kernel.arch = "sm_900"
refused("a kernel.arch NVRTC does not know", ka, "kernel.arch: sm_900: NVRTC")
local rs = base()
rs.reference = { source = "k.cu", entry = "k", state = { "counter" } }
refused("reference.state", rs, "reference.state: a reference cannot keep state across launches")
local rc = base()
rc.reference = { source = "k.cu", entry = "k", launch = { grid = { "cdiv(n, 64)" }, block = { 64 }, cluster = { 2 } } }
refused("reference.launch.cluster", rc, "reference.launch.cluster: the reference runs without clusters")

-- outputs nothing compares: an output marked scratch too, verify.outputs on
-- a scratch buffer, and a spec whose only output is scratch were accepted,
-- so a kernel that wrote nothing passed
local so = base()
so.args[2].scratch = true
refused("an output marked scratch", so, "args[2].scratch: an output is compared with the reference, a scratch buffer never is")
local sv = base()
sv.args[2] = { name = "b", type = "f32", shape = { "n" }, scratch = true }
sv.verify = { outputs = { b = { rel_l2 = 1e-6 } } }
refused("verify on a scratch buffer", sv, "verify.outputs.b: 'b' is a scratch buffer, which is not compared")
sv.verify = nil
sv.reference = { source = "k.cu", entry = "k" }
refused("no compared output", sv, "args: no output is compared with the reference and there is no verify.check")

-- a flag that is no boolean, and the array flags on a scalar: "constant":
-- "false" made the array a __constant__ symbol, and a scalar's "param" and
-- "scratch" were ignored without a word
for _, v in ipairs({ "false", 0 }) do
  local cf = base()
  cf.args[1].constant = v
  refused("constant " .. json.encode(v), cf, "args[1].constant: expected true or false, got a " ..
          (type(v) == "string" and "string" or "number"))
end
local sp = base()
sp.args[3].param = "no"
refused("a scalar's param \"no\"", sp, "args[3].param: expected true or false, got a string")
sp.args[3].param = false
refused("a scalar's param false", sp, "args[3].param: a scalar is always a kernel parameter")
sp.args[3].param, sp.args[3].scratch = nil, true
refused("a scalar's scratch", sp, "args[3].scratch: a scalar is no buffer")

-- a pipeline's reference without its own launch ran with the first
-- kernel's (a scan reference of one 1024-thread block ran as 4096 blocks of
-- 256, writing a quarter of its output)
do
  local pj = json.decode(T.slurp("tests/honest/scan_pipe.json"))
  local root = require("kopt.sys").realpath(".")
  pj.kernel.source = root .. "/tests/honest/scan_pipe.cu"
  pj.reference.source = pj.kernel.source
  pj.reference.launch = nil
  refused("a pipeline's reference without a launch", pj, "reference.launch: missing: a pipeline has no launch of its own")
end

local s = base()
s.knobs[1].values = {}
for v = 32, 1280, 32 do s.knobs[1].values[#s.knobs[1].values + 1] = v end
s.constraints = { "BS <= 512 or BS % 64" }
refused("a constraint that is a number past the first configs", s, "gave 32 (a number), expected true or false")

s = base()
s.launch.grid = { "n > BS" }
refused("true as a grid", s, "expression 'n > BS' gave true, expected a positive integer")

s = base()
s.args[2].shape = { "n >= 1024" }
refused("true as a shape", s, "gave true, expected a positive integer")

s = base()
s.launch.block = { 1, 1, "BS" }
refused("a block z of 128", s, "cannot launch: block 1 x 1 x 128")
s.launch.block = { 1, 1, 65 }
s.knobs[1].values = { 32 }
refused("a block z of 65", s, "at most 1024 x 1024 x 64")

s = base()
s.launch.cluster = { 3 }
refused("a grid of 32 in clusters of 3", s, "is not a whole number of clusters 3 x 1 x 1")
s = base()
s.reference = { source = "k.cu", entry = "k", launch = { grid = { 100000, 100000 }, block = { 32 } } }
refused("a reference grid of 100000 x 100000", s, "the reference cannot launch")

s = base()
s.args[1].shape = { "2^32", "2^32" }
s.args[1].shape = { "int(2^32)", "int(2^32)" }
refused("a shape of 2^64 elements", s, "more than 2^62 elements")

s = base()
s.problem.reps = 30000000000
s.work.bytes = "4 * 2 * n * n * n * reps"
refused("work past 2^63", s, "expected a count >= 0")

refused("a knob value of 1e400", nil, "knobs[1].values[2]: expected a finite number, got inf",
        json.encode(base()):gsub('"values":%[32,64,128%]', '"values":[32,1e400]'))
refused("a problem size of 1e400", nil, "problem.n: expected a finite number",
        json.encode(base()):gsub('"n":1024', '"n":1e400'))
refused("a problem size past 2^53", nil, "is 2^53 or more", json.encode(base()):gsub('"n":1024', '"n":18014398509481985'))

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
