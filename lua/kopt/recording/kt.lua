-- The reader of Kernel Tuner cache files, including ones whose closing
-- braces are missing after an interrupted run (kopt.recording).

local common = require("kopt.recording.common")
local json = require("kopt.json")

local bad, show = common.bad, common.show
local minimised, bool_name = common.minimised, common.bool_name
local knob_value, number_or_nil, finite = common.knob_value, common.number_or_nil, common.finite
local unit_of_name, stats, extend_values = common.unit_of_name, common.stats, common.extend_values

local KT_FAILURES = {
  CompilationFailedConfig = "compile_error",
  RuntimeFailedConfig = "launch_error",
  InvalidConfig = "invalid",
}

-- Kernel Tuner's own marker for a failed config in old caches (1e20).
local KT_FAILED_NUMBER = 1e19

-- Kernel Tuner writes one line per config and the closing "}\n}" last; an
-- interrupted run leaves it out, perhaps with a half-written last line. Drop
-- incomplete trailing lines until the text closes into valid JSON.
local function repair_kt(text)
  local body = text:gsub("%s+$", "")
  for _ = 1, 4 do
    -- (NaN and Infinity as Kernel Tuner writes them: a sample that failed)
    local v = json.decode_with_nonfinite(body:gsub(",%s*$", "") .. "\n}\n}")
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
    local v = json.decode_with_nonfinite(text:sub(1, pos) .. "\n}\n}")
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

-- Reads a decoded cache; text: the file's text, which tells an empty array
-- from an empty object.
local function from_kt(doc, file, repaired, r, text)
  local keys = doc.tune_params_keys
  if type(keys) ~= "table" or type(doc.tune_params) ~= "table" or type(doc.cache) ~= "table" then
    return nil, file .. ": not a Kernel Tuner cache (tune_params_keys, tune_params and cache are required)"
  end
  -- (configurations of no parameter: kopt's spaces and results have one at least)
  if #keys == 0 then
    return nil, string.format("replay file %s: tune_params_keys: expected at least one parameter name, got none", file)
  end
  local objective = doc.objective or "time"
  -- (Kernel Tuner 1.4 writes the objective as a list: one name)
  if type(objective) == "table" and #objective == 1 and type(objective[1]) == "string" then objective = objective[1] end
  if type(objective) == "table" and #objective > 1 then
    return nil, string.format("replay file %s: objective: %s names %d objectives; kopt replays one", file,
                              show(objective), #objective)
  end
  if type(objective) ~= "string" then
    return nil, string.format("replay file %s: objective: expected a string, got %s", file, show(objective))
  end
  local rec = { format = "kernel_tuner", device = doc.device_name, kernel = doc.kernel_name,
                objective = objective, knobs = {}, entries = {}, repaired = repaired }
  -- Kernel Tuner's writer keeps the objective's name, not always its
  -- direction: a time ("total_time", "time_ms"), an energy, a cost, a loss
  -- or an error is minimised, anything else (GFLOP/s, a score) maximised
  local higher = doc.objective_higher_is_better
  if higher == json.null then higher = nil end
  if higher ~= nil and type(higher) ~= "boolean" then
    return nil, string.format("replay file %s: objective_higher_is_better: expected true or false, got %s", file,
                              show(higher))
  end
  if higher == nil then higher = not minimised(objective) end
  if higher and common.time_like(objective) then
    -- (a time marked higher-is-better: a writer's slip; times are minimised)
    rec.direction_ignored = objective
    higher = false
  end
  if higher and common.efficiency(objective) then
    return nil, string.format("replay file %s: objective '%s' is an efficiency (work per energy): the time each " ..
                              "entry records ranks by something else; kopt replays time objectives", file, objective)
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
  if not common.time_like(objective) then
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
      local fault = common.knob_number_fault(v)
      if fault then return nil, string.format("replay file %s: tune_params.%s[%d]: %s", file, name, j, fault) end
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
      end
      config[name] = v
    end
    check_key(ck, config)
    local cost = number_or_nil(e.compile_time, ".compile_time") + number_or_nil(e.verification_time, ".verification_time")
      + number_or_nil(e.benchmark_time, ".benchmark_time")
    local entry = { config = config, cost_s = cost / 1000,
                    compile_s = finite(e.compile_time) and e.compile_time / 1000 or nil }
    local obj = e[objective]
    -- a failure where Kernel Tuner puts it: "__error__" (1.4), or the
    -- objective tuned for (a rate, when the entries are replayed by time:
    -- 0.4.5 to 1.3 write no time for a failed config)
    local failed = e.__error__ ~= nil and e.__error__ ~= json.null and e.__error__
    if not failed and obj == nil and rec.objective_replaced then failed = e[rec.objective_replaced] end
    if type(failed) == "string" and (KT_FAILURES[failed] or failed:find("Config$")) and
       not (type(obj) == "number" and finite(obj) and obj < KT_FAILED_NUMBER) then
      obj = failed
    end
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
  -- (an empty array decodes as an empty object does: the text tells them apart)
  if #doc.cache > 0 or (next(doc.cache) == nil and text and text:find('"cache"%s*:%s*%[')) then
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
      -- values beyond tune_params' lists, from the entries kept only (a
      -- skipped entry's value would be a config no entry records)
      for _, name in ipairs(keys) do
        local v = entry.config[name]
        if not allowed[name][v] then
          added[name] = added[name] or {}
          added[name][v] = true
        end
      end
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

return { read = from_kt, repair = repair_kt }
