-- The spec fields for kernels brought from Kernel Tuner (docs/KERNEL_TUNER.md,
-- specs/README.md): an argument's data (copy:NAME, files, generators),
-- verify, metrics and the objective, pipelines, template entries and the
-- knobs the reference sees. Their checks at load (errors name the field)
-- and their values at a config, as methods of the spec, which lends its
-- path and message helpers through install().
local errors = require("kopt.errors")
local hostdata = require("kopt.hostdata")

local M = {}
local U -- join, read_text, describe (a config), types, ident, exists, check_launch
local Methods = {}

-- Called once by kopt.spec: its helpers, and these methods on its class.
function M.install(spec_class, helpers)
  U = helpers
  for name, fn in pairs(Methods) do spec_class[name] = fn end
end

-- An argument's init: a distribution name or {"dist": ...}; "copy:NAME" (an
-- output that starts as a copy of input NAME); {"file": "x.npy"} or
-- {"file": "x.bin", "dtype": "f32", "offset": 0} (raw little-endian); or
-- {"generate": "gen.lua" or "return function(ctx) ... end", "seed": 1}.
local CONSTANT_DISTS = { zeros = true, ones = true, constant = true, arange = true }

function M.check_init(c, v, p, arg, dir)
  local init = v or (arg.output and "zeros" or "normal")
  if type(init) == "string" then
    local from = init:match("^copy:(.*)$")
    if from then
      if not arg.output then
        c:fail(p, "'%s' is for outputs: an in/out buffer that starts as a copy of an input", init)
      end
      if not from:match(U.ident) then c:fail(p, "expected 'copy:NAME' with NAME an input array, got '%s'", init) end
      return { dist = "copy", from = from }
    end
    return { dist = init }
  end
  c:object(init, p)
  if init.file == nil and init.generate == nil then
    c:unknown_fields(init, { "dist", "value", "fixed" }, p)
    -- (a value only a constant takes: with another dist it was ignored)
    if init.value ~= nil and init.dist ~= "constant" then
      c:fail(p .. ".value", "only {\"dist\": \"constant\"} takes a value; '%s' has none", tostring(init.dist))
    end
    if init.fixed ~= nil then
      if type(init.fixed) ~= "boolean" then c:fail(p .. ".fixed", "expected true or false, got %s", c:type_name(init.fixed)) end
      -- check 2 varies a float constant (docs/TRUST.md); `fixed` keeps it,
      -- for a constant the kernel may rely on
      if not CONSTANT_DISTS[init.dist] then
        c:fail(p .. ".fixed", "only a constant ('zeros', 'ones', 'constant') or 'arange' can be fixed; '%s' is drawn anew in every input set", tostring(init.dist))
      end
    end
    return init
  end
  if arg.output then
    c:fail(p, "an output's data comes from the kernel (for an in/out buffer, write \"copy:NAME\")")
  end
  if init.file ~= nil and init.generate ~= nil then c:fail(p, "expected one of 'file' or 'generate', not both") end
  if init.generate ~= nil then
    c:unknown_fields(init, { "generate", "seed", "fixed" }, p)
    local text = c:string(init.generate, p .. ".generate", false, nil, "a Lua file or Lua code returning a function")
    local label = p .. ".generate"
    if text:match("%.lua$") and not text:find("\n") then
      local full
      full, text = U.read_text(c, text, p .. ".generate", dir)
      label = full
    end
    local fn, err = hostdata.load_function(text, label)
    if not fn then c:fail(p .. ".generate", "%s", err) end
    local seed = init.seed ~= nil and c:number(init.seed, p .. ".seed") or 1
    if math.type(seed) ~= "integer" then c:fail(p .. ".seed", "expected an integer, got %s", tostring(seed)) end
    -- check 2 reads another draw of the generator (docs/TRUST.md); `fixed`
    -- makes this seed's draw the contract, as for a constant
    if init.fixed ~= nil and type(init.fixed) ~= "boolean" then
      c:fail(p .. ".fixed", "expected true or false, got %s", c:type_name(init.fixed))
    end
    return { dist = "generate", fn = fn, seed = seed, fixed = init.fixed == true }
  end
  c:unknown_fields(init, { "file", "dtype", "offset" }, p)
  local rel = c:string(init.file, p .. ".file", false, nil, "a file name (.npy, or raw binary)")
  local path = U.join(dir, rel)
  local out = { dist = "file", path = path, offset = 0 }
  if rel:match("%.npy$") then
    if init.dtype ~= nil or init.offset ~= nil then
      c:fail(p, "a .npy file says its own dtype and shape (leave out 'dtype' and 'offset')")
    end
    local h, err = hostdata.npy_header(path)
    if not h then c:fail(p .. ".file", "%s", err) end
    if h.fortran then
      c:fail(p .. ".file", "'%s' is in Fortran order; save it in C order (numpy.ascontiguousarray)", rel)
    end
    if h.dtype ~= arg.type then
      c:fail(p .. ".file", "'%s' holds %s elements, the argument is %s", rel,
             h.dtype or ("'" .. h.descr .. "'"), arg.type)
    end
    out.npy, out.offset = h, h.offset
  else
    if init.dtype ~= nil then
      local t = c:string(init.dtype, p .. ".dtype")
      if not U.types[t] then c:fail(p .. ".dtype", "unknown type '%s'", t) end
      if t ~= arg.type then c:fail(p .. ".dtype", "the file holds %s, the argument is %s", t, arg.type) end
    end
    if init.offset ~= nil then
      local o = c:number(init.offset, p .. ".offset")
      if math.type(o) ~= "integer" or o < 0 then
        c:fail(p .. ".offset", "expected a non-negative integer, got %s", tostring(o))
      end
      out.offset = o
    end
    if not U.exists(path) then c:fail(p .. ".file", "cannot read '%s' (not a regular file)", rel) end
  end
  return out
end

-- A list of argument names (a pipeline kernel's or the reference's
-- parameters, in order) as 1-based indices into the spec's args.
function M.arg_list(c, v, path, args)
  local idx = {}
  for i, a in ipairs(args) do idx[a.name] = i end
  local out = {}
  for i, n in ipairs(c:array(v, path, "an array of argument names", false, true)) do
    local p = string.format("%s[%d]", path, i)
    c:string(n, p, false, U.ident, "an argument name")
    local k = idx[n]
    if not k then c:fail(p, "'%s' is not one of the spec's args", n) end
    if args[k].kind == "constant" then c:fail(p, "'%s' is a __constant__ symbol, not a parameter", n) end
    out[i] = k
  end
  return out
end

-- A pipeline: kernels of the kernel's source run in order on one stream and
-- timed as one, each with its own launch and its parameters from the args.
function M.check_pipeline(c, v, args, names)
  local out = {}
  for i, st in ipairs(v) do
    local p = string.format("pipeline[%d]", i)
    c:object(st, p)
    c:unknown_fields(st, { "entry", "launch", "args" }, p)
    out[i] = { entry = c:string(st.entry, p .. ".entry", false, U.ident, "an extern \"C\" kernel name"),
               launch = U.check_launch(c, st.launch, p .. ".launch", names),
               args = M.arg_list(c, st.args, p .. ".args", args) }
    -- (the worker launches the later kernels plainly: a cluster there was
    -- dropped without a word, and a kernel using cluster barriers ran alone)
    if i > 1 and #(out[i].launch.cluster or {}) > 0 then
      c:fail(p .. ".launch.cluster", "only a pipeline's first kernel runs in clusters")
    end
  end
  if #out > 9 then c:fail("pipeline", "expected at most 9 kernels, got %d", #out) end
  -- an output no kernel is given stays as poisoned: every candidate wrong
  local passed = {}
  for _, st in ipairs(out) do
    for _, k in ipairs(st.args or {}) do passed[k] = true end
  end
  for k, a in ipairs(args) do
    if a.output and not a.scratch and a.param ~= false and not passed[k] then
      c:fail("pipeline", "output '%s' is passed to none of its kernels (it would be compared as left poisoned)",
             tostring(a.name))
    end
  end
  return out
end

-- What a request says of a pipeline at a config: the first kernel's
-- arguments and the later kernels (core/worker/request_fields.h: stages).
function Methods:pipeline_fields(config)
  if not self.pipeline then return nil end
  local stages = {}
  for i = 2, #self.pipeline do
    local st = self.pipeline[i]
    local l = self:launch_for(st.launch, config)
    stages[#stages + 1] = string.format("%s:%d,%d,%d:%d,%d,%d:%d:%s", st.entry, l.grid[1], l.grid[2], l.grid[3],
                                        l.block[1], l.block[2], l.block[3], l.smem, table.concat(st.args, ","))
  end
  return { args1 = table.concat(self.pipeline[1].args, ","), stages = table.concat(stages, ";") }
end

-- The verify section: per output, the region compared ("region": [[lo, hi],
-- ...] per dimension, half-open, or "first": N elements), tolerances and
-- "compare": false (left to the check); "check": a Lua function over host
-- copies of the outputs, the reference's outputs and the inputs.
function M.check_verify(c, v, args, names, dir)
  local out = { outputs = {} }
  if v == nil then return out end
  c:object(v, "verify")
  c:unknown_fields(v, { "outputs", "check" }, "verify")
  local by_name = {}
  for _, a in ipairs(args) do by_name[a.name] = a end
  for name, o in pairs(c:object(v.outputs, "verify.outputs", true) or {}) do
    local p = "verify.outputs." .. tostring(name)
    local a = by_name[name]
    if not a or not a.output then c:fail(p, "'%s' is not an output argument", tostring(name)) end
    if a.scratch then c:fail(p, "'%s' is a scratch buffer, which is not compared", tostring(name)) end
    c:object(o, p)
    c:unknown_fields(o, { "region", "first", "rel_l2", "max_abs", "compare" }, p)
    local r = { rel_l2 = c:number(o.rel_l2, p .. ".rel_l2", true, "tolerance"),
                max_abs = c:number(o.max_abs, p .. ".max_abs", true, "tolerance") }
    if o.compare ~= nil and type(o.compare) ~= "boolean" then
      c:fail(p .. ".compare", "expected true or false, got %s", c:type_name(o.compare))
    end
    r.compare = o.compare ~= false
    if o.region ~= nil and o.first ~= nil then c:fail(p, "expected one of 'region' or 'first', not both") end
    if o.region ~= nil then
      local what = string.format("an array of %d [lo, hi] pairs (one per dimension of the shape)", #a.shape)
      local reg = c:array(o.region, p .. ".region", what)
      if #reg ~= #a.shape then c:fail(p .. ".region", "expected %s, got %d", what, #reg) end
      r.region = {}
      for d, pair in ipairs(reg) do
        local pp = string.format("%s.region[%d]", p, d)
        c:array(pair, pp, "a [lo, hi] pair of expressions")
        if #pair ~= 2 then c:fail(pp, "expected a [lo, hi] pair of expressions, got %d values", #pair) end
        r.region[d] = { c:expression(pair[1], pp .. "[1]", names), c:expression(pair[2], pp .. "[2]", names) }
      end
    elseif o.first ~= nil then
      r.first = c:expression(o.first, p .. ".first", names)
    end
    out.outputs[name] = r
  end
  if v.check ~= nil then
    local text = c:string(v.check, "verify.check", false, nil, "a Lua file or Lua code returning a function")
    local label = "verify.check"
    if text:match("%.lua$") and not text:find("\n") then label, text = U.read_text(c, text, "verify.check", dir) end
    local fn, err = hostdata.load_function(text, label)
    if not fn then c:fail("verify.check", "%s", err) end
    out.check = fn
  end
  -- an output left out of the comparison is the check's to judge: without
  -- one, nothing would look at it (a kernel that wrote nothing would pass)
  if not out.check then
    for name, r in pairs(out.outputs) do
      if not r.compare then
        c:fail("verify.outputs." .. tostring(name) .. ".compare",
               "false leaves the output to verify.check, and the spec has none: nothing would check it")
      end
    end
  end
  return out
end

-- User metrics: name -> expression over knobs, sizes, device, time_ms,
-- time_s, and the work's flops and bytes; the objective: "time" or
-- {"metric": NAME, "goal": "max" | "min"}.
function M.check_metrics(c, metrics, objective, names, work)
  local out, order = {}, {}
  local mnames = {}
  for k in pairs(names) do mnames[k] = true end
  mnames.time_ms, mnames.time_s = true, true
  if work.flops then mnames.flops = true end
  if work.bytes then mnames.bytes = true end
  for name, e in pairs(c:object(metrics, "metrics", true) or {}) do
    local p = "metrics." .. tostring(name)
    if not tostring(name):match("^[%w_ /%-%.%%]+$") then
      c:fail(p, "expected a metric name of letters, digits, space, '_', '/', '-', '.', '%%'")
    end
    out[name] = c:expression(e, p, mnames)
    order[#order + 1] = name
  end
  table.sort(order)
  out = { exprs = out, order = order }
  if objective == nil or objective == "time" then return out, nil end
  c:object(objective, "objective")
  c:unknown_fields(objective, { "metric", "goal" }, "objective")
  local m = c:string(objective.metric, "objective.metric", false, nil, "the name of one of the spec's metrics")
  if not out.exprs[m] then c:fail("objective.metric", "'%s' is not one of the spec's metrics", m) end
  local goal = c:string(objective.goal, "objective.goal", false, nil, "'max' or 'min'")
  if goal ~= "max" and goal ~= "min" then c:fail("objective.goal", "expected 'max' or 'min', got '%s'", goal) end
  return out, { metric = m, goal = goal }
end

-- A generator's array for a config, cached by the values of the sizes and
-- knobs it read (ctx.sizes is watched), its shape, and the arrays of the
-- other inputs it read (ctx.inputs is watched), so configs that differ only
-- in knobs it ignores share one array (a generator of -a, or of row indices
-- of a shape, got another config's array when only the count was keyed). draw_seed (nil: the spec's seed) asks
-- for another draw; only the latest such seed's arrays are kept.
function Methods:generated(i, r, config, inputs, draw_seed)
  local a = self.arg_specs[i]
  a.memo = a.memo or { reads = nil, data = {} }
  local memo = a.memo
  if draw_seed and memo.other_seed ~= draw_seed then memo.other_seed, memo.other = draw_seed, {} end
  local data = draw_seed and memo.other or memo.data
  local function key()
    if not memo.reads then return nil end
    local parts = { tostring(r.count), table.concat(r.shape or {}, "x") }
    for _, n in ipairs(memo.reads) do parts[#parts + 1] = n .. "=" .. tostring(config[n] or self.problem[n]) end
    -- (an input's array is one object per its own key: cached, so alive)
    for _, n in ipairs(memo.input_reads or {}) do parts[#parts + 1] = n .. "@" .. tostring(inputs and inputs[n]) end
    return table.concat(parts, ",")
  end
  local k = key()
  if k and data[k] then return data[k] end
  local read, read_list = {}, {}
  local sizes = setmetatable({}, { __index = function(_, n)
    if not read[n] then read[n] = true; read_list[#read_list + 1] = n end
    local v = config[n]
    if v == nil then v = self.problem[n] end
    return v
  end })
  local in_read, in_list = {}, {}
  local function note_input(n)
    if not in_read[n] then in_read[n] = true; in_list[#in_list + 1] = n end
  end
  local watched = inputs and setmetatable({}, {
    __index = function(_, n) note_input(n) return inputs[n] end,
    __pairs = function()
      for n in pairs(inputs) do note_input(n) end
      return next, inputs, nil
    end,
    __len = function() return #inputs end,
  })
  local bytes, err, values = hostdata.generate(a.init, r, sizes, watched, draw_seed)
  if not bytes then
    -- (an input it read and did not find: generated later, where the
    -- arguments' order decides, or not generated at all, which no order mends)
    local later, drawn = {}, {}
    for _, n in ipairs(in_list) do
      if inputs and inputs[n] == nil then
        for _, b in ipairs(self.arg_specs) do
          if b.name == n and not b.output and b.init then
            if b.init.dist == "generate" then
              later[#later + 1] = n
            else
              drawn[#drawn + 1] = string.format("%s has init '%s'", n, tostring(b.init.dist))
            end
          end
        end
      end
    end
    local hint = ""
    if #later > 0 then
      hint = string.format("; ctx.inputs holds the arrays generated before this one, and %s comes later in args " ..
                           "(move it before %s)", table.concat(later, ", "), a.name)
    elseif #drawn > 0 then
      hint = string.format("; ctx.inputs holds only arrays made by a generator, and %s, not a generator " ..
                           "(give it one, ahead of %s, to read it here)", table.concat(drawn, ", "), a.name)
    end
    -- (the code's own chunk name already says where: not said twice)
    local label = string.format("args[%d].init.generate", i)
    local where = tostring(err):sub(1, #label) == label and "" or (label .. ": ")
    errors.usage("%s: %s%s%s (at %s)", self.path, where, err, hint, U.describe(self, config))
  end
  table.sort(read_list)
  -- (a generator may read fewer sizes on another draw: the union is the key)
  for _, n in ipairs(memo.reads or {}) do
    if not read[n] then read[n] = true; read_list[#read_list + 1] = n end
  end
  table.sort(read_list)
  memo.reads = read_list
  for _, n in ipairs(memo.input_reads or {}) do note_input(n) end
  table.sort(in_list)
  memo.input_reads = in_list
  local entry = { bytes = bytes, values = values or hostdata.unpack(bytes, r.type) }
  data[key()] = entry
  return entry
end

-- The verification of output r (an args() entry) at a config: compare,
-- region (dims and half-open [lo, hi) per dimension), tolerances.
function M.verify_of(self, r, config, scratch)
  if scratch then return { compare = false } end
  local v = self.verify and self.verify.outputs[r.name]
  if not v then return nil end
  local out = { compare = v.compare, rel_l2 = v.rel_l2, max_abs = v.max_abs }
  local p = string.format("verify.outputs.%s", r.name)
  if v.region then
    out.dims, out.lo, out.hi = r.shape, {}, {}
    for d, pair in ipairs(v.region) do
      local lo, hi = self:count(pair[1], config, 0), self:count(pair[2], config, 0)
      if lo >= hi or hi > r.shape[d] then
        errors.usage("%s: %s.region[%d]: [%d, %d) is not a non-empty part of 0..%d (at %s)", self.path, p, d, lo, hi,
                     r.shape[d], U.describe(self, config))
      end
      out.lo[d], out.hi[d] = lo, hi
    end
  elseif v.first then
    local n = self:count(v.first, config, 1)
    if n > r.count then
      errors.usage("%s: %s.first: %d elements, the output has %d (at %s)", self.path, p, n, r.count,
                   U.describe(self, config))
    end
    out.dims, out.lo, out.hi = { r.count }, { 0 }, { n }
  end
  return out
end

-- The metrics of a measured config (time in ms): name -> number. A metric
-- that cannot be computed for this config (a division by a knob that is
-- zero here) is left out of its result, with a note on stderr the first time
-- for each metric: the run goes on, and a config without its objective ranks
-- last (kopt.engine's cost).
function Methods:metrics(config, time_ms)
  if not self.metric_exprs or #self.metric_exprs.order == 0 then return nil end
  local scope = { time_ms = time_ms, time_s = time_ms / 1e3 }
  for k, v in pairs(self:work(config)) do scope[k] = v end
  local out = {}
  for _, name in ipairs(self.metric_exprs.order) do
    local v, err = self.metric_exprs.exprs[name]:number(scope, config, self.problem, { device = self.device })
    if err then
      self.metric_noted = self.metric_noted or {}
      if not self.metric_noted[name] then
        self.metric_noted[name] = true
        io.stderr:write(string.format("kopt: %s: metrics.%s: %s (at %s); left out of that result (and of any " ..
                                      "other config where it fails)\n", self.path, name, err, U.describe(self, config)))
      end
    else
      out[name] = v
    end
  end
  return out
end

-- Whether result a is better than result b (both ok): by the objective
-- metric when the spec declares one and both carry it, else by time.
-- A result without a usable objective (its metric failed, or it is not a
-- finite positive number: the search steers by it as a cost, kopt.engine)
-- loses to one with.
local function usable(v) return type(v) == "number" and v > 0 and v < math.huge end

function Methods:better(a, b)
  local obj = self.objective
  if obj then
    local ua, ub = usable(a.objective), usable(b.objective)
    if ua ~= ub then return ua end
    if ua and a.objective ~= b.objective then
      if obj.goal == "max" then return a.objective > b.objective end
      return a.objective < b.objective
    end
  end
  return a.time_ms < b.time_ms
end

-- The kernel's entry at a config: knob names inside a template's argument
-- list are replaced by their values ("stencil<float, BLOCK>" ->
-- "stencil<float, 128>").
local function instantiate(entry, config)
  local name, targs = entry:match("^([^<]*)(<.*>)$")
  if not name then return entry end
  targs = targs:gsub("[%a_][%w_]*", function(id)
    local v = config and config[id]
    if v == nil then return nil end
    return tostring(v)
  end)
  return name .. targs
end

function Methods:entry(config) return instantiate(self.kernel.entry, config) end

function Methods:reference_entry(config)
  return self.reference and instantiate(self.reference.entry, config) or nil
end

-- A key that changes exactly when the reference's defines (the knobs it
-- declares: Spec:reference_defines) or its entry do.
function Methods:reference_key(config)
  local defs = self:reference_defines(config)
  local entry = self:reference_entry(config)
  return table.concat(defs, " ") .. (entry and (" " .. entry) or "")
end

-- The values of the scalar arguments at config, as text: a scalar set by
-- a knob changes what the reference computes as a define would.
function Methods:scalars_key(config)
  local parts = {}
  for _, a in ipairs(self.arg_specs) do
    if a.kind == "scalar" then
      local ok, v = pcall(self.value, self, a.value, config)
      parts[#parts + 1] = ok and string.format("%.17g", tonumber(v) or 0) or "?"
    end
  end
  return table.concat(parts, ",")
end

-- The spec's work (flops, bytes, ...) at config: counts >= 0.
function Methods:work(config)
  local w = {}
  for k, e in pairs(self.work_expr) do
    w[k] = self:value(e, config)
    -- (an integer product past 2^63 wraps, often to a negative number;
    -- write such a product with a float, 1.0 * rows * cols * reps)
    if w[k] < 0 then
      errors.usage("%s: work.%s: expression '%s' gave %s, expected a count >= 0 (an integer product past 2^63 " ..
                   "wraps: multiply by 1.0 first) (at %s)", self.path, k, e.text, tostring(w[k]),
                   U.describe(self, config))
    end
  end
  return w
end

return M
