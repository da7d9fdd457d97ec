-- The policy that an edit changes device code only: what the lines it adds
-- may include and contain (no host code, no allocation, no launches, no
-- global __device__ state that survives between runs), and that it leaves
-- every tuning knob settable from the command line (kopt sets a knob with
-- -D; a define outside its #ifndef guard would override it, and a config
-- would be measured with another value than its label).
--
--   device_only.check(diff, opts) -> true | nil, reason
--     opts.knobs: the knob names; opts.base, opts.new: the sources before
--     and after the edit (the knob-guard check reads them whole)
--   device_only.strip_comments(source) -> source without comments
local M = {}

-- (one pass, left to right, so "// see /*" is a line comment and an
-- unclosed "/*" ends the text: a long reply of them costs linear time)
function M.strip_comments(source)
  local out, at = {}, 1
  while true do
    local a = source:find("/[/*]", at)
    if not a then break end
    out[#out + 1] = source:sub(at, a - 1)
    if source:sub(a + 1, a + 1) == "/" then
      local nl = source:find("\n", a + 2, true)
      if not nl then at = #source + 1 break end
      at = nl
    else
      local _, e = source:find("*/", a + 2, true)
      if not e then at = #source + 1 break end
      out[#out + 1] = " "
      at = e + 1
    end
  end
  out[#out + 1] = source:sub(at)
  return table.concat(out)
end
local strip_comments = M.strip_comments

-- Headers an edit may include: device-side CUDA headers only.
M.INCLUDE_ALLOW = {
  "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cuda_pipeline.h", "cuda_pipeline_primitives.h",
  "mma.h", "cooperative_groups.h", "cooperative_groups/reduce.h", "cooperative_groups/memcpy_async.h",
  "cuda/pipeline", "cuda/barrier", "cuda/std/cstdint", "cuda/std/limits", "cuda/std/type_traits",
  "cuda/annotated_ptr", "stdint.h", "cstdint", "math_constants.h", "cuda/std/array", "cuda/std/utility",
  "cuda/std/bit", "cuda/std/cmath",
}

-- Host-side or harness-evading constructs an edit may not add. Each entry:
-- Lua pattern, what it is.
M.FORBIDDEN = {
  { "%f[%w_]main%s*%(", "a main function" },
  { "%f[%w_]cuda[A-Z]%w*%s*%(", "a CUDA runtime API call" },
  { "%f[%w_]cu[A-Z]%w*%s*%(", "a CUDA driver API call" },
  { "<<<", "a kernel launch" },
  { "%f[%w_]__host__%f[^%w_]", "host code (__host__)" },
  { "%f[%w_]__managed__%f[^%w_]", "managed memory" },
  { "%f[%w_]malloc%s*%(", "dynamic allocation" },
  { "%f[%w_]free%s*%(", "dynamic allocation" },
  { "%f[%w_]std::thread", "host threads" },
  { "%f[%w_]f?open%s*%(", "file access" },
  { "%f[%w_]system%s*%(", "process control" },
  { "#%s*pragma%s+comment", "linker directives" },
}

-- Qualifiers that may stand between __device__ and a declaration's type.
local ATTRIBUTES = { "__align__%s*%b()", "__attribute__%s*%b()", "alignas%s*%b()", "__declspec%s*%b()",
                     "__launch_bounds__%s*%b()", "__maxnreg__%s*%b()" }

-- Where `text` (comments out) declares a __device__ variable, or nil: a
-- declaration up to its first ";" or "{" with no "(" (int g;  int g[4];
-- int g = 0;  int g{0};), one with "=" before its first "(" (int g = f(1);),
-- or a name followed by a parenthesised initializer that is a value, not
-- parameters (int g(0);  cuda::atomic<int> g(0);). A function has
-- parameters in parentheses before its body or ";".
function M.device_variable(text)
  local from = 1
  while true do
    local at, e = text:find("%f[%w_]__device__%f[^%w_]", from)
    if not at then return nil end
    from = e + 1
    local rest = text:sub(e + 1, e + 600)
    for _, a in ipairs(ATTRIBUTES) do rest = rest:gsub(a, " ") end
    local seg, term = rest:match("^([^;{]*)([;{]?)")
    local open = seg:find("(", 1, true)
    local var
    if not open then
      var = (term ~= "" and seg:find("[%w_%]>]%s*$") ~= nil) or seg:find("[=%[]") ~= nil
    elseif seg:sub(1, open - 1):find("=", 1, true) then
      var = true
    else
      local inner = (seg:match("%b()", open) or "()"):sub(2, -2)
      var = inner:find("^%s*[%d%-%+'\"{%.]") ~= nil or inner:find("^%s*true%f[^%w_]") ~= nil
        or inner:find("^%s*false%f[^%w_]") ~= nil or inner:find("^%s*nullptr%f[^%w_]") ~= nil
    end
    if var then return at end
  end
end

-- Constructs the joined text is checked for (comments out, so English in a
-- comment does not count).
local JOINED_ONLY = {
  { "%f[%w_]new%s+[%a_:]", "dynamic allocation (new)" },
}

-- The added lines of a diff as one text, as the compiler reads it: comments
-- out, the object-like macros they define expanded, white space (line
-- breaks too) one space. The line-by-line check above names the line; this
-- one sees what is split over lines or hidden in a macro
-- ("__device__ int\n g;", "#define KEEP __device__" then "KEEP int g;",
-- "malloc\n(4)").
local function check_joined(diff)
  -- runs of consecutive added lines: lines the diff keeps between them are
  -- not joined in (a changed "__device__ float" line before an unchanged
  -- "f(float v) {" is no variable with what a later hunk adds)
  local runs, cur = {}, nil
  for line in (diff .. "\n"):gmatch("(.-)\n") do
    if line:sub(1, 1) == "+" and not line:match("^%+%+%+ ") then
      if not cur then cur = {} runs[#runs + 1] = cur end
      cur[#cur + 1] = line:sub(2)
    else
      cur = nil
    end
  end
  -- the object-like macros the edit defines, expanded (nested ones too)
  local all = {}
  for i, r in ipairs(runs) do all[i] = table.concat(r, "\n") end
  local defs = table.concat(all, "\n"):gsub("/%*.-%*/", " "):gsub("//[^\n]*", "")
  local names, macros = {}, {}
  for name, body in defs:gmatch("#%s*define%s+([%a_][%w_]*)[ \t]+([^\n(][^\n]*)") do
    if not macros[name] then names[#names + 1] = name end
    macros[name] = body
  end
  table.sort(names)
  for _, run in ipairs(all) do
    local text = run:gsub("/%*.-%*/", " "):gsub("//[^\n]*", ""):gsub("#[^\n]*", " ")
    for _ = 1, 4 do
      for _, name in ipairs(names) do
        text = text:gsub("%f[%w_]" .. name .. "%f[^%w_]", (macros[name]:gsub("%%", "%%%%")))
      end
    end
    text = text:gsub("%s+", " ")
    for _, f in ipairs(M.FORBIDDEN) do
      local at = text:find(f[1])
      if at then return nil, string.format("the edit adds %s: %q", f[2], text:sub(at, at + 60)) end
    end
    for _, f in ipairs(JOINED_ONLY) do
      local at = text:find(f[1])
      if at then return nil, string.format("the edit adds %s: %q", f[2], text:sub(at, at + 60)) end
    end
    local at = M.device_variable(text)
    if at then
      return nil, string.format("the edit adds a global __device__ variable: %q", text:sub(at, at + 60))
    end
  end
  return true
end

-- The #define and #undef lines of `source` that set a knob outside a guard
-- of its own (#ifndef K, #if !defined(K), or the #else of #ifdef K):
-- { [name] = count }.
local function unguarded_knob_lines(source, knobs)
  local counts, stack = {}, {}
  local text = strip_comments(source):gsub("\\\r?\n", " ")
  for line in (text .. "\n"):gmatch("(.-)\n") do
    local dir, rest = line:match("^%s*#%s*(%a+)%s*(.*)$")
    -- each open conditional: the knob its branch leaves undefined (where a
    -- define is a default, not an override), and the one its #else would
    if dir == "ifndef" then
      stack[#stack + 1] = { rest:match("^([%a_][%w_]*)") or false, false }
    elseif dir == "ifdef" then
      stack[#stack + 1] = { false, rest:match("^([%a_][%w_]*)") or false }
    elseif dir == "if" then
      local neg = rest:match("^!%s*defined%s*%(?%s*([%a_][%w_]*)")
      local pos = not neg and rest:match("^defined%s*%(?%s*([%a_][%w_]*)%s*%)?%s*$")
      stack[#stack + 1] = { neg or false, pos or false }
    elseif dir == "else" then
      if #stack > 0 then stack[#stack] = { stack[#stack][2], false } end
    elseif dir == "elif" or dir == "elifdef" or dir == "elifndef" then
      if #stack > 0 then stack[#stack] = { false, false } end
    elseif dir == "endif" then
      stack[#stack] = nil
    elseif dir == "define" or dir == "undef" then
      local name = rest:match("^([%a_][%w_]*)")
      if name and knobs[name] then
        local guarded = false
        if dir == "define" then
          for _, g in ipairs(stack) do if g[1] == name then guarded = true end end
        end
        if not guarded then counts[name] = (counts[name] or 0) + 1 end
      end
    end
  end
  return counts
end

-- Whether an edit from `base` to `new` leaves every knob settable: no
-- #define of a knob outside its guard, or #undef of one, that the base did
-- not have (an edit that only deletes the "#ifndef VEC" and "#endif" around
-- "#define VEC 4" adds no line, and would pin VEC to 4 under every label).
function M.check_knob_guards(base, new, names)
  local knobs = {}
  for _, k in ipairs(names) do knobs[k] = true end
  local before, after = unguarded_knob_lines(base, knobs), unguarded_knob_lines(new, knobs)
  local bad = {}
  for name, n in pairs(after) do
    if n > (before[name] or 0) then bad[#bad + 1] = name end
  end
  if #bad == 0 then return true end
  table.sort(bad)
  return nil, string.format("the edit leaves the tuning knob%s %s defined or undefined outside an #ifndef guard " ..
                            "of its own: kopt sets knobs with -D, and the define would override it",
                            #bad > 1 and "s" or "", table.concat(bad, ", "))
end

-- Checks the added lines of a diff: includes from the allow-list only, none
-- of M.FORBIDDEN, no new global __device__ variables (state that survives
-- between runs), no redefinition of the tuning knobs. opts.knobs: names.
function M.check(diff, opts)
  opts = opts or {}
  local allow = {}
  for _, h in ipairs(opts.include_allow or M.INCLUDE_ALLOW) do allow[h] = true end
  local knobs = {}
  for _, k in ipairs(opts.knobs or {}) do knobs[k] = true end
  local n = 0
  for line in (diff .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if line:sub(1, 1) == "+" and not line:match("^%+%+%+ ") then
      local code = line:sub(2):gsub("/%*.-%*/", " "):gsub("//.*$", "")
      if code:find("^%s*#%s*include") then
        local inc = code:match("^%s*#%s*include%s*[<\"]([^>\"]+)[>\"]")
        if not inc then
          return nil, string.format("line %d includes a file named by a macro, which the allow-list cannot check", n)
        end
        if not allow[inc] then
          return nil, string.format("line %d includes <%s>, which is not on the allow-list", n, inc)
        end
      end
      for _, f in ipairs(M.FORBIDDEN) do
        if code:find(f[1]) then
          return nil, string.format("line %d adds %s: %q", n, f[2], code:sub(1, 80))
        end
      end
      if M.device_variable(code) then
        return nil, string.format("line %d adds a global __device__ variable: %q", n, code:sub(1, 80))
      end
      local def = code:match("^%s*#%s*define%s+([%w_]+)") or code:match("^%s*#%s*undef%s+([%w_]+)")
      if def and knobs[def] then
        return nil, string.format("line %d redefines the tuning knob %s", n, def)
      end
    end
  end
  if opts.base and opts.new then
    local ok, why = M.check_knob_guards(opts.base, opts.new, opts.knobs or {})
    if not ok then return nil, why end
  end
  return check_joined(diff)
end


return M
