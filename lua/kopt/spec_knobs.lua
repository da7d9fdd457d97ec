-- The checks of a spec's knobs at load (kopt.spec): names that can be
-- defines and expression names, values, defaults, per-value options.
local M = {}

local IDENT = "^[%a_][%w_]*$"
-- A value in a message: strings quoted, so '256' (a string) and 256 differ.
local function show_value(v)
  if type(v) == "string" then return "'" .. v .. "' (a string)" end
  return tostring(v)
end

-- Names that cannot be knobs or problem sizes: Lua's words (expressions are
-- Lua), and for a knob that becomes a define, C++'s keywords and CUDA's
-- built-in variables (the define would rewrite them in every header).
local LUA_WORDS = {}
for w in ("and break do else elseif end false for function goto if in local nil not or repeat return then " ..
          "true until while _ENV"):gmatch("%S+") do LUA_WORDS[w] = true end
local C_WORDS = {}
for w in ("alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr " ..
          "const_cast continue decltype default delete do double dynamic_cast else enum explicit export " ..
          "extern false float for friend goto if inline int long mutable namespace new noexcept nullptr " ..
          "operator private protected public register reinterpret_cast return short signed sizeof static " ..
          "static_assert static_cast struct switch template this thread_local throw true try typedef typeid " ..
          "typename union unsigned using virtual void volatile wchar_t while threadIdx blockIdx blockDim " ..
          "gridDim warpSize __global__ __device__ __shared__ __constant__ __host__"):gmatch("%S+") do
  C_WORDS[w] = true
end
-- Names CUDA's own headers use (cuda_fp16.h, the C++ library a kernel
-- includes): a define of one breaks them ahead of the kernel's own code
-- (a knob named T, type or x), and the vector types.
for w in ("T type value_type size_type reference size value x y iterator dim3"):gmatch("%S+") do C_WORDS[w] = true end
for _, base in ipairs({ "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong",
                        "float", "double" }) do
  for n = 1, 4 do C_WORDS[base .. n] = true end
end

local function check_knobs(c, knobs, reserved)
  c:array(knobs, "knobs", "a non-empty array of knobs ({\"name\": ..., \"values\": [...]})")
  local out, seen = {}, {}
  for i, k in ipairs(knobs) do
    local p = string.format("knobs[%d]", i)
    c:object(k, p)
    c:unknown_fields(k, { "name", "values", "tags", "default", "help", "options", "define" }, p)
    if k.help ~= nil then c:string(k.help, p .. ".help") end
    local name = c:string(k.name, p .. ".name", false, IDENT, "an identifier (letters, digits, _)")
    if seen[name] then c:fail(p .. ".name", "duplicate knob '%s'", name) end
    if reserved[name] then c:fail(p .. ".name", "'%s' is reserved (%s)", name, reserved[name]) end
    if LUA_WORDS[name] then c:fail(p .. ".name", "'%s' is a word of the expression language (Lua)", name) end
    if k.define ~= false and C_WORDS[name] then
      c:fail(p .. ".name", "'%s' is a C++ keyword, a CUDA built-in or a name CUDA's headers use: it cannot be " ..
             "a define (rename the knob, or set \"define\": false)", name)
    end
    if k.define ~= false and (name:match("^__") or name:match("^_%u")) then
      c:fail(p .. ".name", "'%s' is a name C++ reserves for the compiler and its headers (a leading __ or _ and " ..
             "a capital): as a define it can rewrite them (rename the knob, or set \"define\": false)", name)
    end
    seen[name] = true
    local what = "a non-empty array of numbers or strings"
    local values = c:array(k.values, p .. ".values", what)
    local vseen, as_text = {}, {}
    for j, v in ipairs(values) do
      if type(v) ~= "number" and type(v) ~= "string" then
        c:fail(string.format("%s.values[%d]", p, j), "expected a number or a string, got %s", c:type_name(v))
      end
      if type(v) == "string" and v:find("%z") then
        c:fail(string.format("%s.values[%d]", p, j), "a NUL character in a value (its define would end there)")
      end
      -- (a define is one line: a line break would put the rest in the
      -- source as code, and a trailing backslash would take the next line)
      if type(v) == "string" and (v:find("[\r\n]") or v:find("\\$")) then
        c:fail(string.format("%s.values[%d]", p, j), "%s in a value: a define is one line",
               v:find("[\r\n]") and "a line break" or "a trailing backslash")
      end
      -- (1 and "1" are one value: the same -D define and config key)
      if as_text[tostring(v)] then c:fail(string.format("%s.values[%d]", p, j), "duplicate value %s", show_value(v)) end
      if type(v) == "number" and (v ~= v or v == math.huge or v == -math.huge) then
        c:fail(string.format("%s.values[%d]", p, j), "expected a finite number, got %s (a JSON number too large " ..
               "for a double?)", tostring(v))
      end
      if type(v) == "number" and math.type(v) == "float" and v == math.floor(v) and math.abs(v) >= 2^53 then
        c:fail(string.format("%s.values[%d]", p, j), "%.17g is 2^53 or more: a JSON number is read as a double, " ..
               "so it would not be exact (write it as a string)", v)
      end
      as_text[tostring(v)], vseen[v] = true, true
    end
    local tags = {}
    for j, t in ipairs(c:array(k.tags, p .. ".tags", "an array of strings", true, true) or {}) do
      tags[j] = c:string(t, string.format("%s.tags[%d]", p, j))
    end
    if k.default ~= nil and not vseen[k.default] then
      c:fail(p .. ".default", "%s is not one of the knob's values", show_value(k.default))
    end
    -- compiler options per value ({"1": ["--use_fast_math"]}); define=false
    -- keeps the knob out of the defines (a knob that is only options)
    local options = {}
    local opts = c:object(k.options, p .. ".options", true) or {}
    for v, list in pairs(opts) do
      local vp = p .. ".options." .. tostring(v)
      local match
      for _, kv in ipairs(values) do if tostring(kv) == v then match = kv end end
      -- ("2.0" names the value 2: a JSON key is text, and 2.0 is read as 2)
      for _, kv in ipairs(values) do
        if match == nil and type(kv) == "number" and tonumber(v) == kv then match = kv end
      end
      if match == nil then c:fail(vp, "'%s' is not one of the knob's values", tostring(v)) end
      if options[tostring(match)] then c:fail(vp, "a second entry for the value %s", show_value(match)) end
      options[tostring(match)] = {}
      for j, o in ipairs(c:array(list, vp, "an array of compiler options", false, true)) do
        options[tostring(match)][j] = c:string(o, string.format("%s[%d]", vp, j), false, nil, "a compiler option (a string)")
      end
    end
    if k.define ~= nil and type(k.define) ~= "boolean" then
      c:fail(p .. ".define", "expected true or false, got %s", c:type_name(k.define))
    end
    local float = false
    for _, v in ipairs(values) do float = float or (math.type(v) == "float" and v ~= math.floor(v)) end
    out[i] = { name = name, values = values, tags = tags, default = k.default, help = k.help,
               options = options, define = k.define ~= false, float = float }
  end
  return out
end

-- {"of": ARRAY, "box": [exprs, outermost first], "swizzle": 0|32|64|128}:
-- a CUtensorMap over ARRAY (dense, row-major) passed by value, which the
-- worker builds for whichever buffer each launch uses (specs/README.md).

M.check_knobs, M.LUA_WORDS = check_knobs, LUA_WORDS
return M
