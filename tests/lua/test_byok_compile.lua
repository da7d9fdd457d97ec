-- The corner-case specs of tests/byok/ (run on a GPU by test_gpu_byok.lua)
-- load and compile offline with NVRTC for sm_90: a sample of each space and
-- the reference, through `kopt compile`, so a change to the spec format or
-- the compile path that breaks one shows without a GPU.
local T = require("testlib")
local sys = require("kopt.sys")

local names = {}
for _, f in ipairs(sys.list_dir("tests/byok")) do
  if f:match("^byok_.+%.json$") then names[#names + 1] = f end
end
table.sort(names)
T.check(#names >= 11, "the byok specs are there (%d)", #names)
for _, f in ipairs(names) do
  local code, out, err = T.run(string.format("compile tests/byok/%s --sample 3 --no-cache", f))
  T.eq(code, 0, f .. ": kopt compile exit code (" .. err:sub(1, 300) .. ")")
  T.check(not out:find("error", 1, true), "%s: a compile error:\n%s", f, out:sub(1, 500))
end
return T.done()
