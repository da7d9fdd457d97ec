-- The cuda backend's parts that need no GPU: the worker request built from a
-- spec (launch geometry, arguments, tolerances, watchdog), the mapping of a
-- worker reply to a result table (TFLOP/s, GB/s, resources), and, on a
-- machine without a driver, the one-sentence refusal of `kopt devices`.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local spec = require("kopt.spec").load("kernels/faults/faults.json")

local be = cuda._offline(spec, { seed = 3 })
local m = assert(be:request(5, { FAULT = 9, BLOCK = 256 }, "CUBIN", "faults"))
T.eq(m.op, "run", "op")
T.eq(m.grid_x, 4194304 // 256, "grid_x = cdiv(N, BLOCK)")
T.eq(m.block_x, 256, "block_x")
T.eq(m.smem, 300000, "smem expression evaluated per config")
T.eq(m.ref_grid_x, 16384, "reference launch")
T.eq(m.nargs, 3, "nargs")
T.eq(m["a1.init"], "uniform01", "input distribution")
T.eq(m["a1.count"], 4194304, "count")
T.eq(m["a2.output"], 1, "output flag")
T.eq(m["a3.kind"], "scalar", "scalar arg")
T.eq(m["a3.value"], 4194304, "scalar value")
T.eq(m.seed, 3, "seed")
T.check(m.verify2 == true, "second correctness trial requested")
T.eq(m.timeout_ms, 2000, "watchdog floor before the reference is timed")
be.ref_ms = 100
T.eq(be:timeout_ms(), 5000, "watchdog = 50x the reference time")
-- the input seed moves on every reseed_every evaluations
be.evaluated = 64
T.eq(be:request(1, { FAULT = 0, BLOCK = 256 }, "C", "faults").seed, 4, "reseeded")

-- the reference timed as a candidate runs with the reference's launch
-- (regression: it once ran with the candidate's geometry and left most of
-- its output unwritten)
local mm = require("kopt.spec").load("specs/matmul_f16.json")
local mb = cuda._offline(mm)
local cfg = { BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 32, WARPS = 4, STAGES = 3 }
local cm = assert(mb:request(1, cfg, "C", "matmul"))
local rm = assert(mb:request(0, cfg, "C", "matmul_ref", true))
T.eq(cm.grid_x, 32, "candidate grid")
T.eq(rm.grid_x, 256, "reference grid (cdiv(N,16))")
T.eq(rm.block_y, 16, "reference block")
T.eq(rm.smem, 0, "reference smem")
T.check(rm.verify2 == false, "no second trial for the reference itself")

-- The request follows the worker's own field list (core/worker/request_fields.h):
-- every required field sent, nothing sent that the worker does not read.
local run_fields, arg_fields = require("kopt.gpu").request_fields()
local listed = {}
for _, f in ipairs(run_fields) do
  listed[f.name] = true
  if f.required then T.check(m[f.name] ~= nil, "required field %s is sent", f.name) end
end
for k in pairs(m) do
  local name = k:match("^a%d+%.(.+)$")
  local known = k == "op" or listed[k]
  if name then for _, f in ipairs(arg_fields) do known = known or f.name == name end end
  T.check(known, "field %s is in the worker's list", k)
end
local function copy(t) local c = {} for k, v in pairs(t) do c[k] = v end return c end
local extra = copy(m); extra.min_sample = 5
local ok1, e1 = pcall(be.check_request, be, extra)
T.check(not ok1 and e1:find("unknown field 'min_sample'", 1, true), "an unlisted field is an error: %s", tostring(e1))
local missing = copy(m); missing.max_noise = nil
local ok2, e2 = pcall(be.check_request, be, missing)
T.check(not ok2 and e2:find("missing field 'max_noise'", 1, true), "a missing field is an error: %s", tostring(e2))
local badarg = copy(m); badarg["a4.name"] = "x"
T.check(not pcall(be.check_request, be, badarg), "an argument past nargs is an error")
local wrongtype = copy(m); wrongtype.timeout_ms = "soon"
T.check(not pcall(be.check_request, be, wrongtype), "a field of the wrong type is an error")
-- a string past the worker's buffer was cut there unseen (a lowered C++
-- name over 255 bytes loaded another name); now 1023 bytes fit, and a
-- longer one makes the candidate fail with a sentence (a user error)
local errors = require("kopt.errors")
local long = copy(m); long.entry = "_Z" .. string.rep("x", 600)
T.check(pcall(be.check_request, be, long), "a 602-byte lowered name fits the worker's entry")
local huge = copy(m); huge.entry = "_Z" .. string.rep("x", 1100)
local ok3, e3 = pcall(be.check_request, be, huge)
T.check(not ok3 and errors.is_user_error(e3) and errors.describe(e3):find("at most 1023 bytes in 'entry'", 1, true),
        "a 1102-byte entry is refused as the candidate's fault: %s", tostring(errors.describe(e3)))
local ok4, e4 = pcall(require("kopt.backends.worker_wire").set_ref, "cubin", huge.entry)
T.check(not ok4 and errors.describe(e4):find("at most 1023 bytes in 'entry'", 1, true), "the reference's entry too")
-- the profiler's request (Cuda:profile) adds listed fields only
local prof = copy(m); prof.time, prof.verify2, prof.profile = false, false, 1
prof.profile_metrics, prof.profile_matrix = "a,b", 0
T.check(pcall(be.check_request, be, prof), "the profiling request is in the list")
-- without a worker the backend says profiling cannot work here (kopt.profiling
-- then switches it off for the run)
local pm, pwhy, pdetail = be:profile({ config = { FAULT = 0, BLOCK = 256 } }, { "a" })
T.check(pm == nil and pwhy == "no GPU worker" and pdetail.kind == "unavailable", "profile without a worker")

local r = be:result({ op = "result", status = "ok", time_ms = 0.02, p90_ms = 0.021, samples = 12,
                      err_rel_l2 = 0.0, err_max_abs = 0.0, regs = 16, smem_static = 1024,
                      smem_dynamic = 0, occupancy = 1.0, blocks_per_sm = 8 },
                    { config = { FAULT = 0, BLOCK = 256 } }, { spills = 0, compile_s = 0.1 })
T.eq(r.status, "ok", "status")
T.check(math.abs(r.gbps - 8 * 4194304 / 0.02e-3 / 1e9) < 1e-6, "gbps from work.bytes: %s", tostring(r.gbps))
T.eq(r.resources.regs, 16, "regs")
T.eq(r.resources.smem, 1024, "smem = static + dynamic")
T.eq(r.err.rel_l2, 0.0, "err")
-- The reply follows the worker's own list (core/worker/reply_fields.h):
-- Cuda:result reads through it (an unlisted read raises; the results above
-- read every field they use), and the worker puts run-reply fields only by
-- that list (KOPT_REPLY_* in run.c, profile.c and loop.c's reply; a name
-- not in the list does not compile), never by a literal key.
local reply_fields, reply_prefixes = require("kopt.gpu").reply_fields()
local in_reply = {}
for _, f in ipairs(reply_fields) do in_reply[f.name] = f.type end
T.check(in_reply.time_ms == "number" and in_reply.samples == "int" and in_reply.status == "string", "reply types")
T.eq(reply_prefixes[1].prefix, "m.", "the counters' family")
local view = cuda.reply_view({ time_ms = 1.5, ["m.dram_bytes"] = 7 })
T.eq(view.time_ms, 1.5, "a listed field reads through")
T.eq(view["m.dram_bytes"], 7, "a prefixed field reads through")
T.check(view.err2_rel_l2 == nil, "a listed absent field is nil")
local okv, ev = pcall(function() return view.median end)
T.check(not okv and tostring(ev):find("not in core/worker/reply_fields.h", 1, true), "an unlisted read raises: %s", tostring(ev))
for _, file in ipairs({ "core/worker/run.c", "core/worker/profile.c" }) do
  local src = assert(io.open(file)):read("a")
  for fn, key in src:gmatch("(kopt_msg_put_%w+)%s*%(%s*[%w_&>%-]+%s*,%s*\"([^\"]*)\"") do
    T.check(false, "%s puts '%s' with %s, not through the reply's list", file, key, fn)
  end
  for key in src:gmatch("KOPT_REPLY_%u+%s*%(%s*[%w_&>%-]+%s*,%s*([%w_]+)") do
    T.check(in_reply[key] ~= nil, "%s puts %s, listed", file, key)
  end
end
local loop_src = assert(io.open("core/worker/loop.c")):read("a")
for _, f in ipairs({ "op", "id", "status", "log" }) do
  T.check(loop_src:find("KOPT_REPLY_%u+%(%S+, " .. f .. ",") ~= nil, "loop.c puts %s through the list", f)
end

local bad = be:result({ op = "result", status = "wrong", log = "check 1: ..." }, { config = { FAULT = 1, BLOCK = 256 } })
T.eq(bad.status, "wrong", "failure is data")
T.check(bad.gbps == nil and bad.time_ms == nil, "no speed for a failed candidate")

local ok, why = cuda.available()
if not ok then
  T.check(why:find("replay", 1, true) ~= nil, "the refusal points at replay: %s", why)
  local rc, _, err = T.run("devices")
  T.eq(rc, 1, "kopt devices exit code without a GPU")
  T.check(err:find("no NVIDIA driver", 1, true) or err:find("reports no GPU", 1, true),
          "kopt devices says why: %s", err)
  T.eq(select(2, err:gsub("\n", "")), 1, "one line")
end

-- Expressions see the same device fields with or without a GPU: every
-- integer the binding sets from the driver (core/bind/gpu.c) is in the
-- offline default too, except the ordinal, clocks and the driver version, which no
-- expression should depend on (regression: the default once said
-- smem_per_sm where a GPU says max_smem_sm, so a spec using it failed only
-- offline).
do
  local f = assert(io.open(T.source_dir .. "/core/bind/gpu.c"))
  local src = f:read("a")
  f:close()
  local default = require("kopt.spec").default_device
  local runtime_only = { index = true, clock_khz = true, mem_clock_khz = true, mem_bus_width = true, driver_version = true }
  local n = 0
  for field in src:gmatch('SETI%("([%w_]+)"') do
    if not runtime_only[field] then
      n = n + 1
      T.check(default[field] ~= nil, "offline default device has " .. field)
    end
  end
  T.check(n >= 12, "found the binding's fields (" .. n .. ")")
end

-- Device-heap use read off the CUBIN: a malloc in an included header, or
-- spelt through a macro, is not in the source's text, and such a candidate
-- shared the worker (tests/cheats/heap_hidden: a cache of answers on the
-- heap, 16x and uncharged)
do
  local compile = require("kopt.compile")
  local tmpd = T.tmpdir("heap-cubin")
  T.write(tmpd .. "/alloc.cuh", "#define GRAB(n) malloc(n)\n#define DROP(p) free(p)\n")
  local function cubin_of(body)
    T.write(tmpd .. "/k.cu", '#include "alloc.cuh"\nextern "C" __global__ void k(float *y) {\n' .. body .. "\n}\n")
    local res = compile.compile({ source = T.slurp(tmpd .. "/k.cu"), entry = "k", name = tmpd .. "/k.cu", arch = "sm_90",
                                  options = { "-I" .. tmpd } }, { cache = false })
    T.check(res.ok, "compiles: %s", tostring(res.log))
    return res.cubin, T.slurp(tmpd .. "/k.cu")
  end
  local cubin, src = cubin_of("  float *p = (float *)GRAB(16);\n  if (p) { p[0] = 1; y[0] = p[0]; DROP(p); }")
  T.check(not cuda.uses_heap(src), "the source's text does not show the heap")
  T.check(cuda.cubin_uses_heap(cubin), "the CUBIN does")
  cubin = cubin_of("  y[0] = 1;")
  T.check(not cuda.cubin_uses_heap(cubin), "a kernel without the heap")
  -- CUDA's aligned allocator, kept without free: no malloc in the text or
  -- the symbols (a system call of its own)
  local aligned = "  float *p = (float *)__nv_aligned_device_malloc(64, 16);\n  if (p) { p[0] = 1; y[0] = p[0]; }"
  cubin, src = cubin_of(aligned)
  T.check(cuda.uses_heap(src), "the text of __nv_aligned_device_malloc shows the heap")
  T.check(cuda.cubin_uses_heap(cubin), "and its CUBIN")
  os.execute("rm -rf '" .. tmpd .. "'")
end

return T.done()
