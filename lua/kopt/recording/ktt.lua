-- The reader of KTT result files.

local common = require("kopt.recording.common")

local bad, show = common.bad, common.show
local unit_to_ms, common_names, names_of, knob_value = common.unit_to_ms, common.common_names, common.names_of, common.knob_value
local number_or_nil, add_entries, sorted_values = common.number_or_nil, common.add_entries, common.sorted_values

-- KTT's ResultStatus names of a failure, and kopt's status for each
local KTT_FAILURES = { DeviceLimitsExceeded = "invalid", CompilationFailed = "compile_error",
                       ValidationFailed = "wrong", ComputationFailed = "launch_error" }
local KTT_STATUS_LIST = "Ok, ComputationFailed, ValidationFailed, CompilationFailed, DeviceLimitsExceeded"

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
    -- (a status kopt does not know, or an Ok without its time, is a bad
    -- entry: read as a failure, it hid the optimum without a word)
    if res.Status == nil then bad(".Status: missing (KTT writes %s)", KTT_STATUS_LIST) end
    if res.Status ~= "Ok" and not KTT_FAILURES[res.Status] then
      bad(".Status: %s is not a KTT status (%s)", show(res.Status), KTT_STATUS_LIST)
    end
    if res.Status == "Ok" then
      if type(res.TotalDuration) ~= "number" then bad(".TotalDuration: a result of Status Ok must record its time") end
      r:time(entry, ".TotalDuration", res.TotalDuration, scale, unit_label)
    else
      entry.status = KTT_FAILURES[res.Status]
      entry.log = res.Status
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
      -- (a number, or nothing: null or text there is no size)
      local function size(v)
        v = math.type(v) and v or (type(v) == "string" and tonumber(v)) or nil
        return v and v == v and v >= 0 and v < math.huge and v or nil
      end
      entry.resources = { regs = size(cd.RegistersCount), smem = size(cd.LocalMemorySize),
                          local_bytes = size(cd.PrivateMemorySize), max_threads = size(cd.MaxWorkGroupSize) }
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


return { read = from_ktt }
