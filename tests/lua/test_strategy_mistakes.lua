-- More user-strategy mistakes, found by writing them; each check failed
-- before its fix:
-- * a config whose values come through a metatable (overrides over a base)
--   was recorded as invalid, and the verdict cached;
-- * an origin that is a number or a boolean, or a source that is not a
--   string, ended in an internal error;
-- * an option whose default is a function lost the run's events (it could
--   not be written); a number outside an option's choices was accepted;
-- * a table as the strategy's name made the run impossible to resume;
-- * tell() writing into a result's metrics changed best/result.json;
-- * a sibling module (require "util") that called os.exit ended kopt
--   without results, and one that set a global broke kopt's own output;
-- * Ctrl-C while a strategy waited in os.execute was lost;
-- * Ctrl-C during an ask() that swallowed it still measured its answer;
-- * a strategy whose every candidate was invalid stopped without saying so.
local T = require("testlib")

local tmp = T.tmpdir("mistakes")
local REC = "tests/data/convolution_A100.json"

local function run(name, body, extra, env)
  local file = tmp .. "/" .. name .. ".lua"
  T.write(file, body)
  local dir = tmp .. "/run_" .. name
  local code, out, err = T.run(string.format("%s --backend replay:%s --budget 6 --out %s -q %s", file, REC, dir,
                                             extra or ""), env)
  return code, out, err, dir
end

-- metatable configs
do
  local code, _, err, dir = run("mt", [[
local S = { name = "mt" }
function S.ask(ctx, n)
  local b = ctx.space:sample(ctx.rng)
  return { { config = setmetatable({ block_size_x = b.block_size_x }, { __index = b }) } }
end
return S
]])
  T.eq(code, 0, "metatable configs: exit code (" .. err .. ")")
  local evals = T.events(dir)
  local ok = 0
  for _, ev in ipairs(evals) do if ev.result.status == "ok" then ok = ok + 1 end end
  T.eq(ok, #evals, "metatable configs: every one measured, none invalid")
  T.check(#evals >= 5, "metatable configs: evaluations (%d)", #evals)
end

-- bad origin and source
for _, c in ipairs({ { "origin = 5", "origin: expected a table" }, { "origin = true", "origin: expected a table" },
                     { "source = { 'x' }", "source: expected the kernel's source as a string" } }) do
  local code, _, err = run("bad_field", string.format([[
local S = { name = "bad_field" }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng), %s } } end
return S
]], c[1]))
  T.eq(code, 2, c[1] .. ": exit code")
  T.check(err:find(c[2], 1, true) and not err:find("internal error", 1, true), "%s: %s", c[1], err)
end

-- options and name
for _, c in ipairs({
  { "options = { f = { default = function() end } }", "options.f: the default must be a number, a string or a boolean" },
  { "options = { k = { default = 5, choices = { 1, 2, 3 } } }", "the default 5 is not one of its choices" },
  { "name = {}", "'name' must be a non-empty string" } }) do
  local code, _, err = run("bad_decl", string.format([[
local S = { %s }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
return S
]], c[1]))
  T.eq(code, 2, c[1] .. ": exit code")
  T.check(err:find(c[2], 1, true), "%s: %s", c[1], err)
end
do
  local code, _, err = run("choices", [[
local S = { name = "choices", options = { k = { default = 2, choices = { 1, 2, 3 } } } }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
return S
]], "--opt k=4")
  T.eq(code, 2, "a number outside the choices: exit code")
  T.check(err:find("--opt k: expected one of 1, 2, 3, got '4'", 1, true), "a number outside the choices: %s", err)
end

-- tell() cannot rewrite what was recorded
do
  local code, _, err, dir = run("tell_nested", [[
local S = { name = "tell_nested" }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
function S.tell(ctx, rs)
  for _, r in ipairs(rs) do
    if type(r.metrics) == "table" then for k in pairs(r.metrics) do r.metrics[k] = -1 end r.metrics.hacked = true end
  end
  if ctx.best and type(ctx.best.result.metrics) == "table" then ctx.best.result.metrics.best_hacked = 1 end
end
return S
]])
  T.eq(code, 0, "tell writing into results: exit code (" .. err .. ")")
  local best = T.slurp(dir .. "/best/result.json")
  T.check(not best:find("hacked", 1, true) and not best:find('": %-1[,}\n]'), "best/result.json unchanged:\n%s", best)
end

-- sibling modules stay in the strategy's sandbox
do
  T.write(tmp .. "/sibutil.lua", [[
local M = {}
function M.die_if(c) if c then os.exit(1) end end
function M.pollute() type = function() return "table" end end
return M
]])
  local code, _, err, dir = run("uses_util", [[
local util = require("sibutil")
local S = { name = "uses_util" }
function S.ask(ctx, n)
  util.die_if(ctx.evaluations >= 3)
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  T.eq(code, 1, "a sibling module's os.exit: an error, exit 1 (" .. err .. ")")
  T.check(err:find("called os.exit", 1, true), "a sibling module's os.exit is named: %s", err)
  T.check(T.exists(dir .. "/results.json"), "a sibling module's os.exit: results.json written")
  T.eq(#(T.events(dir)), 3, "a sibling module's os.exit: the measurements kept")
  code, _, err = run("pollutes", [[
local util = require("sibutil")
local S = { name = "pollutes" }
function S.ask(ctx, n)
  if ctx.evaluations == 2 then util.pollute() end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  T.eq(code, 0, "a sibling module that sets a global: exit code (" .. err .. ")")
end

-- invalid candidates only: the stop says why
do
  local code, _, err = run("invalid_only", [[
local S = { name = "invalid_only" }
function S.init(ctx)  -- a combination of the knobs' values the recording does not hold
  for _ = 1, 100000 do
    local c = {}
    for _, k in ipairs(ctx.space.knobs) do c[k.name] = k.values[ctx.rng:random(1, #k.values)] end
    if not ctx.space:is_valid(c) then ctx.bad = c return end
  end
end
function S.ask(ctx, n) return { { config = ctx.bad } } end
return S
]])
  T.eq(code, 0, "invalid candidates only: exit code")
  T.check(err:find("the last candidate it asked for was invalid", 1, true), "invalid candidates only: %s", err)
end

-- an invalid candidate once, then repeats of a measured one: the stall
-- message does not blame the invalid one
do
  local code, _, err = run("stale_invalid", [[
local S = { name = "stale_invalid" }
function S.init(ctx)
  for _ = 1, 100000 do
    local c = {}
    for _, k in ipairs(ctx.space.knobs) do c[k.name] = k.values[ctx.rng:random(1, #k.values)] end
    if not ctx.space:is_valid(c) then ctx.bad = c break end
  end
  ctx.good = ctx.space:sample(ctx.rng)
end
function S.ask(ctx, n)
  ctx.i = (ctx.i or 0) + 1
  return { { config = ctx.i == 2 and ctx.bad or ctx.good } }
end
return S
]])
  T.eq(code, 0, "a stale invalid candidate: exit code")
  T.check(err:find("proposed nothing new", 1, true) and not err:find("was invalid", 1, true),
          "a stale invalid candidate is not named: %s", err)
end

-- Ctrl-C while the strategy waits in os.execute
do
  local file = tmp .. "/sleeper.lua"
  T.write(file, [[
local S = { name = "sleeper" }
function S.ask(ctx, n)
  os.execute("sleep 3")
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  local dir = tmp .. "/run_sleeper"
  -- (the signal goes once the first evaluation is on record, one second into
  -- the next ask's sleep: a loaded machine, ASan, may take seconds to start)
  local stamp = tmp .. "/sleeper_stopped"
  local _, _, code = os.execute(string.format("KOPT_DB=off %s %s --backend replay:%s --budget 8 --out %s -q " ..
                                              ">/dev/null 2>&1 & pid=$!; for i in $(seq 300); do " ..
                                              "[ -s %s/events.jsonl ] && break; sleep 0.1; done; sleep 1; " ..
                                              "date +%%s > %s; kill -INT $pid; wait $pid; rc=$?; date +%%s >> %s; exit $rc",
                                              T.kopt, file, REC, dir, dir, stamp, stamp))
  T.eq(code, 130, "Ctrl-C during os.execute: exit code 130")
  local sent, ended = (T.slurp(stamp) or ""):match("(%d+)%s+(%d+)")
  local took = (tonumber(ended) or 99) - (tonumber(sent) or 0)
  T.check(took <= 4, "Ctrl-C during os.execute: stopped %d s after the signal (the sleep has 2 s left)", took)
  local evals = T.events(dir)
  T.check(#evals < 8, "Ctrl-C during os.execute: the run stopped early (%d evaluations)", #evals)
end

-- Ctrl-C during an ask() that gives up what it waited for (an LLM request
-- the signal cut, a pcall around a long computation) and still returns a
-- candidate: the run stops without measuring it
do
  local file = tmp .. "/giveup.lua"
  T.write(file, [[
local S = { name = "giveup" }
local asked = 0
function S.ask(ctx, n)
  asked = asked + 1
  if asked >= 2 then
    pcall(function() local t0 = os.clock() while os.clock() - t0 < 3 do end end)
  end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  local dir = tmp .. "/run_giveup"
  local _, _, code = os.execute(string.format("KOPT_DB=off %s %s --backend replay:%s --budget 8 --out %s -q " ..
                                              ">/dev/null 2>&1 & pid=$!; for i in $(seq 300); do " ..
                                              "[ -s %s/events.jsonl ] && break; sleep 0.1; done; sleep 1; " ..
                                              "kill -INT $pid; wait $pid", T.kopt, file, REC, dir, dir))
  T.eq(code, 130, "Ctrl-C during a long ask: exit code 130")
  local evals = T.events(dir)
  T.eq(#evals, 1, "Ctrl-C during a long ask: the candidate it returned after the signal is not measured")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
