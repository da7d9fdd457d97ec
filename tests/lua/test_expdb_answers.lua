-- What the experience database answers with, and what it keeps of a run
-- (docs/DATABASE.md), through the real binary on the replay backend:
--  1. a run whose LLM went off (its endpoint unreachable) is filed with its
--     LLM said as it was, and the same command asks again: it is no hit;
--  2. a warm-started run writes the transition of every evaluation the
--     database served to its transitions.jsonl, the lines a cold run
--     writes; $KOPT_EXPERIENCE gets those it measured (the served ones are
--     there from the run that measured them);
--  3. a run folder given relative to the working directory is on record
--     as an absolute path, and a hit from another directory names it so;
--  4. a run that replayed with --replay-check lenient (a bad entry skipped)
--     answers no strict run: the strict one still refuses the file;
--  5. a renamed spec is served as the problem it was, its hit names the
--     spec that was run, and `kopt db show NEWNAME` finds the problem;
--  6. an origin with an attempt number is an LLM attempt only when its
--     expert is "llm" (synthesize's tuning, expert "tune", is not).
local T = require("testlib")
local dbm = require("kopt.db")
local json = require("kopt.json")
local sys = require("kopt.sys")

local _
local tmp = T.tmpdir("expdb_answers")
local CONV = "tests/data/convolution_A100.json"
local REDUCE = "tests/data/reduce_h200.t4.json"
local ROOT = sys.realpath(".")

local function query(path, sql, ...)
  local h = assert(dbm.open(path, { readonly = true }))
  local rows, kind, msg = h:rows(sql, ...)
  h:close()
  assert(rows, tostring(kind) .. " " .. tostring(msg))
  return rows
end

local function lines_of(path)
  local out = {}
  for line in (T.slurp(path) or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(line) end
  return out
end

-- 1. An unreachable endpoint (nothing listens on port 9): the LLM goes off.
local DB1 = tmp .. "/llm.db"
local down = "KOPT_DB=" .. DB1 .. " KOPT_LLM_BASE_URL=http://127.0.0.1:9/v1 KOPT_LLM_MODEL=m1"
local experts = "experts --backend replay:" .. CONV .. " --budget 20 -q --out " .. tmp .. "/llm_"
local code, out, err
code, _, err = T.run(experts .. "a", down)
T.eq(code, 0, "experts with the LLM unreachable\n" .. err)
T.check(err:find("the LLM is off for the rest of the run", 1, true) ~= nil, "the LLM went off:\n%s", err)
local filed = json.decode(query(DB1, "SELECT options FROM runs")[1].options)
T.check(tostring(filed["llm (resolved)"]):find("^http://127%.0%.0%.1:9/v1 m1, off during the run: ") ~= nil,
        "the run is filed with its LLM off: %s", tostring(filed["llm (resolved)"]))
code, out, err = T.run(experts .. "b", down)
T.eq(code, 0, "the same command again\n" .. err)
T.check(out:find("answered from the experience database", 1, true) == nil,
        "a run whose LLM was off answers nothing:\n%s", out)
T.check(T.exists(tmp .. "/llm_b/events.jsonl"), "the same command searched again")
-- (with the heuristics, as asked, the run is a hit as before)
local offline = "KOPT_DB=" .. DB1 .. " KOPT_LLM_BASE_URL= OPENAI_BASE_URL= OPENAI_API_BASE="
code = T.run(experts .. "c", offline)
T.eq(code, 0, "experts with no endpoint")
code, out = T.run(experts .. "d", offline)
T.check(code == 0 and out:find("answered from the experience database", 1, true) ~= nil,
        "a heuristics run answers the same heuristics question:\n%s", out)

-- 2. Served evaluations are transitions of the warm run too.
local DB2 = tmp .. "/warm.db"
local function rules(budget, dir, env)
  return T.run(string.format("rules --backend replay:%s --budget %d --seed 3 -q --out %s/%s", CONV, budget, tmp, dir),
               env)
end
local DS = tmp .. "/dataset.jsonl"
code, _, err = rules(15, "r15", "KOPT_DB=" .. DB2 .. " KOPT_EXPERIENCE=" .. DS)
T.eq(code, 0, "rules, budget 15\n" .. err)
local first = #lines_of(DS)
code, _, err = rules(30, "warm", "KOPT_DB=" .. DB2 .. " KOPT_EXPERIENCE=" .. DS)
T.eq(code, 0, "rules, budget 30, warm\n" .. err)
local served = 0
for _, ev in ipairs(T.events(tmp .. "/warm")) do if ev.from_db then served = served + 1 end end
T.check(served > 0, "the warm run was served evaluations (%d)", served)
code, _, err = rules(30, "cold", "KOPT_DB=off")
T.eq(code, 0, "rules, budget 30, cold\n" .. err)
local function keys(path)
  local list = {}
  for i, t in ipairs(lines_of(path)) do list[i] = tostring(t.key) .. " " .. tostring(t.from) .. ">" .. tostring(t.to) end
  return list
end
local warm, cold = keys(tmp .. "/warm/transitions.jsonl"), keys(tmp .. "/cold/transitions.jsonl")
T.check(#cold > 0, "the cold run wrote transitions")
T.same_list(warm, cold, "the warm run's transitions are the cold run's")
-- (the dataset counts each measurement once: the served ones are there
-- from the run that measured them)
T.eq(#lines_of(DS) - first, #cold - served, "the warm run's lines in $KOPT_EXPERIENCE: those it measured")

-- 3. --out relative to the working directory: on record whole.
local DB3 = tmp .. "/dirs.db"
os.execute(string.format("mkdir -p '%s/projA' '%s/projB'", tmp, tmp))
local rnd = string.format("random --backend replay:%s/%s --budget 8 ", ROOT, REDUCE)
code, _, err = T.run(rnd .. "-q --out runs/r1", "KOPT_DB=" .. DB3, tmp .. "/projA")
T.eq(code, 0, "a run in projA\n" .. err)
local real_a = sys.realpath(tmp .. "/projA")
T.eq(query(DB3, "SELECT out_dir FROM runs")[1].out_dir, real_a .. "/runs/r1", "the run folder on record")
code, out = T.run(rnd .. "--out other", "KOPT_DB=" .. DB3, tmp .. "/projB")
T.check(code == 0 and out:find("(" .. real_a .. "/runs/r1)", 1, true) ~= nil,
        "the hit from projB names the folder whole:\n%s", out)

-- 4. --replay-check lenient answers no strict run.
local rec = json.decode(T.slurp(REDUCE))
rec.results[4].configuration.VEC = nil
local BAD = tmp .. "/bad.t4.json"
T.write(BAD, json.encode(rec))
local DB4 = tmp .. "/check.db"
local bad_run = string.format("random specs/reduce.json --backend replay:%s --budget 10 --out %s/", BAD, tmp)
code, _, err = T.run(bad_run .. "strict1", "KOPT_DB=" .. DB4)
T.eq(code, 2, "strict replay of a bad entry\n" .. err)
code, _, err = T.run(bad_run .. "lenient -q --replay-check lenient", "KOPT_DB=" .. DB4)
T.eq(code, 0, "lenient replay of a bad entry\n" .. err)
code, out, err = T.run(bad_run .. "strict2", "KOPT_DB=" .. DB4)
T.eq(code, 2, "strict replay after a lenient run: refused still\n" .. out)
T.check(err:find("--replay-check lenient", 1, true) ~= nil, "strict: says how to go on:\n%s", err)
code, out = T.run(bad_run .. "lenient2 --replay-check lenient", "KOPT_DB=" .. DB4)
T.check(code == 0 and out:find("answered from the experience database", 1, true) ~= nil,
        "lenient again: a hit:\n%s", out)

-- 5. A renamed spec: the same problem, under its new name too.
local DB5 = tmp .. "/names.db"
local spec = T.slurp("specs/reduce.json"):gsub('"%.%./', '"' .. ROOT .. "/")
T.write(tmp .. "/reduce.json", spec)
T.write(tmp .. "/rowsum_v2.json", (spec:gsub('"name": "reduce_rows_f32"', '"name": "rowsum_v2"')))
local named = string.format("random %s/%%s.json --backend replay:%s --budget 8 --out %s/%%s", tmp, REDUCE, tmp)
code, _, err = T.run(named:format("reduce", "n1") .. " -q", "KOPT_DB=" .. DB5)
T.eq(code, 0, "the spec under its first name\n" .. err)
code, out = T.run(named:format("rowsum_v2", "n2"), "KOPT_DB=" .. DB5)
T.check(code == 0 and out:find("answered from the experience database", 1, true) ~= nil,
        "the renamed spec is served:\n%s", out)
T.check(out:find("^kopt: random on rowsum_v2 ") ~= nil, "the hit names the spec that was run:\n%s", out)
T.check(out:find("first run as reduce_rows_f32", 1, true) ~= nil, "the hit says the name on record:\n%s", out)
code, out, err = T.run("db show rowsum_v2", "KOPT_DB=" .. DB5)
T.eq(code, 0, "kopt db show NEWNAME\n" .. err)
T.check(out:find("problem 1: reduce_rows_f32 (also run as rowsum_v2)", 1, true) ~= nil, "db show:\n%s", out)
code = T.run("db show rowsum", "KOPT_DB=" .. DB5)
T.eq(code, 0, "kopt db show by the start of the new name")

-- 6. Attempt numbers outside the LLM's kernels.
local strat = tmp .. "/tuning.lua"
T.write(strat, [[
local S = { name = "tuning", options = {} }
function S.init(ctx) ctx.i = 0 end
function S.ask(ctx)
  ctx.i = ctx.i + 1
  if ctx.i > 3 then return {} end
  local experts = { "llm", "tune", "template" }
  return { { config = ctx.space:sample(ctx.rng), origin = { expert = experts[ctx.i], method = "m", attempt = 1 } } }
end
return S
]])
local DB6 = tmp .. "/attempts.db"
code, _, err = T.run(string.format("%s --backend replay:%s --out %s/att -q", strat, CONV, tmp), "KOPT_DB=" .. DB6)
T.eq(code, 0, "a strategy tuning an attempt\n" .. err)
local rows = query(DB6, "SELECT expert FROM llm_attempts")
T.check(#rows == 1 and rows[1].expert == "llm", "only the LLM's kernel is an LLM attempt: %s", json.encode(rows))

T.done()
