-- Fault injection: a full disk, mid-run and mid-resume, and a failing fsync.
-- Regression: a run on a nearly full disk used to exit 0 with a torn
-- events.jsonl and empty results.json and best/ files, and a --resume that
-- hit a full disk replaced a good results.json with an empty file. And a
-- disk that filled right after the start line told the user to rerun the
-- same command, which refused the folder ("already holds a run").
--
-- KOPT_FAIL_WRITE_AFTER=N lets kopt write N bytes through its checked write
-- path and then fails every write with ENOSPC, the write that crosses the
-- limit written in part, as a real full disk does. For limits spread over
-- the whole of a run's output, each run must: exit 1 with one sentence;
-- leave whole, strict JSON lines on record that are a prefix of what an
-- uninterrupted run records; leave no temporary file and no half-written
-- summary file; and continue with --resume (no fault) to exactly the
-- uninterrupted run's evaluations. A strategy's finish after the failure
-- writes nothing into the folder (regression: MCGS's finish wrote
-- graph.kgr and tried graph.json, a second sentence about the full disk).
local T = require("testlib")
local sys = require("kopt.sys")

local tmp = T.tmpdir("disk")
local replay = "tests/data/convolution_A100.json"

local function files(dir, out, prefix)
  out = out or {}
  for _, name in ipairs(sys.list_dir(dir) or {}) do
    local path = dir .. "/" .. name
    local kind, size = sys.stat(path)
    if kind == "dir" then
      files(path, out, (prefix or "") .. name .. "/")
    else
      out[(prefix or "") .. name] = size
    end
  end
  return out
end

-- Bytes a run wrote through kopt's checked write path: every file but the lock.
local function bytes_written(dir)
  local n = 0
  for name, size in pairs(files(dir)) do
    if name ~= ".kopt.lock" then n = n + size end
  end
  return n
end

local function run(out, budget, extra, env)
  return T.run(string.format("random --backend replay:%s --budget %d --seed 3 --out %s -q %s", replay, budget, out,
                             extra or ""), env)
end

-- What a run may leave after a failed write: no temporary files; summary
-- files whole (strict JSON is checked for the whole tree at the end).
local function check_leftovers(dir, what)
  for name, size in pairs(files(dir)) do
    T.check(not name:find("%.tmp"), "%s: temporary file %s left behind", what, name)
    if name:match("%.json$") then T.check(size > 0, "%s: %s is empty", what, name) end
  end
end

local function check_prefix(dir, ref, what)
  local keys = T.keys(dir)
  for i, k in ipairs(keys) do
    if ref[i] ~= k then
      T.check(false, "%s: evaluation %d on record is %s, the uninterrupted run's is %s", what, i, k, tostring(ref[i]))
      break
    end
  end
  return #keys
end

local PATTERN = "^kopt: cannot write (%S+): No space left on device; the run stopped there, its (%d+) recorded " ..
                "evaluations are intact and %-%-resume continues it$"
local PATTERN_NOTHING = "^kopt: cannot write (%S+): No space left on device; the run stopped before it recorded " ..
                        "anything: run the same command again once there is room$"

-- 1. Mid-run: a fresh run of 40 evaluations.
local ref_dir = tmp .. "/ref"
T.eq((run(ref_dir, 40)), 0, "exit code of the uninterrupted run")
local ref = T.keys(ref_dir)
T.eq(#ref, 40, "evaluations of the uninterrupted run")
local total = bytes_written(ref_dir)
-- just past the start line: the trace's first write fails while the folder
-- is being opened (regression: the message said "run the same command
-- again", which then refused the folder holding that start line)
local start_line = T.slurp(ref_dir .. "/events.jsonl"):match("^[^\n]*\n")
local limits = { 0, 1, 200, #start_line + 1 }
for _, f in ipairs({ 0.05, 0.2, 0.45, 0.7, 0.9, 0.97, 0.995 }) do limits[#limits + 1] = math.floor(total * f) end
local seed = tonumber(os.getenv("KOPT_TEST_SEED") or "") or os.time()
math.randomseed(seed)
io.stdout:write("KOPT_TEST_SEED=", seed, "\n")
for _ = 1, 3 do limits[#limits + 1] = math.random(0, total - 1) end
for i, limit in ipairs(limits) do
  local dir = string.format("%s/full_%d", tmp, i)
  local what = string.format("disk full after %d of %d bytes (seed %d)", limit, total, seed)
  local code, _, err = run(dir, 40, "", "KOPT_FAIL_WRITE_AFTER=" .. limit)
  T.eq(code, 1, what .. ": exit code")
  local line = T.one_sentence(err, what)
  local path, recorded = line:match(PATTERN)
  local n = check_prefix(dir, ref, what)
  if path then
    T.eq(tonumber(recorded), n, what .. ": evaluations the message counts vs on record")
  else
    T.check(line:match(PATTERN_NOTHING) ~= nil and n == 0, "%s: message: %s", what, line)
  end
  check_leftovers(dir, what)
  -- The same command continues it (with --resume when anything was recorded).
  code, _, err = run(dir, 40, path and "--resume" or "")
  T.eq(code, 0, what .. ": exit code of the run that continues it\n" .. err)
  T.same_list(T.keys(dir), ref, what .. ": evaluations after the run was continued")
end

-- 2. Mid-resume: a finished run of 20 continued to 40 on a disk that fills.
local base = tmp .. "/base"
T.eq((run(base, 20)), 0, "exit code of the 20-evaluation run")
local base_results = T.slurp(base .. "/results.json")
local before = files(base)
local clean = tmp .. "/clean_resume"
os.execute(string.format("cp -r '%s' '%s'", base, clean))
T.eq((run(clean, 40, "--resume")), 0, "exit code of the clean resume")
local resumed_ref = T.keys(clean)
T.same_list(resumed_ref, ref, "a run of 20 resumed to 40 evaluates what a run of 40 does")
local total2 = bytes_written(clean) - before["events.jsonl"] - before["trace.md"]
local cjson = require("cjson")
for i, f in ipairs({ 0, 0.1, 0.5, 0.8, 0.95, 0.99 }) do
  local limit = math.floor(total2 * f)
  local dir = string.format("%s/resume_full_%d", tmp, i)
  local what = string.format("resume with the disk full after %d of %d bytes", limit, total2)
  os.execute(string.format("cp -r '%s' '%s'", base, dir))
  local code, _, err = run(dir, 40, "--resume", "KOPT_FAIL_WRITE_AFTER=" .. limit)
  T.eq(code, 1, what .. ": exit code")
  local line = T.one_sentence(err, what)
  local _, recorded = line:match(PATTERN)
  local n = check_prefix(dir, ref, what)
  T.check(n >= 20, "%s: %d evaluations on record, the 20 of the first run must stay", what, n)
  T.eq(tonumber(recorded), n, what .. ": evaluations the message counts vs on record")
  check_leftovers(dir, what)
  -- results.json is the old one, byte for byte, or a whole new one
  local now = T.slurp(dir .. "/results.json")
  if now ~= base_results then
    local ok, doc = pcall(cjson.decode, now)
    T.check(ok and #doc.results == 40, "%s: results.json is neither the old one nor a whole new one", what)
  end
  code, _, err = run(dir, 40, "--resume")
  T.eq(code, 0, what .. ": exit code of the resume that continues it\n" .. err)
  T.same_list(T.keys(dir), ref, what .. ": evaluations after the resume")
end

-- 3. A strategy with a finish (MCGS: its graph snapshot, at the end alone
-- with snapshot_every past the budget): after the failure it writes nothing.
local function run_mcgs(out, extra, env)
  return T.run(string.format("mcgs --backend replay:%s --budget 40 --seed 3 --out %s -q %s", replay, out, extra or ""),
               env)
end
local mcgs_ref = tmp .. "/mcgs_ref"
T.eq((run_mcgs(mcgs_ref)), 0, "exit code of the uninterrupted MCGS run")
T.check(T.exists(mcgs_ref .. "/graph.json") and T.exists(mcgs_ref .. "/graph.kgr"), "MCGS's finish writes its graph")
-- (graph.kgr is written by the graph's own C code, outside the checked path;
-- the failures below come before the end, where finish writes)
local mcgs_total = bytes_written(mcgs_ref) - select(2, sys.stat(mcgs_ref .. "/graph.kgr"))
for i, f in ipairs({ 0.1, 0.25, 0.4 }) do
  local limit = math.floor(mcgs_total * f)
  local dir = string.format("%s/mcgs_full_%d", tmp, i)
  local what = string.format("MCGS with the disk full after %d of %d bytes", limit, mcgs_total)
  local code, _, err = run_mcgs(dir, "", "KOPT_FAIL_WRITE_AFTER=" .. limit)
  T.eq(code, 1, what .. ": exit code")
  local _, recorded = T.one_sentence(err, what):match(PATTERN)
  T.eq(tonumber(recorded), #T.keys(dir), what .. ": evaluations the message counts vs on record")
  T.check(#T.keys(dir) < 40, "%s: the failure came before the end (%d evaluations on record)", what, #T.keys(dir))
  T.check(not T.exists(dir .. "/graph.kgr") and not T.exists(dir .. "/graph.json"),
          "%s: the graph snapshot was written after the failure", what)
  check_leftovers(dir, what)
  code, _, err = run_mcgs(dir, "--resume")
  T.eq(code, 0, what .. ": exit code of the resume that continues it\n" .. err)
  T.same_list(T.keys(dir), T.keys(mcgs_ref), what .. ": evaluations after the resume")
end

-- 4. fsync fails (an I/O error): one sentence, exit 1, nothing on record lost.
local fs = tmp .. "/fsync"
local code, _, err = run(fs, 10, "", "KOPT_FAIL_FSYNC=1")
T.eq(code, 1, "exit code when fsync fails")
local line = T.one_sentence(err, "fsync fails")
T.check(line:find("fsync: Input/output error", 1, true) ~= nil, "fsync failure named: %s", line)
T.eq(#T.keys(fs), 10, "evaluations on record when fsync failed at the end")
code = run(fs, 10, "--resume")
T.eq(code, 0, "exit code of the resume after the fsync failure")
T.check(T.exists(fs .. "/results.json"), "results.json written by the resume")

T.strict_json(tmp, "every file of the disk-full runs")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
