-- A spec's args against its kernel's signature, at load (kopt.spec,
-- check_signatures): a parameter more or less, a float scalar in an int's
-- place or an array where the kernel takes a value are refused naming both;
-- an entry the source never mentions is a typo. Before, `kopt compile`
-- passed them all and a run would have launched the kernel on garbage, or
-- NVRTC said "identifier is undefined" in a name map, once per config. A
-- parameter list with preprocessor lines in it, or a pointer typedef, is
-- left alone (kopt cannot be sure). Also: which candidates run in a worker
-- of their own because they allocate on the device heap.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("spec-signature")
T.write(tmp .. "/k.cu", [[
typedef float *fptr;
extern "C" __global__ void axpby(float *y, const float *x, float a, int n, long long stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i * stride] = a * x[i] + y[i];
}
extern "C" __global__ void cond(float *y,
#if USE_X
                                const float *x,
#endif
                                int n) { }
extern "C" __global__ void typed(fptr y, int n) { }
struct CUtensorMap_st { alignas(64) unsigned long long opaque[16]; };
typedef CUtensorMap_st CUtensorMap;
extern "C" __global__ void withmap(float *y, const float *x, float a, int n, long long stride,
                                   const __grid_constant__ CUtensorMap tm) { }
namespace ops {
__global__ void scale(float *y, const float *x, float a, int n, long long stride) { }
template <int TB> __global__ void scale_t(float *y, const float *x, float a, int n, long long stride) { }
}
]])
local function spec(entry, args)
  return cjson.encode({ name = "sig", kernel = { source = "k.cu", entry = entry }, problem = { N = 1024 },
                        launch = { grid = { 4 }, block = { "B" } }, knobs = { { name = "B", values = { 128, 256 } } },
                        args = args })
end
local y = { name = "y", type = "f32", shape = { "N" }, output = true }
local x = { name = "x", type = "f32", shape = { "N" } }
local a = { name = "a", type = "f32", value = 2 }
local n = { name = "n", type = "i32", value = "N" }
local st = { name = "stride", type = "i64", value = 1 }
local function load(name, entry, args)
  T.write(tmp .. "/" .. name .. ".json", spec(entry, args))
  local code, out, err = T.run("compile " .. tmp .. "/" .. name .. ".json")
  return code, out .. err
end

local code, text = load("ok", "axpby", { y, x, a, n, st })
T.eq(code, 0, "the args as the kernel takes them: " .. text)
code, text = load("missing", "axpby", { y, x, a, n })
T.check(code == 2 and text:find("args: the entry kernel axpby takes 5 parameters", 1, true)
        and text:find("the spec passes 4 (y, x, a, n)", 1, true), "a parameter left out:\n%s", text)
code, text = load("order", "axpby", { y, x, n, a, st })
T.check(code == 2 and text:find("parameter 3 (float) is a value, but the spec's 'n' is a scalar i32", 1, true),
        "an int in a float's place:\n%s", text)
local x2 = { name = "x2", type = "f32", shape = { "N" } }
code, text = load("array", "axpby", { y, x, a, x2, st })
T.check(code == 2 and text:find("parameter 4 (int) is a value, but the spec's 'x2' is an array", 1, true),
        "an array in an int's place:\n%s", text)
code, text = load("typo", "axpyb", { y, x, a, n, st })
T.check(code == 2 and text:find("kernel.entry: 'axpyb' appears nowhere in", 1, true), "an entry typo:\n%s", text)
-- a qualified entry, template or not: its signature is checked as any
-- other's (the namespace's name was taken for the function's, and nothing
-- was checked), and a plain qualified name is an entry too (it was refused)
code, text = load("ns_ok", "ops::scale", { y, x, a, n, st })
T.eq(code, 0, "a qualified entry: " .. text)
code, text = load("ns_missing", "ops::scale_t<B>", { y, x, a, n })
T.check(code == 2 and text:find("args: the entry kernel scale_t takes 5 parameters", 1, true),
        "a qualified template entry given 4 of its 5 parameters:\n%s", text)
-- (left alone: a parameter list with #if lines, a pointer typedef)
code, text = load("cond", "cond", { y, n })
T.eq(code, 0, "a parameter list with preprocessor lines is not judged: " .. text)
code, text = load("typed", "typed", { y, n })
T.eq(code, 0, "a pointer typedef takes an array: " .. text)

-- a pipeline's stages are checked each against its own args (they were
-- skipped, and a stage given 3 of its 4 parameters compiled "ok")
local function pipeline_spec(name, stage2_args)
  T.write(tmp .. "/" .. name .. ".json", cjson.encode({ name = "sig", kernel = { source = "k.cu" },
    problem = { N = 1024 }, knobs = { { name = "B", values = { 128, 256 } } },
    pipeline = { { entry = "axpby", launch = { grid = { 4 }, block = { "B" } }, args = { "y", "x", "a", "n", "stride" } },
                 { entry = "typed", launch = { grid = { 4 }, block = { "B" } }, args = stage2_args } },
    args = { y, x, a, n, st } }))
  local c, o, e = T.run("compile " .. tmp .. "/" .. name .. ".json")
  return c, o .. e
end
code, text = pipeline_spec("pipe_ok", { "y", "n" })
T.eq(code, 0, "a pipeline with its stages' args right: " .. text)
code, text = pipeline_spec("pipe_bad", { "y", "x", "n" })
T.check(code == 2 and text:find("pipeline[2].args: the entry kernel typed takes 2 parameters", 1, true),
        "a pipeline stage given a parameter too many:\n%s", text)
-- a cluster on a later kernel (the worker launched it without), an output
-- no kernel is given (it was compared as left poisoned): refused
do
  local function pipe(name, stage2_launch, extra_arg)
    local args = { y, x, a, n, st }
    if extra_arg then args[#args + 1] = extra_arg end
    T.write(tmp .. "/" .. name .. ".json", cjson.encode({ name = "sig", kernel = { source = "k.cu" },
      problem = { N = 1024 }, knobs = { { name = "B", values = { 128, 256 } } },
      pipeline = { { entry = "axpby", launch = { grid = { 4 }, block = { "B" } }, args = { "y", "x", "a", "n", "stride" } },
                   { entry = "typed", launch = stage2_launch, args = { "y", "n" } } },
      args = args }))
    local c, o, e = T.run("compile " .. tmp .. "/" .. name .. ".json")
    return c, o .. e
  end
  code, text = pipe("pipe_cluster", { grid = { 4 }, block = { "B" }, cluster = { 2 } })
  T.check(code == 2 and text:find("pipeline[2].launch.cluster: only a pipeline's first kernel runs in clusters", 1, true),
          "a cluster on a later kernel:\n%s", text)
  code, text = pipe("pipe_unpassed", { grid = { 4 }, block = { "B" } },
                    { name = "z", type = "f32", shape = { "N" }, output = true })
  T.check(code == 2 and text:find("pipeline: output 'z' is passed to none of its kernels", 1, true),
          "an output no kernel is given:\n%s", text)
end
-- the reference without reference.args reads the parameters it declares:
-- tensor maps at the end of the list are not its
T.write(tmp .. "/tmap_ref.json", cjson.encode({ name = "sig", kernel = { source = "k.cu", entry = "withmap" },
  problem = { N = 1024 }, launch = { grid = { 4 }, block = { "B" } }, knobs = { { name = "B", values = { 128, 256 } } },
  reference = { source = "k.cu", entry = "axpby" },
  args = { y, x, a, n, st, { name = "tmx", tensor_map = { of = "x", box = { 64 }, swizzle = 0 } } } }))
local c4, o4, e4 = T.run("compile " .. tmp .. "/tmap_ref.json")
T.eq(c4, 0, "a tensor map after the reference's parameters:\n" .. o4 .. e4)

-- notes, not refusals: a knob the kernel never sees, a knob that changes
-- the problem ranked by time
T.write(tmp .. "/unused.json", cjson.encode({ name = "sig", kernel = { source = "k.cu", entry = "axpby" },
  problem = { N = 1024 }, launch = { grid = { 4 }, block = { 256 } },
  knobs = { { name = "VEC", values = { 1, 2 } } }, constraints = { "VEC <= 2" }, args = { y, x, a, n, st } }))
local c2, _, e2 = T.run("compile " .. tmp .. "/unused.json")
T.check(c2 == 0 and e2:find("note: knob VEC appears nowhere in " .. tmp .. "/k.cu, its launch or its shapes", 1, true),
        "a knob the kernel never reads is noted:\n%s", e2)
T.write(tmp .. "/problem.json", cjson.encode({ name = "sig", kernel = { source = "k.cu", entry = "axpby" },
  problem = { N = 1024 }, launch = { grid = { 4 }, block = { "B" } },
  knobs = { { name = "B", values = { 128, 256 } } },
  reference = { source = "k.cu", entry = "axpby", knobs = { "B" } }, args = { y, x, a, n, st } }))
local _, _, err = T.run("compile " .. tmp .. "/problem.json")
T.check(err:find("note: knob B changes the problem (reference.knobs) and configs are ranked by time", 1, true),
        "a problem-changing knob ranked by time is noted:\n%s", err)

-- a launch that fails for some configs only: those are FAIL with the
-- sentence, the others reported (compile --all stopped at the first one,
-- after compiling them all, with nothing but its header printed)
-- (past the 16 configs checked before anything compiles)
T.write(tmp .. "/late.json", cjson.encode({ name = "sig", kernel = { source = "k.cu", entry = "axpby" },
  problem = { N = 1024 }, launch = { grid = { "N // (B * C)" }, block = { "B" } },
  knobs = { { name = "B", values = { 64, 128, 256 } }, { name = "C", values = { 1, 2, 3, 4, 5, 6, 7, 8 } } },
  args = { y, x, a, n, st } }))
local c3, o3 = T.run("compile " .. tmp .. "/late.json --all")
T.check(c3 == 1 and o3:find("ok   regs", 1, true) and o3:find("expression 'N // (B * C)' gave 0, expected a positive " ..
        "integer (at B=256, C=8)", 1, true), "a config whose grid is 0 fails alone:\n%s", o3)

-- device-heap candidates (lua/kopt/backends/cuda.lua)
local uses_heap = require("kopt.backends.cuda").uses_heap
T.check(uses_heap("__global__ void k(float *y) { float *p = (float *)malloc(64); free(p); }"), "malloc and free")
T.check(uses_heap("__global__ void k(float *y) { S *s = new S[4]; }"), "new")
T.check(not uses_heap("__global__ void k(float *y) { /* no malloc( here */ y[0] = 1; }"), "a comment is not code")
T.check(not uses_heap("__global__ void k(float *renew, int freed) { renew[0] = freed; }"), "names that contain the words")

-- (kept for a look when a check fails)
if T.failures == 0 then os.execute("rm -rf '" .. tmp .. "'") end
return T.done()
