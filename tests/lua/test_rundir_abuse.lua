-- A run folder and its files abused from outside; each case failed before
-- its fix:
-- * a write that failed part-way cut the file back to the size this process
--   had last seen: lines another process had appended since (the shared
--   experience dataset) were cut with it;
-- * a file-size limit (ulimit -f) killed kopt with SIGXFSZ: exit 153, a torn
--   line, no stop event, no results.json, a stray .tmp file;
-- * with stderr closed (2>&-) the lock file took descriptor 2, and the
--   progress lines were written into it;
-- * a lock file deleted during a run (a cleanup of "stale" locks) let a
--   second kopt write the same folder at once.
local T = require("testlib")
local sys = require("kopt.sys")

local tmp = T.tmpdir("rundir-abuse")
local REC = "--backend replay:tests/data/convolution_A100.json --no-db"

-- a failed write takes back its own part only
do
  local path = tmp .. "/shared.jsonl"
  T.write(tmp .. "/append.lua", string.format([[
local sys = require("kopt.sys")
local f = assert(sys.open_log(%q, "a"))
assert(f:write("mine 1\n"))
local other = assert(io.open(%q, "a"))
other:write("theirs\n")
other:close()
print(f:write("mine 2 cut short\n"))
]], path, path))
  -- (7 bytes of the first line, then 5 of the second, then the disk is full)
  local code, out, err = T.run("script " .. tmp .. "/append.lua", "KOPT_FAIL_WRITE_AFTER=12")
  T.eq(code, 0, "the appending script: " .. out .. err)
  T.check(out:find("nil", 1, true), "the cut write did not fail: %s", out)
  T.eq(T.slurp(path), "mine 1\ntheirs\n", "the shared file after a write failed part-way")
end

-- a file-size limit: one sentence, exit 1, whole lines, the summary files
do
  local dir = tmp .. "/fsize"
  local code = T.run(string.format("random %s --budget 300 --out %s -q", REC, dir))
  T.eq(code, 0, "the unlimited run")
  local size = #T.slurp(dir .. "/events.jsonl")
  os.execute("rm -rf '" .. dir .. "'")
  local cmd = string.format("ulimit -f %d; KOPT_DB=off %s random %s --budget 300 --out %s -q", size // 2048, T.kopt,
                            REC, dir)
  local ok, _, rc = os.execute("bash -c " .. string.format("%q", cmd) .. " > " .. tmp .. "/fsize.out 2>&1")
  local err = T.slurp(tmp .. "/fsize.out")
  T.check(not ok and rc == 1, "under ulimit -f: exit %s (expected 1)\n%s", tostring(rc), err)
  T.check(err:find("File too large", 1, true) and err:find("--resume", 1, true),
          "under ulimit -f: no sentence naming the failed write:\n%s", err)
  local text = T.slurp(dir .. "/events.jsonl")
  T.check(text:sub(-1) == "\n", "under ulimit -f: a torn last line")
  for _, f in ipairs(sys.list_dir(dir) or {}) do
    T.check(not f:find("%.tmp"), "under ulimit -f: %s left behind", f)
  end
end

-- stderr closed: the lock file holds the PID only
do
  local dir = tmp .. "/closed"
  os.execute(string.format("KOPT_DB=off %s random %s --budget 50 --out %s 2>&- > /dev/null", T.kopt, REC, dir))
  local lock = T.slurp(dir .. "/.kopt.lock")
  T.check(lock:match("^%d+\n$"), "with stderr closed the lock file holds %d bytes: %q", #lock, lock:sub(1, 80))
end

-- a lock file deleted during a run: a second kopt on the folder is refused
do
  local dir = tmp .. "/unlocked"
  local pidfile = tmp .. "/unlocked.pid"
  -- (a strategy that takes its time: 20 ms a candidate)
  T.write(tmp .. "/slow.lua", [[
local S = { name = "slow", options = {} }
function S.ask(ctx, n)
  local t = os.clock()
  while os.clock() - t < 0.02 do end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  os.execute(string.format("KOPT_DB=off %s %s/slow.lua %s --budget 1000 --out %s -q > /dev/null 2>&1 & echo $! > %s",
                           T.kopt, tmp, REC, dir, pidfile))
  local t0 = sys.now()
  while not T.exists(dir .. "/events.jsonl") and sys.now() - t0 < 20 do sys.sleep(0.05) end
  os.remove(dir .. "/.kopt.lock")
  local code, _, err = T.run(string.format("%s/slow.lua %s --budget 1000 --out %s -q --resume", tmp, REC, dir))
  local pid = T.slurp(pidfile):match("%d+")
  local first_alive = os.execute("kill -0 " .. pid .. " 2>/dev/null") == true
  os.execute("kill " .. pid .. " 2>/dev/null; sleep 0.3")
  T.check(first_alive, "the first run ended before the check (it should outlast it)")
  T.check(code == 2 and err:find("whose lock file", 1, true), "a second kopt on a folder whose lock file was " ..
          "removed: exit %d\n%s", code, err)
end

T.done()
