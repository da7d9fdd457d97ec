-- What the three recording readers share (kopt.recording.kt, .t4, .ktt):
-- checked knob values and numbers, time units, and the Reader that collects
-- a recording's bad entries (strict mode stops at the first, lenient mode
-- skips and counts them).

local json = require("kopt.json")

local M = {}

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

-- A recorded cost (a compile time, a run's sample): 0 when absent, or when
-- NaN, as Python's json.dump writes a sample that failed (an unknown cost,
-- not a bad entry: the entry's time still ranks it).
local function number_or_nil(v, path)
  if v == nil or (type(v) == "number" and v ~= v) then return 0 end
  if not finite(v) or v < 0 then bad("%s: expected a non-negative number, got %s", path, show(v)) end
  return v
end

-- An integer knob value at or past 2^53 reaches kopt as a double, where
-- 2^53 and 2^53 + 1 are one number: two configs would merge unseen.
local function inexact(v)
  return finite(v) and math.type(v) == "float" and v == math.floor(v) and math.abs(v) >= 2^53
end

-- The shortest text that reads back as the number x.
local function exact_text(x)
  for digits = 15, 16 do
    local t = string.format("%." .. digits .. "g", x)
    if tonumber(t) == x then return t end
  end
  return string.format("%.17g", x)
end

-- Why a knob value that is a number cannot be one (NaN, an infinity, a
-- whole number past 2^53), or nil.
local function knob_number_fault(v)
  if type(v) ~= "number" then return nil end
  if v ~= v then return "NaN is not a knob value (no config can be told by it)" end
  if not finite(v) then
    return string.format("%s is not a knob value (configurations are written as JSON, which has no infinity)",
                         v > 0 and "Infinity" or "-Infinity")
  end
  if inexact(v) then
    return string.format("%s is past %s2^53, where JSON numbers no longer tell integers apart; write it as a string",
                         exact_text(v), v < 0 and "-" or "")
  end
  return nil
end

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
  local fault = knob_number_fault(v)
  if fault then bad("%s: %s", path, fault) end
  return v
end

-- Whether an objective's name reads as a time (Kernel Tuner's "time", T4's
-- "time", KTT's "TotalDuration", "kernel_runtime", "latency_us", ...).
local function time_like(name)
  local n = tostring(name):lower()
  return n:find("time") ~= nil or n:find("duration") ~= nil or n:find("latency") ~= nil
end

local MINIMISED_WORDS = { "energy", "cost", "loss", "error", "power", "joule", "watt" }
local function minimised(name)
  local n = name:lower()
  if time_like(n) then return true end
  for _, w in ipairs(MINIMISED_WORDS) do
    if n:find(w, 1, true) then return true end
  end
  return false
end

-- Whether a maximised objective is an efficiency (GFLOPS/W, a per-joule or
-- energy figure): work per energy, which a faster config need not have more
-- of (a lower clock saves power), so it is never replayed by the time each
-- entry records, in a Kernel Tuner cache or a T4 file.
local EFFICIENCY_WORDS = { "watt", "joule", "energy", "power", "efficien" }
local function efficiency(name)
  local n = tostring(name):lower()
  if n:find("/w%f[%A]") or n:find("/j%f[%A]") then return true end
  for _, w in ipairs(EFFICIENCY_WORDS) do
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

-- The parameter names of a configuration, sorted and joined: entries of one
-- recording must agree on them.
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

M.Bad = Bad
M.bad, M.bad_file, M.new_reader = bad, bad_file, new_reader
M.sorted_values, M.finite, M.stats, M.show = sorted_values, finite, stats, show
M.unit_to_ms, M.unit_of_name, M.time_like, M.minimised = unit_to_ms, unit_of_name, time_like, minimised
M.efficiency = efficiency
M.number_or_nil, M.knob_value, M.bool_name, M.inexact = number_or_nil, knob_value, bool_name, inexact
M.knob_number_fault = knob_number_fault
M.extend_values, M.add_entries, M.names_of, M.common_names = extend_values, add_entries, names_of, common_names

return M
