-- Faster than light is suspect: a measured time below the device's
-- speed-of-light floor for the spec's declared work cannot be real. It means
-- the kernel skipped work that the correctness checks did not see, or the
-- spec's `work` is wrong; either way the result must not win. The cuda
-- backend calls check() on every `ok` result; a result under the floor
-- becomes `suspect` (never crowned: only `ok` can be the best).
--
-- The floor is deliberately generous, so an honest kernel is never flagged:
--  * compute: the spec's flops at the device's highest dense rate (FP8
--    tensor cores: twice the FP16 tensor rate the report quotes), whatever
--    the kernel's precision, with 10 % for clocks above the rated one;
--  * memory: the spec's bytes at the DRAM peak (2 x memory clock x bus
--    width), with 25 % for measurement; when the problem's bytes are less
--    than twice the L2, part of them may be served by the L2 despite the
--    flush between samples, so the margin is 4x there.
-- The floor is the larger of the two. Without declared work, or without the
-- device's clocks, there is no floor and check() says so in the result.
local report = require("kopt.report")

local M = {}

M.COMPUTE_MARGIN = 1.10
M.MEMORY_MARGIN = 1.25
M.MEMORY_MARGIN_L2 = 4.0

-- Seconds at the speed of light for work on device, with how it was
-- computed; nil, reason when it cannot be computed.
function M.floor_s(work, device)
  work = work or {}
  if not work.flops and not work.bytes then return nil, "the spec declares no work (flops, bytes)" end
  local floor, how = 0, {}
  if work.flops and work.flops > 0 then
    local peak = report.peaks(device, "tensor").flops
    if peak then
      local s = work.flops / (2 * peak * M.COMPUTE_MARGIN)
      if s > floor then floor = s end
      how[#how + 1] = string.format("%.3g FLOP at %.3g FLOP/s", work.flops, 2 * peak * M.COMPUTE_MARGIN)
    end
  end
  if work.bytes and work.bytes > 0 then
    local peak = report.peaks(device, "fp32").bytes_per_s
    if peak then
      local l2 = device and device.l2_bytes or 0
      local margin = work.bytes < 2 * l2 and M.MEMORY_MARGIN_L2 or M.MEMORY_MARGIN
      local s = work.bytes / (peak * margin)
      if s > floor then floor = s end
      how[#how + 1] = string.format("%.3g B at %.3g B/s", work.bytes, peak * margin)
    end
  end
  if floor <= 0 then return nil, "the device's peak rates are unknown" end
  return floor, table.concat(how, "; ")
end

-- Marks r (a result table, status ok) suspect when its time is under the
-- floor; records why the check could not run otherwise (r.sol_check).
function M.check(r, work, device)
  if r.status ~= "ok" or type(r.time_ms) ~= "number" then return r end
  local floor, how = M.floor_s(work, device)
  if not floor then
    r.sol_check = "not run: " .. how
    return r
  end
  local floor_ms = floor * 1e3
  r.floor_ms = floor_ms
  if r.time_ms < floor_ms then
    r.status = "suspect"
    r.log = string.format("faster than light: %.4g ms measured, but the declared work needs at least %.4g ms on "
                          .. "this device (%s); a kernel cannot beat that, so it skipped work the checks did not "
                          .. "see or the spec's work is wrong", r.time_ms, floor_ms, how)
  end
  return r
end

return M
