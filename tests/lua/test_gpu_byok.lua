-- Kernels that exercise corners of the spec format (tests/byok/): f64 with
-- odd sizes, f16 with an odd element count, exact i32 and u8 outputs, two
-- outputs, 3-D grids and blocks, dynamic shared memory from knobs, an
-- in/out buffer with a scalar, a __constant__ array, a constrained space,
-- a one-block problem. Every one is honest: every config of each (up to 24)
-- must be `ok` through the whole verifier. A u8 output was once reported as
-- "unwritten" wherever an honest byte equalled the poison's (one in 256).
-- None may be charged check 2's time (timed far faster than checked).
-- Needs a GPU: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local spec_mod = require("kopt.spec")
local run_mod = require("kopt.run")

local DIR = "tests/byok"
local names = {}
for _, f in ipairs(require("kopt.sys").list_dir(DIR)) do
  local n = f:match("^(byok_.+)%.json$")
  if n then names[#names + 1] = n end
end
table.sort(names)
T.check(#names >= 11, "the byok specs are there (%d)", #names)

for _, name in ipairs(names) do
  local spec = spec_mod.load(DIR .. "/" .. name .. ".json")
  local be = cuda.open(spec, { seed = 3, timing = { max_time_s = 0.05 } })  -- (sets spec.device)
  local space = run_mod.build_space(spec)
  local all = space:enumerate()
  local jobs = {}
  for i = 1, math.min(#all, 24) do jobs[i] = { key = tostring(i), config = all[i] } end
  local res = be:evaluate(jobs)
  be:close()
  local good, charged = 0, 0
  for i, r in ipairs(res) do
    if r.status == "ok" then
      good = good + 1
      -- (an honest kernel keeps its timed median: check 2's launch, on
      -- other data, is not 3x slower; run.c timed_faster_than_checked)
      if r.charged_check2 then
        charged = charged + 1
        print(string.format("  %s, %s: charged check 2's time: %s", name, space:describe(jobs[i].config),
                            tostring(r.log):sub(1, 200)))
      end
    else
      print(string.format("  %s, %s: %s: %s", name, space:describe(jobs[i].config), tostring(r.status),
                          tostring(r.log):sub(1, 300)))
    end
  end
  T.eq(good, #jobs, name .. ": configs ok")
  T.eq(charged, 0, name .. ": configs charged check 2's time")
  print(string.format("%-26s %2d of %2d configs ok", name, good, #jobs))
end
return T.done()
