-- Knob values, parameter lists and whole files that the recording readers
-- misread or misnamed; each check failed before its fix:
-- * two floats that differ past 14 digits (0.1, 0.10000000000000002) were
--   one configuration to the duplicate check (tostring), two to the space's
--   key; 0.1 and "0.10000000000000001" the other way round, so one config
--   was replayed at the other's time without a word;
-- * a cache whose tune_params_keys is empty was read, and kopt then refused
--   the results.json it wrote of it;
-- * "cache": [] said "records no configurations", not that it is an array;
-- * an infinite knob value was "past 2^53, where JSON numbers no longer
--   tell integers apart";
-- * a CSV file (KTT's default output) and an empty file were "not valid
--   JSON ... and could not be repaired", though nothing was tried;
-- * a T4 knob of numbers and numbers written as strings (1, "2", 4) was
--   read as [1, 4, "2"], its neighbours out of order, without a word;
-- * lenient mode put a value beyond tune_params' list into the space, and
--   said it was there, when only a skipped entry (a bad time, a key that
--   names other values) used it;
-- * a cache key written twice replayed its last entry without a word (JSON
--   keeps the last), where two spellings of one key were refused;
-- * in a file cut short inside a string (an interrupted run), a key written
--   twice before the cut ended lenient mode in an internal error (the
--   duplicate had no line).
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("recordings-values")
-- (inputs that are not strict JSON live apart from the runs' files)
local inputs = T.tmpdir("recordings-values-in")

local function run(name, text, extra)
  local file = inputs .. "/" .. name
  T.write(file, text)
  local out = tmp .. "/run_" .. name:gsub("%W", "_")
  os.execute("rm -rf '" .. out .. "'")
  local code, stdout, err = T.run(string.format("exhaustive --backend replay:%s --out %s -q %s", file, out,
                                                extra or ""))
  local evals, stop
  if T.exists(out .. "/events.jsonl") then evals, stop = T.events(out) end
  return code, err, evals or {}, stop, stdout
end

local function t4(results)
  return cjson.encode({ schema_version = "1.0.0", results = results })
end
local function res(a, ms)
  return { configuration = { a = a }, invalidity = "correct", objectives = { "time" },
           measurements = { { name = "time", value = ms, unit = "ms" } } }
end

-- floats close together: four configurations
do
  local code, err, evals = run("close.json", '{"tune_params_keys": ["f"], "tune_params": {"f": [0.1, ' ..
    '0.10000000000000002, 1234567.12345678, 1234567.12345679]}, "objective": "time", "cache": {' ..
    '"0.1": {"f": 0.1, "time": 1.0}, "0.10000000000000002": {"f": 0.10000000000000002, "time": 2.0}, ' ..
    '"1234567.12345678": {"f": 1234567.12345678, "time": 3.0}, ' ..
    '"1234567.12345679": {"f": 1234567.12345679, "time": 4.0}}}')
  T.check(code == 0 and #evals == 4, "floats that differ past 14 digits: %d configs replayed (%d: %s)", #evals, code,
          err)
end

-- a number and its 17-digit string: one configuration, said as such
do
  local text = '{"tune_params_keys": ["a"], "tune_params": {"a": [0.1, "0.10000000000000001", 0.5]}, ' ..
    '"objective": "time", "cache": {"0.1": {"a": 0.1, "time": 5.0}, ' ..
    '"0.10000000000000001": {"a": "0.10000000000000001", "time": 1.0}, "0.5": {"a": 0.5, "time": 3.0}}}'
  local code, err = run("collide.json", text)
  T.check(code == 2 and err:find('cache["0.10000000000000001"]: the same configuration as cache["0.1"]', 1, true)
          ~= nil, "0.1 and '0.10000000000000001' are one configuration (%d: %s)", code, err)
  local code2, err2, _, stop = run("collide.json", text, "--replay-check lenient")
  T.check(code2 == 0 and stop and stop.best and stop.best.time_ms == 3,
          "lenient keeps the first of the two (a=0.1 at 5 ms): best %s (%s)",
          tostring(stop and stop.best and stop.best.time_ms), err2)
end

-- no parameters; a cache that is an empty array
do
  local code, err = run("nokeys.json", '{"tune_params_keys": [], "tune_params": {}, "cache": {"": {"time": 1.0}}}')
  T.check(code == 2 and err:find("tune_params_keys: expected at least one parameter name", 1, true) ~= nil,
          "a cache of no parameters is refused (%d: %s)", code, err)
  code, err = run("cachearr.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": []}')
  T.check(code == 2 and err:find("cache: expected an object keyed by configuration, got an array", 1, true) ~= nil,
          "an empty cache array is named as an array (%d: %s)", code, err)
end

-- infinite and huge knob values
do
  local code, err = run("inf.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [0.5, Infinity]}, ' ..
    '"objective": "time", "cache": {"0.5": {"a": 0.5, "time": 1.0}}}')
  T.check(code == 2 and err:find("tune_params.a[2]: Infinity is not a knob value", 1, true) ~= nil
          and not err:find("2^53", 1, true), "an infinite knob value (%d: %s)", code, err)
  code, err = run("huge.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [0.5, -1e300]}, ' ..
    '"objective": "time", "cache": {"0.5": {"a": 0.5, "time": 1.0}}}')
  T.check(code == 2 and err:find("tune_params.a[2]: -1e+300 is past -2^53", 1, true) ~= nil,
          "a knob value of -1e300 (%d: %s)", code, err)
end

-- files that are no JSON
do
  local code, err = run("ktt.csv", "Kernel name,Status,Total duration (us),WORK_GROUP_SIZE_X\n" ..
                                   "directCoulombSum,Ok,3037.408,16\n")
  T.check(code == 2 and err:find("is CSV, not JSON", 1, true) ~= nil and not err:find("repaired", 1, true),
          "a KTT CSV file (%d: %s)", code, err)
  code, err = run("empty.json", "")
  T.check(code == 2 and err:find("empty.json is empty", 1, true) ~= nil, "an empty file (%d: %s)", code, err)
  code, err = run("broken.json", '{"results": [1, 2,]}')
  T.check(code == 2 and err:find("is not valid JSON", 1, true) ~= nil and not err:find("repaired", 1, true),
          "a broken file that is no cache is not said to be repaired (%d: %s)", code, err)
end

-- a T4 knob of numbers and numbers written as strings
do
  local text = t4({ res(1, 5), res("2", 4), res(4, 3), res("8", 2), res(16, 1) })
  local code, err = run("mixed.t4.json", text)
  T.check(code == 2 and err:find("results[2].configuration.a: '2' is a number written as a string", 1, true) ~= nil,
          "a T4 knob of 1, '2', 4, '8', 16 (%d: %s)", code, err)
  local code2, err2, evals = run("mixed.t4.json", text, "--replay-check lenient")
  T.check(code2 == 0 and #evals == 3, "lenient: the entries of the odd kind are skipped (%d evals; %s)", #evals, err2)
  -- (numbers beside words are a knob of two kinds, as before)
  local code3, err3 = run("words.t4.json", t4({ res(1, 5), res("auto", 4), res(4, 3) }))
  T.eq(code3, 0, "a T4 knob of 1, 'auto', 4\n" .. err3)
end

-- values beyond tune_params' list: those of kept entries only
do
  local text = '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "objective": "time", "cache": {' ..
    '"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}, "3": {"a": 3, "time": 1.5}, ' ..
    '"4": {"a": 4, "time": "0.5"}, "8": {"a": 16, "time": 3.0}}}'
  local code, err, evals = run("skipped_values.json", text, "--replay-check lenient")
  T.check(code == 0 and #evals == 3 and err:find("skipped 2 bad entries", 1, true) ~= nil,
          "lenient: two entries skipped, three replayed (%d, %d evals: %s)", code, #evals, err)
  T.eq(err:match("do not list (%b())"), "(a: 3)", "only the kept entry's value joins the space")
end

-- a key written twice: the duplicate policy of two spellings of one key
do
  local head = '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "objective": "time", "cache": {\n'
  local twice = head .. '"1": {"a": 1, "time": 1.0},\n"2": {"a": 2, "time": 2.0},\n"1": {"a": 1, "time": 9.0}}}'
  local code, err = run("twice.json", twice)
  T.check(code == 2 and err:find('line 4: cache["1"] is given twice (JSON keeps only the last one); remove one, or ' ..
                                 'replay with --replay-check lenient to keep the first', 1, true) ~= nil,
          "strict: a key written twice is refused (%d: %s)", code, err)
  local code2, err2, evals, stop = run("twice.json", twice, "--replay-check lenient")
  T.check(code2 == 0 and #evals == 2 and stop and stop.best and stop.best.time_ms == 1.0 and
          err2:find('skipped 1 bad entry (the first: cache["1"] (line 4): given twice; the first is kept)', 1, true)
          ~= nil, "lenient: the first of the two is kept and counted (%d, %d evals, best %s: %s)", code2, #evals,
          tostring(stop and stop.best and stop.best.time_ms), err2)
  local cut = head .. '"1": {"a": 1, "time": 5.0},\n"2": {"a": 2, "time": 3.0},\n"1": {"a": 1, "time": 1.0},\n' ..
    '"3": {"a": 3, "ti'
  code2, err2, evals = run("twice_cut.json", cut, "--replay-check lenient")
  T.check(code2 == 0 and #evals == 2 and
          err2:find('skipped 1 bad entry (the first: cache["1"] (line 4): given twice; the first is kept)', 1, true)
          ~= nil and not err2:find("internal error", 1, true),
          "lenient, cut short: the first of the two is kept (%d, %d evals: %s)", code2, #evals, err2)
  local field = head .. '"1": {"a": 1, "time": 1.0},\n"2": {"a": 2, "time": 2.0, "time": 0.5}}}'
  code, err = run("field_twice.json", field)
  T.check(code == 2 and err:find('line 3: cache["2"].time is given twice', 1, true) ~= nil,
          "strict: a field written twice is refused (%d: %s)", code, err)
  code2, err2, evals = run("field_twice.json", field, "--replay-check lenient")
  T.check(code2 == 0 and #evals == 1 and err2:find("the entry is skipped", 1, true) ~= nil,
          "lenient: the entry is skipped (%d, %d evals: %s)", code2, #evals, err2)
  code, err = run("params_twice.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2], "a": [1]}, ' ..
                  '"objective": "time", "cache": {"1": {"a": 1, "time": 1.0}}}', "--replay-check lenient")
  T.check(code == 2 and err:find("line 1: 'tune_params.a' is given twice (JSON keeps only the last one; merge the two)",
                                 1, true) ~= nil, "a key twice outside the cache is refused (%d: %s)", code, err)
end

T.strict_json(tmp, "every file of the runs")
os.execute("rm -rf '" .. tmp .. "' '" .. inputs .. "'")
return T.done()
