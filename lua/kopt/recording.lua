-- Readers for recorded search spaces: Kernel Tuner cache files (including
-- ones whose closing braces are missing after an interrupted run), T4 results
-- files and KTT result files. Each becomes
--   { format=, device=, kernel=, knobs={ {name=, values=} }, objective=,
--     entries = { {config=, status=, time_ms=, samples=, cost_s=, metrics=} } }
-- time_ms is the objective converted to milliseconds; cost_s is the recorded
-- compile + verify + benchmark time that replay charges to its simulated clock.
local json = require("kopt.json")

local M = {}

local KT_FAILURES = {
  CompilationFailedConfig = "compile_error",
  RuntimeFailedConfig = "launch_error",
  InvalidConfig = "invalid",
}

local function sorted_values(set)
  local list = {}
  for v in pairs(set) do list[#list + 1] = v end
  table.sort(list, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  return list
end

local function stats(times)
  if type(times) ~= "table" or #times == 0 then return nil end
  local s = {}
  for i, t in ipairs(times) do s[i] = t end
  table.sort(s)
  local function q(p) return s[math.max(1, math.min(#s, math.floor(p * (#s - 1) + 0.5) + 1))] end
  return q(0.5), q(0.9), #s
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

local function from_kt(doc, file, repaired)
  local keys = doc.tune_params_keys
  if type(keys) ~= "table" or type(doc.tune_params) ~= "table" or type(doc.cache) ~= "table" then
    return nil, file .. ": not a Kernel Tuner cache (tune_params_keys, tune_params and cache are required)"
  end
  local objective = doc.objective or "time"
  local rec = { format = "kernel_tuner", device = doc.device_name, kernel = doc.kernel_name,
                objective = objective, knobs = {}, entries = {}, repaired = repaired }
  local higher = doc.objective_higher_is_better
  if higher == nil then higher = not (objective == "time" or objective == "energy" or objective == "cost") end
  if higher then return nil, file .. ": objective '" .. objective .. "' is maximised; kopt replays time objectives" end
  for i, name in ipairs(keys) do
    local values = doc.tune_params[name]
    if type(values) ~= "table" or #values == 0 then
      return nil, string.format("%s: tune_params.%s: expected a non-empty array", file, name)
    end
    rec.knobs[i] = { name = name, values = values }
  end
  -- pairs() order changes from process to process; a run must not.
  local cache_keys = {}
  for k in pairs(doc.cache) do cache_keys[#cache_keys + 1] = k end
  table.sort(cache_keys)
  for _, ck in ipairs(cache_keys) do
    local e = doc.cache[ck]
    local config = {}
    for _, name in ipairs(keys) do config[name] = e[name] end
    local obj = e[objective]
    local entry = { config = config,
                    cost_s = ((e.compile_time or 0) + (e.verification_time or 0) + (e.benchmark_time or 0)) / 1000 }
    if type(obj) == "number" and obj < 1e19 then
      entry.status = "ok"
      entry.time_ms = obj
      entry.median_ms, entry.p90_ms, entry.samples = stats(e.times)
      entry.metrics = {}
      for k, v in pairs(e) do
        if type(v) == "number" and not doc.tune_params[k] and k ~= objective then entry.metrics[k] = v end
      end
    else
      entry.status = KT_FAILURES[obj] or "launch_error"
      entry.log = type(obj) == "string" and obj or "recorded as failed"
    end
    rec.entries[#rec.entries + 1] = entry
  end
  return rec
end

local T4_INVALIDITY = { correct = "ok", compile = "compile_error", runtime = "launch_error",
                        correctness = "wrong", constraints = "invalid", timeout = "timeout" }

local function unit_to_ms(unit)
  unit = (unit or ""):lower()
  if unit:find("micro") or unit == "us" then return 1e-3 end
  if unit:find("nano") or unit == "ns" then return 1e-6 end
  if unit == "s" or unit:find("^second") then return 1e3 end
  return 1
end

local function from_t4(doc, file)
  local rec = { format = "t4", knobs = {}, entries = {} }
  local sets, order = {}, {}
  local default_unit = unit_to_ms(doc.metadata and doc.metadata.timeunit)
  for i, r in ipairs(doc.results) do
    if type(r) ~= "table" or type(r.configuration) ~= "table" then
      return nil, string.format("%s: results[%d].configuration: expected an object", file, i)
    end
    for name, v in pairs(r.configuration) do
      if not sets[name] then sets[name] = {} order[#order + 1] = name end
      sets[name][v] = true
    end
    local objective = type(r.objectives) == "table" and r.objectives[1] or "time"
    rec.objective = rec.objective or objective
    local entry = { config = r.configuration, metrics = {} }
    local status = T4_INVALIDITY[r.invalidity or "correct"] or "launch_error"
    local value, scale
    for _, m in ipairs(r.measurements or {}) do
      if m.name == objective then value, scale = m.value, unit_to_ms(m.unit) end
      if type(m.value) == "number" then entry.metrics[m.name] = m.value end
    end
    if status == "ok" and type(value) == "number" then
      entry.status, entry.time_ms = "ok", value * scale
    else
      entry.status = status == "ok" and "launch_error" or status
      entry.log = type(value) == "string" and value or r.invalidity
    end
    local t = r.times or {}
    local run = 0
    for _, x in ipairs(t.runtimes or {}) do run = run + x end
    local c = (t.compilation or t.compilation_time or 0) + (t.validation or 0) + run
    entry.cost_s = c * default_unit / 1000
    rec.entries[#rec.entries + 1] = entry
  end
  table.sort(order)
  for i, name in ipairs(order) do rec.knobs[i] = { name = name, values = sorted_values(sets[name]) } end
  return rec
end

local function from_ktt(doc, file)
  local meta = doc.Metadata or {}
  local scale = unit_to_ms(meta.TimeUnit or "Microseconds")
  local rec = { format = "ktt", device = meta.Device, knobs = {}, entries = {}, objective = "TotalDuration" }
  local sets, order = {}, nil
  for i, r in ipairs(doc.Results) do
    if type(r.Configuration) ~= "table" then
      return nil, string.format("%s: Results[%d].Configuration: expected an array", file, i)
    end
    local config, names = {}, {}
    for _, p in ipairs(r.Configuration) do
      config[p.Name] = p.Value
      names[#names + 1] = p.Name
      sets[p.Name] = sets[p.Name] or {}
      sets[p.Name][p.Value] = true
    end
    order = order or names
    rec.kernel = rec.kernel or r.KernelName
    local entry = { config = config, metrics = {},
                    cost_s = ((r.TotalDuration or 0) + (r.TotalOverhead or 0)) * scale / 1000 }
    if r.Status == "Ok" and type(r.TotalDuration) == "number" then
      entry.status, entry.time_ms = "ok", r.TotalDuration * scale
    else
      entry.status = r.Status == "DeviceLimitsExceeded" and "invalid" or "launch_error"
      entry.log = r.Status
    end
    local cr = r.ComputationResults and r.ComputationResults[1]
    if cr then
      for _, c in ipairs((cr.ProfilingData or {}).Counters or {}) do entry.metrics[c.Name] = c.Value end
      -- KTT speaks OpenCL: "local memory" is CUDA shared memory, "private
      -- memory" is per-thread local memory.
      local cd = cr.CompilationData or {}
      entry.resources = { regs = cd.RegistersCount, smem = cd.LocalMemorySize,
                          local_bytes = cd.PrivateMemorySize, max_threads = cd.MaxWorkGroupSize }
      if cr.GlobalSize and cr.LocalSize then
        entry.launch = { grid = { cr.GlobalSize.X, cr.GlobalSize.Y, cr.GlobalSize.Z },
                         block = { cr.LocalSize.X, cr.LocalSize.Y, cr.LocalSize.Z } }
      end
    end
    rec.entries[#rec.entries + 1] = entry
  end
  for i, name in ipairs(order or {}) do rec.knobs[i] = { name = name, values = sorted_values(sets[name]) } end
  return rec
end

-- Reads a recording. Returns the table above, or nil and one sentence.
function M.read(file)
  local f, err = io.open(file, "rb")
  if not f then return nil, "cannot read replay file " .. (err or file) end
  local text = f:read("a")
  f:close()
  local doc, derr = json.decode(text)
  local repaired = false
  if doc == nil then
    if text:find('"tune_params_keys"', 1, true) and text:find('"cache"', 1, true) then
      doc = repair_kt(text)
      repaired = true
    end
    if doc == nil then
      return nil, string.format("replay file %s is not valid JSON (%s) and could not be repaired", file, derr)
    end
  end
  if type(doc) ~= "table" then return nil, "replay file " .. file .. " holds no object" end
  local rec, rerr
  if doc.cache and doc.tune_params then rec, rerr = from_kt(doc, file, repaired)
  elseif type(doc.results) == "table" then rec, rerr = from_t4(doc, file)
  elseif type(doc.Results) == "table" then rec, rerr = from_ktt(doc, file)
  else
    return nil, "replay file " .. file .. " is not a Kernel Tuner cache, a T4 results file or a KTT results file"
  end
  if not rec then return nil, rerr end
  if #rec.entries == 0 then return nil, "replay file " .. file .. " records no configurations" end
  rec.file = file
  return rec
end

return M
