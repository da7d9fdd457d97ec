-- A small JSON Schema validator: the subset kopt's schemas use (type, enum,
-- anyOf, properties, required, additionalProperties=false, items, minItems,
-- maxItems), for LLM replies (kopt.llm) and tool-call arguments (kopt.tools).
local json = require("kopt.json")

local M = {}

local function json_type(v)
  local t = type(v)
  if v == json.null then return "null" end
  if t == "table" then
    if next(v) == nil then return "empty" end
    if #v > 0 then return "array" end
    return "object"
  end
  if t == "number" then return math.type(v) == "integer" and "integer" or "number" end
  if t == "boolean" then return "boolean" end
  if t == "string" then return "string" end
  return t
end

local function type_ok(want, got)
  if want == got then return true end
  if want == "number" and got == "integer" then return true end
  if got == "empty" and (want == "array" or want == "object") then return true end
  return false
end

local function enum_has(enum, v)
  for _, e in ipairs(enum) do
    if e == v then return true end  -- (1 == 1.0 in Lua: an integer reply matches a float enum)
  end
  return false
end

local function validate(v, s, path)
  if s.anyOf then
    local last
    for _, alt in ipairs(s.anyOf) do
      local ok, err = validate(v, alt, path)
      if ok then return true end
      last = err
    end
    return nil, last or (path .. ": matches no alternative")
  end
  if s.enum and not enum_has(s.enum, v) then
    return nil, string.format("%s: %s is not an allowed value", path, json.encode(v == nil and json.null or v))
  end
  if s.type then
    local got = json_type(v)
    local types = type(s.type) == "table" and s.type or { s.type }
    local ok = false
    for _, t in ipairs(types) do if type_ok(t, got) then ok = true end end
    if not ok then return nil, string.format("%s: expected %s, got %s", path, table.concat(types, "|"), got) end
  end
  local got = json_type(v)
  if (got == "object" or got == "empty") and s.properties then
    for _, name in ipairs(s.required or {}) do
      if v[name] == nil then return nil, string.format("%s: missing '%s'", path, name) end
    end
    for name, x in pairs(v) do
      local ps = s.properties[name]
      if ps then
        local ok, err = validate(x, ps, path .. "." .. tostring(name))
        if not ok then return nil, err end
      elseif s.additionalProperties == false then
        return nil, string.format("%s: unexpected property '%s'", path, tostring(name))
      end
    end
  end
  if (got == "array" or got == "empty") and s.items then
    if s.minItems and #v < s.minItems then return nil, string.format("%s: fewer than %d items", path, s.minItems) end
    if s.maxItems and #v > s.maxItems then return nil, string.format("%s: more than %d items", path, s.maxItems) end
    for i, x in ipairs(v) do
      local ok, err = validate(x, s.items, string.format("%s[%d]", path, i))
      if not ok then return nil, err end
    end
  end
  return true
end

-- true, or nil and "path: problem" ("$.proposals[2].changes: missing 'BLOCK'")
function M.validate(value, schema) return validate(value, schema, "$") end

return M
