-- Spec loading and validation. Every error names the file, the field path and
-- what was expected: "specs/x.json: knobs[2].values: expected a non-empty
-- array of numbers or strings". The format is documented in specs/README.md.
local errors = require("kopt.errors")
local expr = require("kopt.expr")
local json = require("kopt.json")

local M = {}
local Spec = {}
Spec.__index = Spec

-- Device facts used in expressions when no GPU is attached (compile checks,
-- replay): an H100 SXM, the smallest Hopper part kopt targets.
M.default_device = {
  name = "NVIDIA H100 (assumed: no GPU attached)", arch = "sm_90", cc_major = 9, cc_minor = 0,
  sm_count = 132, max_smem_optin = 232448, max_smem_block = 49152, smem_per_sm = 233472,
  max_regs_block = 65536, regs_per_sm = 65536, max_threads_block = 1024, max_threads_sm = 2048,
  warp_size = 32, l2_bytes = 52428800, mem_bytes = 85520809984, assumed = true,
}

M.types = { f32 = 4, f16 = 2, bf16 = 2, f64 = 8, i32 = 4, i64 = 8, u32 = 4, i8 = 1, u8 = 1 }
M.inits = { normal = true, uniform = true, uniform01 = true, zeros = true, ones = true,
            arange = true, constant = true }

local top_fields = { "name", "description", "kernel", "problem", "knobs", "constraints", "launch",
                     "args", "reference", "tolerance", "work", "recording", "profile", "device", "torch" }

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

function Checker:number(v, path, optional, positive)
  if v == nil and optional then return nil end
  if type(v) ~= "number" or (positive and v <= 0) then
    self:fail(path, "expected %s, got %s", positive and "a positive number" or "a number",
              v == nil and "nothing" or type(v) == "number" and tostring(v) or self:type_name(v))
  end
  return v
end

function Checker:unknown_fields(obj, known, path)
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(obj) do
    if not set[k] then
      self:fail(path .. (path == "" and "" or ".") .. tostring(k),
                "unknown field (expected one of: %s)", table.concat(known, ", "))
    end
  end
end

-- Compiles an expression and checks every name it reads is known.
function Checker:expression(v, path, names)
  local e, err = expr.compile(v, path)
  if not e then self:fail(path, "%s", err) end
  for _, n in ipairs(e.names) do
    if not names[n] then
      self:fail(path, "expression '%s' uses unknown name '%s' (knobs, problem sizes, device and %s are known)",
                e.text, n, "ceil/floor/min/max/abs/sqrt/log/log2/exp/cdiv")
    end
  end
  return e
end

local IDENT = "^[%a_][%w_]*$"

-- "specs/../tests/data/x.json" -> "tests/data/x.json", for messages users read.
local function join(dir, rel)
  if rel:sub(1, 1) == "/" then return rel end
  local parts = {}
  for p in (dir .. "/" .. rel):gmatch("[^/]+") do
    if p == ".." and #parts > 0 and parts[#parts] ~= ".." then
      parts[#parts] = nil
    elseif p ~= "." then
      parts[#parts + 1] = p
    end
  end
  local path = table.concat(parts, "/")
  if dir:sub(1, 1) == "/" then path = "/" .. path end
  return path ~= "" and path or "."
end
M.join = join

local function read_text(c, rel, path, dir)
  local full = join(dir, rel)
  local f, err = io.open(full, "rb")
  if not f then c:fail(path, "cannot read '%s': %s", rel, (err:gsub("^[^:]*: ", ""))) end
  local text = f:read("a")
  f:close()
  return full, text
end

local function check_kernel(c, k, path, dir, with_launch, names)
  c:object(k, path)
  c:unknown_fields(k, { "source", "entry", "options", "launch", "state" }, path)
  local out = { entry = c:string(k.entry, path .. ".entry", false, IDENT, "a kernel function name") }
  out.path, out.source = read_text(c, c:string(k.source, path .. ".source"), path .. ".source", dir)
  out.options = {}
  for i, o in ipairs(c:array(k.options, path .. ".options", "an array of strings", true, true) or {}) do
    out.options[i] = c:string(o, string.format("%s.options[%d]", path, i))
  end
  -- module variables the kernel keeps across launches on purpose (a counter,
  -- a semaphore): the worker resets them before every launch
  out.state = {}
  for i, o in ipairs(c:array(k.state, path .. ".state", "an array of module variable names", true, true) or {}) do
    out.state[i] = c:string(o, string.format("%s.state[%d]", path, i), false, IDENT, "a module variable name")
  end
  if k.launch ~= nil then
    if not with_launch then c:fail(path .. ".launch", "not allowed here (the kernel's launch is the top-level 'launch')") end
    out.launch = M.check_launch(c, k.launch, path .. ".launch", names)
  end
  return out
end

function M.check_launch(c, l, path, names)
  c:object(l, path)
  c:unknown_fields(l, { "grid", "block", "smem" }, path)
  local out = {}
  for _, f in ipairs({ "grid", "block" }) do
    local a = c:array(l[f], path .. "." .. f, "an array of 1 to 3 expressions")
    if #a > 3 then c:fail(path .. "." .. f, "expected an array of 1 to 3 expressions, got %d", #a) end
    out[f] = {}
    for i, e in ipairs(a) do out[f][i] = c:expression(e, string.format("%s.%s[%d]", path, f, i), names) end
  end
  out.smem = l.smem ~= nil and c:expression(l.smem, path .. ".smem", names) or nil
  return out
end

local function check_knobs(c, knobs, reserved)
  c:array(knobs, "knobs", "a non-empty array of knobs ({\"name\": ..., \"values\": [...]})")
  local out, seen = {}, {}
  for i, k in ipairs(knobs) do
    local p = string.format("knobs[%d]", i)
    c:object(k, p)
    c:unknown_fields(k, { "name", "values", "tags", "default", "help" }, p)
    local name = c:string(k.name, p .. ".name", false, IDENT, "an identifier (letters, digits, _)")
    if seen[name] then c:fail(p .. ".name", "duplicate knob '%s'", name) end
    if reserved[name] then c:fail(p .. ".name", "'%s' is reserved (%s)", name, reserved[name]) end
    seen[name] = true
    local what = "a non-empty array of numbers or strings"
    local values = c:array(k.values, p .. ".values", what)
    local vseen = {}
    for j, v in ipairs(values) do
      if type(v) ~= "number" and type(v) ~= "string" then
        c:fail(string.format("%s.values[%d]", p, j), "expected a number or a string, got %s", c:type_name(v))
      end
      if vseen[v] then c:fail(string.format("%s.values[%d]", p, j), "duplicate value %s", tostring(v)) end
      vseen[v] = true
    end
    local tags = {}
    for j, t in ipairs(c:array(k.tags, p .. ".tags", "an array of strings", true, true) or {}) do
      tags[j] = c:string(t, string.format("%s.tags[%d]", p, j))
    end
    if k.default ~= nil and not vseen[k.default] then
      c:fail(p .. ".default", "%s is not one of the knob's values", tostring(k.default))
    end
    out[i] = { name = name, values = values, tags = tags, default = k.default, help = k.help }
  end
  return out
end

local function check_args(c, args, names)
  local out, seen = {}, {}
  for i, a in ipairs(c:array(args, "args", "an array of kernel arguments", true, true) or {}) do
    local p = string.format("args[%d]", i)
    c:object(a, p)
    c:unknown_fields(a, { "name", "type", "shape", "value", "init", "output", "constant", "help" }, p)
    local arg = { name = c:string(a.name, p .. ".name", false, IDENT, "an identifier") }
    if seen[arg.name] then c:fail(p .. ".name", "duplicate argument '%s'", arg.name) end
    seen[arg.name] = true
    local t = c:string(a.type, p .. ".type")
    if not M.types[t] then
      local ts = {}
      for k in pairs(M.types) do ts[#ts + 1] = k end
      table.sort(ts)
      c:fail(p .. ".type", "unknown type '%s' (expected one of %s)", t, table.concat(ts, ", "))
    end
    arg.type = t
    if (a.value == nil) == (a.shape == nil) then
      c:fail(p, "expected exactly one of 'value' (a scalar) or 'shape' (an array)")
    end
    if a.value ~= nil then
      arg.kind = "scalar"
      arg.value = c:expression(a.value, p .. ".value", names)
      if a.output or a.init or a.constant then c:fail(p, "a scalar takes no output, init or constant") end
    else
      arg.kind = a.constant and "constant" or "array"
      arg.shape = {}
      for j, e in ipairs(c:array(a.shape, p .. ".shape", "a non-empty array of expressions")) do
        arg.shape[j] = c:expression(e, string.format("%s.shape[%d]", p, j), names)
      end
      if a.output ~= nil and type(a.output) ~= "boolean" then c:fail(p .. ".output", "expected true or false") end
      arg.output = a.output == true
      if arg.output and arg.kind == "constant" then c:fail(p, "a __constant__ symbol cannot be an output") end
      local init = a.init or (arg.output and "zeros" or "normal")
      if type(init) == "string" then init = { dist = init } end
      c:object(init, p .. ".init")
      if not M.inits[init.dist] then
        c:fail(p .. ".init", "unknown distribution '%s' (expected normal, uniform, uniform01, zeros, ones, arange or {\"dist\": \"constant\", \"value\": x})", tostring(init.dist))
      end
      if init.dist == "constant" then c:number(init.value, p .. ".init.value") end
      arg.init = init
    end
    out[i] = arg
  end
  return out
end

-- A kernel that issues MMA instructions is a matrix kernel: its tensor pipes
-- should be busy (tensor_idle) and its peak is the tensor-core peak.
function M.is_matrix(source)
  if type(source) ~= "string" then return false end
  return source:find("wmma", 1, true) ~= nil or source:find("mma_sync", 1, true) ~= nil
    or source:find("wgmma", 1, true) ~= nil or source:find("mma.sync", 1, true) ~= nil
end

-- Loads and validates a spec. opts.device: device facts for expressions
-- (default: M.default_device). Raises a user error on any problem.
function M.load(path, opts)
  opts = opts or {}
  local raw, err = json.read_file(path)
  if raw == nil then errors.usage("%s", err) end
  local c = setmetatable({ file = path }, Checker)
  if type(raw) ~= "table" or #raw > 0 then errors.usage("%s: expected a JSON object at the top level", path) end
  c:unknown_fields(raw, top_fields, "")
  local dir = path:match("^(.*)/[^/]*$") or "."
  local self = setmetatable({ path = path, dir = dir, raw = raw }, Spec)
  self.name = c:string(raw.name, "name", false, "^[%w_.%-]+$", "a name of letters, digits, '_', '-', '.'")
  self.description = c:string(raw.description, "description", true)

  self.problem = {}
  local reserved = { device = "device facts" }
  for k in pairs(expr.helpers) do reserved[k] = "a built-in function" end
  for k, v in pairs(c:object(raw.problem, "problem", true) or {}) do
    if not tostring(k):match(IDENT) then c:fail("problem." .. k, "expected an identifier as size name") end
    if reserved[k] then c:fail("problem." .. k, "'%s' is reserved (%s)", k, reserved[k]) end
    self.problem[k] = c:number(v, "problem." .. k, false, true)
  end
  for k in pairs(self.problem) do reserved[k] = "a problem size" end
  -- No kernel: the reference defines the problem and a kernel is to be
  -- synthesized (strategies/synthesize.lua), whose knobs come with it.
  self.synthesis = raw.kernel == nil
  if self.synthesis and raw.reference == nil then
    c:fail("kernel", "missing (expected an object; a spec without a kernel needs a 'reference' to synthesize one from)")
  end
  self.knobs = (self.synthesis and raw.knobs == nil) and {} or check_knobs(c, raw.knobs, reserved)

  local names = { device = true }
  for k in pairs(self.problem) do names[k] = true end
  for _, k in ipairs(self.knobs) do names[k.name] = true end
  self.names = names

  self.constraints = {}
  for i, e in ipairs(c:array(raw.constraints, "constraints", "an array of expressions", true, true) or {}) do
    self.constraints[i] = c:expression(e, string.format("constraints[%d]", i), names)
  end
  if not self.synthesis then self.kernel = check_kernel(c, raw.kernel, "kernel", dir, false, names) end
  -- Compiled fields are named apart from the methods spec:launch() and spec:args().
  self.launch_exprs = raw.launch ~= nil and M.check_launch(c, raw.launch, "launch", names) or nil
  self.arg_specs = check_args(c, raw.args, names)
  if raw.reference ~= nil then
    self.reference = check_kernel(c, raw.reference, "reference", dir, true, names)
  end
  if self.synthesis then
    -- Until a kernel is synthesized the reference stands in for it (the
    -- fallback when no attempt is correct), launched as the reference is.
    local ref = self.reference
    self.launch_exprs = self.launch_exprs or ref.launch
    if not self.launch_exprs then
      c:fail("reference.launch", "missing (a spec without a kernel launches its reference with it, or with 'launch')")
    end
    self.kernel = { entry = ref.entry, path = ref.path, source = ref.source, options = ref.options, state = {} }
  end
  local tol = c:object(raw.tolerance, "tolerance", true) or {}
  c:unknown_fields(tol, { "rel_l2", "max_abs" }, "tolerance")
  self.tolerance = { rel_l2 = c:number(tol.rel_l2, "tolerance.rel_l2", true, true),
                     max_abs = c:number(tol.max_abs, "tolerance.max_abs", true, true) }
  local work = c:object(raw.work, "work", true) or {}
  c:unknown_fields(work, { "flops", "bytes" }, "work")
  self.work_expr = {
    flops = work.flops ~= nil and c:expression(work.flops, "work.flops", names) or nil,
    bytes = work.bytes ~= nil and c:expression(work.bytes, "work.bytes", names) or nil,
  }
  if raw.recording ~= nil then
    local rec = c:string(raw.recording, "recording")
    self.recording = join(dir, rec)
  end
  -- The problem in PyTorch (kopt suite's baselines, tools/suite_baselines.py):
  -- an expression over the input arguments and problem sizes, by name.
  local torch = c:object(raw.torch, "torch", true)
  if torch then
    c:unknown_fields(torch, { "expr", "kernelbench" }, "torch")
    self.torch = { expr = c:string(torch.expr, "torch.expr"),
                   kernelbench = c:string(torch.kernelbench, "torch.kernelbench", true) }
  end
  local prof = c:object(raw.profile, "profile", true) or {}
  c:unknown_fields(prof, { "metrics" }, "profile")
  self.profile_metrics = c:array(prof.metrics, "profile.metrics", "an array of metric names", true)
  self.device = opts.device or M.default_device
  self.checker = c
  return self
end

function Spec:set_device(device) self.device = device end

local function describe_config(self, config)
  local parts = {}
  for _, k in ipairs(self.knobs) do parts[#parts + 1] = k.name .. "=" .. tostring(config[k.name]) end
  return table.concat(parts, ", ")
end

-- Evaluates a compiled expression for a config; raises a user error naming
-- the expression and the config when it fails.
function Spec:value(e, config)
  local v, err = e:number(config, self.problem, { device = self.device })
  if err then errors.usage("%s: %s: %s", self.path, e.label, err) end
  return v
end

-- A value that must be a whole number >= min (launch dimensions, shapes,
-- shared memory), named by its expression when it is not.
function Spec:count(e, config, min)
  local v = self:value(e, config)
  if math.type(v) ~= "integer" or v < min then
    errors.usage("%s: %s: expression '%s' gave %s, expected %s (at %s)", self.path, e.label, e.text, tostring(v),
                 min > 0 and "a positive integer" or "a non-negative integer", describe_config(self, config))
  end
  return v
end

local function dims(self, list, config)
  local d = { 1, 1, 1 }
  for i, e in ipairs(list) do d[i] = self:count(e, config, 1) end
  return d
end

function Spec:launch_for(launch, config)
  if not launch then errors.usage("%s: launch: missing (needed to run on a GPU)", self.path) end
  return { grid = dims(self, launch.grid, config), block = dims(self, launch.block, config),
           smem = launch.smem and self:count(launch.smem, config, 0) or 0 }
end

function Spec:launch(config) return self:launch_for(self.launch_exprs, config) end

function Spec:reference_launch(config)
  return self:launch_for(self.reference and self.reference.launch or self.launch_exprs, config)
end

function Spec:args(config)
  local out = {}
  for i, a in ipairs(self.arg_specs) do
    local r = { name = a.name, type = a.type, kind = a.kind, output = a.output, init = a.init }
    if a.kind == "scalar" then
      r.value = self:value(a.value, config)
    else
      r.shape, r.count = {}, 1
      for j, e in ipairs(a.shape) do
        r.shape[j] = self:count(e, config, 1)
        r.count = r.count * r.shape[j]
      end
    end
    out[i] = r
  end
  return out
end

function Spec:work(config)
  local w = {}
  for k, e in pairs(self.work_expr) do w[k] = self:value(e, config) end
  return w
end

local function define_value(v)
  if math.type(v) == "float" then return string.format("%.17g", v) end
  return tostring(v)
end

function Spec:defines(config)
  local out = {}
  for i, k in ipairs(self.knobs) do out[i] = "-D" .. k.name .. "=" .. define_value(config[k.name]) end
  return out
end

function Spec:compile_options(config)
  local out = {}
  for _, o in ipairs(self.kernel.options) do out[#out + 1] = o end
  for _, d in ipairs(self:defines(config)) do out[#out + 1] = d end
  return out
end

return M
