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
--   device_only.code_only(source [, keep_strings]) -> the source without
--     comments (and string contents), its lines where they were
--   device_only.strip_comments(source) -> code_only with the strings kept
local M = {}

-- The source as the compiler's later phases see its lines: backslash-newline
-- splices joined (the joined line stands where it began, and as many empty
-- lines follow as it took, so line numbers stay the source's), "%:" read as
-- "#" at a line's start, comments blanked and, unless keep_strings, the
-- insides of string and character literals blanked too. One pass, left to
-- right: "// see /*" is a line comment, and an unclosed "/*" ends the text.
function M.code_only(source, keep_strings)
  local lines, pending, spliced = {}, nil, 0
  for line in (source:gsub("\r\n", "\n") .. "\n"):gmatch("(.-)\n") do
    if line:sub(-1) == "\\" then
      pending, spliced = (pending or "") .. line:sub(1, -2), spliced + 1
    else
      lines[#lines + 1] = ((pending or "") .. line):gsub("^(%s*)%%:", "%1#")
      for _ = 1, spliced do lines[#lines + 1] = "" end
      pending, spliced = nil, 0
    end
  end
  if pending then lines[#lines + 1] = pending end
  local text = table.concat(lines, "\n")
  local out, at, n = {}, 1, #text
  while at <= n do
    local a = text:find("[/\"']", at)
    if not a then break end
    local c = text:sub(a, a)
    local nxt = text:sub(a + 1, a + 1)
    -- (a ' inside a number is a digit separator, 1'000 or 0xFF'FF, not a
    -- character literal: the token before it begins with a digit)
    local token = c == "'" and text:sub(math.max(1, a - 64), a - 1):match("[%w_.]*$") or ""
    if token:find("^%d") then
      out[#out + 1] = text:sub(at, a)
      at = a + 1
    elseif c == "/" and nxt == "/" then
      out[#out + 1] = text:sub(at, a - 1)
      at = text:find("\n", a + 2, true) or n + 1
    elseif c == "/" and nxt == "*" then
      out[#out + 1] = text:sub(at, a - 1)
      local _, e = text:find("*/", a + 2, true)
      -- (the comment's line breaks stay)
      out[#out + 1] = " " .. text:sub(a, e or n):gsub("[^\n]", "")
      at = (e or n) + 1
    elseif c == "/" then
      out[#out + 1] = text:sub(at, a)
      at = a + 1
    else
      -- a literal: to its closing quote, escapes skipped; an unclosed one
      -- ends at its line's end
      local e = a + 1
      while e <= n do
        local ch = text:sub(e, e)
        if ch == "\\" then e = e + 2
        elseif ch == c or ch == "\n" then break
        else e = e + 1 end
      end
      local closed = text:sub(e, e) == c
      if keep_strings then
        out[#out + 1] = text:sub(at, closed and e or e - 1)
      else
        out[#out + 1] = text:sub(at, a) .. (closed and c or "")
      end
      at = closed and e + 1 or e
    end
  end
  out[#out + 1] = text:sub(at)
  return table.concat(out)
end

-- The source without comments (string literals kept).
function M.strip_comments(source) return M.code_only(source, true) end

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
  -- (the driver API's families by name: a kernel's own helper may be
  -- called cuSq)
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
for _, family in ipairs({ "Init", "Driver", "Device", "Ctx", "Module", "Library", "Kernel", "Func", "Launch", "Mem",
                          "Array", "Mipmapped", "Pointer", "Stream", "Event", "Graph", "Tex", "Surf", "Link", "Ipc",
                          "Occupancy", "TensorMap", "Profiler", "External", "Multicast", "Get", "Param", "Coredump",
                          "UserObject", "Flush", "Wait", "Signal" }) do
  M.FORBIDDEN[#M.FORBIDDEN + 1] = { "%f[%w_]cu" .. family .. "%w*%s*%(", "a CUDA driver API call" }
end

-- Qualifiers that may stand between __device__ and a declaration's type.
local ATTRIBUTES = { "__align__%s*%b()", "__attribute__%s*%b()", "alignas%s*%b()", "__declspec%s*%b()",
                     "__launch_bounds__%s*%b()", "__maxnreg__%s*%b()", "noexcept%s*%b()", "throw%s*%b()" }

-- Whether seg has an initializer's "=" before position `limit`: a lone "="
-- outside brackets ("==", "<=", ">=", "!=" are comparisons, in a template
-- argument as anywhere).
local function initializer_before(seg, limit)
  local depth = 0
  for i = 1, limit - 1 do
    local ch = seg:sub(i, i)
    if ch == "(" or ch == "[" then depth = depth + 1
    elseif ch == ")" or ch == "]" then depth = depth - 1
    elseif ch == "=" and depth == 0 and not seg:sub(i - 1, i - 1):find("[=<>!+%-*/%%&|^~]")
           and seg:sub(i + 1, i + 1) ~= "=" then
      return true
    end
  end
  return false
end

-- Where `text` (code only: kopt.device_only.code_only) declares a global
-- __device__ variable, or nil. The declaration after __device__ runs to its
-- first ";" or "{". Operator names (operator+=, operator()) and
-- decltype(...) are set aside first. It is a variable when
-- it has no "(" (int g;  int g[4];  int g{0};), an "=" before its first
-- "(" (int g = f(1);), or its last parenthesised group holds a value, not
-- parameters (int g(0);  cuda::atomic<int> g(~0u);). A const or constexpr
-- table (no pointer) holds no state and passes; so does a __host__
-- __device__ function.
function M.device_variable(text)
  text = text:gsub("__attribute__%s*%(%(%s*device%s*%)%)", "__device__"):gsub("__location__%s*%(%s*device%s*%)",
                                                                                "__device__")
  local from = 1
  while true do
    local at, e = text:find("%f[%w_]__device__%f[^%w_]", from)
    if not at then return nil end
    from = e + 1
    local rest = text:sub(e + 1, e + 600)
    for _, a in ipairs(ATTRIBUTES) do rest = rest:gsub(a, " ") end
    rest = rest:gsub("operator%s*%(%s*%)", "operator"):gsub("operator%s*[^%w_%s%(]+", "operator")
               :gsub("decltype%s*%b()", "decltype")
    local seg, term = rest:match("^([^;{]*)([;{]?)")
    local open = seg:find("(", 1, true)
    -- const or constexpr anywhere among the declaration's specifiers, before
    -- __device__ ("static constexpr __device__") or after it, behind other
    -- specifiers ("__device__ static const"): a table, not state
    -- (the words before __device__ only when they are words alone: not
    -- "template <const int N>")
    local prefix = text:sub(1, at - 1):match("[^;{}]*$") or ""
    local specifiers = (prefix:find("^[%s%w_]*$") and prefix or "") .. " " .. (seg:match("^[%s%w_]*") or "")
    local constant = false
    for word in specifiers:gmatch("[%w_]+") do
      if word == "const" or word == "constexpr" then constant = true end
    end
    local var
    if seg:find("^%s*$") then
      var = term == ";"  -- (a trailing qualifier: "unsigned g __device__;")
    elseif constant and not seg:find("*", 1, true) then
      var = false
    elseif not open then
      var = (term ~= "" and seg:find("[%w_%]>]%s*$") ~= nil) or seg:find("[=%[]") ~= nil
    elseif initializer_before(seg, open) then
      var = true
    else
      -- (a constructor's initializer list is not its parameters)
      local last
      for g in seg:gsub("%)%s*:[^:].*$", ")"):gmatch("%b()") do last = g end
      local inner = (last or "()"):sub(2, -2)
      var = inner:find("^%s*[%d%-%+'\"{%.~!%(]") ~= nil
      for _, word in ipairs({ "true", "false", "nullptr", "sizeof", "alignof" }) do
        if inner:find("^%s*" .. word .. "%f[^%w_]") then var = true end
      end
    end
    if var then return at end
  end
end

-- Constructs the joined text is checked for (comments out, so English in a
-- comment does not count).
local MAX_EXPANDED = 1024 * 1024

local JOINED_ONLY = {
  { "%f[%w_]new%s+[%a_:]", "dynamic allocation (new)" },
}

-- The added lines of a diff, each as the compiler reads it (code_only):
-- from the new source when the caller gives it (so a line inside a block
-- comment or a string that the diff does not show opening is read as the
-- comment or string it is), else from the added lines alone. Returns a list
-- of { n = diff line number, code = text, raw = comment-free text with its
-- strings (for #include names), run = index of its run of consecutive
-- added lines (consecutive in the new source, blank lines aside) }.
local function added_lines(diff, new)
  local out, plus, newline_of = {}, {}, {}
  local c, run, prev = nil, 0, false
  local n = 0
  for line in (diff .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    local hunk = line:match("^@@ %-%d+,?%d* %+(%d+)")
    if hunk then
      c, prev = tonumber(hunk), false
    elseif line:sub(1, 1) == "+" and not (c == nil and line:match("^%+%+%+ ")) then
      -- ("+++ b/file" is a header before the first hunk; inside one, an
      -- added line that begins "++ ")
      if not prev then run = run + 1 end
      plus[#plus + 1] = { n = n, text = line:sub(2), run = run }
      newline_of[#plus] = c
      if c then c = c + 1 end
      prev = true
    else
      if line:sub(1, 1) == " " and c then c = c + 1 end
      prev = false
    end
  end
  local code_lines, raw_lines
  local mapped = new and true
  for i in ipairs(plus) do if not newline_of[i] then mapped = false end end
  local function split(text)
    local t = {}
    for l in (text .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
    return t
  end
  if mapped then
    code_lines, raw_lines = split(M.code_only(new)), split(M.code_only(new, true))
    -- a line that continues a spliced one ("\" at the end of the line
    -- before) is read as the joined line, where code_only put it
    local start, k, spliced = {}, 0, false
    for l in (new:gsub("\r\n", "\n") .. "\n"):gmatch("(.-)\n") do
      k = k + 1
      start[k] = spliced and start[k - 1] or k
      spliced = l:sub(-1) == "\\"
    end
    for i, k2 in ipairs(newline_of) do newline_of[i] = start[k2] or k2 end
    -- two runs of added lines with only blank or comment lines of the new
    -- source between them are one run: "__device__ unsigned", a blank line
    -- the base had, "g;" is one declaration
    local r = 0
    for i, p in ipairs(plus) do
      local joined = i > 1 and p.run ~= plus[i - 1].run
      if joined then
        for k2 = newline_of[i - 1] + 1, newline_of[i] - 1 do
          if (code_lines[k2] or ""):find("%S") then joined = false break end
        end
      end
      if i == 1 or (p.run ~= plus[i - 1].run and not joined) then r = r + 1 end
      p.run = r
    end
  else
    local texts = {}
    for i, p in ipairs(plus) do texts[i], newline_of[i] = p.text, i end
    local joined = table.concat(texts, "\n")
    code_lines, raw_lines = split(M.code_only(joined)), split(M.code_only(joined, true))
  end
  for i, p in ipairs(plus) do
    local k = newline_of[i]
    out[i] = { n = p.n, run = p.run, code = code_lines[k] or "", raw = raw_lines[k] or "" }
  end
  return out
end

-- A __host__ __device__ function compiles for the device like a __device__
-- one (NVRTC never builds the host side), so the pair reads as __device__.
-- "__host__ __device__" functions are device code too, with specifiers
-- between the two in any order ("__host__ __forceinline__ __device__")
local FUNCTION_SPECIFIERS = { inline = true, __forceinline__ = true, __noinline__ = true, static = true,
                              constexpr = true, __inline__ = true }
local function host_device(code)
  -- (words: nearest first; true when __device__ comes before another word)
  local function beside(words)
    for _, word in ipairs(words) do
      if word == "__device__" then return true end
      if not FUNCTION_SPECIFIERS[word] then return false end
    end
    return false
  end
  return (code:gsub("%f[%w_]()__host__()%f[^%w_]", function(at, e)
    local after, before = {}, {}
    for word in code:sub(e):match("^[%s%w_]*"):gmatch("[%w_]+") do after[#after + 1] = word end
    for word in code:sub(1, at - 1):match("[%s%w_]*$"):gmatch("[%w_]+") do table.insert(before, 1, word) end
    if beside(after) or beside(before) then return "" end
  end))
end

-- The runs of added lines as one text each, as the compiler reads them: the
-- object-like macros they define expanded, white space (line breaks too)
-- one space. The line-by-line check names the line; this one sees what is
-- split over lines or hidden in a macro ("__device__ int\n g;",
-- "#define KEEP __device__" then "KEEP int g;", "malloc\n(4)").
local function check_joined(lines)
  -- (lines the diff keeps between two runs are not joined in: a changed
  -- "__device__ float" line before an unchanged "f(float v) {" is no
  -- variable with what a later hunk adds)
  local runs = {}
  for _, l in ipairs(lines) do
    runs[l.run] = runs[l.run] or {}
    local r = runs[l.run]
    r[#r + 1] = l.code
  end
  local all = {}
  for _, r in ipairs(runs) do all[#all + 1] = table.concat(r, "\n") end
  -- the object-like macros the edit defines, expanded (nested ones too)
  local names, macros = {}, {}
  for name, body in table.concat(all, "\n"):gmatch("#%s*define%s+([%a_][%w_]*)[ \t]+([^\n(][^\n]*)") do
    if not macros[name] then names[#names + 1] = name end
    macros[name] = body
  end
  for _, run in ipairs(all) do
    local text = run:gsub("#[^\n]*", " ")
    -- one pass over the words per round, each macro's name replaced by its
    -- body (nested ones in the next round, until none is left or 64 rounds):
    -- linear in the text, however many macros the edit defines
    for _ = 1, #names > 0 and 64 or 0 do
      local before = text
      text = text:gsub("%f[%w_][%a_][%w_]*", macros)
      if text == before then break end
      -- (macros that each expand to copies of the next grow the text
      -- exponentially: no honest edit needs this much)
      if #text > MAX_EXPANDED then
        return nil, string.format("the edit's macros expand to more than %d bytes", MAX_EXPANDED)
      end
    end
    text = host_device(text:gsub("%s+", " "))
    for _, list in ipairs({ M.FORBIDDEN, JOINED_ONLY }) do
      for _, f in ipairs(list) do
        local at = text:find(f[1])
        if at then return nil, string.format("the edit adds %s: %q", f[2], text:sub(at, at + 60)) end
      end
    end
    local at = M.device_variable(text)
    if at then
      return nil, string.format("the edit adds a global __device__ variable: %q", text:sub(at, at + 60))
    end
  end
  return true
end

-- The names a preprocessor condition proves undefined where it holds (the
-- "!defined(K)" terms of a condition joined by && only: one joined by ||
-- proves nothing, "#if !defined(VEC) || 1" holds always) and, when it is
-- "defined(K)" alone, the name its later branches prove undefined.
local function condition_names(cond)
  local undefined, later = {}, {}
  -- the terms of a conjunction at the top level: a condition with anything
  -- looser than && there (||, or, ?:) is none, and a term guards only when
  -- it is exactly !defined(K) (so "!defined(K) | 1" and "!!defined(K)" do not)
  local terms, depth, from, loose = {}, 0, 1, false
  local i = 1
  while i <= #cond do
    local ch = cond:sub(i, i)
    if ch == "(" then depth = depth + 1
    elseif ch == ")" then depth = depth - 1
    elseif depth == 0 and cond:sub(i, i + 1) == "&&" then
      terms[#terms + 1], from, i = cond:sub(from, i - 1), i + 2, i + 1
    elseif depth == 0 and (cond:sub(i, i + 1) == "||" or ch == "?"
                           or cond:find("^%f[%w_]or%f[^%w_]", i)) then
      loose = true
    end
    i = i + 1
  end
  terms[#terms + 1] = cond:sub(from)
  if not loose then
    for _, t in ipairs(terms) do
      local name = t:match("^%s*!%s*defined%s*%(%s*([%a_][%w_]*)%s*%)%s*$")
        or t:match("^%s*!%s*defined%s+([%a_][%w_]*)%s*$")
        or t:match("^%s*!%s*%(%s*defined%s*%(%s*([%a_][%w_]*)%s*%)%s*%)%s*$")
      if name then undefined[name] = true end
    end
  end
  local only = cond:match("^%s*defined%s*%(%s*([%a_][%w_]*)%s*%)%s*$") or cond:match("^%s*defined%s+([%a_][%w_]*)%s*$")
  if only then later[only] = true end
  return undefined, later
end

local function union(a, b)
  local u = {}
  for k in pairs(a) do u[k] = true end
  for k in pairs(b) do u[k] = true end
  return u
end

-- The #define and #undef lines of `source` that set a knob where a branch
-- does not prove it undefined (#ifndef K, #if !defined(K), the #else or
-- #elif of #ifdef K): { [name] = count }.
local function unguarded_knob_lines(source, knobs)
  local counts, stack = {}, {}
  for line in (M.code_only(source) .. "\n"):gmatch("(.-)\n") do
    local dir, rest = line:match("^%s*#%s*(%a+)%s*(.*)$")
    -- each open conditional: the names its current branch proves
    -- undefined (where a define is a default, not an override), and those
    -- every later branch will
    local top = stack[#stack]
    if dir == "ifndef" then
      local name = rest:match("^([%a_][%w_]*)")
      stack[#stack + 1] = { cur = name and { [name] = true } or {}, later = {} }
    elseif dir == "ifdef" then
      local name = rest:match("^([%a_][%w_]*)")
      stack[#stack + 1] = { cur = {}, later = name and { [name] = true } or {} }
    elseif dir == "if" then
      local undefined, later = condition_names(rest)
      stack[#stack + 1] = { cur = undefined, later = later }
    elseif top and dir == "elif" then
      local undefined, later = condition_names(rest)
      top.cur, top.later = union(top.later, undefined), union(top.later, later)
    elseif top and (dir == "elifdef" or dir == "elifndef") then
      local name = rest:match("^([%a_][%w_]*)")
      local one = name and { [name] = true } or {}
      top.cur = dir == "elifndef" and union(top.later, one) or top.later
      if dir == "elifdef" then top.later = union(top.later, one) end
    elseif top and dir == "else" then
      top.cur, top.later = top.later, {}
    elseif dir == "endif" then
      stack[#stack] = nil
    elseif dir == "define" or dir == "undef" then
      local name = rest:match("^([%a_][%w_]*)")
      if name and knobs[name] then
        local guarded = false
        if dir == "define" then
          for _, g in ipairs(stack) do if g.cur[name] then guarded = true end end
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
-- between runs), the tuning knobs left settable. opts.knobs: names;
-- opts.base, opts.new: the sources before and after (with them, the lines
-- are read in the new source's context, and a knob's default may change
-- inside its guard; without them, any #define of a knob is refused).
function M.check(diff, opts)
  opts = opts or {}
  local allow = {}
  for _, h in ipairs(opts.include_allow or M.INCLUDE_ALLOW) do allow[h] = true end
  local knobs = {}
  for _, k in ipairs(opts.knobs or {}) do knobs[k] = true end
  local whole = opts.base ~= nil and opts.new ~= nil
  -- (the compiler reads a C string: what follows a NUL byte would go unseen)
  if (opts.new or diff):find("\0", 1, true) then return nil, "the edit holds a NUL byte" end
  local lines = added_lines(diff, opts.new)
  for _, l in ipairs(lines) do
    local n, code = l.n, host_device(l.code)
    if l.raw:find("^%s*#%s*include") then
      local inc = l.raw:match("^%s*#%s*include%s*[<\"]([^>\"]+)[>\"]")
      if not inc then
        return nil, string.format("line %d includes a file named by a macro, which the allow-list cannot check", n)
      end
      if not allow[inc] then
        return nil, string.format("line %d includes <%s>, which is not on the allow-list", n, inc)
      end
    end
    for _, f in ipairs(M.FORBIDDEN) do
      if code:find(f[1]) then
        return nil, string.format("line %d adds %s: %q", n, f[2], l.raw:sub(1, 80))
      end
    end
    if M.device_variable(code) then
      return nil, string.format("line %d adds a global __device__ variable: %q", n, l.raw:sub(1, 80))
    end
    local def = not whole and code:match("^%s*#%s*define%s+([%w_]+)") or code:match("^%s*#%s*undef%s+([%w_]+)")
    if def and knobs[def] then
      return nil, string.format("line %d redefines the tuning knob %s", n, def)
    end
  end
  if whole then
    local ok, why = M.check_knob_guards(opts.base, opts.new, opts.knobs or {})
    if not ok then return nil, why end
  end
  return check_joined(lines)
end

return M
