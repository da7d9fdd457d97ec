-- The checks of a spec's fields at load: each names the file, the field's
-- path and what was expected ("specs/x.json: knobs[2].values: expected a
-- non-empty array of numbers or strings"), as a usage error. One Checker per
-- spec file (kopt.spec, kopt.spec_fields).
local errors = require("kopt.errors")
local expr = require("kopt.expr")
local json = require("kopt.json")

local M = {}

-- Device facts used in expressions when no GPU is attached (compile checks,
-- replay): an H100 SXM, the smallest Hopper part kopt targets.
M.default_device = {
  name = "NVIDIA H100 (assumed: no GPU attached)", arch = "sm_90", cc_major = 9, cc_minor = 0,
  sm_count = 132, max_smem_optin = 232448, max_smem_block = 49152, max_smem_sm = 233472,
  max_regs_block = 65536, max_regs_sm = 65536, max_threads_block = 1024, max_threads_sm = 2048,
  max_blocks_sm = 32,
  warp_size = 32, l2_bytes = 52428800, mem_bytes = 85520809984, assumed = true,
}

local Checker = {}
Checker.__index = Checker

function Checker:fail(path, fmt, ...)
  errors.usage("%s: %s: " .. fmt, self.file, path, ...)
end

function Checker:type_name(v)
  if type(v) == "table" then return (#v > 0 or next(v) == nil) and "an array" or "an object" end
  if v == json.null then return "null" end
  return type(v) == "number" and "a number" or type(v) == "string" and "a string" or type(v)
end

function Checker:object(v, path, optional)
  if v == nil and optional then return nil end
  if v == nil then self:fail(path, "missing (expected an object)") end
  if type(v) ~= "table" or (#v > 0) then
    self:fail(path, "expected an object, got %s", self:type_name(v))
  end
  return v
end

function Checker:array(v, path, what, optional, allow_empty)
  if v == nil and optional then return nil end
  if v == nil then self:fail(path, "missing (expected %s)", what) end
  if type(v) ~= "table" or (next(v) ~= nil and #v == 0) then
    self:fail(path, "expected %s, got %s", what, self:type_name(v))
  end
  if #v == 0 and not allow_empty then self:fail(path, "expected %s, got an empty array", what) end
  return v
end

function Checker:string(v, path, optional, pattern, what)
  if v == nil and optional then return nil end
  if type(v) ~= "string" then
    self:fail(path, "expected %s, got %s", what or "a string", v == nil and "nothing" or self:type_name(v))
  end
  if pattern and not v:match(pattern) then self:fail(path, "expected %s, got '%s'", what, v) end
  return v
end

-- positive: true (> 0), or "tolerance" (>= 0: 0 asks for exact equality).
-- real: a quantity of a float type, where 1e30 is a value like another
-- (else a whole number past 2^53 is refused: JSON would not carry it exactly)
function Checker:number(v, path, optional, positive, real)
  if v == nil and optional then return nil end
  local bad = type(v) ~= "number" or (positive == "tolerance" and (v ~= v or v < 0)) or (positive == true and v <= 0)
  if not bad and (v ~= v or v == math.huge or v == -math.huge) then
    self:fail(path, "expected a finite number, got %s (a JSON number too large for a double?)", tostring(v))
  end
  -- (>=: 2^53 + 1 arrives as 2^53 itself, so 2^53 cannot be told from it)
  if not bad and not real and math.type(v) == "float" and v == math.floor(v) and math.abs(v) >= 2^53 then
    self:fail(path, "%.17g is 2^53 or more: a JSON number is read as a double, so it would not be exact", v)
  end
  if bad then
    self:fail(path, "expected %s, got %s",
              positive == "tolerance" and "a number >= 0 (0: exactly equal)" or positive and "a positive number" or "a number",
              v == nil and "nothing" or type(v) == "number" and tostring(v) or self:type_name(v))
  end
  return v
end

-- known: the fields read; refused_later: those among them that a later
-- check refuses here with its own sentence (not offered as a suggestion).
function Checker:unknown_fields(obj, known, path, refused_later)
  local set, offered, skip = {}, {}, {}
  for _, k in ipairs(refused_later or {}) do skip[k] = true end
  for _, k in ipairs(known) do
    set[k] = true
    if not skip[k] then offered[#offered + 1] = k end
  end
  for k in pairs(obj) do
    if not set[k] then
      self:fail(path .. (path == "" and "" or ".") .. tostring(k),
                "unknown field (expected one of: %s)", table.concat(offered, ", "))
    end
  end
end

-- Compiles an expression and checks every name it reads is known.
-- The fields of `device` an expression may read: those of the assumed
-- device and those the driver adds (core/bind/gpu.c).
local DEVICE_FIELDS = { pci_bus_id = true, clock_khz = true, mem_clock_khz = true, mem_bus_width = true,
                        driver_version = true, index = true }

function Checker:expression(v, path, names)
  local e, err = expr.compile(v, path)
  if not e then self:fail(path, "%s", err) end
  for field in e.text:gmatch("%f[%w_]device%s*%.%s*([%a_][%w_]*)") do
    if M.default_device[field] == nil and not DEVICE_FIELDS[field] then
      local known = {}
      for k in pairs(M.default_device) do if k ~= "assumed" then known[#known + 1] = k end end
      for k in pairs(DEVICE_FIELDS) do known[#known + 1] = k end
      table.sort(known)
      self:fail(path, "expression '%s' reads device.%s, which kopt does not know (known: %s)", e.text, field,
                table.concat(known, ", "))
    end
  end
  for _, n in ipairs(e.names) do
    if not names[n] then
      -- (every name this field may read: a metric reads time_ms and the work
      -- too, which a constraint may not)
      local known = {}
      for k in pairs(names) do if type(k) == "string" and k ~= "device" then known[#known + 1] = k end end
      table.sort(known)
      local shown = #known > 24 and table.concat(known, ", ", 1, 24) .. ", ..." or table.concat(known, ", ")
      self:fail(path, "expression '%s' uses unknown name '%s' (known: %s%sdevice, and %s)", e.text, n, shown,
                #known > 0 and ", " or "", "ceil/floor/min/max/abs/sqrt/log/log2/exp/cdiv/int")
    end
  end
  return e
end

function M.new(file) return setmetatable({ file = file }, Checker) end

return M
