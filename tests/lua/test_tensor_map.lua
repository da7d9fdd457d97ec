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
local cfg = { BN = 256, WG_M = 1, CONSUMERS = 2, STAGES = 3, GROUP_M = 8, PERSISTENT = 1 }
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
-- 5. The worker request: each map's fields, and a cluster launch; every
-- field is one the worker reads (core/worker/request_fields.h).
do
  local cuda = require("kopt.backends.cuda")
  local r = json.decode(T.slurp(path))
  r.launch.cluster = { 2, 1, 1 }
  r.launch.cooperative = true
  r.kernel.source = root .. "/kernels/matmul_f16_sm90.cu"
  r.reference.source = root .. "/kernels/matmul_nt_ref.cu"
  T.write(tmp .. "/cluster.json", json.encode(r))
  local cs = spec_mod.load(tmp .. "/cluster.json")
  local be = cuda._offline(cs)
  local m = assert(be:request(1, cfg, "CUBIN", "matmul_sm90"))
  T.eq(m["a7.kind"], "tensormap", "a7 kind")
  T.eq(m["a7.of"], 1, "a7 maps argument 1")
  T.eq(m["a7.tmap_dims"], "4096,4096", "a7 dims")
  T.eq(m["a8.box"], "256,64", "a8 box")
  T.eq(m["a8.swizzle"], 128, "a8 swizzle")
  T.eq(m.cluster_x * 10 + m.cluster_y, 21, "cluster dims")
  T.eq(m.cooperative, 1, "a cooperative launch")
  local rm = assert(be:request(0, cfg, "C", "matmul_nt_ref", true))
  T.eq(rm.cluster_x, nil, "the reference runs without a cluster")
  T.eq(rm.cooperative, nil, "the reference is not launched cooperatively")
  local run_fields, arg_fields = require("kopt.gpu").request_fields()
  local listed = {}
  for _, f in ipairs(run_fields) do listed[f.name] = true end
  for _, f in ipairs(arg_fields) do listed["arg." .. f.name] = true end
  for k in pairs(m) do
    local name = k:match("^a%d+%.(.+)$")
    T.check(k == "op" or listed[k] or (name and listed["arg." .. name]), "field %s is in the worker's list", k)
  end
  local plain = cuda._offline(spec):request(1, cfg, "CUBIN", "matmul_sm90")
  T.eq(plain.cluster_x, nil, "no cluster field without launch.cluster")
  T.eq(plain.cooperative, nil, "no cooperative field without launch.cooperative")
end
bad(function(r) r.launch.cluster = { 2, 1, 1, 1 } end, "launch.cluster")
bad(function(r) r.launch.cooperative = 1 end, "launch.cooperative: expected true, false or an expression")
bad(function(r) r.reference.launch = { grid = { 1 }, block = { 32 }, cooperative = true } end,
  "reference.launch.cooperative: only the kernel's top-level 'launch' can be cooperative")

local _ = raw
return T.done()
