-- Sandboxed expressions. Spec fields such as constraints, launch geometry,
-- shapes and work are Lua expressions over knob values, problem sizes and
-- `device`. They are compiled once with `load` into an environment that holds
-- only arithmetic helpers: no io, os, require, load, debug, string or table.
-- `function` is rejected so an expression cannot loop, and string methods
-- (reached through any string value) are out of reach (below).
local conditions = require("kopt.expr_conditions")

local M = {}

local helpers = {
  ceil = math.ceil, floor = math.floor, min = math.min, max = math.max,
  abs = math.abs, sqrt = math.sqrt, exp = math.exp, huge = math.huge,
  log = function(x, b) return math.log(x, b) end,
  log2 = function(x) return math.log(x, 2) end,
  cdiv = function(a, b) return (a + b - 1) // b end,
  -- (truncated toward zero, as Python's int() is: math.tointeger gave nil
  -- for 2.7, and an expression failed far from the cause)
  int = function(x)
    if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge then return nil end
    local t = x >= 0 and math.floor(x) or math.ceil(x)
    return math.tointeger(t) or t
  end,
}
M.helpers = helpers

local keywords = { ["and"] = true, ["or"] = true, ["not"] = true, ["true"] = true,
                   ["false"] = true, ["nil"] = true }

-- The tokens of `text` as Lua's lexer reads them: { kind, text, position }
-- with kind "name", "number", "string" or "op"; comments dropped. Strings are read
-- with their escapes and long brackets, so a quote of the other kind inside
-- one ('"') cannot hide the code after it from the checks below. Nil and
-- why when a string or comment is not closed (load would refuse it too).
local function tokens(text)
  local out, i, n = {}, 1, #text
  local function long_bracket(at)
    local eq = text:match("^%[(=*)%[", at)
    if not eq then return nil end
    local _, close = text:find("]" .. eq .. "]", at + #eq + 2, true)
    return close or false
  end
  while i <= n do
    local c = text:sub(i, i)
    if c:find("%s") then
      i = i + 1
    elseif text:sub(i, i + 1) == "--" then
      local close = long_bracket(i + 2)
      if close == false then return nil, "a comment is not closed" end
      i = close and close + 1 or ((text:find("\n", i, true) or n) + 1)
    elseif c == "[" and long_bracket(i) ~= nil then
      local close = long_bracket(i)
      if not close then return nil, "a string is not closed" end
      out[#out + 1] = { "string", text:sub(i, close), i }
      i = close + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while true do
        local d = text:sub(j, j)
        if d == "" or d == "\n" then return nil, "a string is not closed" end
        if d == "\\" then j = j + 2 elseif d == c then break else j = j + 1 end
      end
      out[#out + 1] = { "string", text:sub(i, j), i }
      i = j + 1
    elseif c:find("[%a_]") then
      local name = text:match("^[%a_][%w_]*", i)
      out[#out + 1] = { "name", name, i }
      i = i + #name
    elseif c:find("%d") or (c == "." and text:sub(i + 1, i + 1):find("%d")) then
      local num = text:match("^0[xX][%x%.]*[pP][%+%-]?%d+", i) or text:match("^0[xX][%x%.]*", i)
        or text:match("^[%d%.]*[eE][%+%-]?%d+", i) or text:match("^[%d%.]+", i)
      out[#out + 1] = { "number", num, i }
      i = i + #num
    else
      local op = text:match("^%.%.%.", i) or text:match("^[%.=~<>/:][%.=/:<>]?", i) or c
      -- (two-character operators: .. == ~= <= >= // :: << >>; anything else is one character)
      if #op == 2 and not ({ [".."] = true, ["=="] = true, ["~="] = true, ["<="] = true, [">="] = true,
                             ["//"] = true, ["::"] = true, ["<<"] = true, [">>"] = true })[op] then
        op = c
      end
      out[#out + 1] = { "op", op, i }
      i = i + #op
    end
  end
  return out
end

-- Names an expression refers to (identifiers not after a '.'), so the search
-- space can check a constraint as soon as the knobs it reads are fixed.
local function free_names(toks)
  local names, seen = {}, {}
  for k, t in ipairs(toks) do
    local prev = toks[k - 1]
    local name = t[2]
    if t[1] == "name" and not (prev and prev[1] == "op" and prev[2] == ".") and not keywords[name] and
       not helpers[name] and not seen[name] then
      seen[name] = true
      names[#names + 1] = name
    end
  end
  return names
end

-- Why an expression (its tokens) reaches beyond its values, or nil. Every
-- string has the string library as its methods (("a"):rep(1e9), ("a").find
-- with a pattern that backtracks for hours), so an expression may read
-- fields of `device` only: no ':' call, no '[' index, no '.' after anything
-- but `device`.
local function reach(toks)
  for _, t in ipairs(toks) do
    -- (C's conditional: its ':' is no method call)
    if t[1] == "op" and t[2] == "?" then return "uses C's 'a ? b : c', which expressions do not read (write 'a and b or c')" end
  end
  for k, t in ipairs(toks) do
    if t[1] == "op" then
      if t[2] == ":" or t[2] == "::" then return "calls a method (':')" end
      if t[2] == "[" then return "indexes a value ('[')" end
      if t[2] == "." then
        local prev = toks[k - 1]
        if not (prev and prev[1] == "name" and prev[2] == "device") then
          local name = prev and prev[1] == "name" and prev[2]
          return name and string.format("reads a field of '%s'", name) or "reads a field of a value"
        end
      end
    end
  end
  return nil
end

-- A hint for an expression written with C's or Python's operators (a
-- Kernel Tuner restriction copied as it is), which Lua spells otherwise;
-- "" when it has none. Only after a syntax error: a lone & or | is Lua's
-- bitwise operator.
local function c_operators(toks)
  for k, t in ipairs(toks) do
    local nxt = toks[k + 1]
    if t[1] == "op" and (t[2] == "!" or ((t[2] == "&" or t[2] == "|") and nxt and nxt[1] == "op" and nxt[2] == t[2]))
    then
      return " (Lua writes != as ~=, && as and, || as or, ! as not)"
    end
    if t[1] == "op" and t[2] == "*" and nxt and nxt[1] == "op" and nxt[2] == "*" then
      return " (Lua writes Python's a ** b as a ^ b)"
    end
    if t[1] == "name" and t[2] == "if" then
      return " (Lua writes Python's 'x if c else y' as 'c and x or y')"
    end
    if t[1] == "name" and t[2] == "in" and nxt and nxt[1] == "op" and (nxt[2] == "[" or nxt[2] == "(") then
      return " (Lua has no 'in': write 'a in [1, 2]' as 'a == 1 or a == 2')"
    end
  end
  return ""
end

-- A name no token of the expression spells: the checks of kopt.expr_conditions
-- are locals of the compiled chunk, which must not hide a knob.
local function unused_name(base, toks)
  local taken = {}
  for _, t in ipairs(toks) do if t[1] == "name" then taken[t[2]] = true end end
  while taken[base] do base = base .. "_" end
  return base
end

-- The function that evaluates the expression in `env`: its text, or the
-- text with its conditions checked, which binds the checks as upvalues.
local function instantiate(obj, env)
  local name = "=" .. (obj.label or "expression")
  if #obj.guards == 0 then return (load("return " .. obj.text, name, "t", env)) end
  local chunk = load(string.format("local %s, %s = ... return function() return %s end", obj.truth, obj.equal,
                                   obj.source), name, "t", env)
  return chunk(conditions.checks(obj.label, obj.guards))
end

-- Compiles `text` (a string or a number). Returns a callable object, or nil
-- and a message. `label` names the field for messages (e.g. "constraints[2]").
function M.compile(text, label)
  if type(text) == "number" then
    return setmetatable({ text = tostring(text), label = label, names = {}, const = text }, M)
  end
  if type(text) ~= "string" or text:match("^%s*$") then
    return nil, "expected an expression (a string or a number)"
  end
  if text:find("%f[%w_]function%f[^%w_]") or text:find("%f[%w_]goto%f[^%w_]") then
    return nil, string.format("expression '%s' may not define functions", text)
  end
  local toks, bad = tokens(text)
  if not toks then return nil, string.format("expression '%s' has a syntax error: %s", text, bad) end
  local why = reach(toks)
  if why then
    if why:find("^uses C") then return nil, string.format("expression '%s' %s", text, why) end
    local python = c_operators(toks)
    if python ~= "" then return nil, string.format("expression '%s' is not Lua%s", text, python) end
    return nil, string.format("expression '%s' %s; only device has fields (knobs, problem sizes and device are known)",
                              text, why)
  end
  local env = {}
  local chunk, err = load("return " .. text, "=" .. (label or "expression"), "t", env)
  if not chunk then
    -- (the parser's "C stack overflow" on deep nesting can reach here as
    -- the message handler's table, not a string)
    if type(err) ~= "string" then return nil, string.format("expression '%s' is nested too deeply", text) end
    return nil, string.format("expression '%s' has a syntax error: %s%s", text, (err:gsub("^[^:]*:%d+: ", "")),
                              c_operators(toks))
  end
  -- (Python's readings that Lua would take silently: kopt.expr_conditions)
  local truth, equal = unused_name("truth", toks), unused_name("equal", toks)
  local source, guards = conditions.rewrite(text, toks, truth, equal)
  if not source then return nil, string.format("expression '%s' %s", text, guards) end
  if #guards > 0 and not load("return " .. source, "=", "t", {}) then guards = {} end
  local obj = setmetatable({ text = text, label = label, names = free_names(toks), source = source, guards = guards,
                             truth = truth, equal = equal, toks = toks }, M)
  obj.chunk = #guards > 0 and instantiate(obj, env) or chunk
  setmetatable(env, { __index = function(_, k)
    local scopes = obj.scopes
    for i = 1, scopes.n do
      local v = scopes[i][k]
      if v ~= nil then return v end
    end
    local h = helpers[k]
    if h ~= nil then return h end
    error(string.format("unknown name '%s'", k), 0)
  end })
  return obj
end

M.__index = M

local function describe(values)
  local parts = {}
  for k, v in pairs(values or {}) do
    if type(v) ~= "table" then parts[#parts + 1] = k .. "=" .. tostring(v) end
  end
  table.sort(parts)
  return table.concat(parts, ", ")
end

-- Evaluates with the given scopes (tables searched in order). Returns the
-- value, or nil and a message naming the expression and the values it saw.
function M:eval(...)
  if self.const then return self.const end
  self.scopes = table.pack(...)
  local ok, v = pcall(self.chunk)
  if not ok then
    local why = tostring(v):gsub("^[^:]*:%d+: ", "")
    -- (a check of kopt.expr_conditions names the field itself, as the
    -- caller of eval does before this sentence)
    if self.label and why:sub(1, #self.label + 2) == self.label .. ": " then why = why:sub(#self.label + 3) end
    return nil, string.format("expression '%s' failed for %s: %s", self.text, describe(self.scopes[1]), why)
  end
  return v
end

-- Binds the expression to one scope table for repeated fast calls (the
-- search space's enumeration): returns a function of no arguments that reads
-- names from `scope` as it is at call time. The scope must itself reach the
-- helpers (see M.helpers) if the expression uses them.
function M:bind(scope)
  if self.const then local c = self.const return function() return c end end
  return instantiate(self, setmetatable({}, { __index = scope }))
end

-- Like eval but requires a finite number; integral floats become integers,
-- true and false 1 and 0 (then a third value, true, says so).
function M:number(...)
  local v, err = self:eval(...)
  if err then return nil, err end
  if v == true then return 1, nil, true elseif v == false then return 0, nil, true end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    return nil, string.format("expression '%s' gave %s, expected a finite number (%s)",
                              self.text, type(v) == "string" and ("'" .. v .. "' (a string)") or tostring(v),
                              describe((...)))
  end
  return math.tointeger(v) or v
end

return M
