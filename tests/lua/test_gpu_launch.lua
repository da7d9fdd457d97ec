-- Launch attributes on a GPU: thread-block clusters (launch.cluster) and
-- cooperative grids (launch.cooperative), each through the cuda backend and
-- the verifier. A kernel that writes its cluster rank and cluster id is
-- correct only when the launch really formed clusters of the spec's size; a
-- kernel whose blocks pass a grid-wide barrier (a counter in kernel.state)
-- and then read a value another block wrote before it is correct only when
-- every block ran at once. A grid that is not a whole number of clusters, a
-- cooperative grid larger than can be resident and a pipeline's later kernel
-- the device cannot run are `invalid`, with the numbers. Needs a GPU of
-- compute capability 9.0: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local tmp = T.tmpdir("gpu_launch")

local G = require("gpu_testlib")
local function write_spec(name, files, json_text) return G.write_spec(tmp .. "/" .. name, files, json_text) end
local function evaluate(spec, configs) return G.evaluate(spec, configs, 0.02) end
local log_of = G.log_of

-- 1. Clusters: out[block] = rank in cluster + 100 * cluster id (x only).
local cluster_cu = [[
extern "C" __global__ void who(int *out, int n)
{
	unsigned rank, id;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
	asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(id));
	if (threadIdx.x == 0 && blockIdx.x < n)
		out[blockIdx.x] = (int)(rank + 100 * id);
}
]]
local cluster_ref = [[
extern "C" __global__ void who_ref(int *out, int n)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b < n)
		out[b] = b % CL + 100 * (b / CL);
}
]]
local cluster = write_spec("cluster", { ["who.cu"] = cluster_cu, ["who_ref.cu"] = cluster_ref }, [[
{ "name": "cluster_ranks",
  "kernel": { "source": "who.cu", "entry": "who" },
  "problem": { "n": 48 },
  "knobs": [ { "name": "CL", "values": [1, 2, 3, 4, 5, 8] } ],
  "launch": { "grid": ["n", 1, 1], "block": [32, 1, 1], "cluster": ["CL", 1, 1] },
  "args": [ { "name": "out", "type": "i32", "shape": ["n"], "output": true },
            { "name": "n", "type": "i32", "value": "n" } ],
  "reference": { "source": "who_ref.cu", "entry": "who_ref", "options": ["-DCL=2"],
                 "launch": { "grid": [1, 1, 1], "block": [64, 1, 1] } },
  "tolerance": { "max_abs": 0.5 } }
]])
local r = evaluate(cluster, { { CL = 2 }, { CL = 4 } })
T.eq(r[1] and r[1].status, "ok", "clusters of 2: ranks and ids as the reference (" .. log_of(r[1]) .. ")")
T.eq(r[2] and r[2].status, "wrong", "clusters of 4 against a reference of 2: the launch did form clusters of 4")
r = evaluate(cluster, { { CL = 5 }, { CL = 3 } })
T.eq(r[1] and r[1].status, "invalid", "a grid of 48 is not a whole number of clusters of 5")
T.check(log_of(r[1]):find("whole number of clusters", 1, true), "names why: %s", log_of(r[1]))
T.eq(r[2] and r[2].status, "wrong", "clusters of 3 (16 of them) run, and differ from the reference's pairs")

-- 2. Cooperative: every block writes its value, arrives at the barrier,
-- waits for all, then copies the value of the block half a grid away.
local coop_cu = [[
__device__ unsigned kopt_arrived;
extern "C" __global__ void swap_halves(int *mid, int *out, int n)
{
	if (threadIdx.x == 0) {
		mid[blockIdx.x] = 7 * (int)blockIdx.x + 1;
		asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&kopt_arrived) : "memory");
		unsigned seen;
		do {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&kopt_arrived) : "memory");
		} while (seen < gridDim.x);
		out[blockIdx.x] = __ldcg(&mid[(blockIdx.x + n / 2) % n]);
	}
}
]]
local coop_ref = [[
extern "C" __global__ void swap_ref(int *mid, int *out, int n)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b < n)
		out[b] = 7 * ((b + n / 2) % n) + 1;
}
]]
local coop = write_spec("coop", { ["swap.cu"] = coop_cu, ["swap_ref.cu"] = coop_ref }, [[
{ "name": "cooperative_swap",
  "kernel": { "source": "swap.cu", "entry": "swap_halves", "state": ["kopt_arrived"] },
  "knobs": [ { "name": "PER_SM", "values": [2, 1024] } ],
  "launch": { "grid": ["PER_SM * device.sm_count", 1, 1], "block": [1024, 1, 1], "cooperative": true },
  "args": [ { "name": "mid", "type": "i32", "shape": ["PER_SM * device.sm_count"], "scratch": true },
            { "name": "out", "type": "i32", "shape": ["PER_SM * device.sm_count"], "output": true },
            { "name": "n", "type": "i32", "value": "PER_SM * device.sm_count" } ],
  "reference": { "source": "swap_ref.cu", "entry": "swap_ref",
                 "launch": { "grid": ["cdiv(PER_SM * device.sm_count, 128)", 1, 1], "block": [128, 1, 1] } },
  "tolerance": { "max_abs": 0.5 } }
]])
r = evaluate(coop, { { PER_SM = 2 }, { PER_SM = 1024 } })
T.eq(r[1] and r[1].status, "ok", "2 blocks of 1024 threads per multiprocessor, cooperative: the barrier holds (" ..
  log_of(r[1]) .. ")")
T.eq(r[2] and r[2].status, "invalid", "a cooperative grid of 1024 blocks per multiprocessor")
T.check(log_of(r[2]):find("needs them all resident", 1, true), "names why: %s", log_of(r[2]))
-- 3. A pipeline's later kernel is held to the device's limits too: a final
-- block of 2048 threads makes the config invalid, naming that kernel.
local pipe_json = io.open("examples/kt/reduce/reduce2.json"):read("a")
  :gsub('"values": %[32, 128, 512, 1024%]', '"values": [32, 128, 512, 1024, 2048]')
local pipe = write_spec("pipeline", {
  ["reduce2.cu"] = io.open("examples/kt/reduce/reduce2.cu"):read("a"),
  ["reduce2_ref.cu"] = io.open("examples/kt/reduce/reduce2_ref.cu"):read("a"),
}, pipe_json)
r = evaluate(pipe, { { block_size_x = 256, items = 4, final_block = 128 },
                     { block_size_x = 256, items = 4, final_block = 2048 } })
T.eq(r[1] and r[1].status, "ok", "the pipeline within the limits (" .. log_of(r[1]) .. ")")
T.eq(r[2] and r[2].status, "invalid", "a later kernel of 2048 threads")
T.check(log_of(r[2]):find("pipeline kernel 'reduce_final'", 1, true) and log_of(r[2]):find("2048", 1, true),
  "names the kernel and the block: %s", log_of(r[2]))

-- 5. A kernel whose (lowered) name is 600 characters: the worker cut entry
-- names at 255, so the module had no function of the name it was asked for;
-- and knobs named as NVRTC's built-in header names them (width, mode),
-- which as -D options broke every compile.
local long = "k_" .. string.rep("long_name_", 60)
local named = write_spec("long_name", {
  ["long.cu"] = 'extern "C" __global__ void ' .. long .. '(float *y, int n)\n{\n' ..
                '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = (float)(i * width + mode);\n}\n',
  ["long_ref.cu"] = 'extern "C" __global__ void long_ref(float *y, int n)\n{\n' ..
                    '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = (float)(i * width + mode);\n}\n',
}, [[
{ "name": "long_name",
  "kernel": { "source": "long.cu", "entry": "]] .. long .. [[" },
  "problem": { "n": 4096 },
  "knobs": [ { "name": "width", "values": [3] }, { "name": "mode", "values": [1] }, { "name": "BS", "values": [128, 256] } ],
  "launch": { "grid": ["cdiv(n, BS)"], "block": ["BS"] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ],
  "reference": { "source": "long_ref.cu", "entry": "long_ref", "knobs": ["width", "mode"] } }
]])
r = evaluate(named, { { width = 3, mode = 1, BS = 128 }, { width = 3, mode = 1, BS = 256 } })
T.eq(r[1] and r[1].status, "ok", "a 602-character entry name, knobs width and mode (" .. log_of(r[1]) .. ")")
T.eq(r[2] and r[2].status, "ok", "the same at another block size (" .. log_of(r[2]) .. ")")

-- 6. A scalar argument set by a knob, read by the reference too: the worker
-- kept its reference outputs while the reference's compile key stayed, so
-- the second config was compared with the first one's scale (wrong).
local scaled = write_spec("scalar_knob", {
  ["sc.cu"] = 'extern "C" __global__ void sc(float *y, const float *x, float s, int n)\n{\n' ..
              '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] * s;\n}\n',
  ["sc_ref.cu"] = 'extern "C" __global__ void sc_ref(float *y, const float *x, float s, int n)\n{\n' ..
                  '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] * s;\n}\n',
}, [[
{ "name": "scalar_knob",
  "kernel": { "source": "sc.cu", "entry": "sc" },
  "problem": { "n": 4096 },
  "knobs": [ { "name": "S", "values": [1, 2, 3] }, { "name": "BS", "values": [128, 256] } ],
  "launch": { "grid": ["cdiv(n, BS)"], "block": ["BS"] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "x", "type": "f32", "shape": ["n"] },
            { "name": "s", "type": "f32", "value": "S" }, { "name": "n", "type": "i32", "value": "n" } ],
  "reference": { "source": "sc_ref.cu", "entry": "sc_ref" } }
]])
r = evaluate(scaled, { { S = 1, BS = 128 }, { S = 2, BS = 128 }, { S = 3, BS = 256 }, { S = 1, BS = 256 } })
for k = 1, 4 do
  T.eq(r[k] and r[k].status, "ok", "a knob-set scalar, config " .. k .. " (" .. log_of(r[k]) .. ")")
end
return T.done()
