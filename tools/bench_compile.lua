-- Compile throughput of the NVRTC pool: the same N distinct configs of a spec
-- (first N of a seeded sample) compiled cold (no cache) with 1, 2, ... worker
-- processes, and once more through a fresh cache directory, twice: the first
-- pass fills it, the second is all hits.
--   kopt script tools/bench_compile.lua [SPEC] [N] [WORKERS,...]
--   defaults: specs/matmul_f16.json 16 1,<cpu count>
local compile = require("kopt.compile")
local rng_mod = require("kopt.rng")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")

local path = arg[1] or "specs/matmul_f16.json"
local n = math.tointeger(tonumber(arg[2] or "16")) or 16
local workers = {}
for w in (arg[3] or ("1," .. sys.cpu_count())):gmatch("[^,]+") do workers[#workers + 1] = math.tointeger(tonumber(w)) end

local spec = spec_mod.load(path)
local scope = { device = spec.device }
for k, v in pairs(spec.problem) do scope[k] = v end
local space = space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
local rng, seen, jobs = rng_mod.new(7), {}, {}
while #jobs < math.min(n, space:size()) do
  local c = space:sample(rng)
  if not seen[space:key(c)] then
    seen[space:key(c)] = true
    jobs[#jobs + 1] = compile.job_for(spec, c, "sm_90")
  end
end

local function run(w, opts)
  local t0 = sys.now()
  local pool = compile.pool(w, opts)
  for _, j in ipairs(jobs) do pool:submit(j) end
  local ok, cached, busy = 0, 0, 0
  while true do
    local id, r = pool:wait_any()
    if not id then break end
    if r.ok then ok = ok + 1 end
    if r.cached then cached = cached + 1 else busy = busy + r.compile_s end
  end
  pool:close()
  local dt = sys.now() - t0
  return dt, ok, cached, busy
end

local function load_avg()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("l") or "?"
  if f then f:close() end
  return s:match("^(%S+)") or "?"
end

print(string.format("%s: %d distinct configs, %d CPUs, NVRTC %s, load %s", path, #jobs, sys.cpu_count(),
                    compile.version(), load_avg()))
print("mode        workers  wall_s  compiles/s  mean NVRTC s  ok  cached")
do -- baseline: one after the other in this process, no pool
  local t0, ok, busy = sys.now(), 0, 0
  for _, j in ipairs(jobs) do
    local r = compile.compile(j, { cache = false })
    if r.ok then ok = ok + 1 end
    busy = busy + r.compile_s
  end
  local dt = sys.now() - t0
  print(string.format("in-process  %7s  %6.2f  %10.2f  %12.2f  %2d  %6d", "-", dt, #jobs / dt, busy / #jobs, ok, 0))
end
for _, w in ipairs(workers) do
  local dt, ok, cached, busy = run(w, { cache = false })
  print(string.format("cold        %7d  %6.2f  %10.2f  %12.2f  %2d  %6d", w, dt, #jobs / dt,
                      busy / math.max(1, #jobs - cached), ok, cached))
end
local dir = os.tmpname()
os.remove(dir)
local w = workers[#workers]
local dt, ok, cached, busy = run(w, { cache_dir = dir })
print(string.format("cache fill  %7d  %6.2f  %10.2f  %12.2f  %2d  %6d", w, dt, #jobs / dt,
                    busy / math.max(1, #jobs - cached), ok, cached))
dt, ok, cached = run(w, { cache_dir = dir })
print(string.format("cache hit   %7d  %6.3f  %10.1f  %12s  %2d  %6d", w, dt, #jobs / dt, "-", ok, cached))
os.execute("rm -rf '" .. dir .. "'")
print(string.format("load %s at the end", load_avg()))
