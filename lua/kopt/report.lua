-- Speed-of-light report for the final best: achieved against peak compute and
-- bandwidth, the limiter, and what the counters say is left on the table.
-- report.render(best, facts) is a pure function returning the Markdown of
-- best/REPORT.md and a short terminal block; report.write(run_dir, best,
-- facts) writes the file and returns the terminal block.
--
-- best:  { config=, result = { time_ms, metrics, resources, ... }, key= }
-- facts: { name = problem name, device = { name, cc_major, cc_minor, sm_count,
--          clock_khz, mem_clock_khz, mem_bus_width },
--          work = { flops=, bytes= } (the spec's work for best.config),
--          launch = { grid, block, smem }, matrix = bool (tensor-core kernel),
--          precision = "tensor" | "fp32" | "fp64" (default: tensor when matrix),
--          peaks = { flops=, bytes_per_s= } (override the computed peaks),
--          profiling = reason profiling was off (when no counters) }
local symptoms = require("kopt.symptoms")
local sys = require("kopt.sys")

local M = {}

-- Dense FLOP per clock per SM by compute capability: FP32/FP64 pipes, and
-- FP16/BF16 tensor cores with FP32 accumulate.
M.flop_per_clk = {
  [70] = { fp32 = 128, fp64 = 64, tensor = 1024 },
  [75] = { fp32 = 128, fp64 = 4, tensor = 1024 },
  [80] = { fp32 = 128, fp64 = 64, tensor = 2048 },
  [86] = { fp32 = 256, fp64 = 4, tensor = 512 },
  [89] = { fp32 = 256, fp64 = 4, tensor = 512 },
  [90] = { fp32 = 256, fp64 = 128, tensor = 4096 },
}

local function arch_row(device)
  local cc = (device.cc_major or 9) * 10 + (device.cc_minor or 0)
  local best
  for k in pairs(M.flop_per_clk) do if k <= cc and (not best or k > best) then best = k end end
  return M.flop_per_clk[best or 90]
end

-- Peak FLOP/s and bytes/s of a device, with how each was computed.
function M.peaks(device, precision, override)
  device = device or {}
  override = override or {}
  local p = { precision = precision or "fp32" }
  local sms, clock = device.sm_count, device.clock_khz and device.clock_khz * 1e3
  if override.flops then
    p.flops, p.flops_how = override.flops, "given"
  elseif sms and clock then
    local per = arch_row(device)[p.precision] or arch_row(device).fp32
    p.flops = sms * per * clock
    p.flops_how = string.format("%d SMs x %d %s FLOP/clk x %.2f GHz", sms, per, p.precision, clock / 1e9)
  end
  if override.bytes_per_s then
    p.bytes_per_s, p.bytes_how = override.bytes_per_s, "given"
  elseif device.mem_clock_khz and device.mem_bus_width then
    p.bytes_per_s = 2 * device.mem_clock_khz * 1e3 * device.mem_bus_width / 8
    p.bytes_how = string.format("2 x %.0f MHz x %d-bit bus", device.mem_clock_khz / 1e3, device.mem_bus_width)
  end
  return p
end

local function rate(v, unit)
  if not v then return "-" end
  if v >= 1e12 then return string.format("%.1f T%s", v / 1e12, unit) end
  if v >= 1e9 then return string.format("%.1f G%s", v / 1e9, unit) end
  return string.format("%.3g %s", v, unit)
end

local function pct(v) return v and string.format("%.1f%%", v) or "-" end

-- A fraction of a peak. Above 1 it is not a measurement of the kernel but a
-- sign that the spec's work or the assumed peak is wrong: never print it as
-- if it were real.
local function frac_text(f)
  if not f then return "-" end
  if f <= 1 then return pct(f * 100) end
  return string.format("above peak (%.0f%% computed: not physical; check the spec's work and the precision assumed)",
                       f * 100)
end
M.frac_text = frac_text

-- The analysis behind both outputs. Pure.
function M.analyse(best, facts)
  facts = facts or {}
  local r = best and best.result or {}
  local a = { time_ms = r.time_ms, config = best and best.config }
  local precision = facts.precision or (facts.matrix and "tensor" or "fp32")
  a.peaks = M.peaks(facts.device, precision, facts.peaks)
  local t = r.time_ms and r.time_ms / 1e3
  local work = facts.work or {}
  if t and t > 0 then
    if work.flops then a.flops_s = work.flops / t end
    if work.bytes then a.bytes_s = work.bytes / t end
  end
  if a.flops_s and a.peaks.flops then a.compute_frac = a.flops_s / a.peaks.flops end
  if a.bytes_s and a.peaks.bytes_per_s then a.memory_frac = a.bytes_s / a.peaks.bytes_per_s end
  -- Time at the speed of light: the slower of doing the work at peak compute
  -- and moving the problem's bytes at peak bandwidth.
  local sol_t = math.max(work.flops and a.peaks.flops and work.flops / a.peaks.flops or 0,
                         work.bytes and a.peaks.bytes_per_s and work.bytes / a.peaks.bytes_per_s or 0)
  if sol_t > 0 and t then a.sol_ms, a.sol_frac = sol_t * 1e3, sol_t / t end

  local dfacts = symptoms.facts_from(r, facts.launch, facts.device, facts.static)
  dfacts.device, dfacts.matrix, dfacts.work = facts.device, facts.matrix, facts.work
  a.symptoms, a.q = symptoms.diagnose(r, dfacts)
  -- (counters kopt reads: a recording's compile_time or energy are none)
  a.has_counters = next(a.q) ~= nil

  -- The limiter: counters first (they see what the kernel really did), the
  -- work-based fractions otherwise.
  local q = a.q
  local top
  for _, s in ipairs(a.symptoms) do
    if s.name == "memory_bound" or s.name == "compute_bound" or s.name == "latency_bound" then top = s break end
  end
  if top then
    a.limiter = top.name:gsub("_bound", "")
    a.limiter_detail = top.summary
  elseif q.sm_pct or q.dram_pct then
    a.limiter = (q.sm_pct or 0) >= (q.dram_pct or 0) and "compute" or "memory"
  elseif a.compute_frac or a.memory_frac then
    a.limiter = (a.compute_frac or 0) >= (a.memory_frac or 0) and "compute" or "memory"
    a.limiter_detail = "from the work and the time only (no counters)"
  end

  -- Left on the table.
  local left = {}
  local busiest = math.max(q.sm_pct or 0, q.dram_pct or 0, q.l2_pct or 0)
  if busiest > 0 then
    left[#left + 1] = string.format("The busiest unit runs at %.0f%% of its peak: keeping the same work, at most "
      .. "%.2fx is left before it saturates.", busiest, 100 / busiest)
  end
  if q.dram_bytes and work.bytes and work.bytes > 0 then
    local ratio = q.dram_bytes / work.bytes
    if ratio > 1.1 then
      left[#left + 1] = string.format("DRAM traffic is %.2fx the problem's minimum (%s moved, %s needed): "
        .. "better reuse in L2/shared memory would cut it.", ratio, symptoms.fmt_bytes(q.dram_bytes),
        symptoms.fmt_bytes(work.bytes))
    else
      left[#left + 1] = string.format("DRAM traffic is at the problem's minimum (%.2fx): reuse is already complete.",
        ratio)
    end
  end
  if a.sol_frac and a.sol_frac > 1 then
    left[#left + 1] = string.format("At the device's speed of light this problem takes %.4g ms, yet the best "
      .. "measured %.4g ms: no kernel beats the speed of light, so the spec's work figures or the peak assumed "
      .. "are wrong (nothing can be said about what is left).", a.sol_ms, a.time_ms)
  elseif a.sol_frac then
    left[#left + 1] = string.format("At the device's speed of light this problem takes %.4g ms; the best runs at "
      .. "%.0f%% of it (up to %.2fx left in principle).", a.sol_ms, a.sol_frac * 100, 1 / a.sol_frac)
  end
  if q.warps_active_pct and q.warps_active_pct < symptoms.thresholds.low_occupancy then
    left[#left + 1] = string.format("Only %.0f%% of warp slots are active: latency is hidden by ILP or not at all.",
      q.warps_active_pct)
  end
  a.left = left
  return a
end

local counter_rows = {
  { "sm_pct", "SM throughput", "% of peak" }, { "dram_pct", "DRAM throughput", "% of peak" },
  { "l2_pct", "L2 throughput", "% of peak" }, { "warps_active_pct", "achieved occupancy", "% of warp slots" },
  { "l1_hit_pct", "L1 hit rate", "%" }, { "l2_hit_pct", "L2 hit rate", "%" },
  { "tensor_pct", "tensor pipe active", "% of cycles" }, { "dram_read_bytes", "DRAM read", "bytes" },
  { "dram_write_bytes", "DRAM written", "bytes" }, { "sm_clock_hz", "SM clock while profiled", "Hz" },
  { "duration_ns", "profiled duration", "ns" },
}

local function counter_value(key, v)
  if key:find("bytes") then return symptoms.fmt_bytes(v) end
  if key == "sm_clock_hz" then return string.format("%.0f MHz", v / 1e6) end
  if key == "duration_ns" then return string.format("%.1f us", v / 1e3) end
  return pct(v)
end

-- Returns markdown (REPORT.md) and a short terminal block. Pure.
function M.render(best, facts)
  facts = facts or {}
  local a = M.analyse(best, facts)
  local md = {}
  local function add(fmt, ...) md[#md + 1] = select("#", ...) > 0 and string.format(fmt, ...) or fmt end
  add("# Speed of light%s", facts.name and (": " .. facts.name) or "")
  add("")
  if facts.device and facts.device.name then add("Device: %s.", facts.device.name) end
  -- (the median of the timed samples on a GPU; a recording's own time, which
  -- its tool may have taken otherwise, under replay)
  if a.time_ms then
    add("Best time: %.5g ms (%s).", a.time_ms, best.result and best.result.timer and "median" or "as recorded")
  end
  if a.config then
    local keys = {}
    for k in pairs(a.config) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(a.config[k]) end
    add("Config: `%s`.", table.concat(parts, " "))
  end
  add("")
  add("| | achieved | peak | fraction |")
  add("|---|---|---|---|")
  add("| compute | %s | %s%s | %s |", rate(a.flops_s, "FLOP/s"), rate(a.peaks.flops, "FLOP/s"),
      a.peaks.flops_how and (" (" .. a.peaks.flops_how .. ")") or "",
      frac_text(a.compute_frac))
  add("| memory | %s | %s%s | %s |", rate(a.bytes_s, "B/s"), rate(a.peaks.bytes_per_s, "B/s"),
      a.peaks.bytes_how and (" (" .. a.peaks.bytes_how .. ")") or "",
      frac_text(a.memory_frac))
  add("")
  add("Limiter: **%s**%s", a.limiter or "unknown", a.limiter_detail and (" — " .. a.limiter_detail) or "")
  add("")
  if a.has_counters then
    add("## Counters")
    add("")
    add("| quantity | value |")
    add("|---|---|")
    for _, row in ipairs(counter_rows) do
      local v = a.q[row[1]]
      if v then add("| %s | %s |", row[2], counter_value(row[1], v)) end
    end
    add("")
  else
    add("No hardware counters for this candidate%s.", facts.profiling and (" (" .. facts.profiling .. ")") or "")
    add("")
  end
  add("## Symptoms")
  add("")
  add(symptoms.format(a.symptoms, not a.has_counters))
  add("")
  add("## Left on the table")
  add("")
  if #a.left == 0 then
    local missing = {}
    if not a.has_counters then missing[#missing + 1] = "no counters" end
    local work = facts.work or {}
    if not (work.flops or work.bytes) then
      missing[#missing + 1] = "no work figures"
    elseif not (a.peaks.flops or a.peaks.bytes_per_s) then
      missing[#missing + 1] = "no device peaks (a replay has no device): no speed of light"
    end
    if #missing == 0 then missing[1] = "no unit near its peak" end
    add("- nothing measurable: %s", table.concat(missing, ", "))
  end
  for _, l in ipairs(a.left) do add("- " .. l) end
  add("")

  local term = {}
  -- Without peaks (no GPU attached, e.g. replay) there is no speed of light to quote.
  if a.compute_frac or a.memory_frac then
    term[#term + 1] = string.format("  speed of light: compute %s of %s, memory %s of %s; limiter: %s",
      frac_text(a.compute_frac), rate(a.peaks.flops, "FLOP/s"),
      frac_text(a.memory_frac), rate(a.peaks.bytes_per_s, "B/s"), a.limiter or "unknown")
  end
  for i = 1, math.min(3, #a.symptoms) do term[#term + 1] = "    " .. a.symptoms[i].summary end
  if not a.has_counters and facts.profiling then term[#term + 1] = "    (no counters: " .. facts.profiling .. ")" end
  return table.concat(md, "\n"), table.concat(term, "\n") .. "\n", a
end

-- Writes <run_dir>/best/REPORT.md; returns the terminal block.
function M.write(run_dir, best, facts)
  local md, term = M.render(best, facts)
  local dir = run_dir .. "/best"
  sys.mkdir_p(dir)
  local f = io.open(dir .. "/REPORT.md", "wb")
  if f then
    f:write(md)
    f:close()
  end
  return term
end

return M
