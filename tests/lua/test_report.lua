-- kopt.report: speed-of-light numbers from device facts, work and counters;
-- REPORT.md written; render is pure (same inputs, same text).
local report = require("kopt.report")
local sys = require("kopt.sys")

local failures = 0
local function check(cond, fmt, ...)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
end
local function near(a, b, rel) return a and b and math.abs(a - b) <= rel * math.abs(b) end

-- An H100 SXM as the driver reports it.
local h100 = { name = "NVIDIA H100 80GB HBM3", cc_major = 9, cc_minor = 0, sm_count = 132,
               clock_khz = 1980000, mem_clock_khz = 2619000, mem_bus_width = 5120 }
local p = report.peaks(h100, "tensor")
check(near(p.flops, 132 * 4096 * 1.98e9, 1e-9), "tensor peak")
check(near(p.bytes_per_s, 3.352e12, 1e-3), "HBM3 peak %.4g", p.bytes_per_s or -1)
check(near(report.peaks(h100, "fp32").flops, 66.9e12, 1e-2), "fp32 peak")

-- A 4096^3 GEMM at 0.611 ms with counters like those of the CUDA notes.
local n = 4096
local best = { config = { BLOCK_M = 128, BLOCK_N = 128, STAGES = 3 },
  result = { status = "ok", time_ms = 0.611, resources = { regs = 232, smem = 56832 },
    metrics = {
      ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 41.8,
      ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 12.0,
      ["sm__warps_active.avg.pct_of_peak_sustained_active"] = 12.2,
      ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] = 35.7,
      ["dram__bytes_read.sum"] = 1.6e8, ["dram__bytes_write.sum"] = 3.4e7,
      ["sm__cycles_elapsed.avg.per_second"] = 1.79e9 } } }
local facts = { name = "matmul_f16_4096", device = h100, matrix = true,
                work = { flops = 2 * n ^ 3, bytes = 2 * 3 * n * n },
                launch = { grid = { 32, 32, 1 }, block = { 128, 1, 1 }, smem = 0 } }
local md, term, a = report.render(best, facts)
check(near(a.flops_s, 2 * n ^ 3 / 0.611e-3, 1e-9), "achieved flops")
check(near(a.compute_frac, a.flops_s / p.flops, 1e-9), "compute fraction")
check(a.limiter == "latency", "limiter from counters: %s", tostring(a.limiter))
check(md:find("| compute |", 1, true) and md:find("Limiter: **latency**", 1, true), "markdown table and limiter")
check(md:find("low occupancy", 1, true) and md:find("registers", 1, true), "occupancy symptom with its limiter")
check(md:find("1.93x the problem's minimum", 1, true), "DRAM traffic vs minimum:\n%s", md)
check(term:find("speed of light:", 1, true) and term:find("limiter: latency", 1, true), "terminal block: %s", term)
local md2, term2 = report.render(best, facts)
check(md2 == md and term2 == term, "render is pure")

-- Without counters: work-based limiter and the reason profiling was off.
local plain = { config = { X = 1 }, result = { status = "ok", time_ms = 1.0 } }
local md3, term3, a3 = report.render(plain, { device = h100, work = { bytes = 3e9 },
                                              profiling = "profiling is off: KOPT_CUPTI_LIB=none" })
check(a3.limiter == "memory" and near(a3.memory_frac, 3e12 / p.bytes_per_s, 1e-9), "memory-bound by work")
check(md3:find("No hardware counters", 1, true) and term3:find("KOPT_CUPTI_LIB=none", 1, true), "says why no counters")

-- A recording's metrics that are no counters (a Kernel Tuner cache's
-- compile_time, energy) and work figures without device peaks (a replay):
-- no Counters section, and the report says what is missing, in agreement
-- with its own table (it said "no counters and no work figures")
local replayed = { config = { X = 1 }, result = { status = "ok", time_ms = 1.0,
                                                  metrics = { compile_time = 120, energy = 3.5 } } }
local md4, _, a4 = report.render(replayed, { work = { flops = 2e9, bytes = 1e8 } })
check(not a4.has_counters and not md4:find("## Counters", 1, true), "a recording's compile_time is no counter:\n%s", md4)
check(md4:find("no device peaks", 1, true) and not md4:find("no work figures", 1, true),
      "the missing peaks are named, not the work figures:\n%s", md4)
check(md4:find("no counters to read", 1, true) and not md4:find("stands out in the counters", 1, true),
      "the symptoms do not speak of counters there are none of:\n%s", md4)

-- write() puts REPORT.md under best/.
local dir = os.tmpname()
os.remove(dir)
local t = report.write(dir, best, facts)
local f = io.open(dir .. "/best/REPORT.md", "rb")
check(f ~= nil and t == term, "REPORT.md written")
if f then
  check(f:read("a") == md, "file content equals render")
  f:close()
end
os.remove(dir .. "/best/REPORT.md")
os.remove(dir .. "/best")
os.remove(dir)
assert(sys)

-- a replay's REPORT.md names the recording's GPU, not the H100 a spec's
-- expressions assume without one
do
  local kopt = os.getenv("KOPT") or "./build/kopt"
  local out = os.tmpname()
  os.remove(out)
  os.execute(string.format("KOPT_DB=off %s random tests/data/specs/vector_add.json --backend " ..
                           "replay:tests/data/vector_add_A4000.json --budget 3 --out %s -q >/dev/null 2>&1", kopt, out))
  local r = io.open(out .. "/best/REPORT.md", "rb")
  local text = r and r:read("a") or ""
  if r then r:close() end
  check(text:find("Device: NVIDIA RTX A4000 (recorded).", 1, true) ~= nil and not text:find("assumed", 1, true),
        "a replay's REPORT.md names the recorded device:\n%s", text)
  os.execute("rm -rf '" .. out .. "'")
end

if failures > 0 then
  io.stderr:write(failures, " check(s) failed\n")
  return 1
end
print("test_report: ok")
return 0
