-- Faster than light is suspect (kopt.lightspeed) and the report never prints
-- a fraction of a peak above 100 % as if it were real (kopt.report).
local T = require("testlib")
local lightspeed = require("kopt.lightspeed")
local report = require("kopt.report")

-- An H100 SXM as the driver reports it: 132 SMs at 1980 MHz, HBM3 at
-- 2619 MHz on a 5120-bit bus (3.35 TB/s), 50 MiB of L2.
local h100 = { cc_major = 9, cc_minor = 0, sm_count = 132, clock_khz = 1980000,
               mem_clock_khz = 2619000, mem_bus_width = 5120, l2_bytes = 50 * 2 ^ 20 }

local function ok(ms) return { status = "ok", time_ms = ms } end

-- compute floor: 2 * 4096^3 FLOP at twice the FP16 tensor peak, 10 % margin
local flops = 2 * 4096 ^ 3
local tensor = 132 * 4096 * 1.98e9
local floor_s = lightspeed.floor_s({ flops = flops }, h100)
T.check(math.abs(floor_s - flops / (2 * tensor * 1.1)) < 1e-12, "compute floor %g", floor_s)
-- the matmul the shipped spec tunes (0.40 ms) and cuBLAS (0.18 ms) are honest
T.eq(lightspeed.check(ok(0.40), { flops = flops }, h100).status, "ok", "kopt's matmul")
T.eq(lightspeed.check(ok(0.176), { flops = flops }, h100).status, "ok", "cuBLAS-speed matmul")
-- a GEMM "done" in 20 us did not do its work
local r = lightspeed.check(ok(0.02), { flops = flops, bytes = 2 * 3 * 4096 ^ 2 }, h100)
T.eq(r.status, "suspect", "a 20 us 4096^3 GEMM")
T.check(r.log:find("faster than light", 1, true) and r.log:find("FLOP", 1, true), "log says why: %s", r.log)
T.check(r.floor_ms and r.floor_ms > 0.02, "floor recorded")

-- memory floor: a 1 GiB copy cannot take less than 1 GiB / (3.35 TB/s * 1.25)
local peak_bw = 2 * 2619e6 * 5120 / 8
local bytes = 2 ^ 30
T.check(math.abs(lightspeed.floor_s({ bytes = bytes }, h100) - bytes / (peak_bw * 1.25)) < 1e-12, "memory floor")
T.eq(lightspeed.check(ok(0.30), { bytes = bytes }, h100).status, "ok", "copy at 3.6 TB/s")
T.eq(lightspeed.check(ok(0.10), { bytes = bytes }, h100).status, "suspect", "copy at 10.7 TB/s")
-- a problem smaller than twice the L2 gets the L2 margin (4x): 32 MB in 12 us
-- is 2.8 TB/s, in 3 us it would be 11 TB/s (still possible), in 1 us no
local small = { bytes = 32 * 2 ^ 20 }
T.eq(lightspeed.check(ok(0.012), small, h100).status, "ok", "small problem, DRAM speed")
T.eq(lightspeed.check(ok(0.003), small, h100).status, "ok", "small problem, L2 speed")
T.eq(lightspeed.check(ok(0.001), small, h100).status, "suspect", "small problem, beyond the L2")

-- no declared work, or no peaks: nothing flagged, and the result says why
r = lightspeed.check(ok(1e-9), {}, h100)
T.eq(r.status, "ok", "no work: not flagged")
T.check(r.sol_check and r.sol_check:find("declares no work", 1, true), "no work: %s", tostring(r.sol_check))
r = lightspeed.check(ok(1e-9), { flops = 1e12 }, { name = "unknown" })
T.check(r.sol_check and r.sol_check:find("peak rates are unknown", 1, true), "no peaks: %s", tostring(r.sol_check))
-- only ok results are looked at
T.eq(lightspeed.check({ status = "wrong", time_ms = 1e-9 }, { flops = flops }, h100).status, "wrong", "wrong stays")

-- the report: a fraction above the peak is named as not physical
local md, term = report.render({ config = { X = 1 }, result = { time_ms = 0.001 } },
                               { device = h100, work = { bytes = bytes } })
T.check(not md:find("%d%d%d%d%.%d%%") , "no four-digit percentage printed as a measurement")
T.check(md:find("not physical", 1, true), "REPORT.md names the impossible fraction")
T.check(term:find("not physical", 1, true), "the terminal block too")
T.check(md:find("no kernel beats the speed of light", 1, true), "left on the table says the work is wrong")
md = report.render({ config = { X = 1 }, result = { time_ms = 0.5 } }, { device = h100, work = { bytes = bytes } })
T.check(not md:find("not physical", 1, true), "an honest fraction is printed as it is")
T.eq(report.frac_text(0.5), "50.0%", "fraction text")

return T.done()
