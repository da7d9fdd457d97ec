-- Unusual recordings a user can have (found by writing them): each case
-- failed before its fix.
-- * String knob values holding the key separator (',') merged two configs
--   and gave the fastest the other's time.
-- * A sparse recorded space (300 configs of a 10^6 product) left anneal,
--   genetic and the surrogate with nothing to measure: they stopped at 0.
-- * A NaN knob value ended in a Lua traceback.
-- * A T4 time written as a string ('1.0') was replayed as a failure.
-- * A unit in the objective's name (latency_us, time_s) was ignored: times
--   1000x off.
-- * A T4 result marked correct without the objective's measurement was a
--   silent failure ("no valid configuration found").
-- * Two spaces of one file name in `kopt compare` shared a label and a chart.
-- * A spec replayed on a recording of part of its space drew configs the
--   recording lacks (invalid, free) and stopped as stalled: exhaustive after
--   5 evaluations of 60 recorded.
-- * A Kernel Tuner cache tuned for GFLOP/s (every entry still records its
--   time) and a T4 file whose objective is GFLOP/s beside a time were
--   refused; they replay by the time, with a note.
-- * Boolean knob values (Kernel Tuner tunes True and False) were refused;
--   they replay as the strings "True" and "False".
-- * A knob of thousands of values made MCGS's region scoring quadratic in
--   them: 20 evaluations of one 5000-value knob took 20 s.
-- * A Kernel Tuner cache key that disagrees with its entry's fields was
--   read by the fields without a word (Kernel Tuner reads it by the key).
-- * A parameter of tune_params missing from tune_params_keys was dropped
--   from every configuration: half the entries refused as duplicates.
-- * --resume on a recording whose contents changed since mixed old and new
--   times.
-- * kopt's own results.json of a spec tuned for GFLOP/s replayed by time
--   without the note a Kernel Tuner file of that objective gets.
-- * A cache tuned for a time of another name (total_time), whose writer
--   left out objective_higher_is_better, was taken as maximised and
--   replayed by 'time': the slowest total crowned.
-- * A cache resumed with more values of a parameter (Kernel Tuner checks
--   only the names, so the header keeps the old lists) was refused.
-- * A numpy float32 knob (key "0.1", field 0.10000000149011612) was
--   refused as a key that disagrees with its entry.
-- * The Greek mu (U+03BC) and msec/usec were unknown units.
-- * KTT's CompilationFailed and ValidationFailed replayed as launch errors;
--   a gzip-compressed file was "not valid JSON"; a T4 energy objective that
--   also records a time said no measurement is a time.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("recordings-unusual")
local function t4(results)
  return cjson.encode({ schema_version = "1.0.0", metadata = { timeunit = "ms" }, results = results })
end
local function res(config, ms, name, unit)
  return { configuration = config, invalidity = "correct", objectives = { name or "time" },
           measurements = { { name = name or "time", value = ms, unit = unit } } }
end

-- comma in string values: four configs, the fastest 1 ms
T.write(tmp .. "/comma.t4.json", t4({ res({ x = "a,b", y = "c" }, 1.0), res({ x = "a", y = "b,c" }, 5.0),
                                      res({ x = "a,b", y = "b,c" }, 3.0), res({ x = "a", y = "c" }, 4.0) }))
local _, code, out, err
code, out, err = T.run("exhaustive --backend replay:" .. tmp .. "/comma.t4.json -q --out " .. tmp .. "/comma")
T.eq(code, 0, "commas: exit code\n" .. err)
local evals, stop = T.events(tmp .. "/comma")
T.eq(#evals, 4, "commas: four configs, not three")
T.check(stop and stop.best and stop.best.time_ms == 1.0, "commas: the best is 1 ms\n%s", out)

-- sparse: 6 knobs x 10 values, 300 recorded configs
do
  local cache, tp, keys = {}, {}, { "a", "b", "c", "d", "e", "f" }
  for _, k in ipairs(keys) do tp[k] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 } end
  local seen, n, s = {}, 0, 7
  while n < 300 do
    local e, key = {}, {}
    for i, k in ipairs(keys) do
      s = (s * 1103515245 + 12345) % 2147483648
      e[k] = s % 10
      key[i] = tostring(e[k])
    end
    local ks = table.concat(key, ",")
    if not seen[ks] then
      seen[ks], n = true, n + 1
      e.time = 1 + (s % 1000) / 1000
      cache[ks] = e
    end
  end
  T.write(tmp .. "/sparse.json", cjson.encode({ tune_params_keys = keys, tune_params = tp, objective = "time",
                                                 cache = cache }))
  for _, strat in ipairs({ "anneal", "genetic", "surrogate" }) do
    code, out, err = T.run(string.format("%s --backend replay:%s/sparse.json --budget 40 -q --out %s/sp_%s", strat,
                                         tmp, tmp, strat))
    T.eq(code, 0, strat .. " on a sparse space: exit code\n" .. err)
    T.eq(#(T.events(tmp .. "/sp_" .. strat)), 40, strat .. ": 40 evaluations on a sparse recorded space\n" .. out)
  end
end

-- a small space fully recorded (12 two-valued knobs, 4096 configs) with a
-- budget above its size: mcgs and rules measure every config (their samples
-- kept finding measured ones near the end: 4017 and 4013 before)
do
  local cache, tp, keys, s = {}, {}, {}, 11
  for i = 1, 12 do keys[i] = "k" .. i tp[keys[i]] = { 0, 1 } end
  for bits = 0, 4095 do
    local e, key = {}, {}
    for i = 1, 12 do
      e[keys[i]] = (bits >> (i - 1)) & 1
      key[i] = tostring(e[keys[i]])
    end
    s = (s * 1103515245 + 12345) % 2147483648
    e.time = 1 + (s % 100000) / 100000
    cache[table.concat(key, ",")] = e
  end
  T.write(tmp .. "/full12.json", cjson.encode({ tune_params_keys = keys, tune_params = tp, objective = "time",
                                                 objective_higher_is_better = false, cache = cache }))
  for _, strat in ipairs({ "mcgs", "rules" }) do
    code, _, err = T.run(string.format("%s --backend replay:%s/full12.json --budget 4200 -q --out %s/full_%s", strat,
                                         tmp, tmp, strat))
    T.eq(code, 0, strat .. " on a full small space: exit code\n" .. err)
    T.eq(#(T.events(tmp .. "/full_" .. strat)), 4096, strat .. ": every config of a 4096-config space measured")
  end
end

-- NaN knob value: one sentence, no traceback
T.write(tmp .. "/nan.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [NaN, 1]}, "objective": "time", ' ..
        '"cache": {"1": {"a": 1, "time": 2.0}}}')
code, _, err = T.run("random --backend replay:" .. tmp .. "/nan.json -q --out " .. tmp .. "/nan")
T.eq(code, 2, "NaN knob: exit code")
T.check(T.one_sentence(err, "NaN knob"):find("tune_params.a[1]: NaN is not a knob value", 1, true), "NaN knob: %s", err)

-- a T4 time written as a string
T.write(tmp .. "/strtime.t4.json", t4({ res({ a = 1 }, "1.0"), res({ a = 2 }, 2.0) }))
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/strtime.t4.json -q --out " .. tmp .. "/strtime")
T.eq(code, 2, "T4 string time: exit code")
T.check(T.one_sentence(err, "T4 string time"):find("results[1].measurements[1].value: a time written as a string ('1.0')",
        1, true), "T4 string time: %s", err)

-- units in the objective's name: T4 without a unit, and a Kernel Tuner cache
T.write(tmp .. "/us.t4.json", cjson.encode({ schema_version = "1.0.0", results = {
  res({ a = 1 }, 1000, "latency_us"), res({ a = 2 }, 3000, "latency_us") } }))
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/us.t4.json -q --out " .. tmp .. "/us")
T.eq(code, 0, "latency_us: exit code\n" .. err)
_, stop = T.events(tmp .. "/us")
T.check(stop and stop.best and math.abs(stop.best.time_ms - 1.0) < 1e-12, "latency_us: 1000 us is 1 ms (got %s)",
        tostring(stop and stop.best and stop.best.time_ms))
T.write(tmp .. "/s.json", cjson.encode({ tune_params_keys = { "a" }, tune_params = { a = { 1, 2 } }, objective = "time_s",
  objective_higher_is_better = false,
  cache = { ["1"] = { a = 1, time_s = 0.002 }, ["2"] = { a = 2, time_s = 0.004 } } }))
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/s.json -q --out " .. tmp .. "/s")
T.eq(code, 0, "time_s: exit code\n" .. err)
_, stop = T.events(tmp .. "/s")
T.check(stop and stop.best and math.abs(stop.best.time_ms - 2.0) < 1e-12, "time_s: 0.002 s is 2 ms (got %s)",
        tostring(stop and stop.best and stop.best.time_ms))

-- a correct result without the objective's measurement
T.write(tmp .. "/noobj.t4.json", cjson.encode({ schema_version = "1.0.0", results = {
  { configuration = { a = 1 }, invalidity = "correct", objectives = { "runtime" },
    measurements = { { name = "time", value = 1, unit = "ms" } } } } }))
code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/noobj.t4.json -q --out " .. tmp .. "/noobj")
T.eq(code, 2, "missing objective: exit code")
T.check(T.one_sentence(err, "missing objective"):find("no 'runtime' measurement", 1, true), "missing objective: %s", err)

-- compare: two spaces named alike get their folders in the label
local d1, d2 = T.tmpdir("cmp-d1"), T.tmpdir("cmp-d2")
T.write(d1 .. "/space.json", T.slurp(tmp .. "/s.json"))
T.write(d2 .. "/space.json", T.slurp(tmp .. "/sparse.json"))
code, _, err = T.run(string.format("compare --strategies random --spaces %s/space.json,%s/space.json --seeds 1-2 " ..
                                   "--budgets 5,10 --out %s/cmp -q", d1, d2, tmp))
T.eq(code, 0, "compare, two files named alike: exit code\n" .. err)
local md = T.slurp(tmp .. "/cmp/benchmark.md")
local l1, l2 = d1:match("([^/]+)$") .. "/space", d2:match("([^/]+)$") .. "/space"
T.check(md:find("### " .. l1, 1, true) and md:find("### " .. l2, 1, true), "compare: labels %s and %s", l1, l2)
T.check(T.exists(tmp .. "/cmp/img/" .. l1:gsub("[%./#]", "_") .. ".svg") and
        T.exists(tmp .. "/cmp/img/" .. l2:gsub("[%./#]", "_") .. ".svg"), "compare: one chart per space")

-- a spec with a recording of part of its space: the search runs over the
-- recorded configs the spec allows
do
  local kt = cjson.decode(T.slurp("tests/data/convolution_A100.json"))
  local keys = {}
  for k in pairs(kt.cache) do keys[#keys + 1] = k end
  table.sort(keys)
  local part = {}
  for i = 1, #keys, 70 do part[keys[i]] = kt.cache[keys[i]] end
  kt.cache = part
  local n = 0
  for _ in pairs(part) do n = n + 1 end
  T.write(tmp .. "/part.json", cjson.encode(kt))
  code, _, err = T.run("exhaustive specs/convolution.json --backend replay:" .. tmp .. "/part.json --budget 500 -q " ..
                       "--out " .. tmp .. "/part")
  T.eq(code, 0, "a partial recording: exit code\n" .. err)
  local ev, st = T.events(tmp .. "/part")
  T.eq(#ev, n, "a partial recording: exhaustive measures every recorded config")
  T.eq(st and st.reason, "strategy finished", "a partial recording: not stalled")
  T.check(err:find("holds " .. n .. " of the 4362 configurations", 1, true), "a partial recording: the note\n%s", err)
  -- (these stopped as stalled after 26, 19 and 4 evaluations on this subset)
  for _, s in ipairs({ "mcgs", "random", "anneal" }) do
    code, _, err = T.run(s .. " specs/convolution.json --backend replay:" .. tmp .. "/part.json --budget 40 -q " ..
                         "--out " .. tmp .. "/part_" .. s)
    T.eq(code, 0, "a partial recording, " .. s .. ": exit code\n" .. err)
    T.eq(#(T.events(tmp .. "/part_" .. s)), 40, "a partial recording, " .. s .. ": 40 evaluations")
  end
end

-- tuned for GFLOP/s, times recorded: replayed by the times
do
  local cache = {}
  for a = 1, 4 do cache[tostring(a)] = { a = a, time = 1 / a, ["GFLOP/s"] = 100 * a } end
  T.write(tmp .. "/kt_gflops.json", cjson.encode({ tune_params_keys = { "a" }, tune_params = { a = { 1, 2, 3, 4 } },
                                                   objective = "GFLOP/s", cache = cache }))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/kt_gflops.json --out " .. tmp .. "/ktg")
  T.eq(code, 0, "a cache tuned for GFLOP/s: exit code\n" .. err)
  local _, st = T.events(tmp .. "/ktg")
  T.check(st and st.best and st.best.time_ms == 0.25, "a cache tuned for GFLOP/s: the best is 0.25 ms")
  T.check(err:find("was tuned for 'GFLOP/s'; it is replayed by the time", 1, true), "a cache tuned for GFLOP/s: %s", err)
  local results = {}
  for a = 1, 4 do
    results[a] = { configuration = { a = a }, invalidity = "correct", objectives = { "GFLOP/s" },
                   measurements = { { name = "GFLOP/s", value = 100 * a, unit = "GFLOP/s" },
                                    { name = "time", value = 1 / a, unit = "ms" } } }
  end
  T.write(tmp .. "/t4_gflops.json", t4(results))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/t4_gflops.json --out " .. tmp .. "/t4g")
  T.eq(code, 0, "a T4 file for GFLOP/s: exit code\n" .. err)
  _, st = T.events(tmp .. "/t4g")
  T.check(st and st.best and st.best.time_ms == 0.25, "a T4 file for GFLOP/s: the best is 0.25 ms")
end

-- boolean knob values
do
  local cache = {}
  for _, b in ipairs({ true, false }) do
    for x = 1, 2 do
      cache[(b and "True" or "False") .. "," .. x] = { b = b, x = x, time = (b and 2 or 1) + x }
    end
  end
  T.write(tmp .. "/bool.json", cjson.encode({ tune_params_keys = { "b", "x" }, tune_params = { b = { true, false },
                                              x = { 1, 2 } }, objective = "time", cache = cache }))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/bool.json -q --out " .. tmp .. "/bool")
  T.eq(code, 0, "boolean knob values: exit code\n" .. err)
  local ev, st = T.events(tmp .. "/bool")
  T.eq(#ev, 4, "boolean knob values: four configs")
  T.check(st and st.best and st.best.key == "False,1", "boolean knob values: the best is b=False x=1")
end

-- one knob of 4000 values: MCGS's stall regions are scored in time linear in
-- the values (before: about 15 s for these 25 evaluations)
do
  local results = {}
  for i = 0, 3999 do results[#results + 1] = res({ x = i }, 1 + ((i * 7919) % 4000) / 100) end
  T.write(tmp .. "/long.t4.json", t4(results))
  local sys = require("kopt.sys")
  local t0 = sys.now()
  code, _, err = T.run("mcgs --backend replay:" .. tmp .. "/long.t4.json --budget 25 -q --out " .. tmp .. "/long")
  local took = sys.now() - t0
  T.eq(code, 0, "a 4000-value knob: exit code\n" .. err)
  T.eq(#(T.events(tmp .. "/long")), 25, "a 4000-value knob: 25 evaluations")
  T.check(took < 8, "a 4000-value knob: 25 MCGS evaluations took %.1f s", took)
end

-- a Kernel Tuner key that names other values than its entry: refused in
-- strict mode (naming both), skipped in lenient mode
do
  local function kt(cache, params)
    return cjson.encode({ tune_params_keys = { "x", "y" }, tune_params = params or { x = { 1, 2 }, y = { 0.5, 8 } },
                          objective = "time", cache = cache })
  end
  T.write(tmp .. "/keymis.json", kt({ ["1,0.5"] = { x = 2, y = 0.5, time = 0.5 }, ["2,8"] = { x = 2, y = 8, time = 3 },
                                      ["1,8"] = { x = 1, y = 8, time = 4 } }))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/keymis.json -q --out " .. tmp .. "/keymis")
  T.check(code == 2 and err:find('cache["1,0.5"]: the key says x=1, the entry says x=2', 1, true) ~= nil,
          "a key that disagrees with its entry (%d):\n%s", code, err)
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/keymis.json --replay-check lenient -q --out " ..
                       tmp .. "/keymis_l")
  T.eq(code, 0, "a key that disagrees with its entry, lenient: exit code\n" .. err)
  T.eq(#(T.events(tmp .. "/keymis_l")), 2, "a key that disagrees with its entry, lenient: the two others replayed")
  -- Python's spellings of the same values agree: 8.0 for 8, 5e-01 for 0.5
  T.write(tmp .. "/keyok.json", kt({ ["1,5e-01"] = { x = 1, y = 0.5, time = 1 }, ["2,8.0"] = { x = 2, y = 8, time = 2 } }))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/keyok.json -q --out " .. tmp .. "/keyok")
  T.eq(code, 0, "keys in Python's other spellings of the values\n" .. err)
  -- a tuned parameter left out of tune_params_keys
  T.write(tmp .. "/nokey.json", cjson.encode({ tune_params_keys = { "x" }, tune_params = { x = { 1, 2 }, b = { 10, 20 } },
                                               objective = "time", cache = { ["1,10"] = { x = 1, b = 10, time = 2 },
                                                                             ["1,20"] = { x = 1, b = 20, time = 0.5 } } }))
  code, _, err = T.run("exhaustive --backend replay:" .. tmp .. "/nokey.json -q --out " .. tmp .. "/nokey")
  T.check(code == 2 and err:find("tune_params.b is not in tune_params_keys", 1, true) ~= nil,
          "a parameter missing from tune_params_keys (%d):\n%s", code, err)
end

-- --resume refuses a recording whose contents changed since the run began
do
  local function rec(times)
    local results = {}
    for i, ms in ipairs(times) do results[i] = res({ x = i }, ms) end
    T.write(tmp .. "/changing.t4.json", t4(results))
  end
  rec({ 1, 2, 3, 4 })
  local cmd = "exhaustive --backend replay:" .. tmp .. "/changing.t4.json -q --out " .. tmp .. "/changing"
  code, _, err = T.run(cmd .. " --budget 2")
  T.eq(code, 0, "a recording, first run\n" .. err)
  code, _, err = T.run(cmd .. " --budget 3 --resume")
  T.eq(code, 0, "the same recording, resumed\n" .. err)
  rec({ 1000, 2000, 3000, 0.9 })
  code, _, err = T.run(cmd .. " --budget 4 --resume")
  T.check(code == 2 and err:find("the file has changed since", 1, true) ~= nil,
          "a changed recording is not resumed (%d):\n%s", code, err)
  T.eq(#(T.events(tmp .. "/changing")), 3, "a changed recording: the record is left as it was")
end

-- KTT failure statuses keep their kind; a gzip file and an energy objective
-- are named for what they are
do
  local recording = require("kopt.recording")
  local function ktt(status)
    return { KernelName = "k", Status = status, TotalDuration = 5, TotalOverhead = 0,
             ComputationResults = { { Configuration = { { Name = "x", Value = 1 } } } },
             Configuration = { { Name = "x", Value = status == "Ok" and 1 or (status == "CompilationFailed" and 2 or 3) } } }
  end
  T.write(tmp .. "/ktt.json", cjson.encode({ Metadata = { TimeUnit = "Microseconds" },
                                             Results = { ktt("Ok"), ktt("CompilationFailed"), ktt("ValidationFailed") } }))
  local r, e = recording.read(tmp .. "/ktt.json")
  T.check(r ~= nil, "a KTT file: %s", tostring(e))
  local by = {}
  for _, entry in ipairs(r and r.entries or {}) do by[entry.config.x] = entry.status end
  T.eq(by[2], "compile_error", "KTT CompilationFailed")
  T.eq(by[3], "wrong", "KTT ValidationFailed")
  os.execute(string.format("gzip -c '%s' > '%s'", tmp .. "/ktt.json", tmp .. "/ktt.json.gz"))
  r, e = recording.read(tmp .. "/ktt.json.gz")
  T.check(r == nil and tostring(e):find("gzip-compressed: gunzip it first", 1, true) ~= nil, "a gzip file: %s",
          tostring(e))
  local function energy(ms)
    return { configuration = { x = ms }, invalidity = "correct", objectives = { "energy" },
             measurements = { { name = "energy", unit = "J", value = ms / 2 }, { name = "time", unit = "ms", value = ms } } }
  end
  -- kopt's own results.json of a spec tuned for GFLOP/s: replayed by time, said so
  T.write(tmp .. "/own.t4.json", cjson.encode({ schema_version = "1.0.0",
    metadata = { objective = { metric = "GFLOP/s", goal = "max" } }, results = { res({ x = 1 }, 2), res({ x = 2 }, 1) } }))
  r, e = recording.read(tmp .. "/own.t4.json")
  T.check(r ~= nil and table.concat(recording.notes(r), "\n"):find("was tuned for 'GFLOP/s'", 1, true) ~= nil,
          "kopt's results.json of a GFLOP/s objective: a note (%s)", tostring(e))
  T.write(tmp .. "/energy.t4.json", t4({ energy(1), energy(2) }))
  r, e = recording.read(tmp .. "/energy.t4.json")
  T.check(r == nil and tostring(e):find("objective 'energy' is not a time (unit 'J') (its 'time' ranks by something " ..
                                        "else)", 1, true) ~= nil, "an energy objective beside a time: %s", tostring(e))
end

-- Kernel Tuner caches as its writer leaves them
do
  local function best_of(name, doc)
    T.write(tmp .. "/" .. name .. ".json", cjson.encode(doc))
    local c, _, e = T.run("exhaustive --backend replay:" .. tmp .. "/" .. name .. ".json --out " .. tmp .. "/r_" .. name)
    local _, st = T.events(tmp .. "/r_" .. name)
    return c, st and st.best, e
  end
  -- tuned for total_time (a pipeline's), each entry also records its first kernel's time
  local cache = {}
  for i, bx in ipairs({ 128, 256, 512 }) do
    cache[tostring(bx)] = { block_size_x = bx, time = 1.0 - 0.2 * i, total_time = 1.0 + 0.2 * i }
  end
  local c, best, e = best_of("kt_total_time", { tune_params_keys = { "block_size_x" },
    tune_params = { block_size_x = { 128, 256, 512 } }, objective = "total_time", cache = cache })
  T.eq(c, 0, "total_time: exit code\n" .. e)
  T.check(best and best.key == "128" and math.abs(best.time_ms - 1.2) < 1e-9,
          "total_time is minimised: the best is block_size_x=128 at 1.2 ms (%s)", cjson.encode(best or {}))
  -- a time marked higher-is-better (a writer's slip): minimised, and said so
  -- (it was said to be "tuned for 'time'" and replayed by its times)
  c, best, e = best_of("kt_time_higher", { tune_params_keys = { "block_size_x" },
    tune_params = { block_size_x = { 128, 256, 512 } }, objective = "time", objective_higher_is_better = true,
    cache = cache })
  T.eq(c, 0, "time marked higher-is-better: exit code\n" .. e)
  T.check(best and best.key == "512", "time marked higher-is-better is minimised (%s)", cjson.encode(best or {}))
  T.check(e:find("objective_higher_is_better is true for 'time', a time: it is minimised", 1, true) and
          not e:find("was tuned for", 1, true), "time marked higher-is-better: the note: %s", e)
  -- resumed with a larger bx: the header lists [16, 32], the entries use 64 too
  cache = {}
  for _, bx in ipairs({ 16, 32, 64 }) do
    for _, by in ipairs({ 1, 2 }) do cache[bx .. "," .. by] = { bx = bx, by = by, time = 1 + 1 / bx + by / 8 } end
  end
  c, best, e = best_of("kt_resumed", { tune_params_keys = { "bx", "by" }, tune_params = { bx = { 16, 32 }, by = { 1, 2 } },
                                       objective = "time", cache = cache })
  T.eq(c, 0, "a resumed cache: exit code\n" .. e)
  T.check(best and best.key == "64,1", "a resumed cache: the best uses the added value (%s)",
          cjson.encode(best or {}))
  T.check(e:find("use values its tune_params do not list (bx: 64)", 1, true), "a resumed cache: says so: %s", e)
  -- float32 knob values: key "0.1", field as the double
  cache = {}
  for i, f in ipairs({ 0.1, 0.2, 0.3 }) do
    local f32 = string.unpack("<f", string.pack("<f", f))
    cache[tostring(f)] = { f = f32, time = i }
  end
  local list = {}
  for i, f in ipairs({ 0.1, 0.2, 0.3 }) do list[i] = string.unpack("<f", string.pack("<f", f)) end
  c, best, e = best_of("kt_f32", { tune_params_keys = { "f" }, tune_params = { f = list }, objective = "time", cache = cache })
  T.eq(c, 0, "float32 knob values: exit code\n" .. e)
  T.check(best and best.time_ms == 1, "float32 knob values: replayed (%s)", cjson.encode(best or {}))
  -- a T4 time in μs (the Greek letter) and in usec
  for _, unit in ipairs({ "\206\188s", "usec" }) do
    local results = {}
    for a = 1, 2 do
      results[a] = { configuration = { a = a }, invalidity = "correct", objectives = { "time" },
                     measurements = { { name = "time", value = 1000 * a, unit = unit } } }
    end
    T.write(tmp .. "/t4_unit.json", t4(results))
    local c2, _, e2 = T.run("exhaustive --backend replay:" .. tmp .. "/t4_unit.json --out " .. tmp .. "/t4u")
    local _, st = T.events(tmp .. "/t4u")
    T.check(c2 == 0 and st and st.best and st.best.time_ms == 1, "a T4 time in %s is read (%s)", unit, e2)
    os.execute("rm -rf '" .. tmp .. "/t4u'")
  end
end

os.execute("rm -rf '" .. tmp .. "' '" .. d1 .. "' '" .. d2 .. "'")
return T.done()
