-- Specs of kernels written to find what kopt misread (each case failed
-- before its fix), through `kopt compile` and a replayed run:
-- * a namespaced entry was checked against the first kernel of that short
--   name (v1::scale, not v2::scale); a [[maybe_unused]] parameter read as
--   a pointer;
-- * a kernel defined in a header included with <...> through -I was "nowhere
--   in the source", and a knob read only there "appears nowhere";
-- * -arch in kernel.options was neither refused nor honoured;
-- * a later pipeline kernel's launch expression was not checked before a
--   run, and its grid and block limits not at all by `kopt compile`;
-- * fields accepted and ignored: an init's value with a drawn dist, a help
--   that is no string, profile metrics that are no names, param and
--   scratch on a tensor map;
-- * messages that misled: a swizzle given as a string, C's a ? b : c, a u64
--   past 2^63 - 1;
-- * a template entry's instance was nowhere in best/; knob defaults that
--   break a constraint changed the baseline silently.
local T = require("testlib")
local json = require("kopt.json")

local tmp = T.tmpdir("spec-unseen")
local COPY = 'extern "C" __global__ void ref(float* out, const float* in, int n) {\n' ..
             '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = in[i];\n}\n'
T.write(tmp .. "/ref.cu", COPY)

local function spec(kernel_source, extra)
  T.write(tmp .. "/k.cu", kernel_source)
  local s = {
    name = "t", kernel = { source = "k.cu", entry = "scale" }, problem = { n = 1024 },
    knobs = { { name = "B", values = { 64, 128 } } },
    launch = { grid = { "cdiv(n, B)" }, block = { "B" } },
    args = { { name = "out", type = "f32", shape = { "n" }, output = true }, { name = "in", type = "f32", shape = { "n" } },
             { name = "n", type = "i32", value = "n" } },
    reference = { source = "ref.cu", entry = "ref" },
  }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function compile(s, args)
  T.write(tmp .. "/s.json", json.encode(s))
  return T.run("compile " .. tmp .. "/s.json --no-cache " .. (args or ""))
end

local function accepted(what, s)
  local code, out, err = compile(s, "--all")
  T.check(code == 0 and not err:find("note", 1, true), "%s: expected ok without a note, got %d:\n%s%s", what, code, out,
          err)
end

local function refused(what, s, pattern)
  local code, out, err = compile(s)
  T.check(code ~= 0 and (err .. out):find(pattern, 1, true) and not err:find("internal error", 1, true),
          "%s: expected a refusal containing %q, got %d:\n%s%s", what, pattern, code, out, err)
end

local BODY = "{\n  int i = blockIdx.x * B + threadIdx.x;\n  if (i < n) out[i] = in[i];\n}\n"

-- the entry in the second namespace, with the spec's three parameters
local ns = spec("namespace v1 { __global__ void scale(float* out, int n) { if (n) out[0] = 1; } }\n" ..
                "namespace v2 { __global__ void scale(float* out, const float* in, int n) " .. BODY .. "}\n")
ns.kernel.entry = "v2::scale"
accepted("a namespaced entry", ns)
ns.kernel.entry = "v1::scale"
refused("the other namespace's entry", ns, "the spec passes 3")

accepted("a [[maybe_unused]] parameter", spec('extern "C" __global__ void scale(float* out, const float* in, ' ..
                                              "[[maybe_unused]] int n) " .. BODY,
                                              { kernel = { source = "k.cu", entry = "scale", options = { "-std=c++17" } } }))

-- a kernel (and the knob it reads) in a header found through -I
os.execute("mkdir -p " .. tmp .. "/inc")
T.write(tmp .. "/inc/impl.cuh", 'extern "C" __global__ void scale(float* out, const float* in, int n) ' .. BODY)
accepted("a kernel in a <header> of -I", spec("#include <impl.cuh>\n",
                                             { kernel = { source = "k.cu", entry = "scale", options = { "-Iinc" } } }))

refused("-arch in kernel.options", spec('extern "C" __global__ void scale(float* out, const float* in, int n) ' .. BODY,
                                        { kernel = { source = "k.cu", entry = "scale", options = { "-arch=sm_80" } } }),
        "kernel.options[1]: '-arch=sm_80' sets the compile target, which kopt chooses: set kernel.arch instead")

-- fields that were accepted and ignored
local K = 'extern "C" __global__ void scale(float* out, const float* in, int n) ' .. BODY
local iv = spec(K)
iv.args[2].init = { dist = "uniform", value = 10 }
refused("an init value with a drawn dist", iv, "args[2].init.value: only {\"dist\": \"constant\"} takes a value")
local kh = spec(K)
kh.knobs[1].help = 123
refused("a knob's help that is a number", kh, "knobs[1].help")
local ah = spec(K)
ah.args[2].help = { a = 1 }
refused("an arg's help that is an object", ah, "args[2].help")
refused("profile metrics that are no names", spec(K, { profile = { metrics = { true } } }), "profile.metrics[1]")

-- messages
local cond = spec(K)
cond.constraints = { "B % 64 == 0 ? true : false" }
refused("C's conditional", cond, "uses C's 'a ? b : c', which expressions do not read (write 'a and b or c')")
local u = spec('extern "C" __global__ void scale(float* out, const float* in, unsigned long long n) ' .. BODY)
u.args[3] = { name = "n", type = "u64", value = "0x7fffffffffffffff + 1" }
T.write(tmp .. "/ref64.cu", (COPY:gsub("int n", "unsigned long long n")))
u.reference = { source = "ref64.cu", entry = "ref" }
refused("a u64 past 2^63 - 1", u, "expected an integer that fits u64 as kopt computes it, 0 to 2^63 - 1")

-- a later pipeline kernel's launch: refused before anything runs when an
-- expression fails at the first configs; a grid past the limits fails its
-- config in `kopt compile`
T.write(tmp .. "/pipe.cu", 'extern "C" __global__ void first(float* out, const float* in, int n) ' .. BODY ..
                           'extern "C" __global__ void second(float* out, const float* in, int n) ' .. BODY)
local pipe = spec(K)
pipe.kernel, pipe.launch = { source = "pipe.cu" }, nil
pipe.reference.launch = { grid = { "cdiv(n, 64)" }, block = { 64 } }
pipe.pipeline = {
  { entry = "first", args = { "out", "in", "n" }, launch = { grid = { "cdiv(n, B)" }, block = { "B" } } },
  { entry = "second", args = { "out", "in", "n" }, launch = { grid = { "cdiv(n, B)" }, block = { "B - 64" } } },
}
refused("a later kernel's block expression", pipe, "pipeline[2].launch.block[1]: expression 'B - 64' gave 0")
pipe.pipeline[2].launch = { grid = { 70000, 70000 }, block = { "B" } }
refused("a later kernel's grid", pipe, "pipeline[2] (second) cannot launch: grid 70000 x 70000 x 1")

-- a template entry: best/entry.txt names its instance; defaults that break
-- a constraint are said
T.write(tmp .. "/t.cu", "template <int TILE> __global__ void tk(float* out, const float* in, int n) " ..
                        "{\n  int i = blockIdx.x * TILE + threadIdx.x;\n  if (i < n) out[i] = in[i];\n}\n" ..
                        "template __global__ void tk<64>(float*, const float*, int);\n" ..
                        "template __global__ void tk<128>(float*, const float*, int);\n")
local tpl = spec(K)
tpl.kernel = { source = "t.cu", entry = "tk<TILE>" }
tpl.knobs = { { name = "TILE", values = { 64, 128 }, default = 64, define = false },
              { name = "B", values = { 64, 128 }, default = 128 } }
tpl.constraints = { "B == TILE" }
tpl.launch = { grid = { "cdiv(n, TILE)" }, block = { "TILE" } }
local results = {}
for i, t in ipairs({ 0.2, 0.1 }) do
  local v = ({ 64, 128 })[i]
  results[i] = { configuration = { TILE = v, B = v }, correctness = 1, invalidity = "correct", objectives = { "time" },
                 measurements = { { name = "time", unit = "ms", value = t } },
                 times = { compilation = 0.1, framework = 0, runtimes = { t }, search_algorithm = 0, validation = 0 },
                 timestamp = "2026-01-01T00:00:00Z" }
end
T.write(tmp .. "/t.t4.json", json.encode({ metadata = { timeunit = "milliseconds" }, results = results }))
tpl.recording = "t.t4.json"
T.write(tmp .. "/tpl.json", json.encode(tpl))
local code, out, err = T.run("exhaustive " .. tmp .. "/tpl.json --no-db --out " .. tmp .. "/tpl_run")
T.eq(code, 0, "the template run: " .. out .. err)
T.check(err:find("the knobs' defaults (TILE=64, B=128) break the constraints", 1, true),
        "no note of the defaults that break a constraint:\n%s", err)
T.eq(T.slurp(tmp .. "/tpl_run/best/entry.txt"), "tk<128>\n", "best/entry.txt")

T.done()
