-- The reader of T4 results files (Kernel Tuner's T4 writer, the benchmark
-- hub's files, kopt's own results.json and `kopt db export`).

local common = require("kopt.recording.common")
local json = require("kopt.json")

local bad, show = common.bad, common.show
local unit_to_ms, common_names, names_of, knob_value = common.unit_to_ms, common.common_names, common.names_of, common.knob_value
local finite, bad_file, unit_of_name, number_or_nil = common.finite, common.bad_file, common.unit_of_name, common.number_or_nil
local add_entries, sorted_values = common.add_entries, common.sorted_values

local T4_INVALIDITY = { correct = "ok", compile = "compile_error", runtime = "launch_error",
                        correctness = "wrong", constraints = "invalid", timeout = "timeout" }

-- The name of a T4 result's measurement that is a time (a time unit, or no
-- unit and a time's name), when its objective's measurement is not: the one
-- named "time" where there is one (the kernel's time; a "transfer_time"
-- listed before it times something else), else the first.
local function time_measurement(res, objective)
  if type(res.measurements) ~= "table" then return nil end
  local function is_time(m)
    if type(m.unit) == "string" and m.unit ~= "" then return unit_to_ms(m.unit) ~= nil end
    return common.time_like(m.name)
  end
  local other
  for _, m in ipairs(res.measurements) do
    if type(m) == "table" and type(m.name) == "string" then
      if m.name == objective and is_time(m) then return nil end
      if m.name ~= objective and is_time(m) and (not other or (m.name == "time" and other ~= "time")) then
        other = m.name
      end
    end
  end
  return other
end

-- Whether a T4 objective is a rate (per second: GFLOP/s, GB/s), by its name
-- or its measurement's unit.
local function is_rate(res, objective)
  if common.efficiency(objective) then return false end
  if objective:find("/s", 1, true) then return true end
  -- (a rate named without "/s": GFLOPS, TFLOPS, OPS, bandwidth, throughput;
  -- not an efficiency such as GFLOPS/W)
  local lower = objective:lower()
  if lower:match("flops$") or lower:match("ops$") or lower:find("bandwidth", 1, true)
     or lower:find("throughput", 1, true) then
    return true
  end
  for _, m in ipairs(type(res.measurements) == "table" and res.measurements or {}) do
    if type(m) == "table" and m.name == objective and type(m.unit) == "string" and m.unit:find("/s", 1, true) then
      return true
    end
  end
  return false
end
-- Per parameter whose values mix numbers with numbers written as strings
-- (1, "2", 4), the kind that is odd out: "string" or "number", whichever
-- fewer entries use (the strings on a tie). Mixed, the knob's values sort
-- numbers before strings ([1, 4, "2"]), and neighbours are not adjacent.
local function odd_kinds(results)
  local count = {}
  for _, res in ipairs(type(results) == "table" and results or {}) do
    if type(res) == "table" and type(res.configuration) == "table" then
      for name, v in pairs(res.configuration) do
        local kind = (type(v) == "number" and "number") or (type(v) == "string" and tonumber(v) and "string")
        if kind then
          count[name] = count[name] or { number = 0, string = 0 }
          count[name][kind] = count[name][kind] + 1
        end
      end
    end
  end
  local odd = {}
  for name, c in pairs(count) do
    if c.number > 0 and c.string > 0 then odd[name] = c.string <= c.number and "string" or "number" end
  end
  return odd
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
  local odd = odd_kinds(doc.results)
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
    for name, v in pairs(config) do
      if odd[name] == "string" and type(v) == "string" and tonumber(v) then
        bad(".configuration.%s: %s is a number written as a string, where most entries give %s as a number",
            tostring(name), show(v), tostring(name))
      elseif odd[name] == "number" and type(v) == "number" then
        bad(".configuration.%s: %s is a number, where most entries give %s as a string of digits", tostring(name),
            show(v), tostring(name))
      end
    end
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
    local mtime = not common.time_like(objective) and is_rate(res, objective) and time_measurement(res, objective)
    if mtime then
      rec.objective_replaced = rec.objective_replaced or objective
      objective = mtime
      -- (the time it is replayed by, whichever entry comes first: a failed
      -- one may record no time)
      if rec.objective == rec.objective_replaced then rec.objective = nil end
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
    -- (metadata.timeunit does not make it one: Kernel Tuner's T4 writer
    -- adds it to every file and writes "unit": "" for GFLOPS/W or energy)
    if status == "ok" and found and (unit == nil or unit == "") and not common.time_like(objective)
       and not unit_of_name(objective) then
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
        if not scale and not common.time_like(objective) then
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
    local compile = number_or_nil(t.compilation or t.compilation_time, ".times.compilation")
    local c = compile + number_or_nil(t.validation, ".times.validation") + run
    -- (in the file's unit: known once every entry is read, below)
    entry.cost_s, entry.compile_s = c, compile
    return entry
  end
  add_entries(r, rec, sets, doc.results, "results", entry_of)
  -- times are in metadata.timeunit, else in the unit of the objective's
  -- measurements: one unit for the whole file (an entry before the first
  -- measurement with a unit was read in ms, the rest in that unit)
  local to_s = (meta_unit and default_unit or cost_unit or 1) / 1000
  for _, e in ipairs(rec.entries) do e.cost_s, e.compile_s = e.cost_s * to_s, e.compile_s * to_s end
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

return { read = from_t4 }
