-- User strategies with the habits people have, through the real binary on
-- the replay backend: editing a config table after returning it, popping
-- from the space's enumeration, a global set with `local` forgotten,
-- writing ctx.best, an origin that is not data, ask() returning something
-- other than a list, os.exit. Each run either measures what it asked for,
-- with best/ and results.json telling the truth, or stops with one sentence
-- naming the strategy; nothing measured is lost.
local T = require("testlib")
local cjson = require("kopt.json")  -- (integers stay integers)

local tmp = T.tmpdir("habits")
local REC = "tests/data/pnpoly_RTX_3090.json"

-- A config's key as kopt writes it (T.events decodes numbers as floats).
local function key_of(cfg)
  local parts = {}
  for i, k in ipairs({ "between_method", "block_size_x", "tile_size", "use_method" }) do
    local v = cfg[k]
    parts[i] = tostring(math.tointeger(v) or v)
  end
  return table.concat(parts, ",")
end

local function run(name, body, budget)
  local file = tmp .. "/" .. name .. ".lua"
  T.write(file, body)
  local dir = tmp .. "/run_" .. name
  local code, out, err = T.run(string.format("%s --backend replay:%s --budget %d --out %s -q", file, REC, budget or 12,
                                             dir))
  return code, out, err, dir
end

-- The recorded time of each config key, from the replay file itself.
local truth = {}
do
  local doc = cjson.decode(T.slurp(REC))
  local keys = doc.tune_params_keys
  for _, e in pairs(doc.cache) do
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = tostring(math.tointeger(e[k]) or e[k]) end
    if type(e.time) == "number" then truth[table.concat(parts, ",")] = e.time end
  end
end

-- 1. A hill climber that edits its one config table in place after ask().
do
  local code, _, err, dir = run("mutate", [[
local S = { name = "mutate" }
function S.init(ctx) ctx.cur = ctx.space:sample(ctx.rng); ctx.i = 0 end
function S.ask(ctx, n)
  ctx.i = ctx.i + 1
  local k = ctx.space.knobs[2]
  if ctx.i > 1 then ctx.cur[k.name] = k.values[(ctx.i % #k.values) + 1] end
  return { { config = ctx.cur } }
end
return S
]])
  T.eq(code, 0, "mutate: exit code (" .. err .. ")")
  local evals = T.events(dir)
  for _, ev in ipairs(evals) do
    local key = key_of(ev.config)
    T.eq(key, ev.key, "mutate: an evaluation's config is the one measured")
  end
  local best = cjson.decode(T.slurp(dir .. "/best/result.json"))
  local cfg = cjson.decode(T.slurp(dir .. "/best/config.json"))
  T.eq(key_of(cfg), best.key, "mutate: best/config.json is the best's config")
  T.check(truth[best.key] and math.abs(truth[best.key] - best.result.time_ms) < 1e-9, "mutate: the best's time is recorded")
end

-- 1b. A hill climber that edits ctx.best.config in place to make a neighbour:
-- the best stays the best measured.
do
  local code, _, err, dir = run("edit_best", [[
local S = { name = "edit_best" }
function S.ask(ctx, n)
  if not ctx.best then return { { config = ctx.space:sample(ctx.rng) } } end
  local c = ctx.best.config
  local k = ctx.space.knobs[2]
  c[k.name] = k.values[ctx.rng:random(1, #k.values)]
  for _, r in ipairs(ctx:recent(3)) do r.config[k.name] = k.values[1] end
  return { { config = c } }
end
return S
]])
  T.eq(code, 0, "edit_best: exit code (" .. err .. ")")
  local best = cjson.decode(T.slurp(dir .. "/best/result.json"))
  local cfg = cjson.decode(T.slurp(dir .. "/best/config.json"))
  T.eq(key_of(cfg), best.key, "edit_best: best/config.json is the best's config")
  for _, ev in ipairs(T.events(dir)) do T.eq(key_of(ev.config), ev.key, "edit_best: a recorded config") end
end

-- 2. Popping from enumerate() and editing samples leave the space whole.
do
  local code, _, err = run("pop", [[
local S = { name = "pop" }
function S.ask(ctx, n)
  local before = #ctx.space:enumerate()
  local list = ctx.space:enumerate()
  for _ = 1, 10 do table.remove(list) end
  local c = ctx.space:sample(ctx.rng)
  for k in pairs(c) do c[k] = "edited" end
  assert(#ctx.space:enumerate() == before, "the space shrank")
  local fresh = ctx.space:sample(ctx.rng)
  for _, v in pairs(fresh) do assert(v ~= "edited", "a sample was edited in the space") end
  return { { config = fresh } }
end
return S
]], 5)
  T.eq(code, 0, "pop: exit code (" .. err .. ")")
end

-- 3. Globals set by mistake stay the strategy's; kopt's own are untouched.
do
  local code, _, err, dir = run("leak", [[
local S = { name = "leak" }
function S.ask(ctx, n)
  type = "oops"          -- `local` forgotten
  next = nil
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]], 6)
  T.eq(code, 0, "leak: exit code (" .. err .. ")")
  T.check(T.exists(dir .. "/results.json") and T.exists(dir .. "/best/result.json"), "leak: no results.json or best/")
end

-- 4. ctx.best written by the strategy does not replace the engine's.
do
  local code, _, err, dir = run("ctxbest", [[
local S = { name = "ctxbest" }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
function S.tell(ctx, results) ctx.best = { time = 0 } end
return S
]], 6)
  T.eq(code, 0, "ctxbest: exit code (" .. err .. ")")
  local best = cjson.decode(T.slurp(dir .. "/best/result.json"))
  T.check(truth[best.key] and math.abs(truth[best.key] - best.result.time_ms) < 1e-9, "ctxbest: the best is a measurement")
end

-- 5. One sentence naming the strategy, for what is not a list of plain data.
local bad = {
  { "unwrapped", "return { config = ctx.space:sample(ctx.rng) }",
    "kopt: strategy 'unwrapped': ask() must return a list of candidates ({ {config = ...}, ... }); " ..
    "the table it returned has the key 'config'" },
  { "zero_based", "return { [0] = { config = ctx.space:sample(ctx.rng) } }",
    "kopt: strategy 'zero_based': ask() must return a list of candidates ({ {config = ...}, ... }); " ..
    "the table it returned has the key 0" },
  { "origin_fn", "return { { config = ctx.space:sample(ctx.rng), origin = { f = print } } }",
    "kopt: strategy 'origin_fn' returned a bad candidate from ask(): candidates[1].origin: must be plain data " ..
    "(tables, strings, numbers, booleans): Cannot serialise function: type not supported" },
}
for _, b in ipairs(bad) do
  local code, _, err = run(b[1], string.format("local S = { name = %q }\nfunction S.ask(ctx, n) %s end\nreturn S\n",
                                               b[1], b[2]))
  T.eq(code, 2, b[1] .. ": exit code")
  T.eq(err:match("^[^\n]*"), b[3], b[1] .. ": message")
end

-- An error inside kopt's code from a bad call names the strategy's line.
do
  local code, _, err = run("badcall", "local S = { name = 'badcall' }\nfunction S.ask(ctx, n)\n  local k = ctx:key(nil)\n  return { k }\nend\nreturn S\n")
  T.eq(code, 1, "badcall: exit code")
  T.check(err:find(tmp .. "/badcall.lua:3", 1, true), "badcall: the strategy's line:\n%s", err)
  -- the same with kopt's Lua read from a tree (--lua-dev, an absolute path):
  -- its files are kopt's, not the strategy's
  local src = os.getenv("KOPT_SOURCE_DIR")
  if src and src:sub(1, 1) == "/" then
    local dir = tmp .. "/run_badcall_dev"
    code, _, err = T.run(string.format("%s/badcall.lua --lua-dev %s --backend replay:%s --budget 4 --out %s -q", tmp,
                                       src, REC, dir))
    T.eq(code, 1, "badcall --lua-dev: exit code")
    T.check(err:find(tmp .. "/badcall.lua:3", 1, true), "badcall --lua-dev: the strategy's line:\n%s", err)
  end
end

-- An error with no position (raised in C: the iterator of ipairs(nil)) is
-- given the strategy's line; so is a result passed where a config is
-- expected, which made an empty neighbour list and a silent stop before.
do
  local code, _, err = run("ipairsnil", [[
local S = { name = "ipairsnil" }
function S.ask(ctx, n)
  if ctx.evaluations >= 3 then
    for _, k in ipairs(ctx.space.knob) do print(k) end
  end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  T.eq(code, 1, "ipairsnil: exit code")
  T.check(err:find("(at " .. tmp .. "/ipairsnil.lua:4)", 1, true), "ipairsnil: the strategy's line:\n%s", err)
  -- in kopt compare, the message names the space and the seed too
  code, _, err = T.run(string.format("compare --strategies %s/ipairsnil.lua --seeds 2 --spaces %s --out %s/cmp -q", tmp,
                                     REC, tmp))
  T.eq(code, 1, "ipairsnil in compare: exit code")
  T.check(err:find("compare: ipairsnil on " .. REC .. " (seed 1): strategy 'ipairsnil' failed in ask()", 1, true),
          "ipairsnil in compare: the message:\n%s", err)
  code, _, err = run("bestnotconfig", [[
local S = { name = "bestnotconfig" }
function S.ask(ctx, n)
  if not ctx.best then return { { config = ctx.space:sample(ctx.rng) } } end
  local out = {}
  for _, c in ipairs(ctx.space:neighbours(ctx.best, "adjacent")) do
    if not ctx:lookup(c) then out[#out + 1] = { config = c } end
  end
  return out
end
return S
]])
  T.eq(code, 1, "bestnotconfig: exit code")
  T.check(err:find("bestnotconfig.lua:5: space:neighbours: the config has no value for knob 'between_method' " ..
                   "(a result was passed: its .config is the config)", 1, true), "bestnotconfig: the message:\n%s", err)
  code, _, err = run("lookupresult", [[
local S = { name = "lookupresult" }
function S.ask(ctx, n)
  if ctx.best and ctx:lookup(ctx.best) then return {} end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  T.eq(code, 1, "lookupresult: exit code")
  T.check(err:find("lookupresult.lua:3: ctx:lookup: the config has no value", 1, true), "lookupresult: the message:\n%s",
          err)
end

-- 6. os.exit in a strategy is an error of the strategy: the summary, the
-- stop event and results.json are still written.
do
  local code, _, err, dir = run("exits", [[
local S = { name = "exits" }
function S.ask(ctx, n)
  if ctx.evaluations >= 3 then os.exit(0) end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
  T.eq(code, 1, "exits: exit code")
  T.check(err:find("called os.exit", 1, true), "exits: the message:\n%s", err)
  local evals, stop = T.events(dir)
  T.check(#evals >= 3 and stop ~= nil, "exits: %d evaluations and a stop event", #evals)
  T.check(T.exists(dir .. "/results.json") and T.exists(dir .. "/best/result.json"), "exits: results.json and best/")
end

-- 7. Resume keeps every measurement on record: with a smaller --budget, the
-- evaluations the strategy does not ask again still make results.json; with
-- no --budget, the budget of the run resumed holds (not the default 200);
-- a strategy drawing from math.random asks again what it asked.
do
  local body = [[
local S = { name = "mathrandom" }
function S.ask(ctx, n)
  local list = ctx.space.knobs
  local c = {}
  for _, k in ipairs(list) do c[k.name] = k.values[math.random(#k.values)] end
  return { { config = c } }
end
return S
]]
  local file = tmp .. "/mathrandom.lua"
  T.write(file, body)
  local dir = tmp .. "/run_resume"
  local base = string.format("%s --backend replay:%s --out %s -q", file, REC, dir)
  local code, _, err = T.run(base .. " --budget 10")
  T.eq(code, 0, "resume: first run (" .. err .. ")")
  code, _, err = T.run(base .. " --resume --budget 5")
  T.eq(code, 0, "resume: smaller budget (" .. err .. ")")
  local res = cjson.decode(T.slurp(dir .. "/results.json"))
  T.eq(#res.results, 10, "resume with --budget 5: every evaluation on record is in results.json")
  code, _, err = T.run(base .. " --resume")
  T.eq(code, 0, "resume: no budget (" .. err .. ")")
  local evals = T.events(dir)
  T.eq(#evals, 10, "resume without --budget: the recorded budget (10) holds")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
