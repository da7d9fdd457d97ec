-- kopt.symptoms on real counters: the KTT CoulombSum3d space (RTX 2080 Ti,
-- 210 configurations, 33 counters each) and on H100-named metric sets.
-- Checks findings against what the file itself says about each config (local
-- memory per thread, the busiest pipe), so nothing here is a recorded answer.
local cjson = require("cjson")
local sym = require("kopt.symptoms")

local failures = 0
local function check(cond, fmt, ...)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
end

local function read_json(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return cjson.decode(text)
end

-- KTT semantics (OpenCL names): LocalMemorySize is CUDA shared memory,
-- PrivateMemorySize is CUDA local memory per thread; GlobalSize counts blocks.
local device = { name = "NVIDIA GeForce RTX 2080 Ti", cc_major = 7, cc_minor = 5, sm_count = 68 }
local doc = read_json("tests/data/coulomb_2080.json")
local rows = {}
for _, r in ipairs(doc.Results) do
  local cr = r.ComputationResults[1]
  local metrics, config = {}, {}
  for _, c in ipairs(cr.ProfilingData.Counters) do metrics[c.Name] = c.Value end
  for _, p in ipairs(r.Configuration) do config[p.Name] = math.tointeger(p.Value) or p.Value end
  local cd = cr.CompilationData
  local facts = { device = device, regs = cd.RegistersCount, smem = cd.LocalMemorySize,
                  local_bytes = cd.PrivateMemorySize,
                  threads = cr.LocalSize.X * cr.LocalSize.Y * cr.LocalSize.Z,
                  blocks = cr.GlobalSize.X * cr.GlobalSize.Y * cr.GlobalSize.Z }
  local result = { status = "ok", time_ms = r.TotalDuration / 1000, metrics = metrics }
  local s, q = sym.diagnose(result, facts)
  rows[#rows + 1] = { config = config, result = result, facts = facts, symptoms = s, q = q }
end
check(#rows == 210, "expected 210 configurations, read %d", #rows)
table.sort(rows, function(a, b) return a.result.time_ms < b.result.time_ms end)

-- Mapping: KTT sector counters become bytes; derived SM% and L2 hit rate.
local best = rows[1]
check(best.q.dram_read_bytes == best.result.metrics["dram__sectors_read.sum"] * 32, "dram bytes from sectors")
check(best.q.sm_pct and best.q.sm_pct >= best.q.xu_pct, "sm_pct derived from the busiest pipe")
check(best.q.l2_hit_pct and best.q.l2_hit_pct >= 0 and best.q.l2_hit_pct <= 100, "derived L2 hit rate in [0,100]")

-- The fastest config saturates the special-function pipe (rsqrt) and spills nothing.
local top = best.symptoms[1]
check(top and top.name == "compute_bound" and top.pipe == "xu",
      "best config: expected compute_bound on pipe xu, got %s", sym.brief(best.symptoms))
check(not sym.find(best.symptoms, "register_spills"), "best config must not report spills")

-- register_spills fires exactly for the configs with local memory per thread,
-- and those configs are slower on average.
local with, without, nwith = 0, 0, 0
for _, x in ipairs(rows) do
  local has = sym.find(x.symptoms, "register_spills") ~= nil
  check(has == (x.facts.local_bytes > 0), "config %s: register_spills=%s but local_bytes=%d",
        cjson.encode(x.config), tostring(has), x.facts.local_bytes)
  if x.facts.local_bytes > 0 then with, nwith = with + x.result.time_ms, nwith + 1
  else without = without + x.result.time_ms end
end
check(nwith > 0 and nwith < #rows, "the file has configs with and without local memory")
check(with / nwith > 2 * without / (#rows - nwith), "spilling configs should be much slower on average")

-- Every diagnosis is sorted, bounded and explained with numbers.
for _, x in ipairs(rows) do
  for i, s in ipairs(x.symptoms) do
    check(s.severity >= 0 and s.severity <= 1, "severity in [0,1]")
    check(type(s.summary) == "string" and s.summary:find("%d"), "summary carries numbers: %s", s.summary)
    if i > 1 then check(x.symptoms[i - 1].severity >= s.severity, "sorted by severity") end
  end
end

-- One work item per thread without unrolling: nothing is busy -> latency-bound.
for _, x in ipairs(rows) do
  local c = x.config
  if c.Z_ITERATIONS == 1 and c.INNER_UNROLL_FACTOR == 0 and x.facts.local_bytes == 0 then
    local busy = math.max(x.q.sm_pct, x.q.dram_pct, x.q.l2_pct)
    check((sym.find(x.symptoms, "latency_bound") ~= nil) == (busy < sym.thresholds.busy),
          "Z1 config %s: latency_bound iff no unit is busy (max %.1f%%)", cjson.encode(c), busy)
  end
end

-- Move priors on a spilling config: less work per thread / less unrolling is
-- favoured, more is discouraged; unknown moves are neutral.
local spill
for _, x in ipairs(rows) do
  if x.facts.local_bytes > 0 then spill = x break end
end
local down = sym.move_bias(spill.symptoms, { method = "decrease", knob = "Z_ITERATIONS", from = 32, to = 16 })
local up = sym.move_bias(spill.symptoms, { method = "increase", knob = "INNER_UNROLL_FACTOR", from = 1, to = 2 })
check(down > 1.2, "spills: decreasing Z_ITERATIONS should be favoured, bias %.2f", down)
check(up < 0.8, "spills: more unrolling should be discouraged, bias %.2f", up)
check(sym.move_bias(spill.symptoms, { method = "mystery" }) == 1, "unknown move is neutral")
local mb = sym.find(spill.symptoms, "memory_bound")
check(not mb or mb.caused_by == "register_spills", "memory traffic of a spilling config is blamed on the spills")
check(sym.classify_move("grow_tile") == "tile_up", "grow_tile classified")
check(sym.classify_move({ knob = "WORK_GROUP_SIZE_X", from = 16, to = 32 }) == "threads_up", "block size up")
check(sym.classify_move({ knob = "USE_SOA", from = 0, to = 1 }) == "layout", "layout knob")
check(sym.classify_move({ knob = "STAGES", tags = { "pipeline" }, direction = -1 }) == "stages_down", "stages down")

-- H100 metric names (the default CUPTI set): a DRAM-bound copy.
local copy = sym.diagnose({ metrics = {
  ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 91.2,
  ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 22.5,
  ["sm__warps_active.avg.pct_of_peak_sustained_active"] = 88.9,
  ["lts__t_sector_hit_rate.pct"] = 12.0,
  ["dram__bytes_read.sum"] = 1.0738e9, ["dram__bytes_write.sum"] = 1.0779e9,
} }, { device = { cc_major = 9, cc_minor = 0, sm_count = 132 }, threads = 256, regs = 16,
       blocks = 132 * 8 * 20, work = { bytes = 2.147e9 } })
check(copy[1] and copy[1].name == "memory_bound" and copy[1].unit == "DRAM", "copy: memory_bound DRAM first, got %s",
      sym.brief(copy))
check(sym.find(copy, "poor_l2_reuse") ~= nil, "copy: streaming with 12%% L2 hits is poor reuse")
check(sym.move_bias(copy, "grow_tile") > 1, "memory-bound: bigger tiles favoured")

-- A WMMA GEMM like the one in the CUDA notes: 232 registers, 128 threads,
-- 56,832 B of shared memory -> 2 blocks/SM limited by registers (12.5%).
local gemm_facts = { device = { cc_major = 9, cc_minor = 0, sm_count = 132 }, threads = 128, regs = 232,
                     smem = 56832, blocks = 300, matrix = true }
local occ = sym.occupancy(gemm_facts, gemm_facts.device)
check(occ.blocks_per_sm == 2 and occ.limiter == "registers", "gemm occupancy: %d blocks/SM by %s",
      occ.blocks_per_sm, tostring(occ.limiter))
-- The same from a device table as kopt.gpu reports it.
local h200 = { cc_major = 9, cc_minor = 0, sm_count = 132, max_threads_sm = 2048, max_regs_sm = 65536,
               max_smem_sm = 233472, max_blocks_sm = 32 }
local occ2 = sym.occupancy(gemm_facts, h200)
check(occ2.blocks_per_sm == 2 and occ2.limiter == "registers" and occ2.max_warps == 64, "device-table limits")
local gemm = sym.diagnose({ metrics = {
  ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 41.8,
  ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 18.0,
  ["sm__warps_active.avg.pct_of_peak_sustained_active"] = 12.2,
  ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] = 35.7,
} }, gemm_facts)
check(sym.find(gemm, "latency_bound"), "gemm: latency-bound, got %s", sym.brief(gemm))
local lo = sym.find(gemm, "low_occupancy")
check(lo and lo.limiter == "registers", "gemm: low occupancy limited by registers")
check(sym.find(gemm, "tensor_idle"), "gemm: tensor pipe idle")
check(sym.find(gemm, "tail_effect"), "gemm: 300 blocks on 264 slots leave a tail (1.14 waves)")
-- on an assumed device (a replayed recording's GPU is not known) no tail is
-- claimed from SMs that are not its
do
  local assumed = {}
  for k, v in pairs(gemm_facts) do assumed[k] = v end
  assumed.device = { cc_major = 9, cc_minor = 0, sm_count = 132, assumed = true }
  local g2 = sym.diagnose({ metrics = { ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 41.8 } }, assumed)
  check(not sym.find(g2, "tail_effect"), "no tail effect on an assumed device")
end
check(sym.move_bias(gemm, { method = "increase", knob = "STAGES" }) > 1, "gemm: deeper pipeline favoured")

-- Shared memory as the occupancy limiter.
local smem = sym.diagnose({ metrics = {} }, { device = { cc_major = 9, cc_minor = 0 }, threads = 128, regs = 32,
                                               smem = 120 * 1024, blocks = 100000 })
check(sym.find(smem, "smem_limited"), "120 KB per block is shared-memory limited, got %s", sym.brief(smem))

-- No counters and no facts: no findings, no error.
check(#sym.diagnose({ status = "ok" }, nil) == 0, "empty result gives no symptoms")
check(sym.format({}):find("no bottleneck"), "format of no symptoms")

if failures > 0 then
  io.stderr:write(failures, " check(s) failed\n")
  return 1
end
print(string.format("test_symptoms: ok (%d configs diagnosed)", #rows))
return 0
