-- Every cheat of tests/cheats compiles, honest and cheating configs alike,
-- with NVRTC and no GPU: the GPU tests that run them (test_gpu_cheats,
-- test_gpu_range_probe, ...) are skipped in CI, so a cheat broken by an
-- edit would otherwise go unseen until a GPU ran it. So does every config
-- of the honest kernels of tests/honest (test_gpu_honest).
local T = require("testlib")
-- cheats whose cheating config must not compile: that is how kopt stops them
local REFUSED = { ["cdp_launch.json"] = "device-side kernel launch could not be processed" }
local sys = require("kopt.sys")
local names = sys.list_dir("tests/cheats") or {}
table.sort(names)
local n = 0
for _, f in ipairs(names) do
  if f:match("%.json$") then
    n = n + 1
    local code, out, err = T.run("compile tests/cheats/" .. f .. " --all")
    if REFUSED[f] then
      T.check(code == 1 and out:find("1 of %d+ failed") and out:find(REFUSED[f], 1, true) and out:find("ok.-CHEAT=0"),
              "tests/cheats/%s: the honest config compiles, the cheat is refused:\n%s%s", f, out, err)
    else
      T.check(code == 0, "tests/cheats/%s: exit %d\n%s%s", f, code, out, err)
    end
  end
end
T.check(n >= 25, "%d cheat specs found", n)
local honest = sys.list_dir("tests/honest") or {}
table.sort(honest)
n = 0
for _, f in ipairs(honest) do
  if f:match("%.json$") then
    n = n + 1
    local code, out, err = T.run("compile tests/honest/" .. f .. " --all")
    T.check(code == 0, "tests/honest/%s: exit %d\n%s%s", f, code, out, err)
  end
end
T.check(n >= 15, "%d honest specs found", n)
return T.done()
