-- The winner under compute-sanitizer (kopt.sanitize): racecheck sees the
-- race of tests/cheats/benign_race.cu, which the output comparison cannot
-- (it happens not to change the result), and finds the honest kernel clean;
-- memcheck finds the honest kernel clean, and tests/cheats/oob_read's reads
-- past its input's end. Needs a GPU and the CUDA
-- toolkit's compute-sanitizer: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local sanitize = require("kopt.sanitize")
local spec_mod = require("kopt.spec")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local exe, nwhy = sanitize.find()
if not exe then
  print("skipped: " .. nwhy)
  return 77
end

local spec = spec_mod.load("tests/cheats/benign_race.json")
local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
local function check(cheat, tools)
  local job = { config = { CHEAT = cheat } }
  local verdict, clean = sanitize.check(be, job, spec:entry(job.config), tools, exe, 300)
  for _, tool in ipairs(tools) do
    local rep = verdict[tool]
    print(string.format("CHEAT=%d %s: errors %s warnings %s blamed %s status %s %.1f s %s", cheat, tool,
      tostring(rep.errors), tostring(rep.warnings), tostring(rep.blamed), tostring(rep.status), rep.seconds,
      rep.note or ""))
    local n = 0
    for line in (rep.text or ""):gmatch("[^\n]+") do
      n = n + 1
      if n <= 12 then print("    | " .. line) end
    end
  end
  return verdict, clean
end

local v, clean = check(0, { "racecheck", "memcheck" })
T.check(clean, "the honest kernel is clean under racecheck and memcheck")
T.eq(v.racecheck.errors, 0, "racecheck: no error in the honest kernel")
T.eq(v.memcheck.errors, 0, "memcheck: no error in the honest kernel")
v, clean = check(1, { "racecheck" })
T.check(not clean, "racecheck holds the dropped barrier against the cheat")
T.check((v.racecheck.errors or 0) > 0, "racecheck reports the hazard (%s)", tostring(v.racecheck.errors))
be:close()

-- memcheck sees reads past the end of a buffer: the worker under the
-- sanitizer allocates each buffer at its own size, without the guard bands
-- that held tests/cheats/oob_read's masked float4 loads inside one
-- allocation (clean before)
spec = spec_mod.load("tests/cheats/oob_read.json")
be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 } })
v, clean = check(0, { "memcheck" })
T.check(clean and v.memcheck.errors == 0, "oob_read: the honest kernel is clean under memcheck")
v, clean = check(1, { "memcheck" })
T.check(not clean and (v.memcheck.errors or 0) > 0, "oob_read: memcheck reports the reads past x's end (%s errors)",
        tostring(v.memcheck.errors))
be:close()
return T.done()
