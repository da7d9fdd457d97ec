-- kopt.compile without a GPU: the worker pool returns every job once, in
-- completion order; wait(id) keeps the others; the disk cache answers a
-- re-run without compiling; compile errors and hung compiles are results.
local compile = require("kopt.compile")
local sys = require("kopt.sys")

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

local dir = os.tmpname()
os.remove(dir)
assert(sys.mkdir_p(dir))

local function kernel(i)
  return string.format([[
extern "C" __global__ void scale(float *x, int n)
{
	__shared__ float tile[%d];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	tile[threadIdx.x %% %d] = i < n ? x[i] : 0.0f;
	__syncthreads();
	if (i < n)
		x[i] = SCALE * tile[(threadIdx.x + 1) %% %d];
}
]], 64 * i, 64 * i, 64 * i)
end

local function job(i, extra)
  local opts = { "-DSCALE=" .. i .. ".0f" }
  if extra then opts[#opts + 1] = extra end
  return { source = kernel(i), entry = "scale", arch = "sm_90", options = opts }
end

-- 1. cold: 5 jobs on 2 workers, one of them broken
local pool = compile.pool(2, { cache_dir = dir })
check(pool:size() == 2, "pool size %d", pool:size())
local ids = {}
for i = 1, 4 do ids[pool:submit(job(i))] = i end
local bad = pool:submit({ source = "extern \"C\" __global__ void scale( {}", entry = "scale", arch = "sm_90" })
check(pool:pending() == 5, "pending %d", pool:pending())

-- wait for the last good one first: the others must still come out of wait_any
local last_id
for id, i in pairs(ids) do if i == 4 then last_id = id end end
local r4 = pool:wait(last_id)
check(r4.ok and not r4.cached, "job 4: ok=%s cached=%s log=%s", r4.ok, r4.cached, r4.log)
check(r4.smem_static == 4 * 64 * 4, "job 4 smem %s", tostring(r4.smem_static))
local seen, n = { [last_id] = true }, 1
while true do
  local id, r = pool:wait_any()
  if not id then break end
  check(not seen[id], "job %d returned twice", id)
  seen[id] = true
  n = n + 1
  if id == bad then
    check(not r.ok and r.log:find("error"), "broken job: ok=%s log=%s", r.ok, r.log)
    check(r.cubin == nil, "broken job has a cubin")
  else
    local i = ids[id]
    check(r.ok, "job %d failed: %s", i, r.log)
    check(r.smem_static == i * 64 * 4, "job %d smem %s", i, tostring(r.smem_static))
    check(r.regs and r.regs > 0, "job %d regs %s", i, tostring(r.regs))
    check(r.cubin:sub(1, 4) == "\127ELF", "job %d cubin is not ELF", i)
    check(r.compile_s > 0, "job %d compile_s", i)
  end
end
check(n == 5 and pool:pending() == 0, "got %d results, %d pending", n, pool:pending())
pool:close()

-- 2. warm: the same jobs come from the cache, same bytes, nothing compiled
local t0 = sys.now()
pool = compile.pool(2, { cache_dir = dir })
local cold = compile.compile(job(3), { cache_dir = dir })
check(cold.cached, "synchronous compile missed the cache")
for i = 1, 4 do pool:submit(job(i)) end
pool:submit({ source = "extern \"C\" __global__ void scale( {}", entry = "scale", arch = "sm_90" })
local hits = 0
for _ = 1, 5 do
  local id, r = pool:wait_any()
  check(id and r.cached, "job %s not from the cache", tostring(id))
  hits = hits + 1
end
check(hits == 5 and sys.now() - t0 < 5, "warm pass: %d hits in %.2f s", hits, sys.now() - t0)
check(pool:wait_any(0) == nil, "a result after all were returned")

-- 3. a job past its time limit is a result, and the worker is replaced
pool:close()
-- (a long straight-line body: about 1 s of NVRTC on a 2-core box)
local body = {}
for i = 1, 100 do body[i] = string.format("\ta = sinf(a * 1.0001f + %d.0f) * x[(threadIdx.x + %d) & 1023];", i, i) end
local slow_src = "extern \"C\" __global__ void slow(float *x) {\n\tfloat a = x[threadIdx.x];\n" ..
  table.concat(body, "\n") .. "\n\tx[threadIdx.x] = a;\n}\n"
pool = compile.pool(1, { cache = false, timeout_s = 0.1 })
local slow = pool:submit({ source = slow_src, entry = "slow", arch = "sm_90" })
local r = pool:wait(slow)
check(not r.ok and r.log:find("timed out"), "timeout: ok=%s log=%s", r.ok, r.log)
pool:close()
pool = compile.pool(1, { cache = false })
r = pool:wait(pool:submit(job(6)))
check(r.ok and not r.cached, "after a timeout: %s", r.log)
-- an option NVRTC refuses is a compile error too
r = pool:wait(pool:submit(job(6, "--no-such-option")))
check(not r.ok and r.log:find("no%-such%-option"), "bad option: %s", r.log)
pool:close()

-- 4. options for a spec: knobs, includes, arch
local spec = {
  dir = "specs", kernel = { path = "kernels/x.cu", options = { "-std=c++17" } },
  knobs = { { name = "BLOCK", values = { 64 } } },
}
function spec:knob_options(c) return { "-std=c++17", c.BLOCK > 32 and "-DWIDE" or nil } end
local o = table.concat(compile.options_for(spec, { BLOCK = 64 }, "sm_90a"), " ")
check(o:find("-DWIDE", 1, true) and o:find("-std=c++17", 1, true) and not o:find("BLOCK", 1, true), "options: %s", o)
check(o:find("--gpu-architecture=sm_90a", 1, true) and o:find("-Ispecs", 1, true) and o:find("-Ikernels", 1, true), "options: %s", o)
check(#compile.include_dirs() >= 1, "no CUDA include directory found")
check(o:find("-I" .. compile.include_dirs()[1], 1, true), "options lack the toolkit include: %s", o)

-- 5. an edited header included with #include "..." is a cache miss
local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
assert(sys.mkdir_p(dir .. "/inc"))
write(dir .. "/inc/scale.cuh", "#define FACTOR 2.0f\n")
write(dir .. "/inc/common.cuh", '#include "scale.cuh"\n')
local src = '#include "common.cuh"\nextern "C" __global__ void k(float *x) { x[0] *= FACTOR; }\n'
check(compile.include_digest("extern \"C\" __global__ void k() {}", dir, {}) == nil, "digest without includes")
local d1 = compile.include_digest(src, dir, { dir .. "/inc" })
check(d1 and #d1 == 64, "no digest for a source with includes")
local j = { source = src, entry = "k", arch = "sm_90", options = { "-I" .. dir .. "/inc" }, salt = d1 }
r = compile.compile(j, { cache_dir = dir .. "/cache" })
check(r.ok and not r.cached, "header job: %s", r.log)
check(compile.compile(j, { cache_dir = dir .. "/cache" }).cached, "header job not cached the second time")
write(dir .. "/inc/scale.cuh", "#define FACTOR 3.0f\n") -- two levels down
local d2 = compile.include_digest(src, dir, { dir .. "/inc" })
check(d2 and d2 ~= d1, "digest unchanged after editing a nested header")
j.salt = d2
check(not compile.compile(j, { cache_dir = dir .. "/cache" }).cached, "edited header answered from the cache")

-- 6. so is one included with #include <...> from the spec's folders (they
-- are on the include path), nested ones too; a toolkit header is not hashed
write(dir .. "/inc/tile.cuh", "#include <scale.cuh>\n#define TILE 4\n")
local asrc = '#include <tile.cuh>\n#include <cuda_fp16.h>\nextern "C" __global__ void k(float *x) { x[0] *= TILE; }\n'
local a1 = compile.include_digest(asrc, dir, { dir .. "/inc" })
check(a1 ~= nil, "no digest for a source with an angle-bracket include of a spec folder's header")
write(dir .. "/inc/scale.cuh", "#define FACTOR 4.0f\n")
local a2 = compile.include_digest(asrc, dir, { dir .. "/inc" })
check(a2 and a2 ~= a1, "digest unchanged after editing a header included with <...> two levels down")
if #compile.include_dirs() > 0 then
  check(compile.include_digest('#include <cuda_fp16.h>\n', dir, { dir .. "/inc" }) == nil,
        "a toolkit header is hashed (its version is in the key)")
end

-- 7. so is a header an option pre-includes (--pre-include=F, -include F):
-- the job's salt, the reference's and the headers' digest all change
for _, form in ipairs({ '"--pre-include=defs.h"', '"-include", "defs.h"' }) do
  local sd = dir .. "/pre"
  assert(sys.mkdir_p(sd))
  write(sd .. "/defs.h", "#define SCALE 2.0f\n")
  write(sd .. "/k.cu", 'extern "C" __global__ void k(float *x) { x[0] *= SCALE; }\n')
  write(sd .. "/spec.json", [[{ "name": "pre", "kernel": { "source": "k.cu", "entry": "k", "options": [ ]] .. form ..
        [[ ] }, "knobs": [ { "name": "B", "values": [ 32 ] } ], "launch": { "grid": [ 1 ], "block": [ "B" ] },
        "args": [ { "name": "x", "type": "f32", "shape": [ 1 ], "output": true } ],
        "reference": { "source": "k.cu", "entry": "k", "options": [ ]] .. form .. [[ ], "launch": { "grid": [ 1 ], "block": [ 1 ] } } }]])
  local pspec = require("kopt.spec").load(sd .. "/spec.json")
  local before = { compile.job_for(pspec, { B = 32 }).salt, compile.reference_job(pspec).salt,
                   compile.headers_digest(pspec, pspec.kernel) }
  write(sd .. "/defs.h", "#define SCALE 3.0f\n")
  local after = { compile.job_for(pspec, { B = 32 }).salt, compile.reference_job(pspec).salt,
                  compile.headers_digest(pspec, pspec.kernel) }
  for i, what in ipairs({ "the job's salt", "the reference's salt", "the headers' digest" }) do
    check(before[i] and before[i] ~= after[i], "%s: %s unchanged after editing a pre-included header", form, what)
  end
end

-- 8. a reference without an arch of its own is built for the kernel's
do
  local rspec = require("kopt.spec").load(dir .. "/pre/spec.json")
  rspec.kernel.arch = "sm_90a"
  check(compile.reference_job(rspec, "sm_90").arch == "sm_90a", "the reference does not inherit kernel.arch")
  rspec.reference.arch = "sm_90"
  check(compile.reference_job(rspec, "sm_90").arch == "sm_90", "the reference's own arch is not kept")
end

os.execute("rm -rf '" .. dir .. "'")
print("compile pool: ok")
return 0
