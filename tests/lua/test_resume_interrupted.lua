-- A resume interrupted while it replays what is on record (Ctrl-C, SIGTERM)
-- wrote results.json, best/ and the summary from the part replayed so far:
-- the folder then named a worse config as the winner until the next resume.
-- Now what is on record and not yet replayed joins the results, with a line
-- that says so, and a later resume finishes the run as an uninterrupted one.
local T = require("testlib")
local cjson = require("cjson")

local root = require("kopt.sys").realpath(os.getenv("KOPT_SOURCE_DIR") or ".")
local replay = root .. "/tests/data/convolution_A4000.json"
local tmp = T.tmpdir("resume-interrupted")
local function cmd(dir) return string.format("mcgs --backend replay:%s --budget 420 --seed 1 --out %s", replay, dir) end

local ref = tmp .. "/ref"
T.eq((T.run(cmd(ref))), 0, "the uninterrupted run")
local d = tmp .. "/run"
local code = T.run(cmd(d), "KOPT_TEST_SIGKILL_AFTER=397")
T.eq(code, 137, "killed after 397 evaluations")
local on_record = T.events(d)
T.eq(#on_record, 397, "397 evaluations on record")
local best = math.huge
for _, ev in ipairs(on_record) do
  if ev.result.status == "ok" and ev.result.time_ms < best then best = ev.result.time_ms end
end

-- Ctrl-C once (the engine sees it between evaluations), then twice (the
-- interruption is raised at once, in the middle of the replay)
for _, how in ipairs({ "250", "300,2" }) do
  local err
  code, _, err = T.run(cmd(d) .. " --resume", "KOPT_TEST_SIGINT_AFTER=" .. how)
  local replayed = tonumber(how:match("^%d+"))
  T.eq(code, 130, how .. ": the resume, interrupted after replaying " .. replayed .. "\n" .. err)
  T.check(err:find(string.format("%d evaluations on record not replayed yet when the run was interrupted; kept in " ..
                                 "the results", 397 - replayed), 1, true), "%s: the line that says so:\n%s", how, err)
  T.check(err:find("interrupted after 397 evaluations; continue with --resume", 1, true),
          "%s: counts what is on record:\n%s", how, err)
  local results = cjson.decode(T.slurp(d .. "/results.json"))
  T.eq(#results.results, 397, how .. ": results.json holds every evaluation on record")
  local _, stop = T.events(d)
  T.check(stop and stop.best and stop.best.time_ms == best, "%s: the best is the best on record (%s, want %s)", how,
          tostring(stop and stop.best and stop.best.time_ms), tostring(best))
end

-- (and what a kill in the middle of an atomic write left behind is gone)
T.write(d .. "/graph.json.tmp2904", "{")
T.write(d .. "/results.json.tmp.28951", "{")
local err, _
code, _, err = T.run(cmd(d) .. " --resume")
T.check(not io.open(d .. "/graph.json.tmp2904") and not io.open(d .. "/results.json.tmp.28951"),
        "temporary files of a killed write removed on resume")
T.eq(code, 0, "the resume after it\n" .. err)
T.same_list(T.keys(d), T.keys(ref), "the evaluations of the uninterrupted run")
-- and its transitions, labels included (a label new to the method set
-- joins it, so a resume names the resumed ones again, in order)
local function lines(f)
  local out = {}
  for line in io.lines(f) do
    local t = cjson.decode(line)
    out[#out + 1] = string.format("%s %s %s>%s %s", tostring(t.n), tostring(t.key), tostring(t.from_method),
                                  tostring(t.to_method), tostring(t.status))
  end
  return out
end
T.same_list(lines(d .. "/transitions.jsonl"), lines(ref .. "/transitions.jsonl"), "the transitions of the uninterrupted run")
-- A run warm-started from the experience database, killed and resumed:
-- the evaluations the database served were written to the dataset on the
-- resume (never by an uninterrupted run), so it counted them twice. The
-- run's own file has every evaluation, served or measured, once.
do
  local env = string.format("KOPT_DB=%s/exp.db KOPT_EXPERIENCE=%s/exp.jsonl", tmp, tmp)
  local function warm(dir, budget) return string.format("mcgs --backend replay:%s --budget %d --seed 1 --out %s -q",
                                                        replay, budget, dir) end
  T.eq((T.run(warm(tmp .. "/a", 60), env)), 0, "the run that fills the database")
  T.eq((T.run(warm(tmp .. "/b", 90), env .. " KOPT_TEST_SIGKILL_AFTER=75")), 137, "the warm run, killed at 75")
  T.eq((T.run(warm(tmp .. "/b", 90) .. " --resume", env)), 0, "its resume")
  local count, seen, twice = 0, {}, 0
  for line in io.lines(tmp .. "/exp.jsonl") do
    local key = cjson.decode(line).key
    count = count + 1
    if seen[key] then twice = twice + 1 end
    seen[key] = true
  end
  T.eq(twice, 0, "no state twice in the dataset (" .. count .. " lines)")
  local n = 0
  for _ in io.lines(tmp .. "/b/transitions.jsonl") do n = n + 1 end
  T.eq(n, 90, "the warm run's own transitions: its 90 evaluations")
end

-- a resume with a smaller budget keeps the evaluations past it, and their
-- time: the summary's clock is the whole run's (it was the budget's part)
do
  local r = string.format("random --backend replay:%s --out %s/rnd", replay, tmp)
  local _, o1 = T.run(r .. " --budget 100")
  local _, o2 = T.run(r .. " --budget 50 --resume")
  local t1, t2 = o1:match("in ([%d:]+) simulated"), o2:match("in ([%d:]+) simulated")
  T.check(t1 and t1 == t2, "the same simulated time (%s, then %s)", tostring(t1), tostring(t2))
end

-- anneal resumed with a larger budget: it cools over its budget, so that is
-- another search, said as such (it was asked "is it deterministic?")
do
  local a = string.format("anneal --backend replay:%s --out %s/an", replay, tmp)
  T.eq((T.run(a .. " --budget 30")), 0, "anneal, 30 evaluations")
  local c, _, e = T.run(a .. " --budget 45 --resume")
  T.check(c == 0 and e:find("note: anneal plans with its budget; resuming " .. tmp .. "/an with --budget 45 (was 30) " ..
                            "makes another search", 1, true) and not e:find("deterministic", 1, true),
          "anneal resumed with another budget:\n%s", e)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
