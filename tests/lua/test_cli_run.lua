-- Runs that end other than by their budget: Ctrl-C (SIGINT) stops between
-- evaluations with everything written and a resumable run; --lua-dev reads
-- strategies from disk; --help/--version; a strategy's --help lists options.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("run")
local replay = "tests/data/convolution_A100.json"

-- A slow strategy so the signal lands mid-run.
T.write(tmp .. "/slow.lua", [[
local sys = require("kopt.sys")
local S = { name = "slow", options = {} }
function S.ask(ctx, n)
  sys.sleep(0.02)
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S]])
local out = tmp .. "/int"
-- Start it in the background, wait for five recorded evaluations, then Ctrl-C.
local script = string.format([[
%s %s/slow.lua --backend replay:%s --budget 1000 --out %s >/dev/null 2>%s/int.err & pid=$!
for i in $(seq 1 600); do
  n=$(grep -c '"event":"eval"' %s/events.jsonl 2>/dev/null || echo 0)
  [ "$n" -ge 5 ] && break
  sleep 0.05
done
kill -INT $pid; wait $pid; exit $?]], T.kopt, tmp, replay, out, tmp, out)
local _, _, code = os.execute(script)
local err = T.slurp(tmp .. "/int.err")
T.eq(code, 130, "exit code after SIGINT")
T.check(err:find("interrupted after %d+ evaluations; continue with %-%-resume") ~= nil, "interrupt message:\n%s", err)
T.check(T.exists(out .. "/results.json"), "results.json written on interrupt")
local n = 0
for line in io.lines(out .. "/events.jsonl") do
  local ev = cjson.decode(line)
  if ev.event == "eval" then n = n + 1 end
  if ev.event == "stop" then T.eq(ev.reason, "interrupted", "stop reason") end
end
-- (at least the five seen; none asked for after the signal is measured)
T.check(n >= 5 and n < 1000, "evaluations before the interrupt: %d", n)
code = T.run(string.format("%s/slow.lua --backend replay:%s --budget %d --out %s --resume -q", tmp, replay, n + 5, out))
T.eq(code, 0, "exit code of the resumed run")
local m = 0
for line in io.lines(out .. "/events.jsonl") do
  if cjson.decode(line).event == "eval" then m = m + 1 end
end
T.eq(m, n + 5, "evaluations after resuming with a larger budget")

-- SIGTERM (timeout, docker stop, systemd, Slurm) stops the same way.
local term = tmp .. "/term"
script = string.format([[
%s %s/slow.lua --backend replay:%s --budget 1000 --out %s >/dev/null 2>%s/term.err & pid=$!
for i in $(seq 1 600); do
  n=$(grep -c '"event":"eval"' %s/events.jsonl 2>/dev/null || echo 0)
  [ "$n" -ge 5 ] && break
  sleep 0.05
done
kill -TERM $pid; wait $pid; exit $?]], T.kopt, tmp, replay, term, tmp, term)
_, _, code = os.execute(script)
T.eq(code, 130, "exit code after SIGTERM")
T.check(T.slurp(tmp .. "/term.err"):find("interrupted after %d+ evaluations; continue with %-%-resume") ~= nil,
        "SIGTERM message:\n%s", T.slurp(tmp .. "/term.err"))
local _, tstop = T.events(term)
T.check(tstop and tstop.reason == "interrupted", "stop event after SIGTERM")

-- Regression: a knob value returned as an integral float (128.0, what any
-- `/` gives) was silently dropped: 0 evaluations, "stalled", exit 0. It is
-- the integer it equals, in the state key as in the run's files.
T.write(tmp .. "/floats.lua", [[
local S = { name = "floats", options = {} }
function S.ask(ctx, n)
  if ctx.evaluations >= 6 then return {} end
  local c = ctx.space:sample(ctx.rng)
  for k, v in pairs(c) do if math.type(v) == "integer" then c[k] = v * 2 / 2 end end
  return { { config = c } }
end
return S]])
local fcode, fout = T.run(string.format("%s/floats.lua --backend replay:%s -q --out %s/floats", tmp, replay, tmp))
T.eq(fcode, 0, "exit code of a strategy returning integral floats")
T.check(fout:find("6 evaluations", 1, true) ~= nil, "integral floats evaluated:\n%s", fout)
for _, ev in ipairs((T.events(tmp .. "/floats"))) do
  T.check(not ev.key:find(".", 1, true), "state key with a float in it: %s", ev.key)
end

-- --lua-dev: a strategy that exists only in the dev tree; the rest is built in.
os.execute("mkdir -p " .. tmp .. "/dev/strategies")
T.write(tmp .. "/dev/strategies/first.lua", [[
return { name = "first", options = {}, ask = function(ctx) return ctx.evaluations == 0 and { { config = ctx.space:enumerate()[1] } } or {} end }]])
local o
code, o = T.run(string.format("--lua-dev %s/dev first --backend replay:%s -q --out %s/dev_run", tmp, replay, tmp))
T.eq(code, 0, "exit code with --lua-dev")
T.check(o:find("1 evaluation (1 ok)", 1, true) ~= nil, "dev strategy ran:\n%s", o)
_, o = T.run("--lua-dev " .. tmp .. "/dev --help")
T.check(o:find("first", 1, true) ~= nil, "--help lists the dev tree's strategy")
-- a --lua-dev folder that is not there (a typo), or not a source tree, is
-- refused: the built-in copies must not run in its place
local e
code, _, e = T.run(string.format("--lua-dev %s/devv first --backend replay:%s -q --out %s/dev_typo", tmp, replay, tmp))
T.check(code == 2 and e:find("devv: no such directory", 1, true) ~= nil, "--lua-dev typo refused (%d):\n%s", code, e)
code, _, e = T.run("--version", "KOPT_LUA_DEV=" .. tmp .. "/floats")
T.check(code == 2 and e:find("has neither lua/kopt/ nor strategies/", 1, true) ~= nil,
        "KOPT_LUA_DEV not a source tree refused (%d):\n%s", code, e)

code, o = T.run("--version")
T.check(code == 0 and o:match("^kopt %d+%.%d+%.%d+\n$") ~= nil, "--version prints the version: %s", o)
code, o = T.run("random --help")
T.check(code == 0 and o:find("tries", 1, true) ~= nil, "random --help lists its options:\n%s", o)
code, o = T.run("--help")
T.check(code == 0 and o:find("--budget N", 1, true) ~= nil, "--help lists the flags")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
