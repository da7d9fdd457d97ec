-- Without a GPU, `kopt STRATEGY SPEC` runs on the spec's recording (the
-- README's first command does): the winner's checks that need a GPU
-- (--sanitize, --range-probe) are said to be skipped and the run goes on;
-- asked for with --backend replay they stay a usage error. Before, the
-- fallback stopped with exit 2 on them. Needs no GPU: with one, the run
-- would not fall back, so the test says so and stops.
local T = require("testlib")
local has_cuda, cuda = pcall(require, "kopt.backends.cuda")
if has_cuda and cuda.available and cuda.available() then
  print("skipped: a GPU is attached, so kopt does not fall back to the recording")
  return 77
end
local tmp = T.tmpdir("fallback")
local code, _, err = T.run("mcgs specs/matmul_f16_sm90.json --budget 3 --sanitize racecheck --range-probe note -q --out " ..
                           tmp .. "/a")
T.eq(code, 0, "the fallback run goes on (" .. err .. ")")
T.check(err:find("--sanitize skipped: it checks the winner on a GPU", 1, true) and
        err:find("--range-probe skipped: it checks the winner on a GPU", 1, true), "the skipped checks are said:\n%s", err)
-- the fallback itself is a note: under -q (only errors and the summary) it
-- is left out, without -q it is said
T.check(not err:find("running on the recorded measurements", 1, true), "-q: no fallback note:\n%s", err)
code, _, err = T.run("mcgs specs/matmul_f16_sm90.json --budget 3 --out " .. tmp .. "/c")
T.check(code == 0 and err:find("running on the recorded measurements", 1, true), "the fallback is said:\n%s", err)
code, _, err = T.run("mcgs --backend replay:tests/data/matmul_f16_sm90_h200.t4.json --budget 3 --sanitize racecheck -q " ..
                     "--out " .. tmp .. "/b")
T.eq(code, 2, "--backend replay with --sanitize: a usage error (" .. err .. ")")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
