-- What the experience database and a resumed run take for "the same
-- problem" (kopt.expdb.problem_digest): every field of the kernel and the
-- reference (options, knobs, arch, state, launch) and the headers they
-- include count; where the spec's files lie does not. A reference switched
-- from ReLU to GELU by one of its options was answered with the ReLU
-- results, and a resume mixed the two.
local T = require("testlib")
local json = require("kopt.json")
local expdb = require("kopt.expdb")
local spec_mod = require("kopt.spec")
local run_mod = require("kopt.run")

local tmp = T.tmpdir("expdb-key")
local KERNEL = '#include "op.h"\nextern "C" __global__ void k(const float *x, float *y, int n) {\n' ..
               '  int i = blockIdx.x * B + threadIdx.x;\n  if (i < n) y[i] = OP(x[i]);\n}\n' ..
               'extern "C" __global__ void kref(const float *x, float *y, int n) {\n' ..
               '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = OP(x[i]);\n}\n'
local function base()
  return {
    name = "op", kernel = { source = "k.cu", entry = "k" }, problem = { n = 1024 },
    knobs = { { name = "B", values = { 128, 256 } } },
    launch = { grid = { "cdiv(n, B)" }, block = { "B" } },
    args = { { name = "x", type = "f32", shape = { "n" } }, { name = "y", type = "f32", shape = { "n" }, output = true },
             { name = "n", type = "i32", value = "n" } },
    reference = { source = "k.cu", entry = "kref", options = { "-DOP_RELU" },
                  launch = { grid = { "cdiv(n, 256)" }, block = { 256 } } },
  }
end
local n = 0
local function digest(raw, header)
  n = n + 1
  local dir = string.format("%s/s%d", tmp, n)
  os.execute("mkdir -p '" .. dir .. "'")
  T.write(dir .. "/k.cu", KERNEL)
  T.write(dir .. "/op.h", header or "#define OP(v) fmaxf(v, 0.0f)\n")
  json.write_file(dir .. "/spec.json", raw)
  local spec = spec_mod.load(dir .. "/spec.json")
  return expdb.problem_digest(spec, run_mod.build_space(spec))
end

local d0 = digest(base())
T.eq(digest(base()), d0, "the same spec in another folder is the same problem")
local changes = {
  ["the reference's options"] = function(s) s.reference.options = { "-DOP_GELU" } end,
  ["the reference's knobs"] = function(s) s.reference.knobs = { "B" } end,
  ["the kernel's options"] = function(s) s.kernel.options = { "-DFAST" } end,
  ["the kernel's arch"] = function(s) s.kernel.arch = "sm_90a" end,
  ["the kernel's state"] = function(s) s.kernel.state = { "counter" } end,
  ["the reference's launch"] = function(s) s.reference.launch.block = { 128 } end,
  ["the tolerance"] = function(s) s.tolerance = { rel_l2 = 1e-3 } end,
}
for what, change in pairs(changes) do
  local s = base()
  change(s)
  T.check(digest(s) ~= d0, "%s changed: another problem", what)
end
T.check(digest(base(), "#define OP(v) (0.5f * v * (1.0f + erff(v * 0.70710678f)))\n") ~= d0,
        "an included header edited: another problem")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
