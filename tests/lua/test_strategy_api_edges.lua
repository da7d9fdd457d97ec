-- A user's own strategy, where it touches kopt's tables and calls; each
-- check failed before its fix:
-- * ctx.options was the run's own table: a strategy that edited it changed
--   the options events.jsonl records (and compounded on every --resume);
-- * the origin table a candidate carried was kept by reference: edited
--   after ask(), best/result.json disagreed with events.jsonl;
-- * ctx:profile() handed out the record's metrics table;
-- * a bad default_budget ended in an internal error (or ran without one);
-- * an option whose default is outside its own range was accepted;
-- * space:first() on a recorded space crashed inside kopt; neighbours()
--   took any mode as "adjacent"; ctx:recent(2.5) and rng:random(1.5, 3)
--   crashed or returned a float;
-- * require of a missing module named kopt's file and ended in a colon;
-- * the summary ranked tied configs at random, so rank 1 was not always the
--   config its best line named;
-- * `compare --opt NAME.KEY=V` for a NAME not in --strategies was ignored,
--   and a strategy given by its path could not be named at all.
local T = require("testlib")
local cjson = require("cjson")
local tmp = T.tmpdir("strategy-api-edges")
local REC = "tests/data/pnpoly_RTX_3090.json"

local function events_of(dir, kind)
  local out = {}
  for line in io.lines(dir .. "/events.jsonl") do
    local ev = cjson.decode(line)
    if ev.event == kind then out[#out + 1] = ev end
  end
  return out
end

-- options, origin and profile: the strategy edits what it was given
T.write(tmp .. "/meddle.lua", [[
local S = { name = "meddle", options = { patience = { default = 8, help = "p" } } }
local given = {}
function S.init(ctx) ctx.options.patience = ctx.options.patience * 10 end
function S.ask(ctx, n)
  local o = { method = "sample" }
  given[#given + 1] = o
  return { { config = ctx.space:sample(ctx.rng), origin = o } }
end
function S.tell(ctx, results)
  for _, o in ipairs(given) do o.method = "EDITED" end
  for _, r in ipairs(ctx:recent()) do r.origin.method = "EDITED" end
  local m = ctx:profile({ config = ctx:recent(1)[1].config })
  if type(m) == "table" then for k in pairs(m) do m[k] = -1 end end
end
return S
]])
do
  local dir = tmp .. "/meddle"
  local code, _, err = T.run(string.format("%s/meddle.lua --backend replay:%s --budget 4 --out %s -q", tmp, REC, dir))
  T.eq(code, 0, "meddle: exit code\n" .. err)
  T.eq(events_of(dir, "start")[1].options.patience, 8, "the options on record are the ones given")
  for _, ev in ipairs(events_of(dir, "eval")) do
    T.eq(ev.origin and ev.origin.method, "sample", "evaluation " .. tostring(ev.n) .. ": its origin as asked")
  end
  local best = cjson.decode(T.slurp(dir .. "/best/result.json") or "{}")
  T.eq(best.origin and best.origin.method, "sample", "best/result.json: the origin as asked")
  local negative = false
  for _, v in pairs(best.result and best.result.metrics or {}) do negative = negative or v == -1 end
  T.check(not negative, "%s", "best/result.json: metrics untouched by the strategy's edits of ctx:profile()")
end

-- default_budget and option declarations
for i, case in ipairs({ { '"abc"', "'default_budget' must be a positive integer" }, { "2.5", "got 2.5" },
                        { "0", "got 0" }, { "0/0", "positive integer" } }) do
  T.write(tmp .. "/db.lua", "return { name = 'db', default_budget = " .. case[1] ..
          ", ask = function(ctx) return { { config = ctx.space:sample(ctx.rng) } } end }")
  local code, _, err = T.run(string.format("%s/db.lua --backend replay:%s --out %s/db%d -q", tmp, REC, tmp, i))
  T.check(code == 2 and err:find(case[2], 1, true) and not err:find("internal error", 1, true),
          "default_budget = %s: exit %d: %s", case[1], code, err)
end
T.write(tmp .. "/range.lua", "return { name = 'range', options = { k = { default = 0, min = 1, help = 'k' } }, " ..
        "ask = function(ctx) return {} end }")
do
  local code, _, err = T.run(string.format("%s/range.lua --backend replay:%s --out %s/range -q", tmp, REC, tmp))
  T.check(code == 2 and err:find("options.k: the default 0 is outside the option's own range (min 1)", 1, true),
          "an option default outside its range: exit %d: %s", code, err)
end

-- calls a strategy makes: errors name the call, at the strategy's line
local function one_call(body, want)
  T.write(tmp .. "/call.lua", "return { name = 'call', ask = function(ctx) " .. body ..
          " return { { config = ctx.space:sample(ctx.rng) } } end }")
  local code, _, err = T.run(string.format("%s/call.lua --backend replay:%s --budget 2 --out %s/call_%d -q", tmp, REC,
                                           tmp, math.random(1, 1e9)))
  if want then
    T.check(code ~= 0 and err:find(want, 1, true) and err:find("call.lua:1", 1, true) and
            not err:find("internal error", 1, true), "%s: exit %d: %s", body, code, err)
  else
    T.check(code == 0, "%s: exit %d: %s", body, code, err)
  end
end
one_call("assert(ctx.space:first(), 'no first')", nil)
one_call("ctx.space:neighbours(ctx.space:first(), 'bogus')", "mode must be \"adjacent\" (the default) or \"hamming\"")
one_call("ctx:recent(2.5)", "ctx:recent(n): n must be a whole number")
one_call("ctx.rng:random(1.5, 3)", "rng:random(m, n): the bounds must be whole numbers")
-- a bare config where a candidate or a state is expected, and a config
-- missing a knob: kopt's own lines were named ("attempt to index a nil
-- value"), and ctx:key gave "nil,nil,..." for a state no evaluation has
one_call("ctx:profile(ctx.space:first())", "ctx:profile(candidate): expected a candidate { config = {...} }")
one_call("require('kopt.moves').propose(ctx, ctx.space:first(), {})",
         "moves.propose(ctx, state, generators): state must be { config = {...}, key = ... }")
one_call("ctx:key({})", "ctx:key(config): the config has no value for knob")
one_call("ctx.space:describe(nil)", "space:describe(config): expected a config table, got nil")
one_call("ctx.space:with(ctx.space:first(), nil)", "space:with(config, text): expected a text")
do
  T.write(tmp .. "/req.lua", "local h = require('helper_missing')\nreturn { ask = function() return {} end }")
  local code, _, err = T.run(string.format("%s/req.lua --backend replay:%s --out %s/req -q", tmp, REC, tmp))
  T.check(code == 2 and err:find("req.lua:1: module 'helper_missing' not found: no ", 1, true)
          and not err:find("strategy.lua", 1, true), "a missing module: exit %d: %s", code, err)
end

-- compare --opt: a name not in --strategies, and a strategy by its path
do
  local base = string.format("compare --spaces %s --seeds 1 --budgets 5 --out %s/cmp", REC, tmp)
  local code, _, err = T.run(base .. " --strategies random --opt anneal.t0=0.5")
  T.check(code == 2 and err:find("no strategy in --strategies is called 'anneal' (they are: random)", 1, true),
          "compare --opt for another strategy: exit %d: %s", code, err)
  T.write(tmp .. "/pick.lua", "return { name = 'pick', options = { k = { default = 1, help = 'k' } }, " ..
          "ask = function(ctx) return { { config = ctx.space:sample(ctx.rng) } } end }")
  code, _, err = T.run(string.format("compare --spaces %s --seeds 1 --budgets 5 --out %s/cmp2 --strategies %s/pick.lua " ..
                                     "--opt %s/pick.lua.k=3", REC, tmp, tmp, tmp))
  T.eq(code, 0, "compare --opt naming a strategy by its path: exit code\n" .. err)
  code, _, err = T.run(string.format("compare --spaces %s --seeds 1 --budgets 5 --out %s/cmp3 --strategies %s/pick.lua " ..
                                     "--opt %s/pick.lua.nope=3", REC, tmp, tmp, tmp))
  T.check(code == 2 and err:find("nope", 1, true), "compare --opt with an unknown key by path: exit %d: %s", code, err)
end

-- the summary's rank 1 is the config its best line names, when times tie
-- (table.sort put either first)
do
  local space = T.grid_space(tmp .. "/ties.json", { { "a", 8 }, { "b", 8 } },
                             function(a, b) return (a + b) % 3 == 0 and 1.0 or 2.0 + a + b end)
  for seed = 1, 5 do
    local dir = string.format("%s/ties%d", tmp, seed)
    local code, out, err = T.run(string.format("random --backend replay:%s --out %s --seed %d --budget 30", space, dir,
                                               seed))
    T.eq(code, 0, "ties: exit code\n" .. err)
    local at = tonumber(out:match("best: [%d.]+ ms at evaluation (%d+)"))
    local first = (events_of(dir, "eval")[at or 1] or {}).config or {}
    local rank1 = out:match("\n  1%s+[%d.]+%s+%S+%s+(a=%d+ b=%d+)")
    T.eq(rank1, string.format("a=%d b=%d", first.a or 0, first.b or 0), "ties: rank 1 is the best line's config (seed " .. seed .. ")")
  end
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
