-- Fault injection: kill -9 at random moments of every built-in strategy,
-- exhaustive without a budget included (regression: its start line held
-- "budget":inf and --resume then refused the run as corrupt). Each run is
-- killed twice: once right after a random evaluation is recorded
-- (KOPT_TEST_SIGKILL_AFTER), once from outside after a random delay, at
-- whatever it was doing; the first also gets a torn last line, as a kill in
-- the middle of a write leaves. After --resume the evaluations on record
-- must be exactly those of an uninterrupted run, in order: nothing recorded
-- lost, nothing measured twice. Every file of every run must be strict JSON.
-- The random moments come from KOPT_TEST_SEED (default: the clock), printed
-- so a failure can be replayed.
local T = require("testlib")

local tmp = T.tmpdir("kill")
local seed = tonumber(os.getenv("KOPT_TEST_SEED") or "") or os.time()
math.randomseed(seed)
io.stdout:write("KOPT_TEST_SEED=", seed, "\n")

local conv = "tests/data/convolution_A100.json"
local runs = {
  { "mcgs", conv, 60 }, { "experts", conv, 40 }, { "rules", conv, 60 }, { "anneal", conv, 60 },
  { "genetic", conv, 60 }, { "surrogate", conv, 40 }, { "random", conv, 60 },
  { "exhaustive", "tests/data/pnpoly_RTX_3090.json", nil },  -- no budget: the whole space
}

for _, r in ipairs(runs) do
  local strategy, file, budget = r[1], r[2], r[3]
  local function cmd(out, extra)
    return string.format("%s --backend replay:%s %s --seed 7 --out %s -q %s", strategy, file,
                         budget and ("--budget " .. budget) or "", out, extra or "")
  end
  local ref_dir = string.format("%s/%s_ref", tmp, strategy)
  local code, _, err = T.run(cmd(ref_dir))
  T.eq(code, 0, strategy .. ": exit code of the uninterrupted run\n" .. err)
  local ref = T.keys(ref_dir)
  local n = #ref
  T.check(n > 2, "%s: the uninterrupted run evaluated %d configs", strategy, n)

  -- killed right after a random evaluation, a torn line appended
  local k = math.random(1, math.max(1, n - 1))
  local dir = string.format("%s/%s_killed", tmp, strategy)
  code = T.run(cmd(dir), "KOPT_TEST_SIGKILL_AFTER=" .. k)
  T.eq(code, 137, strategy .. ": exit status of the run killed after evaluation " .. k)
  T.eq(#T.keys(dir), k, strategy .. ": evaluations on record after the kill")
  local f = assert(io.open(dir .. "/events.jsonl", "ab"))
  f:write('{"event":"eval","n":' .. (k + 1) .. ',"key":"1,2')
  f:close()
  code, _, err = T.run(cmd(dir, "--resume"))
  T.eq(code, 0, strategy .. ": exit code of the resume after a kill at evaluation " .. k .. "\n" .. err)
  T.same_list(T.keys(dir), ref, strategy .. ": evaluations after a kill at evaluation " .. k .. " and a resume")

  -- killed from outside after a random delay, at any moment
  local delay = math.random(5, 400) / 1000
  dir = string.format("%s/%s_kill9", tmp, strategy)
  os.execute(string.format("{ %s %s >/dev/null 2>&1 & pid=$!; sleep %.3f; kill -9 $pid; wait $pid; } 2>/dev/null",
                           T.kopt, cmd(dir), delay))
  if T.exists(dir .. "/events.jsonl") then
    code, _, err = T.run(cmd(dir, "--resume"))
    -- a kill before the start line was written leaves nothing to resume
    if code == 2 and err:find("is empty: the run recorded nothing", 1, true) then code = T.run(cmd(dir)) end
  else
    code, _, err = T.run(cmd(dir))
  end
  T.eq(code, 0, string.format("%s: exit code of the run continued after kill -9 at %.3f s\n%s", strategy, delay, err))
  T.same_list(T.keys(dir), ref, string.format("%s: evaluations after kill -9 at %.3f s and a resume", strategy, delay))
end

T.strict_json(tmp, "every file of the killed and resumed runs")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
