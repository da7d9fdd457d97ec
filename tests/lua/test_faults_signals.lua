-- Fault injection: signals. Regression: SIGTERM (what timeout, docker stop,
-- systemd and Slurm send) was ignored while Lua ran, so a strategy stuck in a
-- loop stopped only on SIGINT or SIGKILL.
--   1. SIGTERM between evaluations behaves like Ctrl-C: exit 130, everything
--      written, and --resume continues to the uninterrupted run's evaluations.
--   2. SIGTERM while the strategy is stuck in a Lua loop: interrupted from a
--      hook within about a second, the same clean stop, resumable.
--   3. Two SIGTERMs: the second interrupts at once, without the grace second.
--   4. A strategy that allocates without end is stopped the same way.
--   5. A strategy whose loop catches the interruption (pcall), or runs in a
--      coroutine the hook does not watch: ended 5 s after the signal with
--      the resume message; resumable to the uninterrupted run's evaluations.
--   6. A finish(ctx, reason) that does not return, after the search ended:
--      interrupted from the hook as ask and tell are, and the run's files
--      written (it was left running, the signal ignored).
local T = require("testlib")

local tmp = T.tmpdir("signals")
local replay = "tests/data/convolution_A100.json"

-- Deterministic given its seed; slow (sleeps) or stuck after 5 evaluations
-- when STUCK says so; done after 30.
T.write(tmp .. "/stuck.lua", [[
local sys = require("kopt.sys")
local S = { name = "stuck", options = {} }
function S.ask(ctx, n)
  local mode = os.getenv("STUCK")
  if ctx.evaluations >= 30 then return {} end
  if mode == "slow" then sys.sleep(0.05) end
  if ctx.evaluations >= 5 and mode == "loop" then
    local x = 0
    while true do x = x + 1 end
  end
  if ctx.evaluations >= 5 and mode == "pcall" then
    while true do pcall(function() local x = 0 for _ = 1, 1e6 do x = x + 1 end end) end
  end
  if ctx.evaluations >= 5 and mode == "coroutine" then
    coroutine.wrap(function() local x = 0 while true do x = x + 1 end end)()
  end
  if ctx.evaluations >= 5 and mode == "alloc" then
    local t = {}
    while true do t[#t + 1] = {} end
  end
  return { { config = ctx.space:sample(ctx.rng) } }
end
function S.finish()
  if os.getenv("STUCK") == "finish" then while true do end end
end
return S]])

local function cmd(out, extra)
  return string.format("%s/stuck.lua --backend replay:%s --out %s -q %s", tmp, replay, out, extra or "")
end

local ref_dir = tmp .. "/ref"
T.eq((T.run(cmd(ref_dir))), 0, "exit code of the uninterrupted run")
local ref = T.keys(ref_dir)
T.eq(#ref, 30, "evaluations of the uninterrupted run")

-- Starts the strategy in mode `mode`, waits for 5 evaluations on record and
-- `settle` seconds more, sends the signals (`gap` seconds apart), and returns
-- the exit status and the milliseconds from the first signal to the exit.
-- A watchdog kills the run after 20 s, so a hook that never fires fails the
-- test instead of hanging it.
local function signal_run(dir, mode, signals, gap, settle)
  local script = string.format([[
STUCK=%s %s %s >/dev/null 2>%s.err & pid=$!
for i in $(seq 1 600); do
  n=$(grep -c '"event":"eval"' %s/events.jsonl 2>/dev/null || echo 0)
  [ "$n" -ge 5 ] && break
  sleep 0.02
done
sleep %.2f
( exec </dev/null >/dev/null 2>&1; sleep 20; kill -9 $pid ) & dog=$!
t0=$(date +%%s%%N)
for s in $(seq 1 %d); do kill -TERM $pid; sleep %.2f; done
wait $pid; rc=$?
t1=$(date +%%s%%N)
kill $dog 2>/dev/null
echo "$rc $(( (t1 - t0) / 1000000 ))" > %s.rc]], mode, T.kopt, cmd(dir), dir, dir, settle, signals, gap, dir)
  os.execute("{ " .. script .. "\n} 2>/dev/null")
  local rc, ms = T.slurp(dir .. ".rc"):match("(%d+) (%d+)")
  io.stdout:write(string.format("%s: exit %s after %s ms\n", dir:match("[^/]+$"), tostring(rc), tostring(ms)))
  return tonumber(rc), tonumber(ms), T.slurp(dir .. ".err")
end

local function check_stopped(dir, what, rc, err)
  T.eq(rc, 130, what .. ": exit status")
  T.check(err:find("interrupted after %d+ evaluations; continue with %-%-resume") ~= nil, "%s: message:\n%s", what, err)
  T.check(not err:lower():find("traceback", 1, true), "%s: a traceback:\n%s", what, err)
  local _, stop = T.events(dir)
  T.check(stop and stop.reason == "interrupted", "%s: stop event with reason 'interrupted'", what)
  T.check(T.exists(dir .. "/results.json"), "%s: results.json written", what)
  local code, _, rerr = T.run(cmd(dir, "--resume"))
  T.eq(code, 0, what .. ": exit code of the resume\n" .. rerr)
  T.same_list(T.keys(dir), ref, what .. ": evaluations after the resume")
end

-- 1. between evaluations
local dir = tmp .. "/term"
local rc, ms, err = signal_run(dir, "slow", 1, 0, 0.1)
check_stopped(dir, "SIGTERM between evaluations", rc, err)
T.check(ms < 3000, "SIGTERM between evaluations: stopped after %d ms", ms or -1)

-- 2. stuck in a loop: the hook after the grace second
dir = tmp .. "/loop"
rc, ms, err = signal_run(dir, "loop", 1, 0, 0.3)
check_stopped(dir, "SIGTERM with the strategy stuck in a loop", rc, err)
T.check(ms and ms >= 900 and ms < 6000, "stuck strategy: stopped %d ms after SIGTERM (expected the grace second)", ms or -1)

-- 3. two signals: at once
dir = tmp .. "/loop2"
rc, ms, err = signal_run(dir, "loop", 2, 0.05, 0.3)
check_stopped(dir, "two SIGTERMs with the strategy stuck in a loop", rc, err)
T.check(ms and ms < 800, "two SIGTERMs: stopped %d ms after the first (expected before the grace second)", ms or -1)

-- 4. runaway allocation, stopped by the second signal
dir = tmp .. "/alloc"
rc, ms, err = signal_run(dir, "alloc", 2, 0.05, 0.1)
check_stopped(dir, "SIGTERM with the strategy allocating without end", rc, err)
T.check(ms and ms < 3000, "runaway allocation: stopped %d ms after SIGTERM", ms or -1)

-- 5. a loop that catches the interruption, or one in a coroutine: the
-- watchdog ends the process; the record is whole, --resume completes it
for _, mode in ipairs({ "pcall", "coroutine" }) do
  dir = tmp .. "/" .. mode
  rc, ms, err = signal_run(dir, mode, 1, 0, 0.3)
  T.eq(rc, 130, mode .. ": exit status")
  T.check(ms and ms >= 4500 and ms < 9000, "%s: ended %d ms after SIGTERM (expected about 5 s)", mode, ms or -1)
  T.check(err:find("did not stop within 5 s of the signal", 1, true), "%s: message:\n%s", mode, err)
  local code, _, rerr = T.run(cmd(dir, "--resume"))
  T.eq(code, 0, mode .. ": exit code of the resume\n" .. rerr)
  T.same_list(T.keys(dir), ref, mode .. ": evaluations after the resume")
end

-- 6. stuck in finish, once the search has ended (30 evaluations)
dir = tmp .. "/finish"
rc, ms, err = signal_run(dir, "finish", 1, 0, 0.5)
T.eq(rc, 0, "stuck in finish: exit status (the search had ended)\n" .. err)
T.check(ms and ms >= 900 and ms < 4000, "stuck in finish: stopped %d ms after SIGTERM (expected the grace second)", ms or -1)
T.check(err:find("interrupted by a signal in finish()", 1, true), "stuck in finish: message:\n%s", err)
T.check(T.exists(dir .. "/results.json") and T.exists(dir .. "/best"), "stuck in finish: results.json and best/ written")
T.same_list(T.keys(dir), ref, "stuck in finish: evaluations")

T.strict_json(tmp, "every file of the interrupted runs")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
