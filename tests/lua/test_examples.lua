-- The examples in examples/ run as documented. hill_climb must stop at a
-- local optimum: every adjacent neighbour of its best was measured and is not
-- faster. policy passes on mcgs's finish: its graph snapshot counts the
-- run's evaluations (it was never written: "evaluations": 0). README's
-- commands for the two run one after the other, as written, from a fresh
-- checkout (they both went to runs/pnpoly_RTX_3090/: the second refused it).
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

-- README's commands, in a folder of their own (their runs/ goes there)
local readme = T.slurp(T.source_dir .. "/README.md"):gsub("\\\n%s*", "")
local checkout, source = tmp .. "/checkout", require("kopt.sys").realpath(T.source_dir)
os.execute(string.format("mkdir -p '%s' && ln -s '%s/examples' '%s/tests' '%s/'", checkout, source, source, checkout))
local commands = {}
for args in readme:gmatch("\n    %./build/kopt (examples/[^\n]+)") do commands[#commands + 1] = args end
T.eq(#commands, 2, "README's commands of the examples")
for _, args in ipairs(commands) do
  local c, _, err = T.run(args .. " -q", nil, checkout)
  T.eq(c, 0, "README's `kopt " .. args .. "` after the one before it: " .. err)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
