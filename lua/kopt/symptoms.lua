-- Symptoms: what the hardware counters and static facts of one measured
-- candidate say about why it runs as fast as it does. A symptom is a named,
-- explained finding with the numbers behind it:
--
--   { name = "memory_bound", severity = 0.85, unit = "DRAM",
--     summary = "memory-bound: DRAM at 85% of peak, SM at 31%",
--     numbers = { dram_pct = 85.1, sm_pct = 31.0 } }
--
-- Metric names are those of CUPTI's range profiler and Nsight Compute (the
-- same names), in result.metrics; `quantities` maps the several names a fact
-- goes by (H100 sets, the KTT CoulombSum3d counters) onto one canonical table.
-- Everything here is a pure function of its inputs.
local M = {}

-- Canonical quantity -> raw metric names tried in order, with a scale.
M.sources = {
  duration_ns = { { "gpu__time_duration.sum", 1 } },
  sm_clock_hz = { { "sm__cycles_elapsed.avg.per_second", 1 } },
  dram_pct = { { "dram__throughput.avg.pct_of_peak_sustained_elapsed", 1 },
               { "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 1 } },
  sm_pct = { { "sm__throughput.avg.pct_of_peak_sustained_elapsed", 1 } },
  l2_pct = { { "lts__throughput.avg.pct_of_peak_sustained_elapsed", 1 },
             { "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 1 } },
  l1_pct = { { "l1tex__throughput.avg.pct_of_peak_sustained_active", 1 } },
  warps_active_pct = { { "sm__warps_active.avg.pct_of_peak_sustained_active", 1 } },
  l2_hit_pct = { { "lts__t_sector_hit_rate.pct", 1 } },
  l1_hit_pct = { { "l1tex__t_sector_hit_rate.pct", 1 } },
  dram_read_bytes = { { "dram__bytes_read.sum", 1 }, { "dram__sectors_read.sum", 32 } },
  dram_write_bytes = { { "dram__bytes_write.sum", 1 }, { "dram__sectors_write.sum", 32 } },
  l2_read_bytes = { { "lts__t_bytes_op_read.sum", 1 }, { "lts__t_sectors_op_read.sum", 32 } },
  l2_write_bytes = { { "lts__t_bytes_op_write.sum", 1 }, { "lts__t_sectors_op_write.sum", 32 } },
  local_load_bytes = { { "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", 1 },
                       { "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", 32 } },
  local_store_bytes = { { "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", 1 },
                        { "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", 32 } },
  shared_pct = { { "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed", 1 } },
  issue_pct = { { "smsp__issue_active.avg.pct_of_peak_sustained_active", 1 },
                { "sm__inst_issued.avg.pct_of_peak_sustained_active", 1 } },
  tensor_pct = { { "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 1 },
                 { "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 1 },
                 { "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active", 1 } },
  fma_pct = { { "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 1 },
              { "smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 1 } },
  alu_pct = { { "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active", 1 },
              { "smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active", 1 } },
  xu_pct = { { "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", 1 },
             { "smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", 1 } },
  lsu_pct = { { "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", 1 },
              { "smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", 1 } },
  fp64_pct = { { "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active", 1 },
               { "smsp__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active", 1 } },
  sm_active_pct = { { "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 1 },
                    { "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed", 1 } },
  thread_efficiency_pct = { { "smsp__thread_inst_executed_per_inst_executed.pct", 1 } },
}

-- The compute pipes a kernel can saturate, with what saturating them means.
M.pipes = {
  { "tensor_pct", "tensor", "tensor-core (MMA) pipe" },
  { "fma_pct", "fma", "FP32 multiply-add pipe" },
  { "fp64_pct", "fp64", "FP64 pipe" },
  { "xu_pct", "xu", "special-function pipe (rsqrt, sin, exp, conversions)" },
  { "alu_pct", "alu", "integer/logic pipe" },
  { "lsu_pct", "lsu", "load/store issue pipe" },
  { "issue_pct", "issue", "instruction issue (one instruction per cycle per scheduler)" },
}

-- Percent thresholds. `busy`: a unit above this is a bottleneck (Nsight
-- Compute's speed-of-light rule uses 60%). Change them from Lua if needed.
M.thresholds = {
  busy = 60,            -- % of peak: the unit limits the kernel
  low_occupancy = 40,   -- % of the SM's warp slots
  poor_l2_hit = 50,     -- % L2 hit rate, when DRAM is under pressure
  dram_pressure = 40,   -- % of DRAM peak that makes L2 reuse matter
  tensor_idle = 50,     -- % tensor-pipe activity for a matrix kernel
  tail_idle = 0.2,      -- fraction of the last wave left idle
  divergence = 80,      -- % of threads active per instruction
  min_bytes = 4 * 1024 * 1024, -- hit rates of kernels moving less are noise
}

local function num(v)
  if type(v) == "number" and v == v then return v end
  return nil
end

-- Canonical quantities from a raw metric table. Returns q (value per
-- canonical name) and from (canonical name -> raw name used, or "derived").
function M.quantities(metrics)
  local q, from = {}, {}
  metrics = metrics or {}
  for name, list in pairs(M.sources) do
    for _, s in ipairs(list) do
      local v = num(metrics[s[1]])
      if v then
        q[name], from[name] = v * s[2], s[1]
        break
      end
    end
  end
  -- Sets without sm__throughput (the KTT file): the busiest pipe stands in.
  if not q.sm_pct then
    local best
    for _, p in ipairs(M.pipes) do
      if q[p[1]] and (not best or q[p[1]] > best) then best = q[p[1]] end
    end
    if best then q.sm_pct, from.sm_pct = best, "derived" end
  end
  -- Without a hit-rate counter: L2 read hits = L2 reads that did not go to DRAM.
  if not q.l2_hit_pct and q.l2_read_bytes and q.dram_read_bytes and q.l2_read_bytes > 0 then
    local hit = 100 * (1 - q.dram_read_bytes / q.l2_read_bytes)
    q.l2_hit_pct, from.l2_hit_pct = math.max(0, math.min(100, hit)), "derived"
  end
  if q.dram_read_bytes and q.dram_write_bytes then
    q.dram_bytes = q.dram_read_bytes + q.dram_write_bytes
  end
  if q.local_load_bytes or q.local_store_bytes then
    q.local_bytes = (q.local_load_bytes or 0) + (q.local_store_bytes or 0)
  end
  return q, from
end

-- Whether a metric table holds counters kopt reads. A recording's own columns
-- (time, compile_time, energy) are measurements, not counters.
function M.has_counters(metrics)
  return type(metrics) == "table" and next((M.quantities(metrics))) ~= nil
end

-- Per-architecture limits for the occupancy calculator: warps, blocks,
-- registers and shared memory per SM; shared memory the driver reserves per
-- block. Keyed by compute capability major*10+minor.
M.arch = {
  [70] = { warps = 64, blocks = 32, regs = 65536, smem = 98304, reserved = 0, sms = 80 },
  [75] = { warps = 32, blocks = 16, regs = 65536, smem = 65536, reserved = 0, sms = 68 },
  [80] = { warps = 64, blocks = 32, regs = 65536, smem = 167936, reserved = 1024, sms = 108 },
  [86] = { warps = 48, blocks = 16, regs = 65536, smem = 102400, reserved = 1024, sms = 84 },
  [89] = { warps = 48, blocks = 24, regs = 65536, smem = 102400, reserved = 1024, sms = 128 },
  [90] = { warps = 64, blocks = 32, regs = 65536, smem = 233472, reserved = 1024, sms = 132 },
}

-- Limits of a device table ({cc_major=, cc_minor=, sm_count=, ...} as in a
-- spec's `device`); unknown architectures fall back to the nearest older one.
function M.limits(device)
  device = device or {}
  local cc = (device.cc_major or 9) * 10 + (device.cc_minor or 0)
  local best
  for k in pairs(M.arch) do
    if k <= cc and (not best or k > best) then best = k end
  end
  local a = M.arch[best or 90]
  return {
    warps = device.max_threads_sm and device.max_threads_sm // 32 or a.warps,
    blocks = device.max_blocks_sm or a.blocks,
    regs = device.max_regs_sm or a.regs, smem = device.max_smem_sm or a.smem,
    reserved = a.reserved, sms = device.sm_count or a.sms,
  }
end

-- Theoretical occupancy and its limiter. f: { threads = per block, regs = per
-- thread, smem = bytes per block (static + dynamic) }. Returns
-- { blocks_per_sm =, occupancy = fraction of warp slots, limiter = name }.
function M.occupancy(f, device)
  local lim = M.limits(device)
  local threads = math.max(1, f.threads or 1)
  local warps = math.ceil(threads / 32)
  local by = {}
  by["warps per SM (block size)"] = lim.warps // warps
  by["blocks per SM"] = lim.blocks
  if (f.regs or 0) > 0 then
    local per_warp = math.ceil(f.regs * 32 / 256) * 256
    by["registers"] = (lim.regs // per_warp) // warps
  end
  if (f.smem or 0) > 0 then
    by["shared memory"] = lim.smem // (f.smem + lim.reserved)
  end
  local blocks, limiter = math.huge, nil
  for _, name in ipairs({ "registers", "shared memory", "warps per SM (block size)", "blocks per SM" }) do
    if by[name] and by[name] < blocks then blocks, limiter = by[name], name end
  end
  return { blocks_per_sm = blocks, occupancy = blocks * warps / lim.warps, limiter = limiter,
           warps_per_block = warps, max_warps = lim.warps }
end

-- Static facts of a result whose backend filled `resources` and knows the
-- launch: { regs, smem, spills, local_bytes, threads, blocks, ... }.
-- resources: { regs, smem (static + dynamic) or smem_static/smem_dynamic,
-- spills, local_bytes, occupancy (fraction), blocks_per_sm } as the cuda
-- backend reports them; launch: { grid, block, smem (dynamic) }.
function M.facts_from(result, launch, device, extra)
  local r = result and result.resources or {}
  local f = { device = device }
  f.regs, f.spill_bytes, f.local_bytes = r.regs, r.spills, r.local_bytes
  f.occupancy, f.blocks_per_sm = r.occupancy, r.blocks_per_sm
  if r.smem_static then
    f.smem = r.smem_static + (r.smem_dynamic or (launch and launch.smem) or 0)
  else
    f.smem = r.smem or (launch and launch.smem)
  end
  if launch then
    local b, g = launch.block or {}, launch.grid or {}
    f.threads = (b[1] or 1) * (b[2] or 1) * (b[3] or 1)
    f.blocks = (g[1] or 1) * (g[2] or 1) * (g[3] or 1)
  end
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

local function fmt_bytes(n)
  if n >= 1e9 then return string.format("%.2f GB", n / 1e9) end
  if n >= 1e6 then return string.format("%.1f MB", n / 1e6) end
  if n >= 1e3 then return string.format("%.1f kB", n / 1e3) end
  return string.format("%d B", math.floor(n))
end
M.fmt_bytes = fmt_bytes

local function add(list, name, severity, summary, numbers, extra)
  local s = { name = name, severity = math.max(0, math.min(1, severity)), summary = summary,
              numbers = numbers }
  for k, v in pairs(extra or {}) do s[k] = v end
  list[#list + 1] = s
  return s
end

-- The busiest compute pipe: its canonical key, short name, description, %.
local function busiest_pipe(q)
  local best
  for _, p in ipairs(M.pipes) do
    local v = q[p[1]]
    if v and (not best or v > best[4]) then best = { p[1], p[2], p[3], v } end
  end
  return best
end

-- Diagnoses one result. result: a DESIGN result table (metrics, resources,
-- time_ms); facts: static facts (see facts_from; may carry `occupancy`,
-- `limiter`, `blocks_per_sm`, `matrix`, `work`, `device`). Returns symptoms
-- sorted by severity (most severe first) and the canonical quantities.
function M.diagnose(result, facts)
  local T = M.thresholds
  facts = facts or M.facts_from(result)
  local q = M.quantities(result and result.metrics)
  local out = {}

  -- Occupancy first: several findings use it.
  local occ
  if facts.threads and (facts.regs or facts.smem) then
    occ = M.occupancy(facts, facts.device)
  end
  local theo = facts.occupancy or (occ and occ.occupancy)
  local limiter = facts.limiter or (occ and occ.limiter)
  local blocks_per_sm = facts.blocks_per_sm or (occ and occ.blocks_per_sm)

  local sm, dram = q.sm_pct, q.dram_pct
  local l2 = q.l2_pct
  local mem, mem_unit = dram, "DRAM"
  if l2 and (not mem or l2 > mem) then mem, mem_unit = l2, "L2" end
  if q.shared_pct and (not mem or q.shared_pct > mem) then mem, mem_unit = q.shared_pct, "shared memory" end
  local pipe = busiest_pipe(q)

  local memory_bound, latency_bound = false, false
  if mem and mem >= T.busy and (not sm or mem >= sm) then
    memory_bound = true
    local s = add(out, "memory_bound", mem / 100,
      string.format("memory-bound: %s throughput at %.0f%% of peak%s", mem_unit, mem,
        sm and string.format(", SM at %.0f%%", sm) or ""),
      { dram_pct = dram, l2_pct = l2, shared_pct = q.shared_pct, sm_pct = sm }, { unit = mem_unit })
    if mem_unit == "shared memory" then s.summary = s.summary .. " (bank conflicts or too many shared loads)" end
  end
  if sm and sm >= T.busy and (not mem or sm > mem) then
    local what = pipe and pipe[4] >= T.busy and pipe or nil
    add(out, "compute_bound", sm / 100,
      string.format("compute-bound: SM at %.0f%% of peak%s%s", sm,
        what and string.format(", %s at %.0f%%", what[3], what[4]) or "",
        mem and string.format("; %s at %.0f%%", mem_unit, mem) or ""),
      { sm_pct = sm, dram_pct = dram, pipe_pct = what and what[4] or nil }, { pipe = what and what[2] or "sm" })
  end
  if sm and mem and sm < T.busy and mem < T.busy then
    latency_bound = true
    local top = math.max(sm, mem)
    add(out, "latency_bound", (T.busy - top) / T.busy,
      string.format("latency-bound: no unit reaches %d%% of peak (SM %.0f%%, %s %.0f%%); "
        .. "warps mostly wait on dependencies%s", T.busy, sm, mem_unit, mem,
        q.warps_active_pct and string.format(" (%.0f%% of warp slots active)", q.warps_active_pct) or ""),
      { sm_pct = sm, mem_pct = mem, warps_active_pct = q.warps_active_pct })
  end

  -- Low occupancy: achieved (counter) or theoretical (static facts).
  local achieved = q.warps_active_pct
  local theo_pct = theo and theo * 100
  local occ_pct = achieved or theo_pct
  if occ_pct and occ_pct < T.low_occupancy then
    local weight = (latency_bound or memory_bound) and 1 or 0.5
    add(out, "low_occupancy", weight * (T.low_occupancy - occ_pct) / T.low_occupancy,
      string.format("low occupancy: %s%s%s", achieved and string.format("%.0f%% of warp slots active", achieved) or "",
        theo_pct and string.format("%stheoretical %.0f%%", achieved and ", " or "", theo_pct) or "",
        limiter and string.format(", limited by %s%s", limiter,
          blocks_per_sm and string.format(" (%d block%s/SM)", blocks_per_sm, blocks_per_sm == 1 and "" or "s") or "")
          or ""),
      { warps_active_pct = achieved, theoretical_pct = theo_pct, blocks_per_sm = blocks_per_sm,
        regs = facts.regs, smem = facts.smem }, { limiter = limiter })
  end

  -- Register spills / local memory: static facts or local traffic.
  local spill = facts.spill_bytes or 0
  local local_static = facts.local_bytes or 0
  local traffic = q.local_bytes or 0
  if spill > 0 or traffic > 0 or local_static > 0 then
    local l2_total = (q.l2_read_bytes or 0) + (q.l2_write_bytes or 0)
    local share = (traffic > 0 and l2_total > 0) and math.min(1, traffic / (traffic + l2_total)) or nil
    local sev = share or (spill > 0 and 0.5 or 0.3)
    local parts = {}
    if spill > 0 then parts[#parts + 1] = string.format("%d bytes spilled per thread", spill) end
    if local_static > 0 then parts[#parts + 1] = string.format("%d bytes of local memory per thread", local_static) end
    if traffic > 0 then
      parts[#parts + 1] = string.format("%s of local-memory traffic%s", fmt_bytes(traffic),
        share and string.format(" (%.0f%% of all L1->L2 traffic)", share * 100) or "")
    end
    add(out, "register_spills", sev,
      "register spills / local memory: " .. table.concat(parts, ", ")
        .. (facts.regs and string.format("; %d registers per thread", facts.regs) or ""),
      { spill_bytes = spill, local_bytes = local_static, local_traffic_bytes = traffic, regs = facts.regs })
  end

  -- Poor L2 reuse matters only when DRAM is busy and the kernel moves enough.
  local moved = q.dram_bytes or 0
  if q.l2_hit_pct and q.l2_hit_pct < T.poor_l2_hit and dram and dram >= T.dram_pressure
     and moved >= T.min_bytes then
    local ideal = facts.work and facts.work.bytes
    add(out, "poor_l2_reuse", (T.poor_l2_hit - q.l2_hit_pct) / T.poor_l2_hit * dram / 100,
      string.format("poor L2 reuse: %.0f%% L2 hit rate with DRAM at %.0f%%; %s moved%s", q.l2_hit_pct, dram,
        fmt_bytes(moved), ideal and ideal > 0 and string.format(" (%.1fx the %s the problem needs)",
          moved / ideal, fmt_bytes(ideal)) or ""),
      { l2_hit_pct = q.l2_hit_pct, dram_pct = dram, dram_bytes = moved, ideal_bytes = ideal })
  end

  -- Tensor pipes idle in a matrix kernel that is not starved by memory.
  if facts.matrix and q.tensor_pct and q.tensor_pct < T.tensor_idle and not memory_bound then
    add(out, "tensor_idle", (T.tensor_idle - q.tensor_pct) / T.tensor_idle,
      string.format("tensor cores idle: tensor pipe active %.0f%% of cycles in a matrix kernel", q.tensor_pct),
      { tensor_pct = q.tensor_pct, sm_pct = sm })
  end

  -- Shared memory: limits occupancy, or its bandwidth is the bottleneck.
  if limiter == "shared memory" and theo_pct and theo_pct < 50 then
    add(out, "smem_limited", (50 - theo_pct) / 50,
      string.format("shared-memory limited: %s per block allows %d block%s/SM (%.0f%% occupancy)",
        fmt_bytes(facts.smem or 0), blocks_per_sm or 0, blocks_per_sm == 1 and "" or "s", theo_pct),
      { smem = facts.smem, blocks_per_sm = blocks_per_sm, theoretical_pct = theo_pct }, { kind = "occupancy" })
  elseif q.shared_pct and q.shared_pct >= T.busy then
    add(out, "smem_limited", q.shared_pct / 100,
      string.format("shared-memory bandwidth bound: %.0f%% of peak shared-memory wavefronts", q.shared_pct),
      { shared_pct = q.shared_pct }, { kind = "bandwidth" })
  end

  -- Tail effect: too few blocks for the SMs, or a mostly empty last wave
  -- (not on an assumed device: a replayed recording's GPU has its own SMs)
  if facts.blocks and blocks_per_sm and blocks_per_sm > 0 and not (type(facts.device) == "table" and facts.device.assumed) then
    local sms = M.limits(facts.device).sms
    local slots = sms * blocks_per_sm
    local waves = facts.blocks / slots
    local full = math.ceil(waves)
    local idle = (full - waves) / full
    if idle >= T.tail_idle then
      add(out, "tail_effect", idle,
        waves < 1 and string.format("too few blocks: %d blocks fill %.0f%% of the %d SMs x %d slots",
            facts.blocks, waves * 100, sms, blocks_per_sm)
          or string.format("tail effect: %d blocks = %.2f waves of %d; the last wave leaves %.0f%% of the GPU idle",
            facts.blocks, waves, slots, idle * 100),
        { blocks = facts.blocks, waves = waves, sms = sms, blocks_per_sm = blocks_per_sm })
    end
  end

  if q.thread_efficiency_pct and q.thread_efficiency_pct < T.divergence then
    add(out, "divergence", (T.divergence - q.thread_efficiency_pct) / T.divergence,
      string.format("branch divergence: %.0f%% of threads active per executed instruction", q.thread_efficiency_pct),
      { thread_efficiency_pct = q.thread_efficiency_pct })
  end

  -- Memory traffic that is mostly spill traffic is the spills' doing: the
  -- memory-bound finding then defers to register_spills (see move_bias).
  local spills, membound = M.find(out, "register_spills"), M.find(out, "memory_bound")
  if spills and membound and membound.unit ~= "shared memory"
     and (spills.numbers.local_traffic_bytes or 0) > 0 and spills.severity >= 0.3 then
    membound.caused_by = "register_spills"
    membound.summary = membound.summary .. ", mostly local-memory (spill) traffic"
  end

  table.sort(out, function(a, b)
    if a.severity ~= b.severity then return a.severity > b.severity end
    return a.name < b.name
  end)
  return out, q
end

-- Finds a symptom by name in a diagnosis.
function M.find(symptoms, name)
  for _, s in ipairs(symptoms or {}) do if s.name == name then return s end end
  return nil
end

-- One line for traces and progress: "compute_bound(0.98) register_spills(0.40)".
function M.brief(symptoms)
  local parts = {}
  for _, s in ipairs(symptoms or {}) do
    parts[#parts + 1] = string.format("%s(%.2f)", s.name, s.severity)
  end
  return #parts > 0 and table.concat(parts, " ") or "no symptoms"
end

-- Bullet list for prompts and reports, most severe first.
function M.format(symptoms, no_counters)
  local lines = {}
  for _, s in ipairs(symptoms or {}) do lines[#lines + 1] = "- " .. s.summary end
  if #lines == 0 then
    lines[1] = no_counters and "- none found: no counters to read" or "- no bottleneck stands out in the counters"
  end
  return table.concat(lines, "\n")
end

return require("kopt.symptoms_moves")(M)
