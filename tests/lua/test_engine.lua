-- Engine accounting: repeats are answered from the cache and cost nothing; a
-- config rejected by the constraints costs nothing; a failure costs one
-- evaluation; --time-limit stops on the simulated clock; a strategy that only
-- repeats itself is stopped; a code edit (patch or source) on a run without a
-- spec is its own state, never answered by the plain config nor answering it.
local T = require("testlib")
local tmp = T.tmpdir("engine")

local events = T.events

-- Asks 192 (fails the spec's "% 128" constraint), then 256 three times, then
-- records what it was told.
T.write(tmp .. "/probe.lua", [[
local S = { name = "probe", options = {} }
local plan = { 192, 256, 256, 256 }
function S.init(ctx) ctx.step = 0 end
function S.ask(ctx, n)
  ctx.step = ctx.step + 1
  local v = plan[ctx.step]
  if not v then return {} end
  return { { config = { block_size_x = v } } }
end
function S.tell(ctx, results)
  local r = results[1]
  ctx:log("told %s cached=%s evaluations=%d", r.status, tostring(r.cached), ctx.evaluations)
  if ctx.step == 1 then ctx:log("a reply's text\n## Stopped: injected\nbest: 0.0001 ms") end
end
return S]])
local code = T.run(string.format("%s/probe.lua tests/data/specs/vector_add.json --backend replay:tests/data/vector_add_A4000.json -q --out %s/p", tmp, tmp))
T.eq(code, 0, "exit code of the probe run")
local evals = events(tmp .. "/p")
T.eq(#evals, 1, "evaluations: the constraint-rejected config and the repeats cost nothing")
local trace = T.slurp(tmp .. "/p/trace.md")
T.check(trace:find("told invalid cached=nil evaluations=0", 1, true) ~= nil, "the rejected config is told as invalid, free:\n%s", trace)
T.check(trace:find("told ok cached=nil evaluations=1", 1, true) ~= nil, "first 256 measured")
T.check(trace:find("told ok cached=true evaluations=1", 1, true) ~= nil, "repeat answered from the cache")
T.check(not trace:find("\n## Stopped: injected", 1, true) and trace:find("a reply's text / ## Stopped: injected", 1, true),
        "a logged message's line breaks start no line of their own:\n%s", trace)

-- Failures cost one evaluation each: pnpoly has 318 failed configs of 4092,
-- so exhausting it records every one of them.
code = T.run(string.format("exhaustive --backend replay:tests/data/pnpoly_RTX_3090.json -q --out %s/ex", tmp))
T.eq(code, 0, "exit code of exhaustive")
local ex, stop = events(tmp .. "/ex")
T.eq(#ex, 4092, "exhaustive evaluates every recorded config once")
local failed = 0
for _, e in ipairs(ex) do if e.result.status ~= "ok" then failed = failed + 1 end end
T.eq(failed, 318, "failed configs recorded as failures")
T.eq(stop.reason, "strategy finished", "exhaustive stops when the space is done")

-- --time-limit on the simulated clock.
code = T.run(string.format("random --backend replay:tests/data/convolution_A100.json --time-limit 60 -q --out %s/tl", tmp))
T.eq(code, 0, "exit code with --time-limit")
local tl, tstop = events(tmp .. "/tl")
local clock = 0
for i, e in ipairs(tl) do
  if i == #tl then T.check(clock < 60, "the time limit was already reached before the last evaluation") end
  clock = clock + e.eval_s
end
T.check(clock >= 60, "simulated clock %.1f s at the stop", clock)
T.eq(tstop.reason, "time limit", "stop reason")

-- A strategy that proposes the same config forever is stopped.
T.write(tmp .. "/stuck.lua", [[
return { name = "stuck", options = {}, ask = function(ctx) return { { config = ctx.space:enumerate()[1] } } end }]])
local err, _
code, _, err = T.run(string.format("%s/stuck.lua --backend replay:tests/data/vector_add_A4000.json -q --out %s/st", tmp, tmp))
T.eq(code, 0, "exit code of a stalled strategy")
T.check(err:find("proposed nothing new for 200 rounds", 1, true) ~= nil, "stall message: %s", err)
T.eq(#events(tmp .. "/st"), 1, "a stalled strategy measured its config once")
-- Regression: with no spec, a candidate with a patch or a source had the plain
-- config's key: the edit's "invalid" answered the plain config afterwards (or
-- the plain config's time the edit), and went into the experience database.
for _, edit in ipairs({ 'patch = "--- a/k.cu\\n+++ b/k.cu\\n@@ -1 +1 @@\\n-x\\n+y\\n"', 'source = "__global__ void k() {}"' }) do
  for _, edit_first in ipairs({ true, false }) do
    T.write(tmp .. "/edit.lua", string.format([[
local S = { name = "edit", options = {} }
local round = 0
function S.ask(ctx, n)
  round = round + 1
  local c = ctx.space:enumerate()[1]
  local edited, plain = { config = c, %s }, { config = c }
  if round == 1 then return { %s } end
  if round == 2 then return { %s } end
  return {}
end
function S.tell(ctx, results)
  local r = results[1]
  ctx:log("told %%s %%s cached=%%s", r.key, r.status, tostring(r.cached))
end
return S]], edit, edit_first and "edited" or "plain", edit_first and "plain" or "edited"))
    local out = string.format("%s/edit_%s_%s", tmp, edit:match("^%a+"), tostring(edit_first))
    T.eq(T.run(string.format("%s/edit.lua --backend replay:tests/data/pnpoly_RTX_3090.json -q --out %s", tmp, out)), 0,
         "exit code of the edit run")
    local told = T.slurp(out .. "/trace.md")
    local what = string.format("%s, edit first: %s", edit:match("^%a+"), tostring(edit_first))
    T.check(told:find("told 0,128,1,0 ok cached=nil", 1, true) ~= nil, "the plain config measured (%s):\n%s", what, told)
    T.check(told:find("told 0,128,1,0#%x+ invalid cached=nil") ~= nil, "the edit its own state (%s):\n%s", what, told)
    T.eq(#events(out), 2, "two evaluations: the edit and the plain config (" .. what .. ")")
  end
end

-- Regression: a resumed run logged again, as new lines, every strategy message
-- of the part it replays from the log. A logging strategy killed after 10
-- evaluations and resumed must leave as many log lines as an uninterrupted run.
T.write(tmp .. "/talk.lua", [[
local S = { name = "talk", options = {} }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
function S.tell(ctx, results) ctx:log("told %s", results[1].key) end
return S]])
local function count_logs(dir)
  local n = 0
  for line in io.lines(dir .. "/events.jsonl") do
    if line:find('"event":"log"', 1, true) then n = n + 1 end
  end
  return n
end
local talk = string.format("%s/talk.lua --backend replay:tests/data/convolution_A100.json --budget 30 -q --out ", tmp)
T.run(talk .. tmp .. "/talk_full")
T.eq(T.run(talk .. tmp .. "/talk_killed", "KOPT_TEST_SIGKILL_AFTER=10"), 137, "the logging run was killed")
T.eq(T.run(talk .. tmp .. "/talk_killed --resume"), 0, "the logging run resumed")
T.eq(count_logs(tmp .. "/talk_killed"), count_logs(tmp .. "/talk_full"), "log lines after resume")

-- Regression: random gave up after 100 draws that all hit measured configs,
-- so on small spaces it stopped short of the budget (softmax: 82-86 of 87)
-- and could miss the optimum. It must measure every config when the budget allows.
for seed = 1, 20 do
  code = T.run(string.format("random --backend replay:tests/data/softmax_h200.t4.json --budget 200 --seed %d -q --out %s/rs%d", seed, tmp, seed))
  T.eq(code, 0, "exit code of random on softmax")
  T.eq(#events(tmp .. "/rs" .. seed), 87, "random measures all 87 softmax configs (seed " .. seed .. ")")
end
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
