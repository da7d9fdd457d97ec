-- The suite's specs (specs/suite/) load, describe their problem in full
-- (a `torch` expression, `work`, a tolerance, a default config) and compile
-- for sm_90 with NVRTC, no GPU needed: every reference, and a sample of each
-- spec's space (KOPT_SUITE_SAMPLE configs per spec, default 1, chosen by a
-- seed derived from the spec's name so specs sharing a kernel cover
-- different configs). A config the constraints allow must compile, launch
-- with its block size and fit its shared memory. Every .cu under
-- kernels/suite/ is used by a suite spec.
--   KOPT_SUITE_SAMPLE=all   every config of every space (about 1,300 compiles)
local compile = require("kopt.compile")
local rng_mod = require("kopt.rng")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local suite = require("kopt.suite")
local sys = require("kopt.sys")

local sample = os.getenv("KOPT_SUITE_SAMPLE") or "1"
local arch = "sm_90"
local failures = {}
local function fail(fmt, ...) failures[#failures + 1] = string.format(fmt, ...) end

local function space_of(spec)
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  return space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
end

local files = suite.spec_files({ "specs/suite" })
if #files < 20 then fail("specs/suite holds %d specs, fewer than 20", #files) end

local pool = compile.pool(nil, { cache = false })
local jobs, kernels_seen, n_configs = {}, {}, 0
for _, path in ipairs(files) do
  local spec = spec_mod.load(path)
  kernels_seen[spec.kernel.path:match("([^/]*)$")] = true
  if spec.reference then kernels_seen[spec.reference.path:match("([^/]*)$")] = true end
  if not spec.torch then fail("%s: no 'torch' expression (the PyTorch baseline)", path) end
  if not (spec.work_expr.flops and spec.work_expr.bytes) then fail("%s: work needs flops and bytes", path) end
  if not (spec.tolerance.rel_l2 or spec.tolerance.max_abs) then fail("%s: no tolerance", path) end
  if not spec.reference then fail("%s: no reference", path) end
  local space = space_of(spec)
  local size = space:size()
  n_configs = n_configs + size
  if size < 10 or size > 200 then fail("%s: %d configs (a suite space is kept within 10..200)", path, size) end
  local default = space:default()
  if not default then fail("%s: not every knob has a default", path) end
  local configs
  if sample == "all" then
    configs = space:enumerate()
  else
    local seed = 0
    for c in spec.name:gmatch(".") do seed = (seed * 31 + c:byte()) % 1000003 end
    local rng, seen = rng_mod.new(seed), {}
    configs = {}
    local want = math.min(math.tointeger(tonumber(sample)) or 1, size)
    while #configs < want do
      local c = assert(space:sample(rng), path .. ": empty space")
      if not seen[space:key(c)] then
        seen[space:key(c)] = true
        configs[#configs + 1] = c
      end
    end
  end
  for _, c in ipairs(configs) do
    jobs[pool:submit(compile.job_for(spec, c, arch))] = { spec = spec, config = c,
                                                          what = path .. " " .. space:describe(c) }
  end
  local ref = compile.reference_job(spec, arch)
  if ref then jobs[pool:submit(ref)] = { spec = spec, what = path .. " reference" } end
end

for _, f in ipairs(assert(sys.list_dir("kernels/suite"))) do
  if f:match("%.cu$") and not kernels_seen[f] then fail("kernels/suite/%s is not used by any suite spec", f) end
end

local n, t0 = 0, sys.now()
while true do
  local id, r = pool:wait_any()
  if not id then break end
  n = n + 1
  local job = jobs[id]
  if not r.ok then
    fail("%s: compile error:\n%s", job.what, r.log)
  elseif job.config then
    local launch = job.spec:launch(job.config)
    local threads = launch.block[1] * launch.block[2] * launch.block[3]
    if r.max_threads < threads then
      fail("%s: block of %d threads but at most %d can launch (%d registers)", job.what, threads, r.max_threads, r.regs)
    elseif r.smem_static + launch.smem > job.spec.device.max_smem_optin then
      fail("%s: %d bytes of shared memory exceed %d", job.what, r.smem_static + launch.smem,
           job.spec.device.max_smem_optin)
    end
  end
end
pool:close()
print(string.format("suite: %d specs, %d configs in all; compiled %d kernels in %.1f s (%d problems)", #files,
                    n_configs, n, sys.now() - t0, #failures))
for _, f in ipairs(failures) do print("FAIL " .. f) end
return #failures == 0 and 0 or 1
