-- Sandboxed expressions. Spec fields such as constraints, launch geometry,
-- shapes and work are Lua expressions over knob values, problem sizes and
-- `device`. They are compiled once with `load` into an environment that holds
-- only arithmetic helpers: no io, os, require, load, debug, string or table.
-- `function` is rejected so an expression cannot loop, and string methods
-- (reached through any string value) are out of reach (below).
local M = {}

local helpers = {
  ceil = math.ceil, floor = math.floor, min = math.min, max = math.max,
  abs = math.abs, sqrt = math.sqrt, exp = math.exp, huge = math.huge,
  log = function(x, b) return math.log(x, b) end,
  log2 = function(x) return math.log(x, 2) end,
  cdiv = function(a, b) return (a + b - 1) // b end,
  int = math.tointeger,
}
M.helpers = helpers

local keywords = { ["and"] = true, ["or"] = true, ["not"] = true, ["true"] = true,
                   ["false"] = true, ["nil"] = true }

-- Names an expression refers to (identifiers not after a '.'), so the search
-- space can check a constraint as soon as the knobs it reads are fixed.
local function free_names(text)
  local names, seen = {}, {}
  local stripped = text:gsub("%b\"\"", '""'):gsub("%b''", "''")
  for pre, name in stripped:gmatch("([%.]?)%f[%w_]([%a_][%w_]*)") do
    if pre == "" and not keywords[name] and not helpers[name] and not seen[name] then
      seen[name] = true
      names[#names + 1] = name
    end
  end
  return names
end

-- Why `text` reaches beyond its values, or nil. Every string has the string
-- library as its methods (("a"):rep(1e9), ("a").find with a pattern that
-- backtracks for hours), so an expression may read fields of `device` only:
-- no ':' call, no '[' index, no '.' after anything but `device`.
local function reach(text)
  local s = text:gsub("\\.", ""):gsub('"[^"]*"', '""'):gsub("'[^']*'", "''")
  if s:find(":", 1, true) then return "calls a method (':')" end  -- (Lua's only other ':' is goto's label)
  if s:find("[", 1, true) then return "indexes a value ('[')" end
  local at = 1
  while true do
    local dot = s:find(".", at, true)
    if not dot then return nil end
    if s:sub(dot + 1, dot + 1) == "." then
      at = dot + 2  -- ('..', concatenation)
    else
      at = dot + 1
      local before = s:sub(1, dot - 1)
      -- (a number such as 1.e5 is not a field access)
      if s:find("^%s*[%a_]", dot + 1) and not before:find("%f[%w_]device%s*$") and not before:find("%f[%w_]%d+$") then
        local name = before:match("%f[%w_]([%a_][%w_]*)%s*$")
        return name and string.format("reads a field of '%s'", name) or "reads a field of a value"
      end
    end
  end
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
  local why = reach(text)
  if why then
    return nil, string.format("expression '%s' %s; only device has fields (knobs, problem sizes and device are known)",
                              text, why)
  end
  local env = {}
  local chunk, err = load("return " .. text, "=" .. (label or "expression"), "t", env)
  if not chunk then
    return nil, string.format("expression '%s' has a syntax error: %s", text,
                              (err:gsub("^[^:]*:%d+: ", "")))
  end
  local obj = setmetatable({ text = text, label = label, names = free_names(text), chunk = chunk }, M)
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
    return nil, string.format("expression '%s' failed for %s: %s", self.text,
                              describe(self.scopes[1]), (tostring(v):gsub("^[^:]*:%d+: ", "")))
  end
  return v
end

-- Binds the expression to one scope table for repeated fast calls (the
-- search space's enumeration): returns a function of no arguments that reads
-- names from `scope` as it is at call time. The scope must itself reach the
-- helpers (see M.helpers) if the expression uses them.
function M:bind(scope)
  if self.const then local c = self.const return function() return c end end
  local env = setmetatable({}, { __index = scope })
  return (load("return " .. self.text, "=" .. (self.label or "expression"), "t", env))
end

-- Like eval but requires a finite number; integral floats become integers.
function M:number(...)
  local v, err = self:eval(...)
  if err then return nil, err end
  if v == true then return 1 elseif v == false then return 0 end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    return nil, string.format("expression '%s' gave %s, expected a finite number (%s)",
                              self.text, type(v) == "string" and ("'" .. v .. "' (a string)") or tostring(v),
                              describe((...)))
  end
  return math.tointeger(v) or v
end

return M
