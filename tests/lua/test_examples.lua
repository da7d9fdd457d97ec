-- The examples in examples/ run as documented. hill_climb must stop at a
-- local optimum: every adjacent neighbour of its best was measured and is not
-- faster. policy passes on mcgs's finish: its graph snapshot counts the
-- run's evaluations (it was never written: "evaluations": 0).
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("examples")
local code, out = T.run("examples/hill_climb.lua --backend replay:tests/data/pnpoly_RTX_3090.json --budget 400 -q --out " .. tmp .. "/hc")
T.eq(code, 0, "exit code of the hill_climb example")
T.check(out:find("stopped: strategy finished", 1, true) ~= nil, "hill_climb ends by itself:\n%s", out)
local times, best = {}, nil
for line in io.lines(tmp .. "/hc/events.jsonl") do
  local ev = cjson.decode(line)
  if ev.event == "eval" then times[ev.key] = ev.result.status == "ok" and ev.result.time_ms or math.huge end
  if ev.event == "stop" then best = ev.best end
end
local space = require("kopt.backends.replay").open(nil, { file = "tests/data/pnpoly_RTX_3090.json" }).space
local best_cfg = require("kopt.json").decode(T.slurp(tmp .. "/hc/best/config.json"))
for _, c in ipairs(space:neighbours(best_cfg, "adjacent")) do
  local t = times[space:key(c)]
  T.check(t ~= nil, "neighbour %s of the best was not measured", space:key(c))
  T.check(t == nil or t >= best.time_ms, "neighbour %s is faster than the reported best", space:key(c))
end
-- policy wraps mcgs: no refused config is measured, and it stops once
-- within 1 % of the target
code, out = T.run("examples/policy.lua --backend replay:tests/data/pnpoly_RTX_3090.json --opt forbid=use_method=2 " ..
                  "--opt target_ms=9 --opt within=1 -q --out " .. tmp .. "/pol")
T.eq(code, 0, "exit code of the policy example")
T.check(out:find("stopped: strategy finished", 1, true) ~= nil, "policy stops at its target:\n%s", out)
local n, refused, stop = 0, 0, nil
for line in io.lines(tmp .. "/pol/events.jsonl") do
  local ev = cjson.decode(line)
  if ev.event == "eval" then
    n = n + 1
    if ev.config.use_method == 2 then refused = refused + 1 end
  end
  if ev.event == "stop" then stop = ev.best end
end
T.check(n > 10 and refused == 0, "policy: %d evaluations, %d of them refused configs", n, refused)
T.check(stop and stop.time_ms <= 9 * 1.01, "policy: the best when it stopped (%s ms) is within 1 %% of 9 ms",
        tostring(stop and stop.time_ms))
local graph = cjson.decode(T.slurp(tmp .. "/pol/graph.json"))
T.eq(graph.evaluations, n, "policy: mcgs's graph snapshot, written by its finish, counts the run's evaluations")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
