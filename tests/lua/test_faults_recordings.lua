-- Fault injection: hostile recordings, through every built-in strategy.
-- Regressions: a Kernel Tuner cache or T4 file with a negative or zero time
-- made that config the best ("best: -5 ms", "infx faster"); an unknown unit
-- was read as milliseconds; a malformed entry ended in a Lua traceback; an
-- entry outside the recording's own values was blamed on the strategy.
--
-- The recording here is Kernel Tuner's vector_add cache with its two fastest
-- configs given the times -5 and 0, plus a malformed entry and one outside
-- the recorded values. Strict mode (the default) refuses it in one sentence;
-- lenient mode skips the two bad entries with a count on stderr, replays the
-- two bad times as failures, and no strategy may crown anything but a
-- positive time that the file records for that config. A T4 file in mixed
-- units is read in milliseconds. Every file written is strict JSON.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("recordings")
local doc = cjson.decode(T.slurp("tests/data/vector_add_A4000.json"))
local by_time = {}
for k, e in pairs(doc.cache) do
  if type(e.time) == "number" then by_time[#by_time + 1] = k end
end
table.sort(by_time, function(a, b) return doc.cache[a].time < doc.cache[b].time end)
local neg, zero = by_time[1], by_time[2]
doc.cache[neg].time = -5
doc.cache[zero].time = 0
doc.cache["zz_junk"] = "junk"
doc.cache["zz_outside"] = { block_size_x = 7, time = 0.001 }
local hostile = tmp .. "/hostile.json"
T.write(hostile, cjson.encode(doc))
-- the truth: positive recorded times by block_size_x
local truth = {}
for _, e in pairs(doc.cache) do
  if type(e) == "table" and type(e.time) == "number" and e.time > 0 and e.block_size_x ~= 7 then
    truth[e.block_size_x] = e.time
  end
end

-- strict: one sentence naming the file and the first bad entry
local code, _, err = T.run("random --backend replay:" .. hostile .. " --out " .. tmp .. "/strict")
T.eq(code, 2, "strict mode: exit code")
local line = T.one_sentence(err, "strict mode")
T.eq(line, "kopt: replay file " .. hostile .. ": cache[\"zz_junk\"]: expected an object, got 'junk'; fix the entry, " ..
     "or replay with --replay-check lenient to skip bad entries", "strict mode: message")
T.check(not T.exists(tmp .. "/strict"), "strict mode: a run folder was left behind")

local strategies = { "mcgs", "experts", "rules", "anneal", "genetic", "surrogate", "random", "exhaustive" }
for _, s in ipairs(strategies) do
  local dir = tmp .. "/" .. s
  local out
  code, out, err = T.run(string.format("%s --backend replay:%s --replay-check lenient %s --out %s", s, hostile,
                                       s == "exhaustive" and "" or "--budget 15", dir))
  T.eq(code, 0, s .. ": exit code\n" .. err)
  T.check(err:find("kopt: replay file " .. hostile .. ": skipped 2 bad entries (the first: cache[\"zz_junk\"]: " ..
                   "expected an object, got 'junk')", 1, true) ~= nil, "%s: skipped entries counted on stderr:\n%s", s, err)
  T.check(err:find("2 entries record no positive finite time and are replayed as failed", 1, true) ~= nil,
          "%s: bad times counted on stderr:\n%s", s, err)
  T.check(not out:find("inf") and not out:find("nan") and not out:find("best: %-"), "%s: summary:\n%s", s, out)
  local evals, stop = T.events(dir)
  T.check(stop and stop.best, "%s: a best was named", s)
  if stop and stop.best then
    local cfg = cjson.decode(T.slurp(dir .. "/best/config.json"))
    local t = truth[cfg.block_size_x]
    T.check(stop.best.time_ms > 0 and t and math.abs(t - stop.best.time_ms) < 1e-12 * t,
            "%s: crowned block_size_x=%s at %s ms; the file records %s", s, tostring(cfg.block_size_x),
            tostring(stop.best.time_ms), tostring(truth[cfg.block_size_x]))
  end
  for _, ev in ipairs(evals) do
    local x = ev.config.block_size_x
    if x == doc.cache[neg].block_size_x or x == doc.cache[zero].block_size_x then
      T.check(ev.result.status == "launch_error" and (ev.result.log or ""):find("not a positive finite time", 1, true),
              "%s: block_size_x=%d replayed as %s (%s)", s, x, ev.result.status, tostring(ev.result.log))
    end
    T.check(x ~= 7, "%s: the entry outside the recorded values was evaluated", s)
  end
  local min = math.huge
  for _, ev in ipairs(evals) do
    if ev.result.status == "ok" then min = math.min(min, truth[ev.config.block_size_x] or -1) end
  end
  T.check(stop and stop.best and math.abs(stop.best.time_ms - min) < 1e-12 * min,
          "%s: the best is not the fastest positive time evaluated (%s)", s, tostring(min))
end

-- T4 in mixed units: one time, four spellings
T.write(tmp .. "/units.t4.json", [[{"schema_version": "1.0.0", "metadata": {"timeunit": "seconds"}, "results": [
 {"configuration": {"a": 1}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 0.002, "unit": "s"}]},
 {"configuration": {"a": 2}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 3000, "unit": "us"}]},
 {"configuration": {"a": 3}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 1500000, "unit": "nanoseconds"}]},
 {"configuration": {"a": 4}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 0.0025, "unit": ""}]}]}]])
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/units.t4.json -q --out " .. tmp .. "/units")
T.eq(code, 0, "T4 in mixed units: exit code\n" .. err)
local want = { 2, 3, 1.5, 2.5 }
for _, ev in ipairs((T.events(tmp .. "/units"))) do
  local w = want[ev.config.a]
  T.check(math.abs(ev.result.time_ms - w) < 1e-9, "T4 units: a=%d read as %s ms, expected %s", ev.config.a,
          tostring(ev.result.time_ms), tostring(w))
end

-- Integers past 2^53: 2^53 and 2^53 + 1 are one double, so two configs
-- would merge unseen; the entry is refused, naming the value.
T.write(tmp .. "/big.t4.json", [[{"schema_version": "1.0.0", "metadata": {"timeunit": "ms"}, "results": [
 {"configuration": {"a": 9007199254740992}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 2, "unit": "ms"}]},
 {"configuration": {"a": 9007199254740993}, "invalidity": "correct", "objectives": ["time"], "measurements": [{"name": "time", "value": 1, "unit": "ms"}]}]}]])
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/big.t4.json -q --out " .. tmp .. "/big")
T.eq(code, 2, "T4 with an integer past 2^53: exit code")
T.check(T.one_sentence(err, "past 2^53"):find("results[1].configuration.a: 9007199254740992 is past 2^53, where JSON numbers "
        .. "no longer tell integers apart; write it as a string", 1, true), "past 2^53: %s", err)

-- (inputs that are not strict JSON live apart from the runs' files)
local inputs = T.tmpdir("recordings-in")

-- NaN and Infinity as Python writes them (json.dump's default): a NaN time
-- is a failure with a note, a NaN in another field is no harm, and no
-- entry is lost (a complete file is never "repaired" by cutting entries).
do
  local vdoc = cjson.decode(T.slurp("tests/data/vector_add_A4000.json"))
  local keys, n = {}, 0
  for k, e in pairs(vdoc.cache) do
    if type(e) == "table" and type(e.time) == "number" then keys[#keys + 1] = k end
    n = n + 1
  end
  table.sort(keys, function(a, b) return vdoc.cache[a].time < vdoc.cache[b].time end)
  local fastest = vdoc.cache[keys[1]]
  local text = cjson.encode(vdoc)
  -- the fastest entry's framework_time and the slowest's time become NaN
  text = text:gsub('("' .. keys[#keys] .. '":{.-"time":)[^,}]+', '%1NaN', 1)
  -- (its own field: a second one would be a key written twice, refused)
  local replaced
  text, replaced = text:gsub('("' .. keys[1] .. '":{[^}]-"framework_time":)[^,}]+', '%1NaN', 1)
  T.eq(replaced, 1, "the fastest entry's framework_time is NaN")
  local nanfile = inputs .. "/nan.json"
  T.write(nanfile, text)
  local dir = tmp .. "/nan"
  local code2, out2, err2 = T.run("exhaustive --backend replay:" .. nanfile .. " --out " .. dir)
  T.eq(code2, 0, "NaN recording: exit code\n" .. err2)
  T.check(err2:find("1 entry records no positive finite time", 1, true), "NaN time: no note on stderr:\n%s", err2)
  local evals, stop = T.events(dir)
  T.eq(#evals, n, "NaN recording: every entry replayed")
  T.check(stop and stop.best and math.abs(stop.best.time_ms - fastest.time) < 1e-12 * fastest.time,
          "NaN recording: the best is the recorded optimum (%s ms), got %s\n%s", tostring(fastest.time),
          tostring(stop and stop.best and stop.best.time_ms), out2)
end

-- A recording in which nothing succeeded: compare says so in one sentence.
do
  local vdoc = cjson.decode(T.slurp("tests/data/vector_add_A4000.json"))
  for _, e in pairs(vdoc.cache) do e.time = "RuntimeFailedConfig" end
  local failed = inputs .. "/all_failed.json"
  T.write(failed, cjson.encode(vdoc))
  local code2, _, err2 = T.run(string.format("compare --strategies mcgs,rules --spaces %s --seeds 2 --budgets 5,10 " ..
                                             "--out %s/cmp -q", failed, tmp))
  T.eq(code2, 2, "compare on an all-failed space: exit code\n" .. err2)
  T.check(err2:find("records no successful configuration", 1, true) and not err2:find("traceback"),
          "compare on an all-failed space: %s", err2)
end

-- A spec whose knobs do not cover the recording's parameters: one sentence.
do
  local code2, _, err2 = T.run("random tests/data/specs/vector_add.json --backend replay:tests/data/pnpoly_RTX_3090.json " ..
                               "--budget 5 --out " .. tmp .. "/mismatch")
  T.eq(code2, 2, "spec and recording that disagree: exit code\n" .. err2)
  T.check(err2:find("records the parameter '", 1, true) and err2:find("has no knob for", 1, true),
          "spec and recording that disagree: %s", err2)
end

T.strict_json(tmp, "every file of the runs on hostile recordings")
os.execute("rm -rf '" .. tmp .. "' '" .. inputs .. "'")
return T.done()
