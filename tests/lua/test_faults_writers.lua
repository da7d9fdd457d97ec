-- Fault injection: two processes on one run folder. Regression: two fresh
-- runs started together could both pass the "already holds a run" check and
-- interleave two searches in one events.jsonl, and two --resumes were never
-- caught. Now the folder's lock is taken before anything is read or written:
--   1. while a run is going, a second fresh run and a --resume are refused
--      with one sentence naming the holder's PID, and write nothing;
--   2. kill -9 of the holder leaves no stale lock: --resume goes on at once;
--   3. many pairs started at the same instant, fresh and --resume: the record
--      is always the uninterrupted run's, one search, nothing twice.
local T = require("testlib")

local tmp = T.tmpdir("writers")
local replay = "tests/data/convolution_A100.json"

-- With HOLD=FILE it waits after 3 evaluations for as long as FILE exists.
T.write(tmp .. "/slow.lua", [[
local sys = require("kopt.sys")
local S = { name = "slow", options = {} }
function S.ask(ctx, n)
  local hold = os.getenv("HOLD")
  while hold and ctx.evaluations >= 3 and sys.stat(hold) do sys.sleep(0.02) end
  if ctx.evaluations >= 40 then return {} end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S]])

local function cmd(out, extra)
  return string.format("%s/slow.lua --backend replay:%s --out %s -q %s", tmp, replay, out, extra or "")
end

local function count(dir, event)
  local n = 0
  for line in io.lines(dir .. "/events.jsonl") do
    if line:find('"event":"' .. event .. '"', 1, true) then n = n + 1 end
  end
  return n
end

local ref_dir = tmp .. "/ref"
T.eq((T.run(cmd(ref_dir))), 0, "exit code of the uninterrupted run")
local ref = T.keys(ref_dir)
T.eq(#ref, 40, "evaluations of the uninterrupted run")

-- 1 and 2: a run holds the folder; others are refused; kill -9 frees it.
local dir = tmp .. "/held"
T.write(tmp .. "/hold", "")
local script = string.format([[
HOLD=%s/hold %s %s >/dev/null 2>&1 & pid=$!
for i in $(seq 1 600); do
  n=$(grep -c '"event":"eval"' %s/events.jsonl 2>/dev/null || echo 0)
  [ "$n" -ge 3 ] && break
  sleep 0.02
done
echo $pid > %s.pid
%s %s >%s.out1 2>%s.err1; echo $? > %s.rc1
%s %s >%s.out2 2>%s.err2; echo $? > %s.rc2
kill -9 $pid; wait $pid
%s %s >/dev/null 2>%s.err3; echo $? > %s.rc3]],
  tmp, T.kopt, cmd(dir), dir, dir, T.kopt, cmd(dir), dir, dir, dir, T.kopt, cmd(dir, "--resume"), dir, dir, dir,
  T.kopt, cmd(dir, "--resume"), dir, dir)
os.execute("{ " .. script .. "\n} 2>/dev/null")
local pid = tonumber(T.slurp(dir .. ".pid"))
local want = string.format("kopt: %s is in use by another kopt process (PID %d); wait for it to end, or choose another --out",
                           dir, pid or -1)
for i, what in ipairs({ "a second fresh run", "a second --resume" }) do
  T.eq(tonumber(T.slurp(dir .. ".rc" .. i)), 2, what .. " while the run goes: exit code")
  local line = T.one_sentence(T.slurp(dir .. ".err" .. i), what)
  T.eq(line, want, what .. ": message")
  T.eq(T.slurp(dir .. ".out" .. i), "", what .. ": stdout")
end
T.eq(count(dir, "start"), 1, "start events: the refused fresh run wrote none")
T.eq(count(dir, "resume"), 1, "resume events: the refused --resume wrote none, the one after the kill one")
T.eq(tonumber(T.slurp(dir .. ".rc3")), 0, "--resume right after kill -9 of the holder: exit code\n" .. T.slurp(dir .. ".err3"))
T.same_list(T.keys(dir), ref, "evaluations after kill -9 of the holder and a resume")

-- 3. pairs started at the same instant
for trial = 1, 6 do
  local d = string.format("%s/race_%d", tmp, trial)
  local mode = trial % 2 == 0 and "--resume" or ""
  if mode == "--resume" then
    -- a run killed after some evaluations, then two resumes at once
    T.run(cmd(d), "KOPT_TEST_SIGKILL_AFTER=" .. (5 * trial))
  end
  os.execute(string.format("{ %s %s >/dev/null 2>%s.a & %s %s >/dev/null 2>%s.b & wait; } 2>/dev/null",
                           T.kopt, cmd(d, mode), d, T.kopt, cmd(d, mode), d))
  local errs = T.slurp(d .. ".a") .. T.slurp(d .. ".b")
  for line in errs:gmatch("[^\n]+") do
    T.check(line:find("is in use by another kopt process %(PID %d+%)") or line:find("already holds a run", 1, true),
            "race %d: unexpected message: %s", trial, line)
  end
  if mode == "" then T.eq(count(d, "start"), 1, string.format("race %d: start events", trial)) end
  T.same_list(T.keys(d), ref, string.format("race %d (%s): evaluations on record", trial, mode ~= "" and mode or "fresh"))
  T.check(count(d, "stop") >= 1, "race %d: the run ended", trial)
end

T.strict_json(tmp, "every file of the concurrent runs")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
