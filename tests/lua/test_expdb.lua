-- The experience database through the real binary, on the replay backend
-- (docs/DATABASE.md): a second identical run answers from the file in under
-- a second with zero evaluations; --fresh searches again; a longer run is
-- warm-started (what was measured is served, not measured again) and visits
-- exactly the states a cold run visits; four kopt processes write the file
-- at once; kill -9 mid-run leaves a usable file, and a resumed run does not
-- record its log twice; a damaged file, another program's SQLite file and a
-- newer schema are one sentence naming the file, and the file is left as it
-- was; --no-db writes nothing outside the run folder, and the default path
-- follows XDG_DATA_HOME and HOME.
local T = require("testlib")
local dbm = require("kopt.db")
local sys = require("kopt.sys")

local _
local tmp = T.tmpdir("expdb")
local DB = tmp .. "/e.db"
local REC = "tests/data/convolution_A100.json"
local VA = "tests/data/vector_add_A4000.json"

local function cmd(strategy, file, budget, out, extra)
  return string.format("%s --backend replay:%s --budget %d --seed 3 --out %s %s", strategy, file, budget, out,
                       extra or "")
end

local function env(path) return "KOPT_DB=" .. (path or DB) end

local function count_from_db(dir)
  local n = 0
  for _, ev in ipairs((T.events(dir))) do if ev.from_db then n = n + 1 end end
  return n
end

local function query(path, sql)
  local h = assert(dbm.open(path, { readonly = true }))
  local rows, kind, msg = h:rows(sql)
  h:close()
  assert(rows, tostring(kind) .. " " .. tostring(msg))
  return rows
end

-- 1. The first run measures; the same command again is a hit.
local code, out, err = T.run(cmd("random", REC, 40, tmp .. "/a") .. " -q", env())
T.eq(code, 0, "first run\n" .. err)
T.check(out:find("40 evaluations", 1, true) ~= nil, "first run: the summary:\n%s", out)
local ref = T.keys(tmp .. "/a")
T.eq(#ref, 40, "first run: evaluations")
T.check(T.exists(DB), "the database %s was created", DB)

-- the best of three, so a busy machine's scheduling is not counted as the hit's cost
local hit_s = math.huge
for _ = 1, 3 do
  local t0 = sys.now()
  code, out, err = T.run(cmd("random", REC, 40, tmp .. "/b"), env())
  hit_s = math.min(hit_s, sys.now() - t0)
end
io.stdout:write(string.format("known-best hit: %.3f s (best of three)\n", hit_s))
T.eq(code, 0, "second identical run: exit code\n" .. err)
T.check(out:find("answered from the experience database " .. DB .. ": 0 evaluations", 1, true) ~= nil,
        "second identical run: says it answered from the database:\n%s", out)
T.check(out:find("best: [%d.e-]+ ms at evaluation %d+ of that run") ~= nil, "the hit shows the best:\n%s", out)
T.check(out:find("known since run 1 of", 1, true) ~= nil, "the hit names its run:\n%s", out)
T.check(not T.exists(tmp .. "/b"), "a hit writes no run folder")
-- KOPT_TIME_SCALE stretches the bound for slow builds (CI's sanitizer run).
local time_scale = tonumber(os.getenv("KOPT_TIME_SCALE") or "") or 1
T.check(hit_s < 1.0 * time_scale, "a hit took %.3f s, expected under %g s", hit_s, time_scale)
-- the very same command, same --out: a hit too (not "already holds a run")
code, out = T.run(cmd("random", REC, 40, tmp .. "/a"), env())
T.eq(code, 0, "the same command, same folder: exit code")
T.check(out:find("0 evaluations", 1, true) ~= nil, "the same command, same folder: a hit:\n%s", out)
-- a smaller budget is answered by the larger run on record
code, out = T.run(cmd("random", REC, 25, tmp .. "/b25"), env())
T.check(code == 0 and out:find("0 evaluations", 1, true) ~= nil, "a smaller budget is a hit:\n%s", out)

-- 1b. The strategy's code is part of the question: another file with the
-- same name, or the same file edited, is searched again, not answered.
local function hc_file(path, value)
  T.write(path, string.format([[
local S = { name = "hc" }
local asked = false
function S.ask(ctx, n)
  if asked then return {} end
  asked = true
  local c = ctx.space:sample(ctx.rng)
  c.block_size_x = %d
  return { { config = c } }
end
return S
]], value))
end
sys.mkdir_p(tmp .. "/s1")
sys.mkdir_p(tmp .. "/s2")
hc_file(tmp .. "/s1/hc.lua", 128)
hc_file(tmp .. "/s2/hc.lua", 256)
-- (the one state the run measured, by its block_size_x)
local function hc_best(dir)
  local ev = T.events(dir)
  for _, e in ipairs(ev) do
    if e.event == "eval" then return e.config and e.config.block_size_x end
  end
end
code, _, err = T.run(cmd(tmp .. "/s1/hc.lua", VA, 5, tmp .. "/hc1", "-q"), env())
T.eq(code, 0, "strategy hc (first file)\n" .. err)
T.eq(hc_best(tmp .. "/hc1"), 128, "the first file's run")
code, out, err = T.run(cmd(tmp .. "/s2/hc.lua", VA, 5, tmp .. "/hc2", "-q"), env())
T.eq(code, 0, "strategy hc (second file)\n" .. err)
T.check(not out:find("answered from the experience database", 1, true),
        "another file of the same name is not answered by the first one's run:\n%s", out)
T.eq(hc_best(tmp .. "/hc2"), 256, "the second file ran")
code, out = T.run(cmd(tmp .. "/s1/hc.lua", VA, 5, tmp .. "/hc3"), env())
T.check(code == 0 and out:find("0 evaluations", 1, true) ~= nil, "the first file again is a hit:\n%s", out)
hc_file(tmp .. "/s1/hc.lua", 512)
code, _, err = T.run(cmd(tmp .. "/s1/hc.lua", VA, 5, tmp .. "/hc4", "-q"), env())
T.eq(code, 0, "strategy hc (edited)\n" .. err)
T.eq(hc_best(tmp .. "/hc4"), 512, "an edited file is searched again")
local codes = query(DB, "SELECT DISTINCT strategy_code FROM runs WHERE strategy = 'hc'")
T.eq(#codes, 3, "three versions of hc, three code digests")

-- 1c. A move generator named in --opt is read by its contents: an edited
-- one asks again (it was answered by the run of the old one, 0 evaluations)
do
  local gen = tmp .. "/gen_v.lua"
  T.write(gen, 'return { name = "g", propose = function(ctx, state)\n' ..
               '  return { { changes = { block_size_x = 32 }, method = "g_a", prior = 2 } } end }\n')
  local gcmd = function(o) return cmd("mcgs", REC, 20, tmp .. "/" .. o, "-q --opt moves=rules," .. gen) end
  code, _, err = T.run(gcmd("gen1"), env())
  T.eq(code, 0, "mcgs with a generator file\n" .. err)
  code, out = T.run(gcmd("gen2"), env())
  T.check(code == 0 and out:find("0 evaluations", 1, true) ~= nil, "the same generator again is a hit:\n%s", out)
  T.write(gen, 'return { name = "g", propose = function(ctx, state)\n' ..
               '  return { { changes = { block_size_x = 64 }, method = "g_b", prior = 50 } } end }\n')
  code, out = T.run(gcmd("gen3"), env())
  T.check(code == 0 and not out:find("answered from the experience database", 1, true),
          "an edited generator file is searched again:\n%s", out)
end

-- 1d. A spec with an objective (GFLOP/s, to maximise): the hit's five best,
-- `db show`'s ten best and `db list`'s best are ranked by it, as the run
-- ranked them (they were ranked by time: the worst configs by the objective)
do
  local d = T.tmpdir("expdb-objective")
  local json = require("kopt.json")
  local cache, bx = {}, {}
  for b = 1, 20 do
    bx[b] = b
    cache[tostring(b)] = { BX = b, time = 1 + 0.1 * b, times = { 1 + 0.1 * b } }
  end
  T.write(d .. "/kt.json", json.encode({ device_name = "GPU", kernel_name = "k", tune_params_keys = { "BX" },
                                          tune_params = { BX = bx }, objective = "time", cache = cache }))
  T.write(d .. "/k.cu", 'extern "C" __global__ void k(float *out, int n) { int i = blockIdx.x * BX + threadIdx.x; ' ..
                        "if (i < n) out[i] = 1.0f; }\n")
  T.write(d .. "/s.json", json.encode({ name = "objdb", kernel = { source = "k.cu", entry = "k" }, problem = { n = 1024 },
    knobs = { { name = "BX", values = bx } }, launch = { grid = { "cdiv(n, 32)" }, block = { 32 } },
    args = { { name = "out", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } },
    recording = "kt.json", work = { flops = "BX * 1e9" }, metrics = { ["GFLOP/s"] = "flops / time_s / 1e9" },
    objective = { metric = "GFLOP/s", goal = "max" } }))
  local odb = "KOPT_DB=" .. d .. "/e.db"
  code, _, err = T.run("exhaustive " .. d .. "/s.json -q --out " .. d .. "/o1", odb)
  T.eq(code, 0, "objective: the first run\n" .. err)
  code, out = T.run("exhaustive " .. d .. "/s.json --out " .. d .. "/o2", odb)
  T.check(code == 0 and out:find("\n  2 +2%.9 +BX=19") and out:find("\n  5 +2%.6 +BX=16"),
          "the hit's five best by the objective:\n%s", out)
  code, out = T.run("db --db " .. d .. "/e.db show 1")
  T.check(code == 0 and out:find("ok +3 +3 +exhaustive +BX=20") and not out:find("BX=1\n", 1, true),
          "db show's best by the objective:\n%s", out)
  code, out = T.run("db --db " .. d .. "/e.db list")
  T.check(code == 0 and out:find("objdb", 1, true) and out:find(" 3 +%x+") , "db list's best is BX=20's 3 ms:\n%s", out)
  os.execute("rm -rf '" .. d .. "'")
end

-- 2. --fresh searches again: every state measured, none served.
code, out, err = T.run(cmd("random", REC, 40, tmp .. "/fresh", "--fresh -q"), env())
T.eq(code, 0, "--fresh: exit code\n" .. err)
T.check(out:find("40 evaluations", 1, true) ~= nil, "--fresh: the summary:\n%s", out)
T.same_list(T.keys(tmp .. "/fresh"), ref, "--fresh: the states of the first run")
T.eq(count_from_db(tmp .. "/fresh"), 0, "--fresh: evaluations served from the database")

-- 3. A longer run is warm-started and visits what a cold run visits.
code, out, err = T.run(cmd("random", REC, 60, tmp .. "/warm"), env())
T.eq(code, 0, "warm start: exit code\n" .. err)
T.eq(count_from_db(tmp .. "/warm"), 40, "warm start: evaluations served from the database")
T.check(out:find("40 of them answered by the experience database", 1, true) ~= nil, "warm start says so:\n%s", out)
code = T.run(cmd("random", REC, 60, tmp .. "/cold", "--no-db -q"))
T.eq(code, 0, "cold run: exit code")
T.same_list(T.keys(tmp .. "/warm"), T.keys(tmp .. "/cold"), "warm start vs cold run: states in order")
-- another strategy on the same problem is served what is known
code = T.run(cmd("anneal", REC, 60, tmp .. "/anneal"), env())
T.eq(code, 0, "anneal after random: exit code")
T.check(#T.keys(tmp .. "/anneal") == 60, "anneal after random: 60 evaluations")

-- 4. Four processes write the file at once (WAL, busy timeout).
local jobs = {}
for i = 1, 4 do
  jobs[#jobs + 1] = string.format("%s %s %s >%s/par%d.out 2>%s/par%d.err", env(), T.kopt,
                                  string.format("random --backend replay:%s --budget 150 --seed %d --out %s/par%d -q",
                                                REC, 100 + i, tmp, i), tmp, i, tmp, i)
end
os.execute("{ " .. table.concat(jobs, " & ") .. " & wait; }")
for i = 1, 4 do
  T.eq(#T.keys(tmp .. "/par" .. i), 150, "concurrent run " .. i .. ": evaluations")
  T.eq(T.slurp(tmp .. "/par" .. i .. ".err"), "", "concurrent run " .. i .. ": stderr")
end
local rows = query(DB, "SELECT seed, evaluations, (SELECT count(*) FROM evaluations e WHERE e.run_id = r.id) AS n"
                   .. " FROM runs r WHERE seed > 100 ORDER BY seed")
T.eq(#rows, 4, "concurrent runs on record")
for _, r in ipairs(rows) do
  T.check(r.evaluations == 150 and r.n == 150, "concurrent run seed %d: %s evaluations, %d rows", r.seed,
          tostring(r.evaluations), r.n)
end

-- 5. kill -9 leaves a usable file.
local KDB = tmp .. "/kill.db"
code = T.run(cmd("random", VA, 15, tmp .. "/killed"), env(KDB) .. " KOPT_TEST_SIGKILL_AFTER=9")
T.eq(code, 137, "a run killed after evaluation 9")
T.eq(query(KDB, "PRAGMA integrity_check")[1].integrity_check, "ok", "after kill -9: integrity check")
code, out = T.run("db list", env(KDB))
T.eq(code, 0, "after kill -9: kopt db list")
T.check(out:find("vector_add_A4000", 1, true) ~= nil, "after kill -9: the problem is listed:\n%s", out)
-- its unfinished run is no hit: a new run is served what was committed
code, _, err = T.run(cmd("random", VA, 15, tmp .. "/after_kill"), env(KDB))
T.eq(code, 0, "after kill -9, a new run\n" .. err)
T.check(count_from_db(tmp .. "/after_kill") >= 8, "after kill -9: %d evaluations served (8 or 9 committed)",
        count_from_db(tmp .. "/after_kill"))
local ref_va = T.keys(tmp .. "/after_kill")
-- the killed run resumed: same states, and its log is not recorded as new measurements
code, _, err = T.run(cmd("random", VA, 15, tmp .. "/killed", "--resume -q"), env(KDB))
T.eq(code, 0, "--resume after kill -9\n" .. err)
T.same_list(T.keys(tmp .. "/killed"), ref_va, "--resume after kill -9: states")
rows = query(KDB, "SELECT count(*) AS n, count(DISTINCT state) AS d FROM evaluations WHERE served_from IS NULL")
T.check(rows[1].n == rows[1].d, "each state measured once on record: %d measurements of %d states", rows[1].n, rows[1].d)
-- killed from outside, at any moment, while writing
for i = 1, 3 do
  os.execute(string.format("{ %s %s %s >/dev/null 2>&1 & pid=$!; sleep %.3f; kill -9 $pid; wait $pid; } 2>/dev/null",
                           env(KDB), T.kopt, cmd("random", REC, 400, tmp .. "/k9_" .. i, "--seed " .. i),
                           0.3 + 0.3 * i))
  T.eq(query(KDB, "PRAGMA integrity_check")[1].integrity_check, "ok", "after an outside kill -9: integrity " .. i)
end
code = T.run("db list", env(KDB))
T.eq(code, 0, "kopt db list after outside kills")

-- 6. kopt db export writes T4 that replay reads.
code, out = T.run("db export convolution_A100 -o " .. tmp .. "/exp.t4.json", env())
T.eq(code, 0, "kopt db export")
T.check(out:find("evaluations written to", 1, true) ~= nil, "kopt db export says where:\n%s", out)
code, _, err = T.run("random --backend replay:" .. tmp .. "/exp.t4.json --budget 5 --no-db -q --out " .. tmp .. "/exp_run")
T.eq(code, 0, "replay of an export\n" .. err)
T.strict_json(tmp .. "/exp.t4.json", "the export")

-- 6b. LLM attempts carried by origins, and the hit as data for callers
local strat = tmp .. "/attempts.lua"
T.write(strat, [[
local S = { name = "attempts", options = {} }
function S.init(ctx) ctx.i = 0 end
function S.ask(ctx, n)
  ctx.i = ctx.i + 1
  if ctx.i > 3 then return {} end
  local c = ctx.space:sample(ctx.rng)
  if ctx.i == 3 then
    return { { config = c, origin = { expert = "llm", method = "edit", llm = { attempt = 3, model = "m", hints = { "a", "b" } } } } }
  end
  return { { config = c, origin = { expert = "llm", method = "synthesis", attempt = ctx.i, hint = "hint " .. ctx.i } } }
end
return S
]])
local ADB = tmp .. "/attempts.db"
code, _, err = T.run(string.format("%s --backend replay:%s --out %s/att -q", strat, VA, tmp), env(ADB))
T.eq(code, 0, "a strategy with LLM attempts\n" .. err)
rows = query(ADB, "SELECT a.attempt, a.expert, a.model, a.hint, a.outcome FROM llm_attempts a ORDER BY a.attempt")
T.eq(#rows, 3, "LLM attempts on record")
T.check(rows[1] and rows[1].hint == "hint 1" and rows[1].expert == "llm" and rows[1].outcome == "ok",
        "attempt 1 on record: %s", rows[1] and require("cjson").encode(rows[1]) or "none")
T.check(rows[3] and rows[3].model == "m" and rows[3].hint == '["a","b"]', "attempt 3 on record: %s",
        rows[3] and require("cjson").encode(rows[3]) or "none")
code, out = T.run("db show vector_add_A4000", env(ADB))
T.check(code == 0 and out:find("3 LLM attempts on record", 1, true) ~= nil, "kopt db show counts the attempts:\n%s", out)

-- 7. Files it will not use: one sentence naming the file, left as it was.
local function refused(path, want, what)
  local before = T.slurp(path)
  local c, _, e = T.run(cmd("random", VA, 5, tmp .. "/refused"), env(path))
  T.eq(c, 2, what .. ": exit code")
  local line = T.one_sentence(e, what)
  T.check(line:find(path, 1, true) ~= nil and line:find(want, 1, true) ~= nil, "%s: %s", what, line)
  T.check(T.slurp(path) == before, "%s: the file was changed", what)
  T.check(not T.exists(tmp .. "/refused"), "%s: a run folder was written", what)
  c, _, e = T.run("db list", env(path))
  T.eq(c, 2, what .. ": kopt db list exit code")
  T.one_sentence(e, what .. ": kopt db list")
end
local garbage = tmp .. "/garbage.db"
T.write(garbage, string.rep("not a database at all ", 400))
refused(garbage, "is damaged or not a database", "a file of garbage")
-- a real database whose pages after the header are overwritten
local cut = tmp .. "/cut.db"
os.execute(string.format("head -c 100 '%s' > '%s'; head -c 61340 /dev/urandom >> '%s'", KDB, cut, cut))
refused(cut, "is damaged or not a database", "a database with damaged pages")
local other = tmp .. "/other.db"
-- (in a rollback journal, as most programs leave theirs: kopt switched it
-- to WAL before it read the tables, and so changed it)
local h = assert(dbm.open(other, { keep_journal = true }))
assert(h:exec("CREATE TABLE photos (id INTEGER)"))
h:close()
refused(other, "not a kopt experience database", "another program's SQLite file")
local newer = tmp .. "/newer.db"
os.execute(string.format("cp '%s' '%s'", KDB, newer))
h = assert(dbm.open(newer))
assert(h:run("INSERT INTO schema_version (version, applied) VALUES (99, 'later')"))
h:close()
refused(newer, "has schema version 99, newer than this kopt's (3)", "a newer schema")

-- 7b. A file of schema version 1 (before strategy_code) is migrated in
-- place: its runs are kept, answer nothing (no code digest), and what they
-- measured is still served.
local expdb = require("kopt.expdb")
local v1 = tmp .. "/v1.db"
h = assert(dbm.open(v1))
assert(h:exec(expdb.MIGRATIONS[1]))
assert(h:run("INSERT INTO schema_version (version, applied) VALUES (1, 'then')"))
h:close()
code, _, err = T.run(cmd("random", VA, 5, tmp .. "/v1a", "-q"), env(v1))
T.eq(code, 0, "a version-1 file: the run\n" .. err)
T.eq(query(v1, "SELECT max(version) AS v FROM schema_version")[1].v, 3, "a version-1 file is migrated to 3")
h = assert(dbm.open(v1))
assert(h:run("UPDATE runs SET strategy_code = NULL"))
h:close()
code, out, err = T.run(cmd("random", VA, 5, tmp .. "/v1b"), env(v1))
T.eq(code, 0, "a run recorded before version 2: exit code\n" .. err)
T.check(not out:find("answered from the experience database", 1, true),
        "a run with no code digest answers nothing:\n%s", out)
T.eq(count_from_db(tmp .. "/v1b"), 5, "a run with no code digest: its evaluations are served")

-- 8. --no-db writes nothing outside the run folder, not even the method
-- names MCGS learns (KOPT_METHODS unset, as a user has it; it wrote
-- ~/.cache/kopt/methods.json before); the default path.
local home = tmp .. "/home"
os.execute("mkdir -p '" .. home .. "'")
local henv = "env -u KOPT_METHODS -u XDG_CACHE_HOME KOPT_DB= XDG_DATA_HOME= HOME=" .. home
code = T.run(cmd("mcgs", REC, 40, tmp .. "/nodb", "--no-db -q"), henv)
T.eq(code, 0, "--no-db: exit code")
local function files_under(dir)
  local p = io.popen("find '" .. dir .. "' -mindepth 1 -type f | wc -l")
  local n = tonumber(p:read("a"))
  p:close()
  return n
end
T.eq(files_under(home), 0, "--no-db: files written under HOME")
T.run(cmd("mcgs", REC, 40, tmp .. "/withdb", "-q"), henv)
T.check(T.exists(home .. "/.cache/kopt/methods.json"), "without --no-db the method names are kept (the check above can fail)")
os.execute("rm -rf '" .. home .. "' && mkdir -p '" .. home .. "'")
code = T.run(cmd("random", VA, 5, tmp .. "/homedb", "-q"), henv)
T.eq(code, 0, "default path: exit code")
T.check(T.exists(home .. "/.local/share/kopt/experience.db"), "default path: ~/.local/share/kopt/experience.db")
code = T.run(cmd("random", VA, 5, tmp .. "/xdgdb", "-q"), "KOPT_DB= XDG_DATA_HOME=" .. tmp .. "/xdg HOME=" .. home)
T.eq(code, 0, "XDG_DATA_HOME: exit code")
T.check(T.exists(tmp .. "/xdg/kopt/experience.db"), "XDG_DATA_HOME: $XDG_DATA_HOME/kopt/experience.db")
-- a default place that cannot be created: a warning, and the run goes on
code, _, err = T.run(cmd("random", VA, 5, tmp .. "/nohome", "-q"), "KOPT_DB= XDG_DATA_HOME= HOME=/proc/1")
T.eq(code, 0, "an unwritable default place: exit code")
T.check(err:find("cannot be opened", 1, true) and err:find("this run goes on without it", 1, true),
        "an unwritable default place: the warning:\n%s", err)
T.eq(#T.keys(tmp .. "/nohome"), 5, "an unwritable default place: evaluations")
code, _, err = T.run(cmd("random", VA, 5, tmp .. "/both", "--no-db --db " .. DB))
T.eq(code, 2, "--db with --no-db: exit code")
T.one_sentence(err, "--db with --no-db")

-- db list lines its columns up by characters, not bytes: a device named in
-- UTF-8 (here "GPÜ é") no longer shifts the columns after it
do
  local path, rec = tmp .. "/utf8.db", tmp .. "/utf8_space.json"
  T.write(rec, '{"device_name": "GP\\u00dc \\u00e9", "kernel_name": "k\\u00e9", "tune_params_keys": ["b"], ' ..
          '"tune_params": {"b": [1, 2]}, "cache": {"1": {"b": 1, "time": 1.5}, "2": {"b": 2, "time": 1.25}}}')
  T.run(string.format("random --backend replay:%s --budget 2 --out %s/utf8_run -q", rec, tmp), env(path))
  T.run(string.format("random --backend replay:tests/data/pnpoly_RTX_3090.json --budget 2 --out %s/ascii_run -q", tmp),
        env(path))
  local c, listing = T.run("db list", env(path))
  T.eq(c, 0, "db list with a UTF-8 device name")
  local at = {}
  for line in listing:gmatch("[^\n]+") do
    local b = line:find("replay ", 1, true) or line:find("toolkit", 1, true)
    if b then at[#at + 1] = utf8.len(line:sub(1, b - 1)) end
  end
  T.check(#at == 3 and at[1] == at[2] and at[2] == at[3], "db list: the toolkit column starts at characters %s",
          table.concat(at, ", "))
end

-- A strategy that plans with its budget (anneal) is answered only by a run
-- of the same budget: a run of 60 answered a question of 40 with a worse
-- best than a search of 40 finds, "at evaluation 45".
do
  local adb = tmp .. "/anneal.db"
  code, _, err = T.run(cmd("anneal", REC, 60, tmp .. "/an60", "-q"), env(adb))
  T.eq(code, 0, "anneal 60\n" .. err)
  code, out = T.run(cmd("anneal", REC, 40, tmp .. "/an40"), env(adb))
  T.check(code == 0 and not out:find("answered from the experience database", 1, true),
          "anneal at another budget is not answered by the database:\n%s", out)
  code, out = T.run(cmd("anneal", REC, 40, tmp .. "/an40b"), env(adb))
  T.check(code == 0 and out:find("answered from the experience database", 1, true) ~= nil,
          "anneal at the same budget is:\n%s", out)
end

-- --db with an empty path (an unset variable) is refused: SQLite took it
-- for a private temporary database, and nothing was remembered
code, _, err = T.run(cmd("random", REC, 5, tmp .. "/empty", "--db ''"), "")
T.check(code == 2 and err:find("--db needs a path", 1, true), "--db '': %s", err)

-- An LLM strategy is answered only by a run that asked the same endpoint
-- and model, the environment included: before, a run with the heuristics
-- alone (no endpoint) answered a later run given KOPT_LLM_BASE_URL, and a
-- run of one model answered another, without asking anything.
do
  local LDB = tmp .. "/llm.db"
  local NO_LLM = "env -u KOPT_LLM_BASE_URL -u OPENAI_BASE_URL -u KOPT_LLM_MODEL -u OPENAI_MODEL KOPT_DB=" .. LDB
  -- (a closed port: the run falls back to the heuristics at once)
  local AT = function(model)
    return NO_LLM .. " KOPT_LLM_BASE_URL=http://127.0.0.1:9/v1 KOPT_LLM_MODEL=" .. model .. " KOPT_LLM_RETRIES=0"
  end
  local function experts(dir) return cmd("experts", VA, 6, tmp .. "/" .. dir, "--opt iterations=1 -q") end
  local hit = "answered from the experience database"
  local c1, o1, e1 = T.run(experts("x1"), NO_LLM)
  T.check(c1 == 0 and not o1:find(hit, 1, true), "experts without an endpoint: %s%s", o1, e1)
  local c2, o2, e2 = T.run(experts("x2"), AT("model-a"))
  T.check(c2 == 0 and not o2:find(hit, 1, true),
          "experts with an endpoint is not answered by the heuristics' run:\n%s%s", o2, e2)
  local _, o3 = T.run(experts("x3"), AT("model-b"))
  T.check(not o3:find(hit, 1, true), "another model is not answered by model-a's run:\n%s", o3)
  local _, o4 = T.run(experts("x4"), AT("model-a"))
  T.check(o4:find(hit, 1, true), "the same endpoint and model again is a hit:\n%s", o4)
  local _, o5 = T.run(experts("x5"), NO_LLM)
  T.check(o5:find(hit, 1, true), "the heuristics again is a hit:\n%s", o5)
end

-- Counters a run collected under --profile (on a GPU) and the symptoms
-- derived from them are not served: a later run without --profile got them
-- with the served results, wrote them into its events.jsonl, and its rule
-- moves read them (kopt.symptoms), so it searched otherwise than cold.
do
  local json = require("kopt.json")
  local PDB = tmp .. "/prof.db"
  local c0, _, e0 = T.run(cmd("random", VA, 12, tmp .. "/p1") .. " -q", env(PDB))
  T.eq(c0, 0, "profiled counters: the first run\n" .. e0)
  -- (as a --profile run leaves its results: counters collected, symptoms)
  local ph = assert(dbm.open(PDB))
  for _, row in ipairs(assert(ph:rows("SELECT id, result FROM evaluations"))) do
    local r = json.decode(row.result)
    r.metrics = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 95.0 }
    r.symptoms = { { name = "memory_bound", severity = 0.9, summary = "DRAM at 95 %" } }
    r.counters_collected = true
    assert(ph:rows("UPDATE evaluations SET result = ? WHERE id = ?", json.encode(r), row.id))
  end
  ph:close()
  local c1, _, e1 = T.run(cmd("rules", VA, 24, tmp .. "/p2") .. " -q", env(PDB))
  T.eq(c1, 0, "profiled counters: the warm run\n" .. e1)
  local served, carried = 0, 0
  for _, ev in ipairs((T.events(tmp .. "/p2"))) do
    if ev.from_db then
      served = served + 1
      if ev.result.metrics or ev.result.symptoms or ev.result.counters_collected then carried = carried + 1 end
    end
  end
  T.check(served > 0, "profiled counters: the warm run was served %d states", served)
  T.eq(carried, 0, "profiled counters: served results carry no collected counters or symptoms")
  T.run(cmd("rules", VA, 24, tmp .. "/p3") .. " -q --no-db")
  T.eq(table.concat(T.keys(tmp .. "/p2"), " "), table.concat(T.keys(tmp .. "/p3"), " "),
       "profiled counters: the warm run visits the states a cold run visits")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
