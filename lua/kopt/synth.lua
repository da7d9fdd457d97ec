-- Synthesis: kernels written from a spec's reference. This module holds what
-- strategies/synthesize.lua needs and nothing of its loop: the prompt, the
-- reply format and its lenient reading, the checks a kernel passes before it
-- is compiled, the materialized source of one config, and the hints that go
-- back to the writer after each attempt.
--
-- A synthesized kernel (`K`), whether from an LLM reply or a template
-- (kopt.synth_templates), is
--   { entry = "name", source = "...", knobs = { {name=, values=, default=}, ... },
--     constraints = { "expr", ... }, launch = { grid = {e, e, e}, block = {e, e, e}, smem = e },
--     scope = { NAME = number, ... } (extra names the launch may read, templates only),
--     origin = { expert=, method=, template= } }
-- and kopt.synth.check turns it into one with a search space (`K.space`) over
-- its knobs, or says why it cannot run.
local device_only = require("kopt.device_only")
local entry_mod = require("kopt.entry")
local expr = require("kopt.expr")
local json = require("kopt.json")
local patch = require("kopt.patch")
local reply_edit = require("kopt.reply_edit")
local report = require("kopt.report")
local space_mod = require("kopt.space")
local sys = require("kopt.sys")
local X = require("kopt.experts")

local M = {}

M.MAX_KNOBS, M.MAX_VALUES, M.MAX_SPACE = 8, 16, 100000
M.SOURCE_CAP = 200 * 1024

M.CTYPES = { f32 = "float", f16 = "__half", bf16 = "__nv_bfloat16", f64 = "double", i32 = "int",
             i64 = "long long", u32 = "unsigned int", i8 = "signed char", u8 = "unsigned char",
             i16 = "short", u16 = "unsigned short", u64 = "unsigned long long" }

---------------------------------------------------------------------------
-- The problem, as the kernel must see it

-- The spec's arguments at its problem sizes: { {name=, type=, kind=, output=,
-- shape={n,...}, count=, value=}, ... } (no knob can change them: a spec
-- without a kernel has none).
function M.args(spec) return spec:args({}) end

-- The parameter list every synthesized kernel must take, in the spec's order:
-- "float *__restrict__ y, const float *__restrict__ x, int n".
function M.params(spec)
  local out = {}
  for i, a in ipairs(M.args(spec)) do
    local t = M.CTYPES[a.type] or "float"
    if a.kind == "scalar" then
      out[i] = t .. " " .. a.name
    elseif a.kind == "constant" then
      out[i] = nil
    else
      out[i] = (a.output and "" or "const ") .. t .. " *__restrict__ " .. a.name
    end
  end
  local list = {}
  for i = 1, #M.args(spec) do if out[i] then list[#list + 1] = out[i] end end
  return table.concat(list, ", ")
end

-- The entry name suggested to the writer.
function M.entry_for(spec)
  return (spec.name:gsub("[^%w_]", "_"):gsub("^(%d)", "k%1")) .. "_synth"
end

local function shape_text(a)
  local dims = {}
  for i, d in ipairs(a.shape or {}) do dims[i] = tostring(d) end
  return "[" .. table.concat(dims, ", ") .. "]"
end

---------------------------------------------------------------------------
-- Prompt and reply format

M.SYSTEM = "You are a CUDA performance engineer. You write complete, correct, fast CUDA C++ kernels for NVIDIA " ..
  "GPUs from a slow reference kernel, and you expose the choices that matter for speed as tuning knobs: " ..
  "preprocessor #defines whose allowed values you declare. Answer with one JSON object only."

M.FORMAT = [[Answer with one JSON object:
{
  "analysis": "one short paragraph: the plan and why it is fast",
  "entry": "the kernel's name",
  "source": "the complete CUDA C++ source: device code only, no main, no host code, no <<<>>> launches",
  "knobs": [ {"name": "BLOCK", "values": [128, 256, 512], "default": 256} ],
  "constraints": [ "BLOCK % 32 == 0" ],
  "launch": { "grid": ["cdiv(n, BLOCK)", 1, 1], "block": ["BLOCK", 1, 1], "smem": "0" }
}
Rules:
- the kernel is extern "C" __global__ with exactly the parameters given, in that order;
- every knob is a #define in the source (kopt rewrites the line for each value it tries);
- launch grid/block/smem are expressions over the knobs, the problem sizes, device.* and
  cdiv/min/max/ceil/floor; dynamic shared memory in bytes (0 when none);
- expressions and constraints are Lua: and/or/not, ~= for "not equal", // for integer
  division (/ divides exactly: cdiv(a, b) rounds up);
- every output element must be written on every launch; no state may survive between launches;
- includes: only CUDA device headers (cuda_fp16.h, cuda_bf16.h, mma.h, cooperative_groups.h, cuda/pipeline).]]

-- The first message of a conversation: the problem and the rules.
function M.messages(spec, opts)
  opts = opts or {}
  local L = {}
  L[#L + 1] = string.format("Problem: %s%s", spec.name, spec.description and (" — " .. spec.description) or "")
  local sizes = {}
  for k, v in pairs(spec.problem) do sizes[#sizes + 1] = k .. "=" .. tostring(v) end
  table.sort(sizes)
  if #sizes > 0 then L[#L + 1] = "Problem sizes: " .. table.concat(sizes, ", ") end
  local dev = spec.device or {}
  L[#L + 1] = string.format("GPU: %s (%s, %s SMs, %s bytes of shared memory per block at most)",
                            tostring(dev.name), tostring(dev.arch), tostring(dev.sm_count), tostring(dev.max_smem_optin))
  L[#L + 1] = "Arguments (in order):"
  for _, a in ipairs(M.args(spec)) do
    if a.kind == "scalar" then
      L[#L + 1] = string.format("- %s: %s scalar = %s", a.name, a.type, tostring(a.value))
    else
      L[#L + 1] = string.format("- %s: %s array %s (%d elements), %s", a.name, a.type, shape_text(a), a.count,
                                a.output and "OUTPUT" or "input")
    end
  end
  local w = spec:work({})
  if w.flops or w.bytes then
    L[#L + 1] = string.format("Work: %s FLOP, %s bytes moved at least", tostring(w.flops or "-"), tostring(w.bytes or "-"))
  end
  local tol = spec.tolerance or {}
  if tol.rel_l2 or tol.max_abs then
    L[#L + 1] = string.format("Tolerance against the reference: rel_l2 %s, max_abs %s", tostring(tol.rel_l2 or "-"),
                              tostring(tol.max_abs or "-"))
  end
  local rl = spec:reference_launch({})
  L[#L + 1] = string.format("The reference kernel (correct, slow), launched with grid (%d, %d, %d), block (%d, %d, %d):",
                            rl.grid[1], rl.grid[2], rl.grid[3], rl.block[1], rl.block[2], rl.block[3])
  L[#L + 1] = "```cuda\n" .. spec.reference.source:sub(1, X.SOURCE_CAP) .. "\n```"
  L[#L + 1] = string.format("Write a faster kernel computing the same outputs. Its signature:\n" ..
                            "extern \"C\" __global__ void %s(%s)", opts.entry or M.entry_for(spec), M.params(spec))
  if #spec.knobs > 0 then
    local taken = {}
    for i, k in ipairs(spec.knobs) do taken[i] = k.name end
    L[#L + 1] = "Knob names taken (do not use them): " .. table.concat(taken, ", ")
  end
  L[#L + 1] = M.FORMAT
  return { { role = "system", content = M.SYSTEM }, { role = "user", content = table.concat(L, "\n") } }
end

-- The follow-up turn after an attempt: what happened, and the same format.
function M.followup(attempt, hint)
  return string.format("Attempt %d: %s\n\nAnswer with the same JSON object: a complete kernel (the whole source), " ..
                       "its knobs and its launch.", attempt, hint)
end

-- Structured output: the server's schema (strict) and the local one (the
-- reply's shape only; M.parse reads it leniently).
function M.schema()
  local value = { type = { "number", "string" } }
  local knob = { type = "object", additionalProperties = false, required = { "name", "values", "default" },
                 properties = { name = { type = "string" }, values = { type = "array", items = value },
                                default = value } }
  local exprs = { type = "array", items = { type = { "number", "string" } } }
  return {
    name = "kopt_kernel",
    schema = { type = "object", additionalProperties = false,
               required = { "analysis", "entry", "source", "knobs", "constraints", "launch" },
               properties = {
                 analysis = { type = "string" }, entry = { type = "string" }, source = { type = "string" },
                 knobs = { type = "array", items = knob }, constraints = { type = "array", items = { type = "string" } },
                 launch = { type = "object", additionalProperties = false, required = { "grid", "block", "smem" },
                            properties = { grid = exprs, block = exprs, smem = { type = { "number", "string" } } } },
               } },
    local_schema = { type = { "object", "array" } },
    -- (an answer carries a source: llm.extract_json takes the last such
    -- value, but one whose source is a sketch with placeholders ranks below
    -- a whole kernel: "Alternatively, { /* TODO */ }" after the answer)
    accept = function(v)
      local k = M.parse(v)
      if not k then return false end
      return M.has_placeholders(k.source) and 1 or 2
    end,
  }
end

local function str(v) return type(v) == "string" and v:find("%S") and v or nil end

-- Whether a kernel source is a sketch: a TODO, or an elision ("...",
-- "// rest unchanged") where code should be.
local PLACEHOLDERS = { "TODO", "FIXME", "/%*%s*%.%.%.%s*%*/", "//%s*%.%.%.", "^%s*%.%.%.%s*$", "\n%s*%.%.%.%s*\n",
                       "[Ee]xisting code", "[Rr]est unchanged", "[Ss]ame as before" }
function M.has_placeholders(source)
  for _, pat in ipairs(PLACEHOLDERS) do
    if source:find(pat) then return true end
  end
  return false
end

-- A source given inside a fence (in the JSON string) is the fence's body:
-- ``` or ~~~, any info string, prose around it. Of several blocks: the last
-- that defines the reply's entry when it names one; else the last that
-- defines the suggested entry (hints.prefer); else the last with a
-- __global__ function and a body (not a signature quoted after the kernel)
-- that is not the reference quoted back (hints.avoid, the reference's
-- entry); else the last that names a __global__ at all.
local function unfence(src, entry, hints)
  local blocks = patch.fenced_blocks((src:gsub("\r\n", "\n")))
  if #blocks == 0 then return src end
  hints = hints or {}
  for _, name in ipairs({ entry or false, hints.prefer or false }) do
    for i = #blocks, 1, -1 do
      if name and entry_mod.defines(blocks[i].body, name) then return blocks[i].body end
    end
  end
  for i = #blocks, 1, -1 do
    local b = blocks[i].body
    if b:find("__global__", 1, true) and b:find("{", 1, true) and entry_mod.braces_balanced(b) and
       not (hints.avoid and entry_mod.defines(b, hints.avoid)) then
      return b
    end
  end
  for _, whole in ipairs({ true, false }) do
    for i = #blocks, 1, -1 do
      local b = blocks[i].body
      if b:find("__global__", 1, true) and (not whole or (b:find("{", 1, true) and entry_mod.braces_balanced(b))) then
        return b
      end
    end
  end
  return blocks[#blocks].body
end

-- An expression from a reply: a number or a string; nil otherwise.
local function expr_of(v)
  if type(v) == "number" then return v end
  if type(v) == "string" and v:find("%S") then return v end
  return nil
end

-- knobs as a list of {name, values, default} or as an object NAME -> values.
local function knobs_of(v, notes)
  local out = {}
  if type(v) ~= "table" or v == json.null then return out end
  if #v == 0 and next(v) ~= nil then
    local names = {}
    for k in pairs(v) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      local d = v[k]
      -- {"WARPS": [1, 2, 4]}, or {"WARPS": {"values": [...], "default": 4}}
      if type(d) == "table" and #d == 0 and next(d) ~= nil then
        out[#out + 1] = { name = k, values = d.values or d.allowed or d.choices or d.options, default = d.default }
      else
        out[#out + 1] = { name = k, values = d }
      end
    end
  else
    for i, k in ipairs(v) do
      if type(k) == "table" then
        out[#out + 1] = { name = k.name, values = k.values or k.allowed or k.choices or k.options, default = k.default }
      else
        notes[#notes + 1] = string.format("knobs[%d] is not an object: ignored", i)
      end
    end
  end
  for _, k in ipairs(out) do
    local vals = {}
    -- ("128, 256, 512" or "[128, 256]": the values as one string)
    -- (only a list of numbers: "64-512" or "powers of two" is no list)
    if type(k.values) == "string" then
      local list = {}
      for x in k.values:gmatch("[^%s,%[%]]+") do
        if not tonumber(x) then list = nil break end
        list[#list + 1] = x
      end
      k.values = list
    end
    for _, x in ipairs(type(k.values) == "table" and k.values or {}) do
      if type(x) == "string" and tonumber(x) then x = tonumber(x) end
      if math.type(x) == "float" and math.tointeger(x) then x = math.tointeger(x) end
      if type(x) == "number" or type(x) == "string" then vals[#vals + 1] = x end
    end
    k.values = vals
    if type(k.default) == "string" and tonumber(k.default) then k.default = tonumber(k.default) end
    if math.type(k.default) == "float" and math.tointeger(k.default) then k.default = math.tointeger(k.default) end
  end
  return out
end

local function dims_of(v)
  if type(v) ~= "table" then v = { v } end
  -- ({"x": ..., "y": ..., "z": ...}, as a dim3 is written)
  if #v == 0 and (v.x ~= nil or v.X ~= nil) then
    v = { v.x or v.X, v.y or v.Y or 1, v.z or v.Z or 1 }
  end
  local out = {}
  for i, e in ipairs(v) do out[i] = expr_of(e) end
  return out
end

-- Reads a reply's JSON value into a kernel K, leniently: the fields may sit
-- inside a "kernel" object, the source may be called "code" or "cuda" and be
-- fenced inside its string, knobs may be an object NAME -> values, numbers
-- may be strings, launch dimensions a single expression. hints (optional):
-- prefer = the entry the writer was asked for, avoid = the reference's entry,
-- for choosing among several fenced blocks. Returns K and notes, or nil and
-- why.
function M.parse(value, reply_text, hints)
  if type(value) ~= "table" then return nil, "the reply is not a JSON object" end
  if #value > 0 and type(value[1]) == "table" then value = value[1] end
  if type(value.kernel) == "table" and #value.kernel == 0 then
    local k = value.kernel
    k.analysis = k.analysis or value.analysis
    value = k
  end
  local notes = {}
  -- (the source as one string, or as its lines; "kernel" may hold it too)
  local function text_or_lines(v)
    if type(v) ~= "table" or #v == 0 then return str(v) end
    for _, x in ipairs(v) do if type(x) ~= "string" then return nil end end
    return str(table.concat(v, "\n"))
  end
  local src = text_or_lines(value.source) or text_or_lines(value.code) or text_or_lines(value.cuda)
    or text_or_lines(value.kernel_source)
  local ktext = text_or_lines(value.kernel)
  if not src and ktext and (ktext:find("\n") or ktext:find("__global__", 1, true)) then src = ktext end
  if src then src = reply_edit.unflatten(src) end
  if not src and type(reply_text) == "string" then
    -- (the kernel in a code block of its own, the JSON beside it without it)
    local fenced = unfence(reply_text, str(value.entry) or str(value.name), hints)
    if fenced ~= reply_text and fenced:find("__global__", 1, true) then
      src = fenced
      notes[#notes + 1] = "source taken from the reply's code block outside the JSON"
    end
  end
  if not src then return nil, "the reply has no kernel source (\"source\")" end
  src = unfence(src, str(value.entry) or str(value.name), hints)
  if #src > M.SOURCE_CAP then return nil, string.format("the source is %d bytes, more than %d", #src, M.SOURCE_CAP) end
  local K = { source = src, entry = str(value.entry) or str(value.name), analysis = str(value.analysis) }
  if not K.entry then
    local plain = src:gsub("__launch_bounds__%s*%b()", "")
    K.entry = plain:match("__global__%s+[%w_%s]-void%s+([%a_][%w_]*)%s*%(")
    if not K.entry then return nil, "the reply names no entry and its source has no __global__ function" end
    notes[#notes + 1] = "entry taken from the source: " .. K.entry
  end
  K.knobs = knobs_of(value.knobs, notes)
  K.constraints = {}
  local cons = value.constraints
  if type(cons) == "string" then cons = { cons } end
  for i, c in ipairs(type(cons) == "table" and cons or {}) do
    -- ({"expr": "..."} and the like: the expression it holds)
    if type(c) == "table" then c = str(c.expr) or str(c.expression) or str(c.constraint) or str(c.condition) or c end
    if str(c) then
      K.constraints[#K.constraints + 1] = c
    else
      notes[#notes + 1] = string.format("constraint %d ignored: not an expression (%s)", i, type(c))
    end
  end
  local l = value.launch
  if type(l) ~= "table" then return nil, "the reply has no launch (grid, block, smem)" end
  K.launch = { grid = dims_of(l.grid or l.grid_dim or l.gridDim or l.grid_size),
               block = dims_of(l.block or l.block_dim or l.blockDim or l.block_size),
               smem = expr_of(l.smem or l.shared_memory or l.dynamic_smem or l.sharedMem or l.shared_mem) or 0 }
  if #K.launch.grid == 0 or #K.launch.block == 0 then return nil, "the launch needs grid and block expressions" end
  return K, notes
end

---------------------------------------------------------------------------
-- Checks

local IDENT = "^[%a_][%w_]*$"

local function escape(s) return (s:gsub("%p", "%%%0")) end

-- f (a gsub of patterns that begin with "\n") over `src` with a line break
-- put in front, so a pattern matches at the start of every line, the first
-- too, and never in the middle of one ("// was: #define W 8" is a comment).
-- Returns the new source and the count.
local function at_line_starts(src, f)
  local out, n = f("\n" .. src)
  return out:sub(2), n
end

-- Whether src has a #define of `name` at the start of a line, whose rest
-- matches `tail`.
local function define_line(src, name, tail)
  return ("\n" .. src):find("\n[ \t]*#[ \t]*define[ \t]+" .. escape(name) .. "%f[^%w_]" .. tail) ~= nil
end

-- A declaration of `name` as a variable or template parameter in code
-- (comments and strings blanked): "constexpr int WARPS = 4", "template
-- <int WARPS>". A knob's #define put before the source would turn it into
-- "int 4 = 4", which NVRTC reports at the writer's own line. The text found,
-- or nil.
local DECL_TYPES = { "int", "unsigned", "long", "short", "char", "bool", "auto", "float", "double", "size_t",
                     "int32_t", "uint32_t", "int64_t", "uint64_t" }
local function declaration_of(code, name)
  for _, ty in ipairs(DECL_TYPES) do
    local s, e = code:find("%f[%w_]" .. ty .. "[%s%*&]+" .. escape(name) .. "%f[^%w_]%s*[=;,>%)%[{]")
    if s then return (code:sub(s, e):gsub("%s+", " ")) end
  end
  return nil
end

-- Checks a kernel before anything is compiled: device code only, the entry
-- defined, knobs well-formed (each a #define of the source or added), the
-- constraints and launch valid expressions over the names they may read, a
-- non-empty space. Returns K (with K.space, K.exprs, K.default) or nil, why.
function M.check(K, spec)
  local src = K.source
  local ok, why = patch.check_kernel_only(patch.diff("", src), { knobs = {}, base = "", new = src })
  if not ok then return nil, "refused: " .. why end
  if type(K.entry) ~= "string" or not K.entry:match(IDENT) then
    return nil, string.format("the entry '%s' is not an identifier", tostring(K.entry))
  end
  if not patch.defines_entry(src, K.entry) then
    return nil, string.format("the source defines no __global__ function '%s'", K.entry)
  end
  -- the worker passes the spec's arguments: their number, order and types
  local params = {}
  for _, a in ipairs(spec.arg_specs or {}) do
    if a.param ~= false and a.kind ~= "constant" then params[#params + 1] = a end
  end
  local mismatch = entry_mod.launch_mismatch(src, K.entry, params)
  if mismatch then return nil, mismatch end
  if #K.knobs > M.MAX_KNOBS then return nil, string.format("%d knobs, more than %d", #K.knobs, M.MAX_KNOBS) end
  local names = { device = true }
  for k in pairs(spec.problem) do names[k] = true end
  for k in pairs(K.scope or {}) do names[k] = true end
  -- a spec with a kernel of its own passes its knobs as -D defines
  local taken = {}
  for _, k in ipairs(spec.knobs) do taken[k.name] = true end
  local seen, raw = {}, 1
  local code = device_only.code_only(src, false)
  for i, k in ipairs(K.knobs) do
    if type(k.name) ~= "string" or not k.name:match(IDENT) then
      return nil, string.format("knob %d: '%s' is not an identifier", i, tostring(k.name))
    end
    if k.name:find("^__") or k.name:find("^_%u") then
      return nil, string.format("knob %s: the name is reserved for the compiler (it begins with __ or _ and a " ..
                                "capital)", k.name)
    end
    if define_line(src, k.name, "[^\n]*\\[ \t]*\n") then
      return nil, string.format("knob %s: its #define goes on over lines (a backslash at its end); kopt sets a " ..
                                "knob's value on one line", k.name)
    end
    if seen[k.name] or names[k.name] or expr.helpers[k.name] or taken[k.name] then
      return nil, string.format("knob %s: the name is taken (another knob, a problem size, a helper or a knob of " ..
                                "the spec's own kernel)", k.name)
    end
    local declared = declaration_of(code, k.name)
    if declared and not define_line(src, k.name, "") then
      return nil, string.format("knob %s: the source declares it (`%s`), but kopt sets each knob as a #define " ..
                                "put before the source; use %s as a macro (a #define of it, or none) and do not " ..
                                "declare it", k.name, declared, k.name)
    end
    seen[k.name] = true
    if #k.values == 0 then return nil, string.format("knob %s: no allowed values", k.name) end
    if #k.values > M.MAX_VALUES then
      return nil, string.format("knob %s: %d values, more than %d", k.name, #k.values, M.MAX_VALUES)
    end
    local vs = {}
    for _, v in ipairs(k.values) do
      if vs[v] then return nil, string.format("knob %s: value %s twice", k.name, tostring(v)) end
      vs[v] = true
      if type(v) == "string" and not v:match("^[%w_.%-]+$") then
        return nil, string.format("knob %s: value '%s' cannot be a #define", k.name, v)
      end
    end
    -- (a default outside the values would be measured at another value,
    -- the writer none the wiser: said, so the next attempt fixes it)
    if k.default == json.null then k.default = nil end
    if k.default ~= nil and not vs[k.default] then
      local shown = {}
      for j, v in ipairs(k.values) do shown[j] = tostring(v) end
      return nil, string.format("knob %s: the default %s is not one of its values (%s); add it to the values or " ..
                                "make the default one of them", k.name, tostring(k.default), table.concat(shown, ", "))
    end
    raw = raw * #k.values
  end
  if raw > M.MAX_SPACE then return nil, string.format("the knobs span %d configs, more than %d", raw, M.MAX_SPACE) end
  for _, k in ipairs(K.knobs) do names[k.name] = true end
  local function compile(e, label)
    local c, err = expr.compile(e, label)
    if not c then return nil, err end
    for _, n in ipairs(c.names) do
      if not names[n] then return nil, string.format("%s: '%s' is not a knob, a problem size or device", label, n) end
    end
    return c
  end
  local exprs = { grid = {}, block = {}, constraints = {} }
  for _, f in ipairs({ "grid", "block" }) do
    if #K.launch[f] > 3 then return nil, string.format("launch.%s: more than 3 dimensions", f) end
    for i, e in ipairs(K.launch[f]) do
      local c, err = compile(e, string.format("launch.%s[%d]", f, i))
      if not c then return nil, err end
      exprs[f][i] = c
    end
  end
  local c, err = compile(K.launch.smem or 0, "launch.smem")
  if not c then return nil, err end
  exprs.smem = c
  for i, e in ipairs(K.constraints) do
    c, err = compile(e, string.format("constraints[%d]", i))
    if not c then return nil, err end
    exprs.constraints[i] = c
  end
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  for k, v in pairs(K.scope or {}) do scope[k] = v end
  K.scope_all, K.exprs = scope, exprs
  -- (the constraints are a generated kernel's: one that raises at a config
  -- makes that config invalid, told to the model, not the run's end)
  local space = space_mod.new({ knobs = K.knobs, constraints = exprs.constraints, scope = scope,
                                on_error = function(raised) return false, "a constraint failed: " .. tostring(raised) end })
  local pok, first = pcall(space.first, space)
  if not pok then return nil, "constraints: " .. tostring(first) end
  if not first then return nil, "no config of the declared knobs satisfies the constraints" end
  K.space, K.default = space, first
  return K
end

---------------------------------------------------------------------------
-- Materialization

local function define_value(v)
  if math.type(v) == "float" then return string.format("%.17g", v) end
  return tostring(v)
end

-- The launch of K at config: { grid = {x,y,z}, block = {x,y,z}, smem = n },
-- or nil and why.
function M.launch(K, config, spec)
  local out = { grid = { 1, 1, 1 }, block = { 1, 1, 1 } }
  for _, f in ipairs({ "grid", "block" }) do
    for i, e in ipairs(K.exprs[f]) do
      local v, err = e:number(config, K.scope_all)
      if err then return nil, err end
      if math.type(v) ~= "integer" or v < 1 then
        return nil, string.format("launch.%s[%d] '%s' gave %s, not a positive integer", f, i, e.text, tostring(v))
      end
      out[f][i] = v
    end
  end
  local smem, err = K.exprs.smem:number(config, K.scope_all)
  if err then return nil, err end
  if math.type(smem) ~= "integer" or smem < 0 then
    return nil, string.format("launch.smem '%s' gave %s, not a byte count", K.exprs.smem.text, tostring(smem))
  end
  out.smem = smem
  local dev = spec.device or {}
  local threads = out.block[1] * out.block[2] * out.block[3]
  if threads > (dev.max_threads_block or 1024) then
    return nil, string.format("a block of %d threads, more than the GPU's %d", threads, dev.max_threads_block or 1024)
  end
  if dev.max_smem_optin and smem > dev.max_smem_optin then
    return nil, string.format("%d bytes of dynamic shared memory, more than the GPU's %d", smem, dev.max_smem_optin)
  end
  return out
end

-- "BLOCK=256 ITEMS=4"
function M.describe(K, config)
  local parts = {}
  for i, k in ipairs(K.knobs) do parts[i] = k.name .. "=" .. define_value(config[k.name]) end
  return #parts > 0 and table.concat(parts, " ") or "(no knobs)"
end

-- The source of K at config: each knob's #define line set to its value (a
-- knob the source does not define gets one at the top), and a last line
-- that says what the source is and how it is launched, so the source alone
-- identifies the state (at the end: the compiler's line numbers stay those
-- of the writer's source). Returns source, launch or nil, why.
function M.materialize(K, config, spec)
  local launch, err = M.launch(K, config, spec)
  if not launch then return nil, err end
  local src = K.source
  local top = {}
  for _, k in ipairs(K.knobs) do
    local v = define_value(config[k.name])
    local n
    src, n = at_line_starts(src, function(text)
      return text:gsub("(\n)([ \t]*#[ \t]*define[ \t]+" .. escape(k.name) .. ")%f[^%w_][^\n]*",
                       "%1%2 " .. v:gsub("%%", "%%%%"))
    end)
    if n == 0 then top[#top + 1] = "#define " .. k.name .. " " .. v end
  end
  local g, b = launch.grid, launch.block
  local tail = string.format("// kopt: synthesized kernel %s; %s; grid (%d, %d, %d), block (%d, %d, %d), smem %d\n",
                             K.entry, M.describe(K, config), g[1], g[2], g[3], b[1], b[2], b[3], launch.smem)
  -- (#line 1: the compiler's line numbers stay the writer's own, as the
  -- hints quote them)
  local head = #top > 0 and (table.concat(top, "\n") .. "\n#line 1\n") or ""
  return head .. src .. (src:sub(-1) == "\n" and "" or "\n") .. tail, launch
end

---------------------------------------------------------------------------
-- The kernel as a spec of its own

-- A spec for K that any strategy can tune (`kopt mcgs DIR/spec.json`):
-- K's source with each knob's #define guarded by #ifndef (the spec passes
-- knobs as -D defines), its knobs, constraints and launch, and the spec's
-- problem (plus a template's sizes), arguments, reference (by absolute
-- path), tolerance and work. Returns the spec as a table and the source.
function M.derived_spec(K, spec)
  local src = K.source
  for _, k in ipairs(K.knobs) do
    src = at_line_starts(src, function(text)
      return text:gsub("(\n)([ \t]*#[ \t]*define[ \t]+" .. escape(k.name) .. ")(%f[^%w_][^\n]*)",
                       "%1#ifndef " .. k.name .. "\n%2%3\n#endif")
    end)
  end
  local raw = spec.raw
  local problem = {}
  for k, v in pairs(spec.problem) do problem[k] = v end
  for k, v in pairs(K.scope or {}) do problem[k] = v end
  local knobs = {}
  for i, k in ipairs(K.knobs) do
    knobs[i] = { name = k.name, values = k.values, default = (K.default or {})[k.name] }
  end
  local ref = {}
  for k, v in pairs(raw.reference) do ref[k] = v end
  ref.source = sys.realpath(spec.reference.path) or spec.reference.path
  local launch = { grid = K.launch.grid, block = K.launch.block, smem = K.launch.smem }
  return {
    name = spec.name .. "_synthesized",
    description = string.format("%s, the kernel written by kopt synthesize (%s)", spec.name,
                                tostring(K.origin and K.origin.method)),
    kernel = { source = "kernel.cu", entry = K.entry, options = raw.reference.options },
    problem = problem, knobs = knobs, constraints = #K.constraints > 0 and K.constraints or nil,
    launch = launch, args = raw.args, reference = ref, tolerance = raw.tolerance, work = raw.work,
  }, src
end

---------------------------------------------------------------------------
-- Hints

local function fmt_ms(t) return type(t) == "number" and string.format("%.4g ms", t) or "-" end

-- What an attempt's measurement says, for the next attempt: the failure
-- (kopt.experts' feedback: the trimmed NVRTC log, the verifier's figures and
-- message), or the performance against the reference and the speed of light.
function M.hint(r, ctx)
  if r.status ~= "ok" then return X.feedback_of(r) end
  local L = { string.format("It is correct: %s.", fmt_ms(r.time_ms)) }
  local ref = ctx.reference
  if ref and type(ref.time_ms) == "number" and type(r.time_ms) == "number" and r.time_ms > 0 then
    local what = ctx.baseline or "reference"
    L[#L + 1] = string.format("The %s takes %s: %.2fx %s.", what:gsub("^the ", ""), fmt_ms(ref.time_ms),
                              ref.time_ms / r.time_ms, ref.time_ms >= r.time_ms and "faster" or "(slower)")
  end
  local spec = ctx.spec
  local a = report.analyse({ result = r }, { device = spec.device, work = spec:work({}), launch = ctx.launch })
  if a.sol_ms and a.sol_frac and a.sol_frac <= 1 then
    L[#L + 1] = string.format("At the speed of light it would take %s: it runs at %.0f%% of it (%.2fx left).",
                              fmt_ms(a.sol_ms), a.sol_frac * 100, 1 / a.sol_frac)
  else
    L[#L + 1] = "The speed of light is unknown here (no declared work or no device clocks)."
  end
  if a.limiter then
    L[#L + 1] = string.format("Limiter: %s%s.", a.limiter, a.limiter_detail and (", " .. a.limiter_detail) or "")
  end
  local res = r.resources or {}
  if res.regs or res.occupancy then
    L[#L + 1] = string.format("Resources: %s registers, %s bytes of shared memory, occupancy %s.", tostring(res.regs or "-"),
                              tostring(res.smem or "-"), res.occupancy and string.format("%.2f", res.occupancy) or "-")
  end
  L[#L + 1] = "Make it faster if you can, keeping it correct."
  return table.concat(L, " ")
end

-- One line of a hint or a log for -v and trace.md.
function M.oneline(text, cap)
  text = tostring(text or ""):gsub("%s*\n%s*", " / ")
  cap = cap or 240
  if #text > cap then text = text:sub(1, cap) .. "..." end
  return text
end

return M
