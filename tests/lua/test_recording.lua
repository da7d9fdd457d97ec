-- Readers of recorded spaces: Kernel Tuner caches (also cut-off ones), T4 and
-- KTT files. Counts and best values are those INDEX.tsv of the data set lists.
local T = require("testlib")
local recording = require("kopt.recording")

local function summary(rec)
  local s = { n = #rec.entries, ok = 0, best = math.huge, status = {} }
  for _, e in ipairs(rec.entries) do
    s.status[e.status] = (s.status[e.status] or 0) + 1
    if e.status == "ok" then
      s.ok = s.ok + 1
      if e.time_ms < s.best then s.best = e.time_ms end
    end
  end
  return s
end

local function near(a, b) return math.abs(a - b) <= 1e-9 * math.max(math.abs(a), math.abs(b)) end

local conv = assert(recording.read("tests/data/convolution_A100.json"))
local s = summary(conv)
T.eq(s.n, 4362, "convolution A100 entries")
T.eq(s.ok, 4201, "convolution A100 valid")
T.eq(s.status.launch_error, 155, "RuntimeFailedConfig entries")
T.eq(s.status.compile_error, 6, "CompilationFailedConfig entries")
T.check(near(s.best, 0.5536000076681376), "convolution A100 best %s", s.best)
T.eq(#conv.knobs, 10, "convolution knobs")
T.eq(conv.knobs[1].name, "block_size_x", "knob order follows tune_params_keys")
T.check(conv.entries[1].cost_s > 0, "recorded evaluation cost is charged")

local pn = assert(recording.read("tests/data/pnpoly_RTX_3090.json"))
s = summary(pn)
T.eq(s.ok, 3774, "pnpoly valid")
T.check(near(s.best, 8.714240169525146), "pnpoly best %s", s.best)

local ktt = assert(recording.read("tests/data/coulomb_2080.json"))
local t4 = assert(recording.read("tests/data/coulomb_2080.t4.json"))
local sk, st = summary(ktt), summary(t4)
T.eq(sk.n, 210, "KTT entries")
T.eq(st.n, 210, "T4 entries")
T.check(near(sk.best, 0.769696), "KTT best %s ms (769.696 us)", sk.best)
T.check(near(st.best, 0.769696), "T4 best %s ms", st.best)
T.eq(ktt.format, "ktt", "KTT format detected")
T.eq(t4.format, "t4", "T4 format detected")
local m = ktt.entries[1].metrics
T.check(m and m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] ~= nil, "KTT counters are kept as metrics")
T.check(ktt.entries[1].resources.regs ~= nil, "KTT register counts are kept")

-- Cut-off Kernel Tuner caches, as an interrupted run leaves them.
local tmp = T.tmpdir("rec")
local text = T.slurp("tests/data/vector_add_A4000.json")
local cut = text:gsub("%s*}%s*}%s*$", "")
T.write(tmp .. "/open.json", cut .. ",\n")
local rec = assert(recording.read(tmp .. "/open.json"))
T.eq(#rec.entries, 15, "entries of a cache without its closing braces")
T.check(rec.repaired, "the reader says it repaired the file")
T.write(tmp .. "/torn.json", cut:sub(1, #cut - 300))
rec = assert(recording.read(tmp .. "/torn.json"))
T.eq(#rec.entries, 14, "entries of a cache cut in the middle of its last entry")
-- cut right after an entry's closing brace (before its comma): the file
-- ends in a brace like a complete one, but opens more than it closes
T.write(tmp .. "/brace.json", cut)
rec = assert(recording.read(tmp .. "/brace.json"))
T.eq(#rec.entries, 15, "entries of a cache cut right after an entry's closing brace")
T.write(tmp .. "/header.json", text:sub(1, 200))
local bad, err = recording.read(tmp .. "/header.json")
T.check(bad == nil and err:find("could not be repaired", 1, true), "a cache cut in its header: %s", tostring(err))
-- KTT results kopt cannot read as they are: an Ok without its time, no
-- status, an unknown one ("ok"); each was replayed as a launch error, even
-- in strict mode, and could hide the optimum
do
  local json = require("kopt.json")
  local function ktt_of(edit)
    local r = {}
    for i, t in ipairs({ 5000.0, 3000.0, 1000.0 }) do
      r[i] = { KernelName = "k", Configuration = { { Name = "bs", Value = i } }, Status = "Ok", TotalDuration = t,
               TotalOverhead = 1.0 }
    end
    edit(r[3])
    T.write(tmp .. "/ktt.json", json.encode({ Metadata = { TimeUnit = "Microseconds" }, Results = r }))
    return recording.read(tmp .. "/ktt.json")
  end
  local cases = {
    { function(e) e.TotalDuration = nil end, "Results[3].TotalDuration: a result of Status Ok must record its time" },
    { function(e) e.Status = nil end, "Results[3].Status: missing" },
    { function(e) e.Status = "ok" end, "Results[3].Status: 'ok' is not a KTT status" },
  }
  for _, c in ipairs(cases) do
    local r2, e2 = ktt_of(c[1])
    T.check(r2 == nil and tostring(e2):find(c[2], 1, true), "KTT: %s: %s", c[2], tostring(e2))
  end
  local r3 = ktt_of(function(e) e.Status = "ComputationFailed" end)
  T.check(r3 and r3.entries[3].status == "launch_error", "KTT: ComputationFailed is a launch error")
end
-- objective_higher_is_better that is no boolean (null, "false"): read as
-- true, with a note that said so
do
  local json = require("kopt.json")
  local doc = json.decode(text)
  doc.objective_higher_is_better = "false"
  T.write(tmp .. "/hib.json", json.encode(doc))
  local r4, e4 = recording.read(tmp .. "/hib.json")
  T.check(r4 == nil and tostring(e4):find("objective_higher_is_better: expected true or false, got 'false'", 1, true),
          "a string for objective_higher_is_better: %s", tostring(e4))
  doc.objective_higher_is_better = json.null
  T.write(tmp .. "/hib.json", json.encode(doc))
  r4 = recording.read(tmp .. "/hib.json")
  T.check(r4 and not r4.direction_ignored, "null is no direction")
end
-- the exact random baseline with a subnormal optimum: opt * p underflowed
-- to 0 before the division
do
  local bs = require("kopt.benchstats")
  local _, frac = bs.random_expectation({ sorted = { 5e-324, 1.0 }, entries = 2, valid = 2, opt = 5e-324, worst = 1.0 }, 1)
  T.check(math.abs(frac - 0.5) < 1e-9, "one draw of two, the optimum subnormal: fraction 0.5, got %s", tostring(frac))
end
-- a T4 file without metadata.timeunit: the cost of an entry before the
-- first measurement with a unit (a compile error) was read in ms, the rest
-- in that unit (us): one unit for the whole file
do
  local json = require("kopt.json")
  T.write(tmp .. "/us.t4.json", json.encode({ results = {
    { configuration = { a = 1 }, invalidity = "compile", measurements = {}, times = { compilation = 5000000 } },
    { configuration = { a = 2 }, invalidity = "correct", objectives = { "time" },
      measurements = { { name = "time", unit = "us", value = 100 } }, times = { compilation = 5000000 } },
  } }))
  local ur = assert(recording.read(tmp .. "/us.t4.json"))
  for _, e in ipairs(ur.entries) do
    T.check(math.abs(e.cost_s - 5) < 1e-9, "entry %s: 5000000 us is 5 s, got %s", tostring(e.config.a), tostring(e.cost_s))
  end
end
-- a whole cache with a brace missing inside (its closing braces in place):
-- it was "repaired" as if cut short, and the entries after the damage (the
-- optimum among them) were dropped without a word
do
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  local at
  for i, l in ipairs(lines) do if not at and i > 3 and l:find("},%s*$") then at = i end end
  lines[at] = lines[at]:gsub("},%s*$", ",")
  T.write(tmp .. "/inner.json", table.concat(lines, "\n") .. "\n")
  bad, err = recording.read(tmp .. "/inner.json")
  T.check(bad == nil and err:find("damaged inside, not cut short", 1, true), "a brace missing inside: %s", tostring(err))
  -- Kernel Tuner's own ending, "...}}\n}" (the last entry on the cache's
  -- line): it was read as cut short, keeping 2 of 4092 entries
  local pntext = T.slurp("tests/data/pnpoly_RTX_3090.json")
  local plines = {}
  for l in pntext:gmatch("[^\n]+") do plines[#plines + 1] = l end
  plines[73] = plines[73]:gsub("},%s*$", ",")
  T.write(tmp .. "/pn.json", table.concat(plines, "\n") .. "\n")
  bad, err = recording.read(tmp .. "/pn.json")
  T.check(bad == nil and tostring(err):find("damaged inside, not cut short", 1, true),
          "a Kernel Tuner cache with a brace missing inside: %s", tostring(err))
  T.check(#assert(recording.read("tests/data/pnpoly_RTX_3090.json")).entries == 4092, "the whole file reads whole")
  -- only the file's last brace missing: every entry is whole and read
  -- (Kernel Tuner's layout dropped its last entry; a pretty-printed one was
  -- refused as damaged)
  for f, n in pairs({ ["tests/data/pnpoly_RTX_3090.json"] = 4092, ["tests/data/vector_add_A4000.json"] = 15 }) do
    local t = T.slurp(f):gsub("}%s*$", "")
    T.write(tmp .. "/last.json", t)
    local lr, le = recording.read(tmp .. "/last.json")
    T.check(lr and #lr.entries == n, "%s without its last brace: %s entries of %d (%s)", f, lr and #lr.entries or "no",
            n, tostring(le))
  end
end

-- a replay's results.json keeps what each evaluation cost: replayed again
-- under --time-limit it spends the same simulated time
do
  local kopt = os.getenv("KOPT") or "./build/kopt"
  local a, b = tmp .. "/cost_a", tmp .. "/cost_b"
  local function run(args)
    local p = io.popen(string.format("KOPT_DB=off %s random --budget 30 --time-limit 3 -q %s 2>&1", kopt, args))
    local out = p:read("a")
    p:close()
    return tonumber(out:match("(%d+) evaluations")), out
  end
  local n1 = run("--backend replay:tests/data/softmax_h200.t4.json --out " .. a)
  os.execute(string.format("KOPT_DB=off %s random --budget 30 -q --backend replay:tests/data/softmax_h200.t4.json " ..
                           "--out %s > /dev/null 2>&1", kopt, b))
  local n2, out = run("--backend replay:" .. b .. "/results.json --out " .. tmp .. "/cost_c")
  T.check(n1 and n1 < 30 and n1 == n2, "a results.json replayed under --time-limit: %s evaluations, the " ..
          "recording %s:\n%s", tostring(n2), tostring(n1), out)
end

-- kopt's own T4 export read back: every status keeps its class (a crash,
-- which T4 has no class for, too).
local rundir = require("kopt.rundir")
local json = require("kopt.json")
local statuses = { "ok", "crash", "launch_error", "compile_error", "wrong", "timeout", "invalid" }
local records = {}
for i, status in ipairs(statuses) do
  records[i] = { config = { x = i }, timestamp = "2026-01-01T00:00:00Z",
                 result = { status = status, time_ms = status == "ok" and 1.5 or nil } }
end
json.write_file(tmp .. "/export.json", rundir.t4(records, { kopt = "test" }))
rec = assert(recording.read(tmp .. "/export.json"))
local back = {}
for _, e in ipairs(rec.entries) do back[math.tointeger(e.config.x)] = e.status end
T.eq(table.concat(back, " "), table.concat(statuses, " "), "statuses after a T4 export and read")

-- an edited kernel's result carries its source hash (the same knobs, other
-- code); a replay of the file measures the spec's kernel: the edited
-- results are left out with a note, not refused as duplicates
local edited = {
  { key = "x=1", config = { x = 1 }, timestamp = "2026-01-01T00:00:00Z", result = { status = "ok", time_ms = 2.0 } },
  { key = "x=1#8eeb37872c2053b6", config = { x = 1 }, timestamp = "2026-01-01T00:00:01Z",
    result = { status = "ok", time_ms = 1.0 } },
  { key = "x=2", config = { x = 2 }, timestamp = "2026-01-01T00:00:02Z", result = { status = "ok", time_ms = 3.0 } },
}
local doc = rundir.t4(edited, { kopt = "test" })
T.eq(doc.results[2].variant, "8eeb37872c2053b6", "the edited result's variant")
T.eq(doc.results[1].variant, nil, "the spec's kernel has no variant")
json.write_file(tmp .. "/edited.json", doc)
local rec2, why = recording.read(tmp .. "/edited.json")
T.check(rec2 and #rec2.entries == 2, "the spec kernel's two results are read: %s", tostring(why))
local notes = rec2 and table.concat(recording.notes(rec2), "\n") or ""
T.check(notes:find("1 results of edited kernels are left out", 1, true), "the note says so: %s", notes)

-- a T4 file with Python booleans (Kernel Tuner's T4 writer): read as
-- "True"/"False", as a Kernel Tuner cache spells them (it was an internal
-- error comparing booleans)
local function t4_file(name, entries)
  local results = {}
  for i, e in ipairs(entries) do
    results[i] = { configuration = e[1], invalidity = "correct", objectives = { "time" },
                   measurements = { { name = "time", value = e[2], unit = "ms" } } }
  end
  json.write_file(tmp .. "/" .. name, { schema_version = "1.0.0", results = results })
  return tmp .. "/" .. name
end
local brec, berr = recording.read(t4_file("bool.json", { { { bs = 1, smem = true }, 2.0 }, { { bs = 1, smem = false }, 1.0 },
                                                         { { bs = 2, smem = true }, 3.0 } }))
T.check(brec and #brec.entries == 3, "booleans in a T4 file: %s", tostring(berr))
local vals = {}
for _, k in ipairs(brec and brec.knobs or {}) do if k.name == "smem" then vals = k.values end end
T.eq(table.concat(vals, ","), "False,True", "boolean values as a Kernel Tuner cache spells them")

-- lenient mode keeps the parameter set most entries share: an odd first
-- entry is the one skipped, not every entry unlike it
local odd = { { { a = 1, b = 1, c = 1 }, 9.0 } }
for i = 1, 5 do odd[#odd + 1] = { { a = i, b = 2 }, i * 1.0 } end
local lrec, lerr = recording.read(t4_file("odd.json", odd), "lenient")
T.check(lrec and #lrec.entries == 5 and lrec.skipped and lrec.skipped.count == 1,
        "lenient: the five consistent entries are kept, the odd one skipped: %s", tostring(lerr))
local srec, serr = recording.read(tmp .. "/odd.json")
T.check(not srec and serr:find("results[2].configuration: has the parameters a, b where the recording's first entry " ..
                                "has a, b, c", 1, true), "strict: refused at the first entry unlike the first: %s",
        tostring(serr))

-- KTT, lenient, every entry bad: one sentence (it was an internal error)
T.write(tmp .. "/ktt_bad.json", [[{"Metadata": {"TimeUnit": "Microseconds"}, "Results": [
  {"KernelName": "k", "Status": "Ok", "TotalDuration": 100, "TotalOverhead": null, "Configuration": [{"Name": "a", "Value": 1}]},
  {"KernelName": "k", "Status": "Ok", "TotalDuration": 80, "TotalOverhead": null, "Configuration": [{"Name": "a", "Value": 2}]}]}]])
local krec, kerr = recording.read(tmp .. "/ktt_bad.json", "lenient")
T.check(not krec and tostring(kerr):find("records no usable configurations (2 bad entries skipped", 1, true),
        "KTT with every entry bad: %s", tostring(kerr))
-- a finite but huge recorded cost: the simulated clock says so (its
-- seconds were no integer to format: an internal error)
T.write(tmp .. "/huge.json", [[{"tune_params_keys":["a"],"tune_params":{"a":[1,2]},"cache":{
"1":{"a":1,"time":1.0,"compile_time":1e300,"verification_time":0,"benchmark_time":1},
"2":{"a":2,"time":2.0,"compile_time":300,"verification_time":0,"benchmark_time":1}}}]])
local hcode, hout, herr = T.run("random --backend replay:" .. tmp .. "/huge.json --out " .. tmp .. "/huge_run")
T.eq(hcode, 0, "a huge recorded cost: exit code (" .. herr .. ")")
T.check(hout:find(" h simulated", 1, true), "the simulated time in hours: %s", hout)

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
