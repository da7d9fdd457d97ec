-- Readers for recorded search spaces: Kernel Tuner cache files (including
-- ones whose closing braces are missing after an interrupted run), T4 results
-- files and KTT result files. Each becomes
--   { format=, device=, kernel=, knobs={ {name=, values=} }, objective=,
--     entries = { {config=, status=, time_ms=, samples=, cost_s=, metrics=} },
--     skipped = { count=, first= }, bad_times = { count=, first= } }
-- time_ms is the objective converted to milliseconds; cost_s is the recorded
-- compile + verify + benchmark time that replay charges to its simulated clock.
--
-- A recording is input like any other and is checked when it is read:
-- entries must be well-formed, inside the recording's own parameter space,
-- with a known time unit. In strict mode (the default) the first bad entry is
-- one sentence naming the file and the entry; in lenient mode bad entries are
-- skipped and counted. A time that is not finite and positive is not a
-- measurement: that entry is replayed as a failure whose log says why, in
-- either mode, so it can never be the best.
local errors = require("kopt.errors")
local json = require("kopt.json")
local sys = require("kopt.sys")

local M = {}
local drop_duplicates  -- (below)

local KT_FAILURES = {
  CompilationFailedConfig = "compile_error",
  RuntimeFailedConfig = "launch_error",
  InvalidConfig = "invalid",
}

-- Kernel Tuner's own marker for a failed config in old caches (1e20).
local KT_FAILED_NUMBER = 1e19

local function sorted_values(set)
  local list = {}
  for v in pairs(set) do list[#list + 1] = v end
  table.sort(list, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  return list
end

local function finite(x) return type(x) == "number" and x == x and x > -math.huge and x < math.huge end

local function stats(times)
  if type(times) ~= "table" or #times == 0 then return nil end
  local s = {}
  for i, t in ipairs(times) do s[i] = t end
  table.sort(s)
  local function q(p) return s[math.max(1, math.min(#s, math.floor(p * (#s - 1) + 0.5) + 1))] end
  return q(0.5), q(0.9), #s
end

-- "miliseconds" is how some T4 writers spell it (benchmark hub files).
local UNITS = { ms = 1, millisecond = 1, milliseconds = 1, miliseconds = 1, s = 1e3, sec = 1e3, second = 1e3, seconds = 1e3,
                us = 1e-3, ["µs"] = 1e-3, ["μs"] = 1e-3, microsecond = 1e-3, microseconds = 1e-3,
                ns = 1e-6, nanosecond = 1e-6, nanoseconds = 1e-6, msec = 1, usec = 1e-3, nsec = 1e-6, secs = 1e3 }

-- Milliseconds per `unit`, or nil for a unit kopt does not know.
local function unit_to_ms(unit)
  if type(unit) ~= "string" then return nil end
  return UNITS[unit:lower()]
end

-- The unit a measurement's name ends with ("time_s", "latency_us",
-- "duration-ns"): milliseconds per unit and the unit, or nil.
local function unit_of_name(name)
  local suffix = tostring(name):match("[_%-]([%aµ]+)$")
  local scale = suffix and unit_to_ms(suffix)
  if scale then return scale, suffix end
  return nil
end
M.unit_to_ms = unit_to_ms

local function show(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if v == nil then return "nothing" end
  if v == json.null then return "null" end
  if type(v) == "table" then return #v > 0 and "an array" or "an object" end
  return tostring(v)
end

-- Collects what is wrong with a recording while it is read. An entry
-- problem raises a Bad (caught per entry by `each`); the reader then fails
-- (strict) or skips the entry (lenient).
local Bad = {}
local function bad(fmt, ...) error(setmetatable({ msg = string.format(fmt, ...) }, Bad), 0) end
-- a fault of the whole file (its objective), which skipping entries cannot mend
local function bad_file(fmt, ...) error(setmetatable({ msg = string.format(fmt, ...), whole = true }, Bad), 0) end

local Reader = {}
Reader.__index = Reader

local function new_reader(file, mode)
  return setmetatable({ file = file, lenient = mode == "lenient", skipped = 0, bad_times = 0 }, Reader)
end

-- Runs f(entry_name) for one entry; returns its value, or nil after a
-- skipped bad entry. In strict mode a bad entry stops the read.
function Reader:each(name, f, ...)
  self.entry = name
  local ok, v = pcall(f, ...)
  if ok then return v end
  if getmetatable(v) ~= Bad then error(v, 0) end
  local msg = name .. v.msg
  if v.whole then error(setmetatable({ msg = string.format("replay file %s: %s", self.file, msg) }, Bad), 0) end
  if not self.lenient then
    error(setmetatable({ msg = string.format("replay file %s: %s; fix the entry, or replay with --replay-check lenient to skip bad entries",
                                             self.file, msg) }, Bad), 0)
  end
  self.skipped = self.skipped + 1
  self.first_skipped = self.first_skipped or msg
  return nil
end

-- An objective value that is a number: a time in ms after scaling, when it
-- is finite and positive; else the entry is a failure saying why.
function Reader:time(entry, name, value, scale, unit_label)
  local t = value * scale
  if finite(t) and t > 0 then
    entry.status, entry.time_ms = "ok", t
    return
  end
  entry.status = "launch_error"
  entry.log = string.format("the recording gives %s %s, not a positive finite time", show(value), unit_label)
  self.bad_times = self.bad_times + 1
  self.first_bad_time = self.first_bad_time or (self.entry .. name .. ": " .. show(value) .. " " .. unit_label)
end

local function number_or_nil(v, path)
  if v == nil then return 0 end
  if not finite(v) or v < 0 then bad("%s: expected a non-negative number, got %s", path, show(v)) end
  return v
end

-- An integer knob value at or past 2^53 reaches kopt as a double, where
-- 2^53 and 2^53 + 1 are one number: two configs would merge unseen.
local function inexact(v)
  return math.type(v) == "float" and v == math.floor(v) and math.abs(v) >= 2^53
end
local INEXACT = "%s: %.17g is past 2^53, where JSON numbers no longer tell integers apart; write it as a string"

local NAN_KNOB = "%s: NaN is not a knob value (no config can be told by it)"

-- A boolean knob value (Kernel Tuner tunes Python's True and False too) is
-- the string Kernel Tuner's cache keys spell it with: knob values are
-- numbers or strings in kopt.
local function bool_name(v)
  if v == true then return "True" elseif v == false then return "False" end
  return v
end

local function knob_value(v, path)
  v = bool_name(v)
  if type(v) ~= "number" and type(v) ~= "string" then
    bad("%s: expected a number or a string, got %s", path, show(v))
  end
  if v ~= v then bad(NAN_KNOB, path) end
  if inexact(v) then bad(INEXACT, path, v) end
  return v
end

-- Kernel Tuner writes one line per config and the closing "}\n}" last; an
-- interrupted run leaves it out, perhaps with a half-written last line. Drop
-- incomplete trailing lines until the text closes into valid JSON.
local function repair_kt(text)
  local body = text:gsub("%s+$", "")
  for _ = 1, 4 do
    local v = json.decode(body:gsub(",%s*$", "") .. "\n}\n}")
    if v then return v end
    local cut = body:match("^(.*)\n[^\n]*$")
    if not cut then break end
    body = cut:gsub("%s+$", "")
  end
  -- Pretty-printed caches spread an entry over many lines: cut after each of
  -- the last closing braces in turn.
  local pos, tries = #text, 0
  while tries < 64 do
    pos = text:sub(1, pos - 1):match(".*()}")
    if not pos then break end
    tries = tries + 1
    local v = json.decode(text:sub(1, pos) .. "\n}\n}")
    if v and type(v.cache) == "table" then return v end
  end
  return nil
end

-- Whether the successful entries of a Kernel Tuner cache carry a time.
local function times_recorded(cache)
  for _, e in pairs(cache) do
    if type(e) == "table" and type(e.time) == "number" and e.time == e.time and e.time < KT_FAILED_NUMBER then
      return true
    end
  end
  return false
end

-- The name of a T4 result's measurement that is a time (a time unit, or no
-- unit and a time's name), when its objective's measurement is not.
local function time_measurement(res, objective)
  if type(res.measurements) ~= "table" then return nil end
  local function is_time(m)
    if type(m.unit) == "string" and m.unit ~= "" then return unit_to_ms(m.unit) ~= nil end
    return M.time_like(m.name)
  end
  local other
  for _, m in ipairs(res.measurements) do
    if type(m) == "table" and type(m.name) == "string" then
      if m.name == objective and is_time(m) then return nil end
      if m.name ~= objective and not other and is_time(m) then other = m.name end
    end
  end
  return other
end

-- Whether a T4 objective is a rate (per second: GFLOP/s, GB/s), by its name
-- or its measurement's unit.
local function is_rate(res, objective)
  if objective:find("/s", 1, true) then return true end
  for _, m in ipairs(type(res.measurements) == "table" and res.measurements or {}) do
    if type(m) == "table" and m.name == objective and type(m.unit) == "string" and m.unit:find("/s", 1, true) then
      return true
    end
  end
  return false
end

local MINIMISED_WORDS = { "energy", "cost", "loss", "error", "power", "joule", "watt" }
local function minimised(name)
  local n = name:lower()
  if M.time_like(n) then return true end
  for _, w in ipairs(MINIMISED_WORDS) do
    if n:find(w, 1, true) then return true end
  end
  return false
end

-- Where a configuration's value is not among tune_params' (a Kernel Tuner
-- cache resumed with more values: its writer checks the parameters' names
-- only, so the header keeps the first run's lists), the values the entries
-- use are the space: added to the knob, in order when the list was sorted.
local function extend_values(knob, added)
  local all_numbers, sorted = true, true
  for i, v in ipairs(knob.values) do
    if type(v) ~= "number" then all_numbers = false end
    if i > 1 and all_numbers and knob.values[i - 1] >= v then sorted = false end
  end
  local new = {}
  for v in pairs(added) do
    new[#new + 1] = v
    if type(v) ~= "number" then all_numbers = false end
  end
  table.sort(new, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  for _, v in ipairs(new) do knob.values[#knob.values + 1] = v end
  if all_numbers and sorted then table.sort(knob.values) end
  return new
end

local function from_kt(doc, file, repaired, r)
  local keys = doc.tune_params_keys
  if type(keys) ~= "table" or type(doc.tune_params) ~= "table" or type(doc.cache) ~= "table" then
    return nil, file .. ": not a Kernel Tuner cache (tune_params_keys, tune_params and cache are required)"
  end
  local objective = doc.objective or "time"
  if type(objective) ~= "string" then
    return nil, string.format("replay file %s: objective: expected a string, got %s", file, show(objective))
  end
  local rec = { format = "kernel_tuner", device = doc.device_name, kernel = doc.kernel_name,
                objective = objective, knobs = {}, entries = {}, repaired = repaired }
  -- Kernel Tuner's writer keeps the objective's name, not always its
  -- direction: a time ("total_time", "time_ms"), an energy, a cost, a loss
  -- or an error is minimised, anything else (GFLOP/s, a score) maximised
  local higher = doc.objective_higher_is_better
  if higher == nil then higher = not minimised(objective) end
  if higher and M.time_like(objective) then
    -- (a time marked higher-is-better: a writer's slip; times are minimised)
    rec.direction_ignored = objective
    higher = false
  end
  if higher and times_recorded(doc.cache) then
    -- Kernel Tuner records every entry's time whatever it tuned for, so a
    -- cache tuned for a rate (GFLOP/s) replays by its times, which rank the
    -- same where the work is fixed (a spec's objective then ranks by its own
    -- metric, computed from them); an objective to minimise that is no time
    -- (energy) is refused below: its times would rank by something else
    rec.objective_replaced, objective, rec.objective = objective, "time", "time"
  end
  if higher and rec.objective_replaced == nil then
    return nil, file .. ": objective '" .. objective .. "' is maximised and the entries record no 'time'; kopt " ..
                "replays time objectives"
  end
  if not M.time_like(objective) then
    return nil, string.format("replay file %s: objective '%s' is not a time; kopt replays time objectives", file, objective)
  end
  local allowed, added = {}, {}
  for i, name in ipairs(keys) do
    if allowed[name] then
      return nil, string.format("replay file %s: tune_params_keys names '%s' twice", file, tostring(name))
    end
    if type(name) ~= "string" then
      return nil, string.format("replay file %s: tune_params_keys[%d]: expected a parameter name, got %s", file, i,
                                show(name))
    end
    local values = doc.tune_params[name]
    if type(values) ~= "table" or #values == 0 then
      return nil, string.format("%s: tune_params.%s: expected a non-empty array", file, name)
    end
    allowed[name] = {}
    local named = {}
    for j, v in ipairs(values) do named[j] = bool_name(v) end
    values = named
    for j, v in ipairs(values) do
      if type(v) ~= "number" and type(v) ~= "string" then
        return nil, string.format("replay file %s: tune_params.%s[%d]: expected a number or a string, got %s",
                                  file, name, j, show(v))
      end
      if v ~= v then
        return nil, string.format("replay file %s: " .. NAN_KNOB, file, string.format("tune_params.%s[%d]", name, j))
      end
      if inexact(v) then
        return nil, string.format("replay file %s: " .. INEXACT, file, string.format("tune_params.%s[%d]", name, j), v)
      end
      allowed[name][v] = true
    end
    rec.knobs[i] = { name = name, values = values }
  end
  -- a parameter tuned but left out of tune_params_keys would be dropped
  -- from every configuration (and its values read as duplicates)
  local extra = {}
  for name in pairs(doc.tune_params) do
    if not allowed[name] then extra[#extra + 1] = tostring(name) end
  end
  if #extra > 0 then
    table.sort(extra)
    return nil, string.format("replay file %s: tune_params.%s is not in tune_params_keys (the cache's keys and " ..
                              "configurations are made of those)", file, extra[1])
  end
  -- Kernel Tuner's key of an entry is its values in tune_params_keys' order,
  -- joined by commas (Python's str: True, 0.5, 1e-07); checked against the
  -- entry's own fields where a split by commas gives one part per knob
  local function check_key(ck, config)
    local parts = {}
    for part in (ck .. ","):gmatch("([^,]*),") do parts[#parts + 1] = part end
    if #parts ~= #keys then return end
    for i, name in ipairs(keys) do
      local v, p = config[name], parts[i]
      -- (a numpy float32 knob: the key is str(float32) "0.1", the field
      -- its double 0.10000000149011612; equal as float32)
      local pv = tonumber(p)
      local same = (type(v) == "number" and pv == v) or tostring(v) == p
        or (math.type(v) == "float" and pv ~= nil and string.pack("<f", pv) == string.pack("<f", v))
      if not same then bad(": the key says %s=%s, the entry says %s=%s", name, p, name, show(v)) end
    end
  end
  local function entry_of(e, ck)
    if type(e) ~= "table" or e == json.null or #e > 0 then bad(": expected an object, got %s", show(e)) end
    local config = {}
    for _, name in ipairs(keys) do
      local v = knob_value(e[name], "." .. name)
      if not allowed[name][v] then
        -- (a value of another type than the list's, "1" against 1, is a
        -- fault of the file, not a value added by a resumed run)
        local kind_known = false
        for x in pairs(allowed[name]) do if type(x) == type(v) then kind_known = true end end
        if not kind_known then
          bad(".%s: %s is not one of the recording's tune_params.%s (they are %s)", name, show(v), name,
              type(v) == "number" and "strings" or "numbers")
        end
        added[name] = added[name] or {}
        added[name][v] = true
      end
      config[name] = v
    end
    check_key(ck, config)
    local cost = number_or_nil(e.compile_time, ".compile_time") + number_or_nil(e.verification_time, ".verification_time")
      + number_or_nil(e.benchmark_time, ".benchmark_time")
    local entry = { config = config, cost_s = cost / 1000 }
    local obj = e[objective]
    if type(obj) == "number" and (not finite(obj) or obj < KT_FAILED_NUMBER) then
      -- (Kernel Tuner's times are in ms; an objective named for its unit,
      -- such as "time_s", is in that unit)
      local scale, unit = unit_of_name(objective)
      r:time(entry, "." .. objective, obj, scale or 1, unit or "ms")
      if entry.status ~= "ok" then return entry end
      if e.times ~= nil then
        if type(e.times) ~= "table" then bad(".times: expected an array of numbers, got %s", show(e.times)) end
        for j, t in ipairs(e.times) do
          if type(t) ~= "number" then bad(".times[%d]: expected a number, got %s", j, show(t)) end
        end
      end
      -- (a sample that is NaN or infinite is not a sample)
      local samples
      if type(e.times) == "table" then
        samples = {}
        for _, t in ipairs(e.times) do if finite(t) then samples[#samples + 1] = t end end
      end
      entry.median_ms, entry.p90_ms, entry.samples = stats(samples)
      entry.metrics = {}
      for k, v in pairs(e) do
        if finite(v) and not doc.tune_params[k] and k ~= objective then entry.metrics[k] = v end
      end
    elseif type(obj) == "number" or (type(obj) == "string" and (KT_FAILURES[obj] or obj:find("Config$"))) then
      -- Kernel Tuner's failure names (ErrorConfig and its kinds), or its
      -- old failure number
      entry.status = KT_FAILURES[obj] or "launch_error"
      entry.log = type(obj) == "string" and obj or "recorded as failed"
    elseif type(obj) == "string" and tonumber(obj) then
      bad(".%s: a time written as a string (%s); expected a number", objective, show(obj))
    else
      bad(".%s: expected a time or Kernel Tuner's failure name, got %s", objective, show(obj))
    end
    return entry
  end
  if #doc.cache > 0 then
    return nil, string.format("replay file %s: cache: expected an object keyed by configuration, got an array", file)
  end
  -- pairs() order changes from process to process; a run must not.
  local cache_keys = {}
  for k in pairs(doc.cache) do cache_keys[#cache_keys + 1] = tostring(k) end
  table.sort(cache_keys)
  for _, ck in ipairs(cache_keys) do
    local label = string.format("cache[\"%s\"]", ck)
    local entry = r:each(label, entry_of, doc.cache[ck], ck)
    if entry then
      entry.label = label
      rec.entries[#rec.entries + 1] = entry
    end
  end
  for i, name in ipairs(keys) do
    if added[name] then
      local new = extend_values(rec.knobs[i], added[name])
      local shown = {}
      for k, v in ipairs(new) do shown[k] = tostring(v) end
      rec.extended = rec.extended or {}
      rec.extended[#rec.extended + 1] = string.format("%s: %s", name, table.concat(shown, ", "))
    end
  end
  return rec
end

-- KTT's ResultStatus names of a failure (ComputationFailed and any other:
-- a launch error)
local KTT_FAILURES = { DeviceLimitsExceeded = "invalid", CompilationFailed = "compile_error",
                       ValidationFailed = "wrong" }

local T4_INVALIDITY = { correct = "ok", compile = "compile_error", runtime = "launch_error",
                        correctness = "wrong", constraints = "invalid", timeout = "timeout" }

-- The parameter names of a configuration, sorted and joined: entries of one
-- recording must agree on them.
-- Reads each raw result with entry_of (through r:each, which skips or
-- refuses a bad one by the reader's mode), appends the entries to rec and
-- collects each knob's values into sets.
local function add_entries(r, rec, sets, list, label, entry_of)
  for i, res in ipairs(list) do
    local entry = r:each(string.format("%s[%d]", label, i), entry_of, res)
    if entry then
      entry.label = string.format("%s[%d]", label, i)
      for name, v in pairs(entry.config) do
        sets[name] = sets[name] or {}
        sets[name][v] = true
      end
      rec.entries[#rec.entries + 1] = entry
    end
  end
end

local function names_of(config)
  local names = {}
  for k in pairs(config) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return table.concat(names, ", ")
end

-- The parameter set most entries of a list share (the earliest on a tie),
-- by `names_in(entry)` (nil for an entry that has none): in lenient mode the
-- odd entries are the ones skipped, not every entry unlike the first.
local function common_names(list, names_in)
  local count, best, best_n = {}, nil, 0
  for _, res in ipairs(type(list) == "table" and list or {}) do
    local ok, names = pcall(names_in, res)
    if ok and names then
      count[names] = (count[names] or 0) + 1
      if count[names] > best_n then best, best_n = names, count[names] end
    end
  end
  return best
end

local function from_t4(doc, file, r)
  local rec = { format = "t4", knobs = {}, entries = {} }
  -- the GPU, where the writer said it: kopt's own results.json (metadata.backend.device)
  -- or `kopt db export` (metadata.device)
  local md = type(doc.metadata) == "table" and doc.metadata or {}
  local mdev = type(md.backend) == "table" and md.backend.device or md.device
  if type(mdev) == "string" then rec.device = mdev end
  -- kopt's own results.json of a spec with an objective (GFLOP/s, say)
  -- records each entry's time as the objective and names the spec's in its
  -- metadata: replayed by the time, with the note a rate's file gets
  local mobj = type(md.objective) == "table" and md.objective.metric
  if type(mobj) == "string" and mobj ~= "time" then rec.objective_replaced = mobj end
  local sets, first_names, cost_unit = {}, nil, nil
  if r.lenient then
    first_names = common_names(doc.results, function(res)
      return type(res) == "table" and type(res.configuration) == "table" and names_of(res.configuration) or nil
    end)
  end
  local meta_unit = type(doc.metadata) == "table" and doc.metadata.timeunit or nil
  local default_unit = 1
  if meta_unit ~= nil then
    default_unit = unit_to_ms(meta_unit)
    if not default_unit then
      return nil, string.format("replay file %s: metadata.timeunit: unknown time unit %s (kopt knows ms, s, us, ns)",
                                file, show(meta_unit))
    end
  end
  local function entry_of(res)
    if type(res) ~= "table" or type(res.configuration) ~= "table" or res.configuration == json.null then
      bad(".configuration: expected an object")
    end
    -- an edited kernel of kopt's (its source hash): not the spec's kernel,
    -- which is all a replay measures
    if res.variant ~= nil then
      rec.edited = (rec.edited or 0) + 1
      return nil
    end
    local names = names_of(res.configuration)
    if names == "" then bad(".configuration: expected at least one parameter") end
    -- (the values as read: a boolean is "True"/"False", as a Kernel Tuner
    -- cache spells it)
    local config = {}
    for name, v in pairs(res.configuration) do config[name] = knob_value(v, ".configuration." .. tostring(name)) end
    first_names = first_names or names
    if names ~= first_names then
      bad(".configuration: has the parameters %s where %s %s", names, r.lenient and "most entries have" or
          "the recording's first entry has", first_names)
    end
    local objective = "time"
    if res.objectives ~= nil then
      if type(res.objectives) ~= "table" or type(res.objectives[1]) ~= "string" then
        bad(".objectives: expected an array of measurement names")
      end
      objective = res.objectives[1]
    end
    -- a rate (GFLOP/s) beside a measurement that is a time: replayed by
    -- that time (a spec's objective ranks by its own metric)
    local mtime = not M.time_like(objective) and is_rate(res, objective) and time_measurement(res, objective)
    if mtime then
      rec.objective_replaced = rec.objective_replaced or objective
      objective = mtime
    end
    rec.objective = rec.objective or objective
    local entry = { config = config, metrics = {} }
    local status = T4_INVALIDITY[res.invalidity or "correct"]
    if not status then bad(".invalidity: unknown value %s", show(res.invalidity)) end
    local value, unit, found
    if res.measurements ~= nil and type(res.measurements) ~= "table" then bad(".measurements: expected an array") end
    for j, m in ipairs(res.measurements or {}) do
      if type(m) ~= "table" or type(m.name) ~= "string" then
        bad(".measurements[%d]: expected an object with a name", j)
      end
      if m.name == objective then value, unit, found = m.value, m.unit, j end
      if finite(m.value) then entry.metrics[m.name] = m.value end
    end
    -- (a file tuned for another quantity that also records a time is not
    -- replayed by that time: it would rank by something the file was not
    -- tuned for; only a rate's time is, above)
    local also_time = time_measurement(res, objective)
    local besides = also_time and string.format(" (its '%s' ranks by something else)", also_time)
      or ", and no measurement is a time"
    if found and (unit == nil or unit == "") and meta_unit == nil and not M.time_like(objective) then
      bad_file(".measurements[%d]: objective '%s' has no unit and its name is not a time%s; kopt replays time " ..
               "objectives", found, objective, besides)
    end
    if found and type(unit) == "string" and unit ~= "" and unit_to_ms(unit) then
      cost_unit = cost_unit or unit_to_ms(unit)
    elseif found and (unit == nil or unit == "") and unit_of_name(objective) then
      cost_unit = cost_unit or unit_of_name(objective)  -- ("latency_us": its times are in us)
    end
    if status == "ok" and type(value) == "number" then
      -- the measurement's own unit, else the one its name ends with
      -- ("latency_us"), else the file's metadata.timeunit, else ms
      local scale, shown = unit_of_name(objective)
      scale, shown = scale or default_unit, shown or tostring(meta_unit or "ms")
      if unit ~= nil and unit ~= "" then
        scale, shown = unit_to_ms(unit), unit
        if not scale and not M.time_like(objective) then
          bad_file(".measurements[%d]: objective '%s' is not a time (unit %s)%s; kopt replays time objectives",
                   found, objective, show(unit), besides)
        elseif not scale then
          bad(".measurements[%d].unit: unknown time unit %s (kopt knows ms, s, us, ns)", found, show(unit))
        end
      end
      r:time(entry, string.format(".measurements[%d].value", found), value, scale, shown)
    elseif status == "ok" then
      if value ~= nil and type(value) ~= "string" then
        bad(".measurements[%d].value: expected a number, got %s", found, show(value))
      end
      if type(value) == "string" and tonumber(value) then
        bad(".measurements[%d].value: a time written as a string (%s); expected a number", found, show(value))
      end
      if value == nil then
        bad(".measurements: no '%s' measurement, the objective (a result marked correct must have one)", objective)
      end
      entry.status = "launch_error"
      entry.log = value
    else
      entry.status = status
      entry.log = type(value) == "string" and value or res.invalidity
      -- T4 has no class for a crash: kopt writes it as invalidity
      -- "runtime" with the measurement "crash", and reads it back as one
      if status == "launch_error" and value == "crash" then entry.status = "crash" end
    end
    local t = res.times or {}
    if type(t) ~= "table" then bad(".times: expected an object") end
    local run = 0
    if t.runtimes ~= nil and type(t.runtimes) ~= "table" then bad(".times.runtimes: expected an array") end
    for j, x in ipairs(t.runtimes or {}) do run = run + number_or_nil(x, string.format(".times.runtimes[%d]", j)) end
    local c = number_or_nil(t.compilation or t.compilation_time, ".times.compilation")
      + number_or_nil(t.validation, ".times.validation") + run
    -- (times are in metadata.timeunit, else in the objective's own unit)
    entry.cost_s = c * (meta_unit and default_unit or cost_unit or 1) / 1000
    return entry
  end
  add_entries(r, rec, sets, doc.results, "results", entry_of)
  local order = {}
  for name in pairs(sets) do order[#order + 1] = name end
  table.sort(order)
  -- kopt's own results.json names its knobs in the spec's order: kept, when
  -- it names exactly the parameters the results hold
  if type(md.knobs) == "table" and #md.knobs == #order then
    local named = {}
    for _, n in ipairs(md.knobs) do if type(n) == "string" and sets[n] then named[n] = true end end
    local count = 0
    for _ in pairs(named) do count = count + 1 end
    if count == #order then order = md.knobs end
  end
  for i, name in ipairs(order) do rec.knobs[i] = { name = name, values = sorted_values(sets[name]) } end
  return rec
end

local function from_ktt(doc, file, r)
  local meta = type(doc.Metadata) == "table" and doc.Metadata or {}
  local scale = unit_to_ms(meta.TimeUnit or "Microseconds")
  if not scale then
    return nil, string.format("replay file %s: Metadata.TimeUnit: unknown time unit %s (kopt knows ms, s, us, ns)",
                              file, show(meta.TimeUnit))
  end
  local unit_label = tostring(meta.TimeUnit or "Microseconds")
  local rec = { format = "ktt", device = meta.Device, knobs = {}, entries = {}, objective = "TotalDuration" }
  local sets, first_names = {}, nil
  if r.lenient then
    first_names = common_names(doc.Results, function(res)
      local c = {}
      for _, p in ipairs(type(res) == "table" and type(res.Configuration) == "table" and res.Configuration or {}) do
        if type(p) == "table" and type(p.Name) == "string" then c[p.Name] = true end
      end
      return next(c) ~= nil and names_of(c) or nil
    end)
  end
  local function entry_of(res)
    if type(res) ~= "table" or type(res.Configuration) ~= "table" then bad(".Configuration: expected an array") end
    local config, names = {}, {}
    for j, p in ipairs(res.Configuration) do
      if type(p) ~= "table" or type(p.Name) ~= "string" then
        bad(".Configuration[%d]: expected an object with a Name and a Value", j)
      end
      if config[p.Name] ~= nil then bad(".Configuration[%d]: names the parameter '%s' twice", j, p.Name) end
      config[p.Name] = knob_value(p.Value, string.format(".Configuration[%d].Value", j))
      names[#names + 1] = p.Name
    end
    if #names == 0 then bad(".Configuration: expected at least one parameter") end
    local joined = names_of(config)
    first_names = first_names or joined
    if joined ~= first_names then
      bad(".Configuration: has the parameters %s where %s %s", joined, r.lenient and "most entries have" or
          "the recording's first entry has", first_names)
    end
    rec.kernel = rec.kernel or res.KernelName
    local cost = number_or_nil(res.TotalDuration, ".TotalDuration") + number_or_nil(res.TotalOverhead, ".TotalOverhead")
    local entry = { config = config, metrics = {}, cost_s = cost * scale / 1000, names = names }
    if res.Status == "Ok" and type(res.TotalDuration) == "number" then
      r:time(entry, ".TotalDuration", res.TotalDuration, scale, unit_label)
    else
      entry.status = KTT_FAILURES[res.Status] or "launch_error"
      entry.log = type(res.Status) == "string" and res.Status or "no status"
    end
    local cr = type(res.ComputationResults) == "table" and res.ComputationResults[1]
    if type(cr) == "table" then
      local prof = type(cr.ProfilingData) == "table" and cr.ProfilingData or {}
      for _, c in ipairs(type(prof.Counters) == "table" and prof.Counters or {}) do
        if type(c) == "table" and type(c.Name) == "string" then entry.metrics[c.Name] = c.Value end
      end
      -- KTT speaks OpenCL: "local memory" is CUDA shared memory, "private
      -- memory" is per-thread local memory.
      local cd = type(cr.CompilationData) == "table" and cr.CompilationData or {}
      entry.resources = { regs = cd.RegistersCount, smem = cd.LocalMemorySize,
                          local_bytes = cd.PrivateMemorySize, max_threads = cd.MaxWorkGroupSize }
      local g, l = cr.GlobalSize, cr.LocalSize
      if type(g) == "table" and type(l) == "table" then
        entry.launch = { grid = { g.X, g.Y, g.Z }, block = { l.X, l.Y, l.Z } }
      end
    end
    return entry
  end
  add_entries(r, rec, sets, doc.Results, "Results", entry_of)
  -- (the knobs in the order the first entry kept lists them)
  local order = rec.entries[1] and rec.entries[1].names or {}
  for i, name in ipairs(order) do rec.knobs[i] = { name = name, values = sorted_values(sets[name]) } end
  return rec
end

-- Whether an objective's name reads as a time (Kernel Tuner's "time", T4's
-- "time", KTT's "TotalDuration", "kernel_runtime", "latency_us", ...).
function M.time_like(name)
  local n = tostring(name):lower()
  return n:find("time") ~= nil or n:find("duration") ~= nil or n:find("latency") ~= nil
end

-- A configuration recorded twice (under two cache keys, or 1 and "1") is
-- ambiguous: strict mode refuses it naming both entries; lenient mode keeps
-- the first and counts the others as skipped.
function drop_duplicates(rec, r)
  local names = {}
  for i, k in ipairs(rec.knobs) do names[i] = k.name end
  local seen, kept = {}, {}
  for _, e in ipairs(rec.entries) do
    local parts = {}
    for i, name in ipairs(names) do parts[i] = tostring(e.config[name]) end
    local key = table.concat(parts, "\0")
    local first = seen[key]
    if first then
      local msg = string.format("%s: the same configuration as %s", e.label or "an entry", first.label or "another entry")
      if not r.lenient then
        return string.format("replay file %s: %s; remove one, or replay with --replay-check lenient to keep the first",
                             rec.file, msg)
      end
      r.skipped = r.skipped + 1
      r.first_skipped = r.first_skipped or msg
    else
      seen[key] = e
      kept[#kept + 1] = e
    end
  end
  rec.entries = kept
end

-- The value of a --replay-check flag: "strict" or "lenient" (the reader's
-- modes); anything else is a usage error naming the flag.
function M.check_mode(v, flag)
  if v == "strict" or v == "lenient" then return v end
  errors.usage("%s: expected strict or lenient, got '%s'", flag, tostring(v))
end

-- Reads a recording. mode: "strict" (default) or "lenient". Returns the
-- table above, or nil and one sentence.
function M.read(file, mode)
  local text, terr = json.read_text(file)
  if not text then return nil, "cannot read replay file " .. terr end
  if text:sub(1, 2) == "\31\139" then
    return nil, string.format("replay file %s is gzip-compressed: gunzip it first", file)
  end
  local doc, derr = json.decode_with_nonfinite(text)
  local repaired = false
  if doc == nil then
    -- only a cache cut short (no closing brace at the end) is repaired: a
    -- complete file that does not parse is an error, not entries to drop
    -- (cut right after an entry's closing brace, the file ends in one too:
    -- more braces opened than closed tells it from a complete file)
    local _, opened = text:gsub("{", "")
    local _, closed = text:gsub("}", "")
    if text:find('"tune_params_keys"', 1, true) and text:find('"cache"', 1, true)
       and (not text:find("}%s*$") or opened > closed) then
      doc = repair_kt(text)
      repaired = true
    end
    if doc == nil then
      return nil, string.format("replay file %s is not valid JSON (%s) and could not be repaired", file, derr)
    end
  end
  if type(doc) ~= "table" then return nil, "replay file " .. file .. " holds no object" end
  local r = new_reader(file, mode)
  local ok, rec, rerr = pcall(function()
    if doc.cache and doc.tune_params then return from_kt(doc, file, repaired, r)
    elseif type(doc.results) == "table" then return from_t4(doc, file, r)
    elseif type(doc.Results) == "table" then return from_ktt(doc, file, r)
    end
    return nil, "replay file " .. file .. " is not a Kernel Tuner cache, a T4 results file or a KTT results file"
  end)
  if not ok then
    if getmetatable(rec) == Bad then return nil, rec.msg end
    error(rec, 0)
  end
  if not rec then return nil, rerr end
  if #rec.entries == 0 then
    if r.skipped > 0 then
      return nil, string.format("replay file %s records no usable configurations (%d bad entries skipped; the first: %s)",
                                file, r.skipped, r.first_skipped)
    end
    return nil, "replay file " .. file .. " records no configurations"
  end
  rec.file = file
  -- (what a resumed run checks: the same file name with other contents is
  -- another recording)
  rec.digest = sys.sha256(text):sub(1, 16)
  local dup_err = drop_duplicates(rec, r)
  if dup_err then return nil, dup_err end
  if r.skipped > 0 then rec.skipped = { count = r.skipped, first = r.first_skipped } end
  if r.bad_times > 0 then rec.bad_times = { count = r.bad_times, first = r.first_bad_time } end
  return rec
end

-- The notes a reader of the recording should see on stderr: skipped entries
-- (lenient mode) and entries replayed as failures for a bad time.
function M.notes(rec)
  local out = {}
  if rec.skipped then
    out[#out + 1] = string.format("replay file %s: skipped %d bad %s (the first: %s)", rec.file, rec.skipped.count,
                                  rec.skipped.count == 1 and "entry" or "entries", rec.skipped.first)
  end
  if rec.objective_replaced then
    out[#out + 1] = string.format("replay file %s was tuned for '%s'; it is replayed by the time each entry " ..
                                  "records (a spec's objective ranks by its own metric)", rec.file,
                                  rec.objective_replaced)
  end
  if rec.direction_ignored then
    out[#out + 1] = string.format("replay file %s: objective_higher_is_better is true for '%s', a time: it is " ..
                                  "minimised", rec.file, rec.direction_ignored)
  end
  if rec.extended then
    out[#out + 1] = string.format("replay file %s: its entries use values its tune_params do not list (%s): they " ..
                                  "are in the space (a cache resumed with more values)", rec.file,
                                  table.concat(rec.extended, "; "))
  end
  if rec.edited then
    out[#out + 1] = string.format("replay file %s: %d results of edited kernels are left out (a replay measures " ..
                                  "the spec's own kernel)", rec.file, rec.edited)
  end
  if rec.repaired then
    out[#out + 1] = string.format("replay file %s was cut short (an interrupted run): " ..
                                  "the %d complete entries are read", rec.file, #rec.entries)
  end
  if rec.bad_times then
    out[#out + 1] = string.format("replay file %s: %d %s no positive finite time and %s replayed as failed (the first: %s)",
                                  rec.file, rec.bad_times.count, rec.bad_times.count == 1 and "entry records" or "entries record",
                                  rec.bad_times.count == 1 and "is" or "are", rec.bad_times.first)
  end
  return out
end

return M
