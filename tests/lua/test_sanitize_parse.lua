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

-- the tool's full names (a parameter list, a namespace, a template): the
-- function's own name decides, never a part of another kernel's name
local full = [[
========= Error: Race reported between Write access at matmul_ref(float *, const float *)+0x40 in /tmp/r.cu:9
=========     and Read access at matmul_ref(float *, const float *)+0x60 in /tmp/r.cu:9 [12 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
]]
r = sanitize.parse(full)
T.eq(r.kernels["matmul_ref(float *, const float *)"], 2, "a name with its parameter list is read whole")
T.check(not sanitize.blames(r, "matmul"), "the reference matmul_ref's race is not the candidate matmul's")
T.check(sanitize.blames(r, "matmul_ref"), "it is matmul_ref's")
T.eq(sanitize.base_name("ns::stencil<float, 128>(float *, int)"), "stencil", "base name through namespace, template, parameters")
T.eq(sanitize.base_name("void stencil<float>(float *)"), "stencil", "base name after a return type")
r = sanitize.parse("========= Error: Race reported between Write access at ns::stage2<64>(float *)+0x10 in a.cu:3\n"
                   .. "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
T.check(not sanitize.blames(r, "stage1<64>"), "a race in another kernel of the namespace is not stage1's")
T.check(sanitize.blames(r, { "stage1<64>", "stage2" }), "a pipeline's later kernel is the candidate's too")

-- an error that names no kernel: held against the candidate (kopt cannot tell)
r = sanitize.parse("========= Program hit CUDA_ERROR_ILLEGAL_ADDRESS\n========= ERROR SUMMARY: 1 error\n")
T.check(sanitize.blames(r, "cheat"), "an unattributed error counts against the candidate")
-- a clean report, and none at all
r = sanitize.parse("========= ERROR SUMMARY: 0 errors\n")
T.eq(r.errors, 0, "a clean report")
T.check(not sanitize.blames(r, "cheat"), "no error, no blame")
T.eq(sanitize.parse("").errors, nil, "no summary: the tool did not finish")
return T.done()
