-- The range probe on a GPU (kopt.range_probe): tests/cheats/fastmath_range
-- (CHEAT=1 uses __sinf, within the tolerance on the spec's inputs in [0,1)
-- and wrong for large ones) passes checks 1 and 2 but is wrong on x scaled
-- by the probe; the honest kernel matches the reference there. In strict
-- mode the honest kernel takes the title from the cheat. The same for
-- integer inputs (tests/cheats/int8_dp4a), and for a kernel that samples
-- its input to choose (tests/cheats/probe_dodge), and for one exact only on
-- a module's first launch (tests/cheats/probe_first_launch). Needs a GPU: exits
-- 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local probe = require("kopt.range_probe")
local spec_mod = require("kopt.spec")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end

local spec = spec_mod.load("tests/cheats/fastmath_range.json")
local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
local res = be:evaluate({ { key = "honest", config = { CHEAT = 0 } }, { key = "cheat", config = { CHEAT = 1 } } })
T.eq(res[1].status, "ok", "the honest kernel passes checks 1 and 2")
T.eq(res[2].status, "ok", "the cheat passes checks 1 and 2 (what the probe is for)")
print(string.format("times: honest %.4f ms, cheat %.4f ms", res[1].time_ms or -1, res[2].time_ms or -1))

local function rec(key, cheat, r) return { key = key, config = { CHEAT = cheat }, result = r } end
local function run(ranked, mode)
  local made
  local lines, row = probe.run({
    backend = be, ranked = ranked, mode = mode, max_tries = 4,
    job_for = function(r) return { config = r.config } end,
    args_for = function(r) return spec:args(r.config) end,
    describe = function(r) return "CHEAT=" .. r.config.CHEAT end,
    make_best = function(r) made = r.key end,
  })
  print(table.concat(lines, "\n"))
  return row, made
end

local row, made = run({ rec("cheat", 1, res[2]), rec("honest", 0, res[1]) }, "strict")
T.eq(row.scale, 1000, "the reference passes on x scaled 1000x")
T.eq(row.status, "wrong", "the cheat is wrong there")
T.eq(made, "honest", "strict: the honest kernel takes the title")
row = run({ rec("honest", 0, res[1]) }, "note")
T.eq(row.status, "ok", "the honest kernel matches the reference on x scaled 1000x")
be:close()

-- integer inputs: tests/cheats/int8_dp4a narrows an i32 GEMM's operands to
-- int8 (right on every check, whose integers are small); the probe's
-- integer pass finds it, and the honest kernel passes there
spec = spec_mod.load("tests/cheats/int8_dp4a.json")
be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
res = be:evaluate({ { key = "honest", config = { CHEAT = 0 } }, { key = "cheat", config = { CHEAT = 1 } } })
T.eq(res[1].status, "ok", "int8_dp4a: the honest kernel passes checks 1 and 2")
T.eq(res[2].status, "ok", "int8_dp4a: the cheat passes checks 1 and 2")
row, made = run({ rec("cheat", 1, res[2]), rec("honest", 0, res[1]) }, "strict")
T.eq(row.status, "wrong", "int8_dp4a: the cheat is wrong on integers scaled by the probe")
T.eq(made, "honest", "int8_dp4a: strict: the honest kernel takes the title")
row = run({ rec("honest", 0, res[1]) }, "note")
T.eq(row.status, "ok", "int8_dp4a: the honest kernel matches the reference on the larger integers")
be:close()

-- tests/cheats/probe_dodge: __sinf unless one of 32 sampled inputs is
-- large, so the whole-array pass (every element scaled) sees the exact
-- path; the sparse pass (one element in 64 scaled) finds it
spec = spec_mod.load("tests/cheats/probe_dodge.json")
be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
res = be:evaluate({ { key = "honest", config = { CHEAT = 0 } }, { key = "cheat", config = { CHEAT = 1 } } })
T.eq(res[1].status, "ok", "probe_dodge: the honest kernel passes checks 1 and 2")
T.eq(res[2].status, "ok", "probe_dodge: the cheat passes checks 1 and 2")
row, made = run({ rec("cheat", 1, res[2]), rec("honest", 0, res[1]) }, "strict")
T.eq(row.status, "wrong", "probe_dodge: the cheat is wrong with one element in 64 scaled")
T.eq(row.sparse, true, "probe_dodge: found by the sparse pass")
T.eq(made, "honest", "probe_dodge: strict: the honest kernel takes the title")
be:close()

-- tests/cheats/probe_first_launch: exact on each module's first launch (check
-- 1, and a probe's check 1), __sinf on every later one: the probe's timed
-- launches, each compared, see the fast path on the scaled inputs
spec = spec_mod.load("tests/cheats/probe_first_launch.json")
be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
res = be:evaluate({ { key = "honest", config = { CHEAT = 0 } }, { key = "cheat", config = { CHEAT = 1 } } })
T.eq(res[1].status, "ok", "probe_first_launch: the honest kernel passes checks 1 and 2")
T.eq(res[2].status, "ok", "probe_first_launch: the cheat passes checks 1 and 2")
print(string.format("probe_first_launch times: honest %.4f ms, cheat %.4f ms", res[1].time_ms or -1,
                    res[2].time_ms or -1))
row, made = run({ rec("cheat", 1, res[2]), rec("honest", 0, res[1]) }, "strict")
T.eq(row.status, "wrong", "probe_first_launch: the cheat is wrong on the probe's timed launches")
T.eq(made, "honest", "probe_first_launch: strict: the honest kernel takes the title")
be:close()

-- tests/cheats/probe_spin: the same with a 400 ms spin on the first batch's
-- tail, which ended the probe's sampling at 4 launches, under the 8 its
-- less-exact rule needs; bench.c now takes 8 past its time cap
spec = spec_mod.load("tests/cheats/probe_spin.json")
be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
res = be:evaluate({ { key = "honest", config = { CHEAT = 0, SPIN_MS = 400 } },
                    { key = "cheat", config = { CHEAT = 1, SPIN_MS = 400 } } })
T.eq(res[2].status, "ok", "probe_spin: the cheat passes checks 1 and 2")
row = run({ { key = "cheat", config = { CHEAT = 1, SPIN_MS = 400 }, result = res[2] },
            { key = "honest", config = { CHEAT = 0, SPIN_MS = 400 }, result = res[1] } }, "strict")
T.eq(row.status, "wrong", "probe_spin: the cheat is wrong on the probe's timed launches")
be:close()
return T.done()
