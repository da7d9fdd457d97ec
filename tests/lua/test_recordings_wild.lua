-- Recordings as Kernel Tuner, KTT and the T4 writers leave them, that kopt
-- misread (tests/data/recordings_wild/; each check failed before its fix):
-- * a T4 file of GFLOPS/W (Kernel Tuner's T4 writer adds metadata.timeunit
--   to every file) replayed its efficiencies as milliseconds: the least
--   efficient config crowned; a rate named GFLOPS (no "/s") the same;
-- * a cache left open by a running tuner, with a NaN sample in an entry,
--   lost complete entries (the optimum) to the repair;
-- * Kernel Tuner 1.4 caches (the objective a list, failures under
--   "__error__") and rate caches of 0.4.5-1.3 (a failure under the
--   objective, no time) were refused;
-- * a one-line cache with a brace missing inside was "repaired" as cut
--   short, its later entries dropped;
-- * a KTT PrivateMemorySize of null ended in an internal error;
-- * --time-limit on a recording with no evaluation cost did nothing, unsaid;
-- * a NaN sample among a T4 result's runtimes, or a NaN compile_time in a
--   cache, refused the file (a NaN outside the time is an unknown cost);
-- * a T4 file tuned for GFLOP/s was replayed by the first time-like
--   measurement, a transfer_time listed before its time: the optimum last;
-- * a cache tuned for GFLOPS/W replayed by its times (the fastest clock
--   crowned) where the same tuning as a T4 file is refused.
local T = require("testlib")

local D = "tests/data/recordings_wild/"
local tmp = T.tmpdir("recordings-wild")

local function run(file, extra)
  local out = tmp .. "/" .. file:gsub("%W", "_")
  os.execute("rm -rf '" .. out .. "'")
  local code, stdout, err = T.run(string.format("exhaustive --backend replay:%s%s --out %s %s", D, file, out, extra or ""))
  local stop
  if T.exists(out .. "/events.jsonl") then stop = select(2, T.events(out)) end
  return code, stop, err, stdout, out
end

local function best_of(file)
  local code, stop, err = run(file)
  return code, stop and stop.best and stop.best.time_ms, err
end

-- T4: an efficiency is refused, a rate named without "/s" replays by its time
local code, _, err = run("t4_score.json")
T.check(code == 2 and err:find("objective 'GFLOPS/W' has no unit and its name is not a time", 1, true),
        "a T4 GFLOPS/W file is refused (%d: %s)", code, err)
local c2, b2, e2 = best_of("t4_gflops_noslash.json")
T.check(c2 == 0 and b2 == 1 and e2:find("tuned for 'GFLOPS'", 1, true), "GFLOPS replays by time: best %s (%s)",
        tostring(b2), e2)
-- (a time named with its unit and no unit field still reads as one)
local c2b, b2b, e2b = best_of("t4_kernel_ms.json")
T.check(c2b == 0 and b2b == 1, "a T4 objective kernel_ms with no unit: best %s (%s)", tostring(b2b), e2b)
local c3, b3 = best_of("t4_rate_failfirst.json")
T.check(c3 == 0 and b3 == 1, "a T4 rate file whose first entry failed: best %s", tostring(b3))

-- Kernel Tuner: an open cache with a NaN sample, 1.4's shapes, a rate cache's failure
local c4, b4, e4 = best_of("kt_open_nan_last.json")
T.check(c4 == 0 and b4 == 1 and e4:find("the 3 complete entries are read", 1, true),
        "an open cache with a NaN sample keeps every complete entry: best %s (%s)", tostring(b4), e4)
for _, f in ipairs({ "kt14.json", "kt13_gflops.json" }) do
  local c, stop, e, stdout = run(f)
  T.check(c == 0 and stop and stop.best and stop.best.time_ms == 0.2 and stdout:find("1 compile_error", 1, true),
          "%s: read, its failure a compile error (%s%s)", f, e, stdout)
end

-- a one-line cache damaged inside
local c5, _, e5 = run("kt_compact_damaged.json")
T.check(c5 == 2 and e5:find("damaged inside, not cut short", 1, true), "a one-line cache damaged inside: %s", e5)

-- KTT: null where a size belongs
local c6, b6, e6 = best_of("ktt_private_null.json")
T.check(c6 == 0 and b6 == 0.05, "a KTT PrivateMemorySize of null: best %s (%s)", tostring(b6), e6)

-- --time-limit where the recording records no cost
local _, _, e7 = run("kt04_nocost.json", "--time-limit 0.001")
T.check(e7:find("records no evaluation cost", 1, true), "--time-limit without costs is said: %s", e7)

-- NaN in a cost: no harm (the entry's cost counts it as 0)
local c8, b8, e8 = best_of("t4_nan_runtime.json")
T.check(c8 == 0 and b8 == 1, "a T4 result with a NaN runtime sample: best %s (%s)", tostring(b8), e8)
local c9, b9, e9 = best_of("kt_nan_compile.json")
T.check(c9 == 0 and b9 == 1, "a cache entry with a NaN compile_time: best %s (%s)", tostring(b9), e9)

-- a rate beside two times: replayed by the one named time, and the note names it
local c10, b10, e10 = best_of("t4_rate_transfer_time.json")
T.check(c10 == 0 and b10 == 1 and e10:find("replayed by the time each entry records, its 'time'", 1, true),
        "a T4 rate file with a transfer_time first: best %s (%s)", tostring(b10), e10)

-- an efficiency: refused in a cache as in a T4 file
local c11, _, e11 = run("kt_gflops_per_watt.json")
T.check(c11 == 2 and e11:find("objective 'GFLOPS/W' is an efficiency", 1, true),
        "a cache tuned for GFLOPS/W is refused (%d: %s)", c11, e11)

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
