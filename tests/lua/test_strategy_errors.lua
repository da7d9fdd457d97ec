-- Errors and signals in a strategy's code outside ask and tell; each check
-- failed before its fix:
-- * an error in finish(ctx, reason) was one line without the strategy's
--   file and line (none at all under -q, none in trace.md, exit 0);
-- * a finish that is not a function was ignored;
-- * an error in a strategy file's top-level code, or in a sibling module
--   it requires, lost the file and line it came from;
-- * Ctrl-C while a strategy file's top-level code ran was ignored (in a
--   loop there; the same loop in init stopped).
local T = require("testlib")

local tmp = T.tmpdir("strategy-errors")
local REC = "tests/data/convolution_A100.json"

local runs = 0
local function run(name, body, extra)
  local file = tmp .. "/" .. name .. ".lua"
  T.write(file, body)
  runs = runs + 1
  local dir = string.format("%s/run%d_%s", tmp, runs, name)
  local code, out, err = T.run(string.format("%s --backend replay:%s --budget 4 --out %s -q %s", file, REC, dir,
                                             extra or ""))
  return code, out, err, dir
end

local ASK = "function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end\n"

-- errors in finish: a kopt call that fails, and a nil indexed by a C function
for _, c in ipairs({ { "ctx.rng:choice({})", "rng:choice: empty list (called from " },
                     { "for _ in ipairs(ctx.my_results) do end", "attempt to index a nil value (at " } }) do
  local code, _, err, dir = run("fin", "local S = { name = 'fin' }\n" .. ASK .. "function S.finish(ctx, reason)\n  " ..
                                c[1] .. "\nend\nreturn S\n")
  local where = c[2] .. tmp .. "/fin.lua:4)"
  T.eq(code, 1, c[1] .. " in finish: exit code")
  T.check(err:find("strategy 'fin' failed in finish(): ", 1, true) and err:find(where, 1, true),
          "%s in finish: the message names the strategy's line under -q:\n%s", c[1], err)
  T.check(T.slurp(dir .. "/trace.md"):find(where, 1, true), "%s in finish: trace.md says it", c[1])
  T.check(T.exists(dir .. "/results.json"), "%s in finish: results.json written", c[1])
  T.eq(#T.events(dir), 4, c[1] .. " in finish: the evaluations on record")
end

-- a finish that is not a function
do
  local code, _, err = run("fin_string", "local S = { name = 'fin_string' }\n" .. ASK ..
                                         "S.finish = 'write my report'\nreturn S\n")
  T.eq(code, 2, "a string as finish: exit code")
  T.check(err:find("'finish' must be a function", 1, true), "a string as finish: %s", err)
end

-- errors in a strategy file's top-level code and in a sibling module's
do
  local code, _, err = run("top", "local S = { name = 'top', options = {} }\nfor _ in ipairs(S.opts) do end\n" ..
                                  ASK .. "return S\n")
  T.eq(code, 2, "an error in the top-level code: exit code")
  T.check(err:find("failed to load: attempt to index a nil value (at " .. tmp .. "/top.lua:2)", 1, true),
          "an error in the top-level code names its line: %s", err)
  T.write(tmp .. "/sibling.lua", "local M = {}\nfor _ in ipairs(nil) do end\nreturn M\n")
  code, _, err = run("uses_sibling", "local sibling = require('sibling')\nlocal S = { name = 'uses_sibling' }\n" ..
                                     ASK .. "return S\n")
  T.eq(code, 2, "an error in a sibling module: exit code")
  T.check(err:find("(at " .. tmp .. "/sibling.lua:2)", 1, true), "an error in a sibling module names its line: %s", err)
end

-- Ctrl-C during a loop in the top-level code (a watchdog ends a run that
-- ignores it, so the test fails instead of hanging)
do
  local file = tmp .. "/spin.lua"
  T.write(file, "local S = { name = 'spin' }\nwhile true do end\n" .. ASK .. "return S\n")
  local stamp = tmp .. "/spin_stopped"
  local _, _, code = os.execute(string.format(
    "KOPT_DB=off %s %s --backend replay:%s --out %s/run_spin -q >/dev/null 2>&1 & pid=$!; sleep 1; " ..
    "( exec </dev/null >/dev/null 2>&1; sleep 15; kill -9 $pid ) & dog=$!; date +%%s > %s; kill -INT $pid; " ..
    "wait $pid; rc=$?; date +%%s >> %s; kill $dog 2>/dev/null; exit $rc", T.kopt, file, REC, tmp, stamp, stamp))
  T.eq(code, 130, "Ctrl-C in the top-level code: exit code 130")
  local sent, ended = T.slurp(stamp):match("(%d+)%s+(%d+)")
  local took = (tonumber(ended) or 99) - (tonumber(sent) or 0)
  T.check(took <= 4, "Ctrl-C in the top-level code: stopped %d s after the signal", took)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
