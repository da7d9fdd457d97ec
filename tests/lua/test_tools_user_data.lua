-- The tools that run strategies for a benchmark leave the user's data
-- alone, as `kopt compare` does. Each check failed before its fix:
-- * tools/bench_search.lua appended its synthetic transitions to
--   $KOPT_EXPERIENCE and MCGS (regraph=auto) learned from them on the next
--   run, so its decision digest changed from one run to the next;
-- * tools/early_curve.lua wrote $KOPT_EXPERIENCE and the method map
--   ($KOPT_METHODS) with its replayed runs.
local T = require("testlib")
local tmp = T.tmpdir("tools-user-data")
local EXPERIENCE, METHODS = tmp .. "/experience.jsonl", tmp .. "/methods.json"
local ENV = "KOPT_EXPERIENCE=" .. EXPERIENCE .. " KOPT_METHODS=" .. METHODS
local TOOLS = T.source_dir .. "/tools/"
local function exists(path) return require("kopt.sys").stat(path) ~= nil end

local digests = {}
for i = 1, 2 do
  local code, out, err = T.run("script " .. TOOLS .. "bench_search.lua 1000 model=false", ENV)
  T.eq(code, 0, "bench_search run " .. i .. " (" .. err .. ")")
  digests[i] = out:match("digest (%x+)")
  T.check(not exists(EXPERIENCE), "bench_search run %d leaves no dataset at %s", i, EXPERIENCE)
  T.check(not exists(METHODS), "bench_search run %d leaves no method map at %s", i, METHODS)
end
T.check(digests[1] ~= nil and digests[1] == digests[2], "bench_search's digest is the same twice: %s, %s",
        tostring(digests[1]), tostring(digests[2]))

local code, _, err = T.run("script " .. TOOLS .. "early_curve.lua mcgs 2 20 tests/data/pnpoly_RTX_3090.json", ENV)
T.eq(code, 0, "early_curve (" .. err .. ")")
T.check(not exists(EXPERIENCE), "early_curve leaves no dataset at %s", EXPERIENCE)
T.check(not exists(METHODS), "early_curve leaves no method map at %s", METHODS)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
