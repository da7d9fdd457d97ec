-- Spec loading and validation. Every error names the file, the field path and
-- what was expected: "specs/x.json: knobs[2].values: expected a non-empty
-- array of numbers or strings". The format is documented in specs/README.md.
local errors = require("kopt.errors")
local expr = require("kopt.expr")
local checker = require("kopt.spec_checker")
local compile = require("kopt.compile")
local fields = require("kopt.spec_fields")
local hostdata = require("kopt.hostdata")
local json = require("kopt.json")
local spec_knobs = require("kopt.spec_knobs")
local spec_lint = require("kopt.spec_lint")
local sys = require("kopt.sys")

local M = {}
local INT_RANGE, FLOAT_MAX  -- (below, with Spec:args)
local Spec = {}
Spec.__index = Spec
M.default_device = checker.default_device  -- (an H100 SXM: kopt.spec_checker)

M.types = { f32 = 4, f16 = 2, bf16 = 2, f64 = 8, i32 = 4, i64 = 8, u32 = 4, i8 = 1, u8 = 1, i16 = 2, u16 = 2, u64 = 8 }
M.inits = { normal = true, uniform = true, uniform01 = true, zeros = true, ones = true,
            arange = true, constant = true }

local top_fields = { "name", "description", "kernel", "problem", "knobs", "constraints", "launch",
                     "args", "reference", "tolerance", "work", "recording", "profile", "torch",
                     "verify", "metrics", "objective", "pipeline" }

local IDENT = "^[%a_][%w_]*$"

-- (a data file must be a regular file: a directory is refused by name)
local function sys_stat(path) return sys.stat(path) == "file" end

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

-- A file the spec names (a source, a generator, a check): a regular file,
-- read whole (a directory, a device or an empty name is refused by name).
local function read_text(c, rel, path, dir)
  if rel == "" then c:fail(path, "expected a file name, got an empty string") end
  local full = join(dir, rel)
  local text, err = json.read_text(full)
  if not text then c:fail(path, "cannot read '%s': %s", rel, (err:gsub("^.-: ", ""))) end
  -- (the compiler reads a source as a C string: what follows a NUL byte
  -- would be cut off unseen)
  local nul = text:find("\0", 1, true)
  if nul then
    local _, line = text:sub(1, nul):gsub("\n", "")
    c:fail(path, "'%s' holds a NUL byte (line %d): a kernel source is text", rel, line + 1)
  end
  return full, text
end

-- An entry is a function name or a template instance whose arguments may
-- name knobs: "stencil<float, BLOCK>" (NVRTC instantiates it by its name
-- expression).
local ENTRY_WHAT = "a kernel function name (qualified or not, 'ops::scale'), or a template instance such as " ..
  "'stencil<float, BLOCK>'"

local function check_entry(c, v, path)
  local e = c:string(v, path, false, nil, ENTRY_WHAT)
  local name, targs = e:match("^([%a_][%w_:]*)%s*(<.*>)$")
  -- (a qualified name, "ops::scale", is a name expression NVRTC lowers too)
  local qualified = e:match("^[%a_][%w_]*::[%a_][%w_:]*$") and not e:find(":::", 1, true) and e:sub(-1) ~= ":"
  if not (e:match(IDENT) or qualified or (name and targs and not targs:find("[;{}\"'`]"))) then
    c:fail(path, "expected %s, got '%s'", ENTRY_WHAT, e)
  end
  return e
end

-- An option that sets the target (-arch, --gpu-architecture) is refused:
-- kopt appends the target itself, from `arch` or the GPU, and checks it
-- against the device, so a second one was either dropped or merged.
local function target_free(c, o, where, owner)
  if o:match("^%-arch") or o:match("^%-%-gpu%-architecture") then
    c:fail(where, "'%s' sets the compile target, which kopt chooses: set %s.arch instead (for example \"sm_90a\")",
           o, owner)
  end
  return o
end

-- Compiler options with their include folders read from the spec's folder
-- when relative, as every path in a spec is (not from where kopt runs).
local function anchored_options(list, dir)
  return compile.map_include_dirs(list, function(path) return join(dir, path) end)
end

-- The kernel parameters the worker passes for args: every arg but the
-- __constant__ inputs and those marked param=false, in order.
local function check_kernel(c, k, path, dir, with_launch, names)
  c:object(k, path)
  c:unknown_fields(k, with_launch and { "source", "entry", "options", "launch", "state", "knobs", "arch", "args" }
                     or { "source", "entry", "options", "launch", "state", "arch", "kernel_tuner_defines" }, path,
                   with_launch and { "state" } or { "launch" })
  -- the defines Kernel Tuner adds of its own: block_size_x/y/z (the launch's
  -- block, for those that are no knob), grid_size_x/y/z and kernel_tuner
  local kt_defines
  if k.kernel_tuner_defines ~= nil then
    if type(k.kernel_tuner_defines) ~= "boolean" then
      c:fail(path .. ".kernel_tuner_defines", "expected true or false, got %s", c:type_name(k.kernel_tuner_defines))
    end
    kt_defines = k.kernel_tuner_defines
  end
  -- a pipeline's kernel file names its entries in the pipeline
  local out = { entry = check_entry(c, k.entry == nil and c.pipeline_entry or k.entry, path .. ".entry"),
                kernel_tuner_defines = kt_defines }
  -- an architecture-specific target (sm_90a: wgmma, setmaxnreg) runs only on
  -- that exact compute capability
  if k.arch ~= nil then
    out.arch = c:string(k.arch, path .. ".arch", false, "^sm_%d+a?$", "an architecture such as sm_90a")
  end
  -- knobs the reference sees as defines: the ones that change the problem
  -- (a filter size), never the ones that only change how it is computed
  out.knobs = {}
  for i, n in ipairs(c:array(k.knobs, path .. ".knobs", "an array of knob names", true, true) or {}) do
    local p = string.format("%s.knobs[%d]", path, i)
    out.knobs[i] = c:string(n, p, false, IDENT, "a knob name")
  end
  out.path, out.source = read_text(c, c:string(k.source, path .. ".source"), path .. ".source", dir)
  out.options = {}
  for i, o in ipairs(c:array(k.options, path .. ".options", "an array of strings", true, true) or {}) do
    out.options[i] = target_free(c, c:string(o, string.format("%s.options[%d]", path, i)),
                                 string.format("%s.options[%d]", path, i), path)
  end
  out.options = anchored_options(out.options, dir)
  -- module variables the kernel keeps across launches on purpose (a counter,
  -- a semaphore): the worker resets them before every launch
  out.state = {}
  for i, o in ipairs(c:array(k.state, path .. ".state", "an array of module variable names", true, true) or {}) do
    out.state[i] = c:string(o, string.format("%s.state[%d]", path, i), false, IDENT, "a module variable name")
  end
  -- (the worker resets the kernel's declared state only: a reference's would
  -- carry over from one launch to the next, unseen)
  if with_launch and #out.state > 0 then
    c:fail(path .. ".state", "a reference cannot keep state across launches (kopt resets only the kernel's); " ..
           "write it so that every launch starts afresh")
  end
  if k.launch ~= nil then
    if not with_launch then c:fail(path .. ".launch", "not allowed here (the kernel's launch is the top-level 'launch')") end
    out.launch = M.check_launch(c, k.launch, path .. ".launch", names)
    if out.launch.cluster and #out.launch.cluster > 0 then
      c:fail(path .. ".launch.cluster", "the reference runs without clusters (only the kernel's launch has them)")
    end
  end
  return out
end

function M.check_launch(c, l, path, names)
  c:object(l, path)
  c:unknown_fields(l, { "grid", "block", "smem", "cluster", "cooperative" }, path)
  local out = {}
  if l.cooperative ~= nil then
    -- Only the candidate's own launch: a reference or a later pipeline kernel
    -- that waits on the whole grid would hang where kopt launches it plainly.
    if path ~= "launch" then
      c:fail(path .. ".cooperative", "only the kernel's top-level 'launch' can be cooperative")
    end
    if type(l.cooperative) == "boolean" then
      out.cooperative = l.cooperative
    elseif type(l.cooperative) == "string" then
      out.cooperative = c:expression(l.cooperative, path .. ".cooperative", names)
    else
      c:fail(path .. ".cooperative", "expected true, false or an expression of the knobs")
    end
  end
  for _, f in ipairs({ "grid", "block", "cluster" }) do
    local a = c:array(l[f], path .. "." .. f, "an array of 1 to 3 expressions", f == "cluster") or {}
    if #a > 3 then c:fail(path .. "." .. f, "expected an array of 1 to 3 expressions, got %d", #a) end
    out[f] = {}
    for i, e in ipairs(a) do out[f][i] = c:expression(e, string.format("%s.%s[%d]", path, f, i), names) end
  end
  out.smem = l.smem ~= nil and c:expression(l.smem, path .. ".smem", names) or nil
  return out
end

local function check_tensor_map(c, t, p, names)
  c:object(t, p)
  c:unknown_fields(t, { "of", "box", "swizzle" }, p)
  local out = { of = c:string(t.of, p .. ".of", false, IDENT, "an argument's name"), box = {} }
  local box = c:array(t.box, p .. ".box", "an array of 1 to 5 expressions, outermost first") or {}
  if #box < 1 or #box > 5 then c:fail(p .. ".box", "expected 1 to 5 entries, got %d", #box) end
  for j, e in ipairs(box) do out.box[j] = c:expression(e, string.format("%s.box[%d]", p, j), names) end
  local sw = t.swizzle or 0
  if sw ~= 0 and sw ~= 32 and sw ~= 64 and sw ~= 128 then
    c:fail(p .. ".swizzle", "expected the number 0, 32, 64 or 128 (bytes), got %s",
           type(sw) == "string" and string.format("the string \"%s\"", sw) or tostring(sw))
  end
  out.swizzle = math.tointeger(sw)
  return out
end

local function check_args(c, args, names, dir)
  local out, seen = {}, {}
  for i, a in ipairs(c:array(args, "args", "an array of kernel arguments", true, true) or {}) do
    local p = string.format("args[%d]", i)
    c:object(a, p)
    c:unknown_fields(a, { "name", "type", "shape", "value", "init", "output", "constant", "help", "tensor_map", "param", "scratch" }, p)
    local arg = { name = c:string(a.name, p .. ".name", false, IDENT, "an identifier") }
    if seen[arg.name] then c:fail(p .. ".name", "duplicate argument '%s'", arg.name) end
    seen[arg.name] = true
    if a.help ~= nil then c:string(a.help, p .. ".help") end
    -- (a flag is true or false: "false" and 0 are true to Lua, and made
    -- an argument a __constant__ symbol without a word)
    for _, flag in ipairs({ "constant", "param", "scratch" }) do
      if a[flag] ~= nil and type(a[flag]) ~= "boolean" then
        c:fail(p .. "." .. flag, "expected true or false, got %s", c:type_name(a[flag]))
      end
    end
    if a.tensor_map ~= nil then
      if a.type or a.shape or a.value or a.init or a.output or a.constant or a.param ~= nil or a.scratch ~= nil then
        c:fail(p, "a tensor map takes its type and shape from the array it maps: give only 'name' and 'tensor_map'")
      end
      arg.kind, arg.tmap = "tensormap", check_tensor_map(c, a.tensor_map, p .. ".tensor_map", names)
      out[i] = arg
      goto next_arg
    end
    do
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
      -- (both are for arrays: a scalar is always a parameter, never a buffer)
      if a.param == false then c:fail(p .. ".param", "a scalar is always a kernel parameter ('param' is for arrays)") end
      if a.scratch then c:fail(p .. ".scratch", "a scalar is no buffer ('scratch' is for arrays)") end
    else
      arg.kind = a.constant and "constant" or "array"
      arg.shape = {}
      for j, e in ipairs(c:array(a.shape, p .. ".shape", "a non-empty array of expressions")) do
        arg.shape[j] = c:expression(e, string.format("%s.shape[%d]", p, j), names)
      end
      if a.output ~= nil and type(a.output) ~= "boolean" then c:fail(p .. ".output", "expected true or false") end
      -- scratch: a buffer one kernel of a pipeline writes and a later one
      -- reads; poisoned before every run like an output, never compared
      arg.scratch = a.scratch == true
      if arg.scratch and (a.init ~= nil or a.constant) then
        c:fail(p .. ".scratch", "a scratch buffer takes no init and is no constant")
      end
      -- (an output marked scratch too would never be compared)
      if arg.scratch and a.output == true then
        c:fail(p .. ".scratch", "an output is compared with the reference, a scratch buffer never is: not both")
      end
      arg.output = a.output == true or arg.scratch
      -- param=false: an input that is no kernel parameter, only the initial
      -- contents of an in/out buffer ("init": "copy:NAME")
      if a.param == false and (arg.output or arg.kind == "constant") then
        c:fail(p .. ".param", "only an input array can be left out of the kernel's parameters")
      end
      arg.param = a.param ~= false
      if arg.output and arg.kind == "constant" then c:fail(p, "a __constant__ symbol cannot be an output") end
      local init = fields.check_init(c, a.init, p .. ".init", arg, dir)
      -- an output is poisoned before every launch (every element must be
      -- written): a distribution given to it would be silently dropped
      if arg.output and not arg.scratch and a.init ~= nil and init.dist ~= "copy" then
        c:fail(p .. ".init", "an output is poisoned before every launch, so '%s' would never be its contents; an " ..
               "output that starts from values is an in/out buffer: \"copy:NAME\" of an input (zeros: an input " ..
               "{\"init\": {\"dist\": \"zeros\", \"fixed\": true}, \"param\": false}; specs/README.md)",
               tostring(init.dist))
      end
      if init.dist ~= "copy" and init.dist ~= "file" and init.dist ~= "generate" and not M.inits[init.dist] then
        c:fail(p .. ".init", "unknown distribution '%s' (expected normal, uniform, uniform01, zeros, ones, arange or {\"dist\": \"constant\", \"value\": x})", tostring(init.dist))
      end
      if init.dist == "constant" then
        local range = INT_RANGE[arg.type]
        local v = c:number(init.value, p .. ".init.value", false, nil, range == nil)
        -- (the worker would clamp or round it to the element type without a word)
        if range and (math.tointeger(v) == nil or v < range[1] or v > range[2]) then
          c:fail(p .. ".init.value", "%s is not a value of type %s: expected an integer from %s to %s", tostring(v), arg.type,
                 tostring(range[1]), tostring(range[2]))
        end
        local fmax = FLOAT_MAX[arg.type]
        if fmax and hostdata.overflows(v, arg.type) then
          c:fail(p .. ".init.value", "%s is past the largest finite %s (%g): it would be infinity", tostring(v), arg.type, fmax)
        end
      end
      arg.init = init
    end
    out[i] = arg
    end
    ::next_arg::
  end
  -- a tensor map's array: an input or output array, of as many dims as its box
  for i, arg in ipairs(out) do
    if arg.kind == "tensormap" then
      local p = string.format("args[%d].tensor_map.of", i)
      local src
      for j, b in ipairs(out) do if b.name == arg.tmap.of then src = j end end
      local b = out[src or 0]
      if not b or b.kind ~= "array" then
        c:fail(p, "'%s' must name an array argument (not a scalar, a constant or another tensor map)", arg.tmap.of)
      end
      if #b.shape ~= #arg.tmap.box then
        c:fail(string.format("args[%d].tensor_map.box", i), "has %d entries, '%s' has %d dimensions",
               #arg.tmap.box, b.name, #b.shape)
      end
      arg.tmap.index, arg.type = src, b.type
    end
  end
  -- an in/out buffer's source: an input array of the same type
  for i, arg in ipairs(out) do
    local from = arg.init and arg.init.from
    if from then
      local p = string.format("args[%d].init", i)
      local src
      for j, b in ipairs(out) do if b.name == from then src = j end end
      if not src then c:fail(p, "'copy:%s' names no argument", from) end
      local b = out[src]
      if b.kind ~= "array" or b.output then
        c:fail(p, "'copy:%s' must name an input array (not an output, a scalar or a constant)", from)
      end
      if b.type ~= arg.type then
        c:fail(p, "'copy:%s' is of type %s, this output of type %s", from, b.type, arg.type)
      end
      arg.init.index = src
    end
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
  local raw, err, text = json.read_file(path)
  if raw == nil then errors.usage("%s", err) end
  local dup, dup_line = json.duplicate_key(text)
  if dup then
    errors.usage("%s: line %d: '%s' is given twice (JSON keeps only the last one; merge the two)", path, dup_line, dup)
  end
  local c = checker.new(path)
  if type(raw) ~= "table" or #raw > 0 then errors.usage("%s: expected a JSON object at the top level", path) end
  c:unknown_fields(raw, top_fields, "")
  local dir = path:match("^(.*)/[^/]*$") or "."
  local self = setmetatable({ path = path, dir = dir, raw = raw }, Spec)
  self.name = c:string(raw.name, "name", false, "^[%w_][%w_.%-]*$",
                       "a name of letters, digits, '_', '-', '.' that starts with a letter, digit or '_'")
  self.description = c:string(raw.description, "description", true)

  self.problem = {}
  local reserved = { device = "device facts" }
  for k in pairs(expr.helpers) do reserved[k] = "a built-in function" end
  for k, v in pairs(c:object(raw.problem, "problem", true) or {}) do
    if not tostring(k):match(IDENT) then c:fail("problem." .. k, "expected an identifier as size name") end
    if reserved[k] then c:fail("problem." .. k, "'%s' is reserved (%s)", k, reserved[k]) end
    if spec_knobs.LUA_WORDS[k] then c:fail("problem." .. k, "'%s' is a word of the expression language (Lua)", k) end
    self.problem[k] = c:number(v, "problem." .. k, false, true)
  end
  for k in pairs(self.problem) do reserved[k] = "a problem size" end
  -- No kernel: the reference defines the problem and a kernel is to be
  -- synthesized (strategies/synthesize.lua), whose knobs come with it.
  self.synthesis = raw.kernel == nil
  if self.synthesis and raw.reference == nil then
    c:fail("kernel", "missing (expected an object; a spec without a kernel needs a 'reference' to synthesize one from)")
  end
  self.knobs = (self.synthesis and raw.knobs == nil) and {} or spec_knobs.check_knobs(c, raw.knobs, reserved)

  for i, k in ipairs(self.knobs) do
    for v, list in pairs(k.options or {}) do
      for j, o in ipairs(list) do target_free(c, o, string.format("knobs[%d].options[%q][%d]", i, v, j), "kernel") end
      k.options[v] = anchored_options(list, dir)
    end
  end

  local names = { device = true }
  for k in pairs(self.problem) do names[k] = true end
  for _, k in ipairs(self.knobs) do names[k.name] = true end
  self.names = names

  self.constraints = {}
  for i, e in ipairs(c:array(raw.constraints, "constraints", "an array of expressions", true, true) or {}) do
    self.constraints[i] = c:expression(e, string.format("constraints[%d]", i), names)
  end
  if raw.pipeline ~= nil then
    local pl = c:array(raw.pipeline, "pipeline", "an array of kernels ({\"entry\": ..., \"launch\": ..., \"args\": [...]})")
    for i, k in ipairs(pl) do c:object(k, string.format("pipeline[%d]", i)) end
    c.pipeline_entry = type(pl[1]) == "table" and pl[1].entry or nil
  end
  if not self.synthesis then self.kernel = check_kernel(c, raw.kernel, "kernel", dir, false, names) end
  c.pipeline_entry = nil
  -- Compiled fields are named apart from the methods spec:launch() and spec:args().
  self.launch_exprs = raw.launch ~= nil and M.check_launch(c, raw.launch, "launch", names) or nil
  if raw.pipeline ~= nil and raw.launch ~= nil then
    c:fail("launch", "not allowed with a pipeline (each of its kernels has its own launch)")
  end
  self.arg_specs = check_args(c, raw.args, names, dir)
  if raw.reference ~= nil then
    self.reference = check_kernel(c, raw.reference, "reference", dir, true, names)
    local knob_set = {}
    for _, k in ipairs(self.knobs) do knob_set[k.name] = true end
    for i, n in ipairs(self.reference.knobs) do
      if not knob_set[n] then c:fail(string.format("reference.knobs[%d]", i), "'%s' is not a knob of this spec", n) end
    end
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
  self.tolerance = { rel_l2 = c:number(tol.rel_l2, "tolerance.rel_l2", true, "tolerance"),
                     max_abs = c:number(tol.max_abs, "tolerance.max_abs", true, "tolerance") }
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
  if raw.pipeline ~= nil then
    self.pipeline = fields.check_pipeline(c, raw.pipeline, self.arg_specs, names)
    self.launch_exprs = self.pipeline[1].launch
    if self.kernel.entry ~= self.pipeline[1].entry then
      c:fail("kernel.entry", "'%s' is not the pipeline's first kernel '%s' (leave it out)", self.kernel.entry,
             self.pipeline[1].entry)
    end
    -- (it would run with the first kernel's launch, which knobs may change)
    if self.reference and not self.reference.launch then
      c:fail("reference.launch", "missing: a pipeline has no launch of its own for the reference to share")
    end
  end
  if self.reference and raw.reference.args ~= nil then
    self.reference.args = fields.arg_list(c, raw.reference.args, "reference.args", self.arg_specs)
  end
  self.verify = fields.check_verify(c, raw.verify, self.arg_specs, names, dir)
  -- (a spec that compares no output and has no check passes any kernel,
  -- one that writes nothing included)
  local compared = self.verify.check ~= nil
  for _, a in ipairs(self.arg_specs) do
    local v = self.verify.outputs[a.name]
    if a.output and not a.scratch and not (v and v.compare == false) then compared = true end
  end
  -- (without a reference nothing runs on a GPU: the cuda backend refuses it)
  if not compared and self.reference then
    c:fail("args", "no output is compared with the reference and there is no verify.check, so nothing would check " ..
           "the kernel: mark its result \"output\": true")
  end
  spec_lint.check_signatures(c, self)
  self.metric_exprs, self.objective = fields.check_metrics(c, raw.metrics, raw.objective, names, self.work_expr)
  self.notes = spec_lint.notes(self)
  local prof = c:object(raw.profile, "profile", true) or {}
  c:unknown_fields(prof, { "metrics" }, "profile")
  self.profile_metrics = c:array(prof.metrics, "profile.metrics", "an array of metric names", true)
  for i, m in ipairs(self.profile_metrics or {}) do c:string(m, string.format("profile.metrics[%d]", i)) end
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

-- The methods and checks of the fields in spec_fields.lua, which borrow
-- these helpers.
fields.install(Spec, { join = join, read_text = read_text, describe = describe_config, types = M.types,
                       ident = IDENT, exists = sys_stat, check_launch = M.check_launch })

-- Evaluates a compiled expression for a config; raises a user error naming
-- the expression and the config when it fails.
function Spec:value(e, config)
  local v, err, from_boolean = e:number(config, self.problem, { device = self.device })
  if err then errors.usage("%s: %s: %s", self.path, e.label, err) end
  return v, from_boolean
end

-- A value that must be a whole number >= min (launch dimensions, shapes,
-- shared memory), named by its expression when it is not.
function Spec:count(e, config, min)
  local v, from_boolean = self:value(e, config)
  -- (true and false are 1 and 0 to a metric, not to a size: "n > BS" as a grid)
  if from_boolean or math.type(v) ~= "integer" or v < min then
    errors.usage("%s: %s: expression '%s' gave %s, expected %s (at %s)", self.path, e.label, e.text,
                 from_boolean and tostring(v == 1) or tostring(v),
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
  local l = { grid = dims(self, launch.grid, config), block = dims(self, launch.block, config),
              smem = launch.smem and self:count(launch.smem, config, 0) or 0,
              cluster = #(launch.cluster or {}) > 0 and dims(self, launch.cluster, config) or nil,
              cooperative = self:is_cooperative(launch, config) or nil }
  return l
end

-- launch.cooperative: true, false or an expression (nonzero: cooperative).
function Spec:is_cooperative(launch, config)
  local c = launch.cooperative
  if type(c) == "boolean" or c == nil then return c == true end
  return self:value(c, config) ~= 0
end

function Spec:launch(config) return self:launch_for(self.launch_exprs, config) end

function Spec:reference_launch(config)
  return self:launch_for(self.reference and self.reference.launch or self.launch_exprs, config)
end

-- The values an integer scalar argument can take, by type.
-- the largest finite value of each float type (a constant past it is inf)
FLOAT_MAX = { f16 = 65504, bf16 = 3.3895313892515355e38, f32 = 3.4028234663852886e38 }

INT_RANGE = {
  i8 = { -128, 127 }, u8 = { 0, 255 }, i16 = { -32768, 32767 }, u16 = { 0, 65535 },
  i32 = { -2147483648, 2147483647 }, u32 = { 0, 4294967295 },
  i64 = { math.mininteger, math.maxinteger }, u64 = { 0, math.maxinteger },
}

-- second_seed (the cuda backend's input-set seed): each generated input that
-- is not `fixed` is drawn a second time from a seed mixed of it and the
-- spec's, for check 2 (docs/TRUST.md); r.data_b holds that draw where it
-- differs from r.data.
-- A seed for the second draw, apart from the spec's own and from every
-- input set's (a hash of the two, kept to 31 bits).
local function second_draw_seed(spec_seed, set_seed)
  local h = 0x9E3779B9
  for _, v in ipairs({ spec_seed, set_seed }) do h = ((h ~ v) * 0x85EBCA6B + 0x2545F491) & 0x7fffffff end
  if h == spec_seed then h = h + 1 end
  return h
end

function Spec:args(config, second_seed)
  local out, generated, generated_b = {}, {}, {}
  for i, a in ipairs(self.arg_specs) do
    local r = { name = a.name, type = a.type, kind = a.kind, output = a.output, init = a.init, param = a.param }
    if a.kind == "scalar" then
      r.value = self:value(a.value, config)
      local range = INT_RANGE[a.type]
      if range then
        local v = r.value
        if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^63 then v = math.tointeger(v) end
        if math.type(v) ~= "integer" or v < range[1] or v > range[2] then
          -- (expressions compute in signed 64-bit integers: a u64 stops at 2^63 - 1)
          errors.usage("%s: args[%d].value: gave %s, expected an integer that fits %s%s (at %s)", self.path, i,
                       tostring(r.value), a.type, a.type == "u64" and " as kopt computes it, 0 to 2^63 - 1" or "",
                       describe_config(self, config))
        end
        r.value = v
      end
      local fmax = FLOAT_MAX[a.type]
      if fmax and hostdata.overflows(r.value, a.type) then
        errors.usage("%s: args[%d].value: gave %s, past the largest finite %s (%g): it would be infinity (at %s)",
                     self.path, i, tostring(r.value), a.type, fmax, describe_config(self, config))
      end
    elseif a.kind == "tensormap" then
      local t = a.tmap
      r.of, r.swizzle, r.dims, r.box = t.index, t.swizzle, {}, {}
      for j, e in ipairs(self.arg_specs[t.index].shape) do r.dims[j] = self:count(e, config, 1) end
      for j, e in ipairs(t.box) do
        r.box[j] = self:count(e, config, 1)
        if r.box[j] < 1 or r.box[j] > 256 then
          errors.usage("%s: args[%d].tensor_map.box[%d] is %d; the copy engine moves 1 to 256 per dimension (at %s)",
                       self.path, i, j, r.box[j], describe_config(self, config))
        end
      end
    else
      r.shape, r.count = {}, 1
      for j, e in ipairs(a.shape) do
        r.shape[j] = self:count(e, config, 1)
        -- (a product past 2^62 elements wraps: 2^32 x 2^32 was 0)
        if r.count > (1 << 62) // r.shape[j] then
          errors.usage("%s: args[%d].shape: more than 2^62 elements (at %s)", self.path, i, describe_config(self, config))
        end
        r.count = r.count * r.shape[j]
      end
      local init = a.init
      if init.dist == "file" then
        local why = hostdata.check_file(init, a.type, r.shape, r.count)
        if why then errors.usage("%s: args[%d].init.file: %s (at %s)", self.path, i, why, describe_config(self, config)) end
      elseif init.dist == "generate" then
        local g = self:generated(i, r, config, generated)
        r.data, generated[a.name] = g.bytes, g.values
        if second_seed then
          local b = g
          if not init.fixed then
            r.seed_b = second_draw_seed(init.seed, second_seed)
            b = self:generated(i, r, config, generated_b, r.seed_b)
          end
          generated_b[a.name] = b.values
          if b.bytes ~= g.bytes then r.data_b = b.bytes end
        end
      elseif init.dist == "copy" then
        local src = out[init.index] or { count = nil }
        if init.index > i then
          -- the source comes later in the list: its shape, evaluated now
          src = { count = 1 }
          for _, e in ipairs(self.arg_specs[init.index].shape) do src.count = src.count * self:count(e, config, 1) end
        end
        if src.count ~= r.count then
          errors.usage("%s: args[%d].init: 'copy:%s' has %d elements, this output %d (at %s)", self.path, i,
                       init.from, src.count, r.count, describe_config(self, config))
        end
      end
      if a.output then r.verify = fields.verify_of(self, r, config, a.scratch) end
    end
    out[i] = r
  end
  return out
end

-- A knob's value as its define's text. A knob with a fractional value
-- (`[0.5, 1.0, 2.0]`) is a floating-point knob: its whole values keep a
-- decimal point (JSON reads 2.0 as 2, and -DALPHA=2 would make 1 / ALPHA
-- an integer division in some configs only).
local function define_value(v, float)
  if type(v) == "number" and (float or math.type(v) == "float") then
    local text = string.format("%.17g", v)
    if not text:find("[.eEn]") then text = text .. ".0" end
    return text
  end
  return tostring(v)
end

function Spec:defines(config)
  local out, knob = {}, {}
  for _, k in ipairs(self.knobs) do
    knob[k.name] = true
    if k.define ~= false then out[#out + 1] = "-D" .. k.name .. "=" .. define_value(config[k.name], k.float) end
  end
  if self.kernel and self.kernel.kernel_tuner_defines then
    -- as Kernel Tuner defines them: the block's and the grid's sizes (1 for
    -- an axis the launch leaves out), each unless a knob has the name
    -- (a config whose launch cannot be computed gets none: it is invalid
    -- when its request is made, with the sentence that says why)
    local lok, l = pcall(self.launch, self, config)
    if not lok then l = { block = {}, grid = {} } end
    for i, axis in ipairs({ "x", "y", "z" }) do
      for _, what in ipairs({ { "block_size_", l.block }, { "grid_size_", l.grid } }) do
        local name = what[1] .. axis
        if not knob[name] then out[#out + 1] = "-D" .. name .. "=" .. tostring(math.tointeger(what[2][i] or 1)) end
      end
    end
    if not knob.kernel_tuner then out[#out + 1] = "-Dkernel_tuner=1" end
  end
  return out
end

-- The defines the reference sees: the knobs it declares (reference.knobs),
-- written as the kernel's are (a float knob's 2.0 stays 2.0).
function Spec:reference_defines(config)
  local out = {}
  for _, n in ipairs(self.reference and self.reference.knobs or {}) do
    local knob
    for _, k in ipairs(self.knobs) do if k.name == n then knob = k end end
    -- (define = false: a template argument, `box<R>`, not a macro)
    if not (knob and knob.define == false) then
      out[#out + 1] = "-D" .. n .. "=" .. define_value(config[n], knob and knob.float)
    end
  end
  return out
end

-- The kernel's options and those its knobs' values add (no defines:
-- kopt.compile writes those into the source).
function Spec:knob_options(config)
  local out = {}
  for _, o in ipairs(self.kernel.options) do out[#out + 1] = o end
  for _, k in ipairs(self.knobs) do
    for _, o in ipairs(k.options and k.options[tostring(config[k.name])] or {}) do out[#out + 1] = o end
  end
  return out
end

-- Everything a config compiles with, the defines as -D options (best/
-- options.txt: how to build the winner by hand).
function Spec:compile_options(config)
  local out = {}
  for _, o in ipairs(self.kernel.options) do out[#out + 1] = o end
  for _, d in ipairs(self:defines(config)) do out[#out + 1] = d end
  local own = #self.kernel.options
  for i, o in ipairs(self:knob_options(config)) do if i > own then out[#out + 1] = o end end
  return out
end

return M
