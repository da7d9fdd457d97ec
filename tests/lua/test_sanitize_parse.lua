-- kopt.sanitize without a GPU: the tool list, and the reading of
-- compute-sanitizer reports (summary counts, the kernels an error names,
-- whether the errors are the candidate's).
local T = require("testlib")
local sanitize = require("kopt.sanitize")

local list = assert(sanitize.parse_tools("racecheck,memcheck,racecheck"))
T.eq(#list, 2, "a tool named twice is one check")
T.eq(#assert(sanitize.parse_tools("none")), 0, "none: no check")
local bad, why = sanitize.parse_tools("racecheck,helgrind")
T.check(bad == nil and why:find("helgrind", 1, true), "an unknown tool is refused by name: %s", tostring(why))

-- racecheck: one error in the candidate (by its template's base name), one warning
local race = [[
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at stencil<float, 128>+0x1f0 in /tmp/s.cu:27
=========     and Read access at stencil<float, 128>+0x150 in /tmp/s.cu:21 [4096 hazards]
=========
========= Warning: Race reported between Write access at ref_sum+0x40 in /tmp/r.cu:5
=========     and Write access at ref_sum+0x40 in /tmp/r.cu:5 [2 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
]]
local r = sanitize.parse(race)
T.eq(r.errors, 1, "racecheck errors from the summary")
T.eq(r.warnings, 1, "racecheck warnings from the summary")
T.eq(r.kernels["stencil<float, 128>"], 2, "the error names the candidate's kernel (both accesses)")
T.eq(r.kernels.ref_sum, nil, "a warning's kernel is not an error's")
T.check(sanitize.blames(r, "stencil<float, 128>"), "the candidate's own race is held against it")
T.check(not sanitize.blames(r, "other"), "an error in another kernel is not")

-- memcheck in the reference only: reported, not the candidate's
local mem = [[
========= Invalid __global__ read of size 4 bytes
=========     at ref_mul+0x90 in /tmp/ref.cu:3
=========     by thread (5,0,0) in block (7,0,0)
=========
========= ERROR SUMMARY: 1 error
]]
r = sanitize.parse(mem)
T.eq(r.errors, 1, "memcheck errors from the summary")
T.check(not sanitize.blames(r, "cheat"), "an error in the reference is not the candidate's")
T.check(sanitize.blames(r, "ref_mul"), "the same error is the candidate's when it is its kernel")

-- an error that names no kernel: held against the candidate (kopt cannot tell)
r = sanitize.parse("========= Program hit CUDA_ERROR_ILLEGAL_ADDRESS\n========= ERROR SUMMARY: 1 error\n")
T.check(sanitize.blames(r, "cheat"), "an unattributed error counts against the candidate")
-- a clean report, and none at all
r = sanitize.parse("========= ERROR SUMMARY: 0 errors\n")
T.eq(r.errors, 0, "a clean report")
T.check(not sanitize.blames(r, "cheat"), "no error, no blame")
T.eq(sanitize.parse("").errors, nil, "no summary: the tool did not finish")
return T.done()
