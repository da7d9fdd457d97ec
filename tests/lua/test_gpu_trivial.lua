-- Specs a trivial kernel passes (kopt.trivial, core/worker/numerics_trivial.c):
-- when the reference runs on an input set, the worker tries all zeros, one
-- value, a copy of each input and the reference in a narrower float type
-- against it; those that pass both checks are named by the first reply past
-- check 2, and the run warns. tests/weak/weak_copy.json (y = x * w, w all
-- ones and fixed) is a copy of x; weak_tolerance.json (rel. L2 1e-2 on f32)
-- accepts f16 and bf16. Every shipped spec, every corner-case spec and the
-- cheat specs whose checks vary their inputs get no line. Needs a GPU:
-- exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local spec_mod = require("kopt.spec")
local run_mod = require("kopt.run")
local sys = require("kopt.sys")

-- the lines a run of the spec prints (the first job that passes check 2 brings them)
local function lines_of(path)
  local spec = spec_mod.load(path)
  local be = cuda.open(spec, { seed = 5, timing = { max_time_s = 0.05 } })
  local space = run_mod.build_space(spec)
  local res = be:evaluate({ { key = "1", config = space:default() or space:enumerate()[1] } })
  be:close()
  print(string.format("%-44s %-8s %s", path, tostring(res[1].status), table.concat(be.spec_warnings or {}, " | ")))
  return be.spec_warnings or {}, res[1]
end

local l = lines_of("tests/weak/weak_copy.json")
T.eq(#l, 1, "weak_copy: one warning")
T.check(l[1] and l[1]:match("^warning: output 'y' passes both checks when a kernel writes a copy of input 'x'"),
        "weak_copy: the copy of x is named (%s)", tostring(l[1]))
l = lines_of("tests/weak/weak_tolerance.json")
T.eq(#l, 1, "weak_tolerance: one note")
T.check(l[1] and l[1]:match("^note: output 'y': the tolerance accepts the reference rounded to f16 or bf16"),
        "weak_tolerance: f16 and bf16 are named (%s)", tostring(l[1]))
l = lines_of("tests/cheats/const_init_fixed.json")
T.check(l[1] and l[1]:find("a copy of input 'x'", 1, true), "const_init_fixed (w fixed ones) is a copy of x")

local quiet = { "tests/cheats/const_init.json", "tests/cheats/arange_float.json" }
for _, dir in ipairs({ "specs", "tests/byok" }) do
  for _, f in ipairs(sys.list_dir(dir)) do
    if f:match("%.json$") then quiet[#quiet + 1] = dir .. "/" .. f end
  end
end
table.sort(quiet)
for _, path in ipairs(quiet) do
  local lines, r = lines_of(path)
  T.eq(#lines, 0, path .. ": no warning or note")
  T.check(r.status == "ok" or r.status == "invalid", "%s: the default config runs (%s)", path, tostring(r.status))
end
return T.done()
