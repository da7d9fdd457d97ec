-- `kopt db list` and `kopt db show` (docs/DATABASE.md) on what they print:
--  1. a state measured twice (a --fresh run): list's best is the latest
--     measurement of each state, as show's, the served one and the export;
--  2. show's rows say which run each comes from, and an edited or written
--     kernel by its source hash (its config alone is empty or the same);
--  3. a file of schema version 2 (no names table) read as it is, read-only:
--     list and show still work, and a name finds its problem.
local T = require("testlib")
local dbm = require("kopt.db")
local expdb = require("kopt.expdb")

local tmp = T.tmpdir("db_show")
local DB = tmp .. "/e.db"
local REC = "tests/data/vector_add_A4000.json"

local function write(path, sql, ...)
  local h = assert(dbm.open(path))
  assert(h:run(sql, ...))
  h:close()
end

-- 1. The same states measured twice; the first measurement made faster.
local run = string.format("random --backend replay:%s --budget 6 -q --out %s/", REC, tmp)
local code, _, err = T.run(run .. "a", "KOPT_DB=" .. DB)
T.eq(code, 0, "first run\n" .. err)
code, _, err = T.run(run .. "b --fresh", "KOPT_DB=" .. DB)
T.eq(code, 0, "second run, --fresh\n" .. err)
write(DB, "UPDATE evaluations SET time_ms = 0.0001 WHERE run_id = 1 AND n = 1")
local out
code, out, err = T.run("db list", "KOPT_DB=" .. DB)
T.eq(code, 0, "db list\n" .. err)
T.check(not out:find(" 0.0001 ", 1, true), "list's best is no superseded measurement:\n%s", out)
local listed = out:match("\n  1 .- (%d[%d.e-]*) +%x+\n")
code, out = T.run("db show 1", "KOPT_DB=" .. DB)
T.eq(code, 0, "db show")
local shown = out:match("the %d+ best configurations measured\n[^\n]*\n  2 +%d+ +ok +(%S+)")
T.check(listed ~= nil and listed == shown, "list's best (%s) is show's (%s):\n%s", tostring(listed), tostring(shown), out)

-- 2. Rows of two runs, one of them an edited kernel.
write(DB, "INSERT INTO evaluations (run_id, problem_id, n, state, config, status, time_ms, method)"
      .. " SELECT 2, problem_id, 7, state || '#0123456789abcdef', config, 'ok', 0.00001, 'edit'"
      .. " FROM evaluations WHERE run_id = 2 AND n = 2")
code, out = T.run("db show 1", "KOPT_DB=" .. DB)
T.eq(code, 0, "db show, two runs")
T.check(out:find("\n  run  n     status", 1, true) ~= nil, "show has a run column:\n%s", out)
T.check(out:find("\n  2    7     ok +[%d.e-]+ +%- +edit +.-%(kernel 01234567%)\n") ~= nil,
        "an edited kernel is told by its source hash:\n%s", out)
code, out = T.run("db show 1 --run 1", "KOPT_DB=" .. DB)
T.check(code == 0 and out:find("\n  1    1     ok", 1, true) ~= nil, "show --run: the run's rows:\n%s", out)

-- 3. A file of schema version 2.
local V2 = tmp .. "/v2.db"
local h = assert(dbm.open(V2))
assert(h:exec(expdb.MIGRATIONS[1]))
assert(h:exec(expdb.MIGRATIONS[2]))
assert(h:run("INSERT INTO schema_version (version, applied) VALUES (2, 'then')"))
assert(h:run("INSERT INTO problems (key, name, device, toolkit) VALUES ('abcdef', 'old_problem', 'gpu', 'nvrtc')"))
h:close()
code, out, err = T.run("db --db " .. V2 .. " list")
T.check(code == 0 and out:find("old_problem", 1, true) ~= nil, "list of a version-2 file:\n%s%s", out, err)
code, out, err = T.run("db --db " .. V2 .. " show old_prob")
T.check(code == 0 and out:find("problem 1: old_problem\n", 1, true) ~= nil, "show of a version-2 file:\n%s%s", out, err)

T.done()
