-- Hopper specs: `tensor_map` arguments and `kernel.arch`. The spec checker
-- names each bad field in one sentence; a config's tensor maps carry the
-- mapped array's index, dims and the box evaluated for that config, as the
-- worker needs them; candidates compile for the spec's arch (NVRTC, no GPU).
local T = require("testlib")
local spec_mod = require("kopt.spec")
local compile = require("kopt.compile")
local errors = require("kopt.errors")
local json = require("kopt.json")

local root = require("kopt.sys").realpath(os.getenv("KOPT_SOURCE_DIR") or ".")
local tmp = T.tmpdir("tmap")
local path = root .. "/specs/matmul_f16_sm90.json"
local raw = json.decode(T.slurp(path))

-- 1. The shipped spec: its maps, for one config.
local spec = spec_mod.load(path)
T.eq(spec.kernel.arch, "sm_90a", "kernel.arch")
local cfg = { BN = 256, WG_M = 1, CONSUMERS = 2, STAGES = 3, GROUP_M = 8 }
local args = spec:args(cfg)
local by = {}
for i, a in ipairs(args) do by[a.name] = a; a.i = i end
T.eq(by.tmA.kind, "tensormap", "tmA kind")
T.eq(by.tmA.of, by.A.i, "tmA maps A")
T.eq(by.tmA.type, "f16", "a map takes its array's type")
T.eq(table.concat(by.tmA.dims, ","), "4096,4096", "tmA dims")
T.eq(table.concat(by.tmA.box, ","), "64,64", "tmA box at WG_M=1")
T.eq(table.concat(by.tmB.box, ","), "256,64", "tmB box follows BN")
T.eq(by.tmB.swizzle, 128, "swizzle")

-- 2. Candidates compile for sm_90a (wgmma needs it), the reference too.
local job = compile.job_for(spec, cfg, "sm_90", nil)
T.eq(job.arch, "sm_90a", "the candidate's arch is the spec's")
local found = false
for _, o in ipairs(job.options) do if o == "--gpu-architecture=sm_90a" then found = true end end
T.check(found, "the NVRTC options name sm_90a")
local res = compile.compile(job, { cache = false })
T.check(res.ok, "matmul_f16_sm90 compiles for sm_90a: %s", tostring(res.log))

-- 3. Bad fields: one sentence each, naming the field.
local function bad(mutate, want)
  local r = json.decode(T.slurp(path))
  mutate(r)
  local p = tmp .. "/bad.json"
  -- sources relative to the spec's folder: keep the spec beside them
  r.kernel.source = root .. "/kernels/matmul_f16_sm90.cu"
  r.reference.source = root .. "/kernels/matmul_nt_ref.cu"
  T.write(p, json.encode(r))
  local ok, err = pcall(spec_mod.load, p)
  local msg = errors.message and errors.message(err) or tostring(type(err) == "table" and err.msg or err)
  T.check(not ok, "accepted: %s", want)
  T.check(tostring(msg):find(want, 1, true), "message %q lacks %q", tostring(msg), want)
end
bad(function(r) r.args[7].tensor_map.of = "M" end, "args[7].tensor_map.of")
bad(function(r) r.args[7].tensor_map.of = "nope" end, "args[7].tensor_map.of")
bad(function(r) r.args[7].tensor_map.box = { 64 } end, "args[7].tensor_map.box")
bad(function(r) r.args[7].tensor_map.swizzle = 96 end, "args[7].tensor_map.swizzle")
bad(function(r) r.args[7].tensor_map.stride = 2 end, "args[7].tensor_map")
bad(function(r) r.args[7].type = "f16" end, "args[7]")
bad(function(r) r.kernel.arch = "hopper" end, "kernel.arch")

-- 4. A box over 256 is refused for the config that makes it, naming it.
do
  local r = json.decode(T.slurp(path))
  r.args[8].tensor_map.box = { "4 * BN", 64 }
  r.kernel.source = root .. "/kernels/matmul_f16_sm90.cu"
  r.reference.source = root .. "/kernels/matmul_nt_ref.cu"
  T.write(tmp .. "/big.json", json.encode(r))
  local big = spec_mod.load(tmp .. "/big.json")
  T.check(pcall(big.args, big, { BN = 64, WG_M = 1, CONSUMERS = 2, STAGES = 2, GROUP_M = 8 }), "a box of 256 is allowed")
  local ok, err = pcall(big.args, big, { BN = 128, WG_M = 1, CONSUMERS = 2, STAGES = 2, GROUP_M = 8 })
  local msg = tostring(type(err) == "table" and (err.msg or err.message) or err)
  T.check(not ok and msg:find("args[8].tensor_map.box[1] is 512", 1, true), "box of 512: %s", msg)
end
local _ = raw
return T.done()
