-- Honest kernels the verifier's rules were not written for (tests/honest):
-- atomics that differ run to run, exact outputs a one-bit nudge moves
-- (ReLU, 2:4 pruning, sorts and counts at ties), in-place updates, 3-D
-- regions, bf16 and f64, pipelines, microsecond and 5 ms kernels, and a
-- data-dependent run time that check 2's other distributions slow down.
-- Every config must be ok and none charged check 2's time; the range probe
-- must pass on three of them. Needs a GPU: exits 77 with the reason
-- otherwise.
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local rc = dofile("tests/honest/run.lua")
if rc ~= 0 then print("FAIL: an honest kernel was not ok, or was charged check 2's time (lines above)") end
return rc
