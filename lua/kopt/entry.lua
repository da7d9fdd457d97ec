-- The entry kernel of a source, as the worker launches it: whether a source
-- defines it, its signature, and whether an edit changed that signature
-- (kopt.patch refuses such edits; kopt.synth checks a synthesized kernel).
local device_only = require("kopt.device_only")

local M = {}

local strip_comments = device_only.strip_comments

-- (an entry may be a template instance, "stencil<float, BLOCK>", and
-- qualified, "ops::scale<BLOCK>": the function's own name, its last
-- component before the template arguments, is what the source defines)
function M.name(entry)
  local qualified = entry:match("^%s*([%a_][%w_:]*)")
  if not qualified then return entry end
  return qualified:match("([%a_][%w_]*)$") or qualified
end

-- The namespaces a qualified entry names ("ops::scale<B>": "ops"), or nil.
local function qualifier(entry)
  local qualified = entry:match("^%s*:*([%a_][%w_:]*)") or ""
  return qualified:match("^(.-)::[%a_][%w_]*$")
end

-- The named namespaces open at `at` in code ("a::b"; an anonymous one adds
-- nothing, as it adds nothing to a name).
local function namespace_at(code, at)
  local stack, pos = {}, 1
  while true do
    local s, e, kind = code:find("([{}])", pos)
    if not s or s >= at then break end
    if kind == "}" then
      stack[#stack] = nil
    else
      local ns = code:sub(math.max(1, s - 200), s - 1):match("namespace%s+([%a_][%w_:]*)%s*$")
      stack[#stack + 1] = ns or (code:sub(math.max(1, s - 200), s - 1):match("namespace%s*$") and "" or false)
    end
    pos = e + 1
  end
  local names = {}
  for _, n in ipairs(stack) do if n and n ~= "" then names[#names + 1] = n end end
  return table.concat(names, "::")
end

-- Where code defines the __global__ function `entry` (with_body: followed
-- by a body): its position and parameter list. A qualified entry is the
-- definition inside its namespaces ("v2::scale", not v1's scale).
local function find_entry(code, entry, with_body)
  local pattern = "__global__[^;{]-%f[%w_]" .. M.name(entry):gsub("%p", "%%%0") .. "%s*(%b())" ..
                  (with_body and "%s*{" or "")
  local want, first_at, first_params = qualifier(entry), nil, nil
  local pos = 1
  while true do
    local at, e, params = code:find(pattern, pos)
    if not at then break end
    if not want then return at, params end
    local ns = namespace_at(code, at)
    if ns == want or ns:sub(-#want - 2) == "::" .. want then return at, params end
    first_at, first_params = first_at or at, first_params or params
    pos = e + 1
  end
  -- (a qualifier no namespace matches: a struct's or a using's; the first)
  if want and first_at then return first_at, first_params end
end

-- Whether a source defines the __global__ function `entry`: its signature
-- followed by a body, in code, not in a comment ("// was: __global__ void
-- entry(" defines nothing, and neither does a declaration "...entry(...);"
-- or a signature line quoted alone).
function M.defines(source, entry)
  return find_entry(strip_comments(source), entry, true) ~= nil
end

-- Whether a source's braces pair up, outside comments, strings and
-- character literals: a whole kernel source does; a snippet cut from one
-- ("__global__ void k(...) {" and two lines) or a reply cut short does not.
function M.braces_balanced(source)
  local code = device_only.code_only(source, false)
  local depth = 0
  for c in code:gmatch("[{}]") do
    depth = depth + (c == "{" and 1 or -1)
    if depth < 0 then return false end
  end
  return depth == 0
end

-- The entry kernel's parameters as the harness sees them: one word per
-- parameter, "pointer" for any pointer or array (all 8 bytes: a kernel may
-- read float * as float4 *), else its type without qualifiers and name.
local QUALIFIERS = { const = true, volatile = true, __restrict__ = true, restrict = true, __restrict = true,
                     __grid_constant__ = true, signed = true }
local function parameter_kinds(params)
  local kinds, depth, cur = {}, 0, {}
  local function close()
    -- (without a default value and attributes: "[[maybe_unused]] int n" is no array)
    local p = table.concat(cur):gsub("=.*$", ""):gsub("%[%[.-%]%]", ""):gsub("__attribute__%s*%b()", "")
    cur = {}
    if not p:find("%S") or p:find("^%s*void%s*$") then return end
    if p:find("[%*%[&]") then kinds[#kinds + 1] = "pointer" return end
    local words = {}
    for w in p:gmatch("[%a_][%w_:]*") do if not QUALIFIERS[w] then words[#words + 1] = w end end
    if #words >= 2 then words[#words] = nil end  -- (its name)
    -- (the sign does not change a parameter's size: int and unsigned launch alike)
    if words[1] == "unsigned" then table.remove(words, 1) end
    if #words == 0 then words[1] = "int" end
    kinds[#kinds + 1] = table.concat(words, " ")
  end
  for i = 2, #params - 1 do
    local c = params:sub(i, i)
    if c == "(" or c == "<" or c == "[" then depth = depth + 1 elseif c == ")" or c == ">" or c == "]" then depth = depth - 1 end
    if c == "," and depth == 0 then close() else cur[#cur + 1] = c end
  end
  close()
  return kinds
end

-- { kinds = parameter kinds, c_linkage = whether it is extern "C", text = its
-- parameter list }, or nil when the source does not define the entry.
function M.signature(source, entry)
  local code = strip_comments(source)
  local at, params = find_entry(code, entry, false)
  if not at then return nil end
  local prefix = code:sub(1, at - 1):match("[^;{}]*$") or ""
  local c_linkage = prefix:find('extern%s*"C"') ~= nil or code:sub(1, at - 1):find('extern%s*"C"%s*{') ~= nil
  return { kinds = parameter_kinds(params), c_linkage = c_linkage, text = params:gsub("%s+", " ") }
end

-- The C types a scalar parameter may have, as class and size: a kernel
-- reads the bytes the worker passes by the spec's dtype, so an int where
-- the spec passes a float, or a size_t where it passes an i32, reads
-- garbage. Types not listed (a typedef, a template parameter) are not
-- judged.
local C_SCALARS = {
  float = { "float", 4 }, double = { "float", 8 }, half = { "float", 2 }, __half = { "float", 2 },
  __nv_bfloat16 = { "float", 2 }, nv_bfloat16 = { "float", 2 },
  int = { "int", 4 }, int32_t = { "int", 4 }, uint32_t = { "int", 4 }, long = { "int", 8 },
  ["long long"] = { "int", 8 }, ["long int"] = { "int", 8 }, ["long long int"] = { "int", 8 },
  int64_t = { "int", 8 }, uint64_t = { "int", 8 }, size_t = { "int", 8 }, ptrdiff_t = { "int", 8 },
  short = { "int", 2 }, int16_t = { "int", 2 }, uint16_t = { "int", 2 }, char = { "int", 1 },
  int8_t = { "int", 1 }, uint8_t = { "int", 1 }, bool = { "int", 1 },
}
-- Whether two parameter kinds launch alike: the same words, or two known
-- scalar types of one class and size (int and int32_t, __half and half).
local function same_kind(x, y)
  if x == y then return true end
  local cx, cy = C_SCALARS[x], C_SCALARS[y]
  return cx ~= nil and cy ~= nil and cx[1] == cy[1] and cx[2] == cy[2]
end

-- Why `new`'s entry kernel cannot be launched as `source`'s is (the worker
-- passes the spec's arguments, by the base's signature), or nil.
function M.signature_changed(source, new, entry)
  local a, b = M.signature(source, entry), M.signature(new, entry)
  if not a or not b then return nil end
  if a.c_linkage and not b.c_linkage then
    return string.format('the edit drops extern "C" from the entry kernel %s (the worker finds it by that name)', entry)
  end
  local same = #a.kinds == #b.kinds
  for i = 1, #a.kinds do same = same and same_kind(a.kinds[i], b.kinds[i]) end
  if same then return nil end
  return string.format("the edit changes the entry kernel's parameters from %s to %s; the worker passes the spec's " ..
                       "arguments, so their number and types must stay", a.text, b.text)
end

local DTYPES = {
  f32 = { "float", 4 }, f64 = { "float", 8 }, f16 = { "float", 2 }, bf16 = { "float", 2 },
  i32 = { "int", 4 }, u32 = { "int", 4 }, i64 = { "int", 8 }, u64 = { "int", 8 }, i16 = { "int", 2 },
  u16 = { "int", 2 }, i8 = { "int", 1 }, u8 = { "int", 1 },
}

-- Why a source's entry kernel cannot take the spec's arguments, or nil.
-- params: the spec's kernel parameters in order ({name=, kind=, type=}):
-- arrays are pointers, scalars by their dtype, tensor maps by value.
function M.launch_mismatch(source, entry, params, certain)
  local sig = M.signature(source, entry)
  if not sig then return nil end
  -- (certain: only what cannot be right whatever the source's macros and
  -- types: no parameter list with preprocessor lines in it, whose branches
  -- both count here, and an array refused only for a parameter of a known
  -- scalar type, not for a pointer typedef)
  if certain and sig.text:find("#", 1, true) then return nil end
  local want = {}
  for i, a in ipairs(params) do want[i] = a.name end
  if #sig.kinds ~= #params then
    return string.format("the entry kernel %s takes %d parameters %s; the spec passes %d (%s), in that order",
                         M.name(entry), #sig.kinds, sig.text, #params, table.concat(want, ", "))
  end
  for i, a in ipairs(params) do
    local got = sig.kinds[i]
    local why
    if a.kind == "array" then
      if got ~= "pointer" and (not certain or C_SCALARS[got]) then why = "an array, passed as a pointer" end
    elseif a.kind == "scalar" then
      local c, d = C_SCALARS[got], DTYPES[a.type]
      if got == "pointer" then why = "a scalar " .. a.type .. ", passed by value"
      elseif c and d and (c[1] ~= d[1] or c[2] ~= d[2]) then
        why = string.format("a scalar %s (%s of %d bytes), not %s", a.type, d[1] == "float" and "a float" or "an integer", d[2], got)
      end
    elseif a.kind == "tensormap" and got == "pointer" then
      why = "a tensor map, passed by value (const __grid_constant__ CUtensorMap)"
    end
    if why then
      return string.format("the entry kernel %s's parameter %d (%s) is %s, but the spec's '%s' is %s", M.name(entry), i,
                           got, got == "pointer" and "a pointer" or "a value", a.name, why)
    end
  end
end

return M
