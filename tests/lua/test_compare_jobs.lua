-- `kopt compare --jobs N`: the runs made in N child processes give the same
-- report as the runs made in one, every figure but the timings; a bad --jobs
-- is refused; a run that fails in a child fails the whole compare, with the
-- child's message, and leaves no report behind; a move generator file that
-- keeps state between calls is loaded afresh for each run, so its figures
-- are the same in one process and in two (it was loaded once per process).
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("compare_jobs")
local SPACES = "tests/data/pnpoly_RTX_3090.json,tests/data/vector_add_A4000.json"
local ARGS = "compare --strategies random,rules,mcgs@model=false --spaces " .. SPACES ..
             " --seeds 5 --budgets 10,25,50 -q --out "

local code, _, err = T.run(ARGS .. tmp .. "/one")
T.eq(code, 0, "compare in one process (" .. err .. ")")
code, _, err = T.run(ARGS:gsub(" %-q", "") .. tmp .. "/three --jobs 3")
T.eq(code, 0, "compare in three processes (" .. err .. ")")
T.check(err:find("runs in 3 processes", 1, true) ~= nil, "the parallel compare says how many processes: %s", err)
T.check(err:find("process 2 of 3: 10 of 10 runs", 1, true) ~= nil, "each process reports its progress: %s", err)
local one = cjson.decode(T.slurp(tmp .. "/one/benchmark.json"))
local three = cjson.decode(T.slurp(tmp .. "/three/benchmark.json"))
T.same_tree(T.untimed(one), T.untimed(three), "benchmark.json")
T.check(#one.spaces == 2 and #one.spaces[1].strategies == 4, "the report holds 2 spaces of 3 strategies and exact random search: %d, %d", #one.spaces, #one.spaces[1].strategies)
T.check(not T.exists(tmp .. "/three/.shards"), "the job files are gone after the runs")

-- a generator file with state of its own (a focus that moves to another
-- knob every 5 calls)
do
  T.write(tmp .. "/rotate.lua", [[
local calls = 0
return { name = "rotate", propose = function(ctx, state)
  calls = calls + 1
  local k = ctx.space.knobs[(calls // 5) % #ctx.space.knobs + 1]
  local out = {}
  for _, v in ipairs(k.values) do out[#out + 1] = { changes = { [k.name] = v }, method = "focus", prior = 50 } end
  return out
end }
]])
  local args = "compare --strategies rules --opt rules.moves=" .. tmp .. "/rotate.lua --spaces " ..
               "tests/data/pnpoly_RTX_3090.json --seeds 4 --budgets 25,50 -q --out " .. tmp
  local reports = {}
  for _, jobs in ipairs({ 1, 2 }) do
    code, _, err = T.run(string.format("%s/rotate%d --jobs %d", args, jobs, jobs))
    T.eq(code, 0, "compare with a stateful generator file, --jobs " .. jobs .. " (" .. err .. ")")
    reports[jobs] = T.untimed(cjson.decode(T.slurp(string.format("%s/rotate%d/benchmark.json", tmp, jobs))))
  end
  T.same_tree(reports[1], reports[2], "benchmark.json with a stateful generator file")
end

-- the user's experience dataset ($KOPT_EXPERIENCE) is neither written nor
-- read by a benchmark: the same figures as without it, twice, and no file
local ds = tmp .. "/dataset.jsonl"
for i = 1, 2 do
  code, _, err = T.run(ARGS .. tmp .. "/ds" .. i, "KOPT_EXPERIENCE=" .. ds)
  T.eq(code, 0, "compare with a dataset named (" .. err .. ")")
  T.same_tree(T.untimed(one), T.untimed(cjson.decode(T.slurp(tmp .. "/ds" .. i .. "/benchmark.json"))),
              "benchmark.json with a dataset named, run " .. i)
end
T.check(not T.exists(ds) or T.slurp(ds) == "", "the benchmark wrote into the user's dataset")

-- more processes than runs: one per run
code, _, err = T.run("compare --strategies random --spaces tests/data/vector_add_A4000.json --seeds 2 " ..
                     "--budgets 5 --out " .. tmp .. "/many --jobs 16")
T.eq(code, 0, "compare with more processes than runs (" .. err .. ")")
T.check(err:find("2 runs in 2 processes", 1, true) ~= nil, "as many processes as runs: %s", err)

for _, bad in ipairs({ "0", "-2", "x", "1.5" }) do
  code, _, err = T.run(ARGS .. tmp .. "/bad --jobs " .. bad)
  T.eq(code, 2, "--jobs " .. bad .. " is a usage error")
  T.check(err:find("--jobs: expected a positive integer or auto", 1, true) ~= nil, "--jobs %s: %s", bad, err)
end

-- A strategy whose run with seed 3 raises: the child's message is shown and
-- the compare fails without writing a report.
T.write(tmp .. "/flaky.lua", [[
local S = { name = "flaky", options = {} }
function S.init(ctx) ctx.n = 0 end
function S.ask(ctx, n)
  if ctx.seed == 3 then error("flaky: no configs for seed 3") end
  local out = {}
  for _ = 1, n do out[#out + 1] = { config = ctx.space:sample(ctx.rng) } end
  return out
end
return S
]])
code, _, err = T.run("compare --strategies " .. tmp .. "/flaky.lua --spaces tests/data/vector_add_A4000.json " ..
                     "--seeds 4 --budgets 5 --out " .. tmp .. "/flaky --jobs 2")
T.check(code ~= 0, "a failing run fails the compare (exit %s)", tostring(code))
T.check(err:find("no configs for seed 3", 1, true) ~= nil, "the child's message is shown: %s", err)
T.check(err:find("child process", 1, true) ~= nil, "the parent names the failed child: %s", err)
T.check(not T.exists(tmp .. "/flaky/benchmark.json"), "no report after a failed run")
T.check(not T.exists(tmp .. "/flaky/.shards"), "no job files left after a failed run")

-- a compare killed by SIGKILL takes its children with it (before, they ran
-- on to the end of their shards)
do
  local out = tmp .. "/killed"
  local p = io.popen(string.format("KOPT_DB=off %s compare --strategies random,mcgs --spaces " ..
                                   "tests/data/convolution_A100.json,tests/data/pnpoly_RTX_3090.json --seeds 8 " ..
                                   "--budgets 100,200 --out %s --jobs 2 -q >/dev/null 2>&1 & echo $!", T.kopt, out))
  local pid = p:read("l")
  p:close()
  local function shards()
    local q = io.popen("ps -eo args | grep -c '[c]ompare --shard " .. out .. "/'")
    local n = tonumber(q:read("l")) or 0
    q:close()
    return n
  end
  local seen = 0
  for _ = 1, 50 do
    seen = shards()
    if seen > 0 then break end
    os.execute("sleep 0.1")
  end
  os.execute("kill -9 " .. pid)
  os.execute("sleep 0.5")
  T.check(seen == 2, "the compare started its 2 children (saw %d)", seen)
  T.eq(shards(), 0, "children left running after the compare was killed")
end

os.execute("rm -rf '" .. tmp .. "'")
T.done()
