-- The knob changes a model's proposal carries, in the shapes models write
-- (kopt.experts reads proposals with it): an object {"K": v}, the same sent
-- as a JSON string, "K=V, K2=V2", a list of "K=V" strings or of {knob=,
-- value=} objects, and a value written as {from=, to=}. Knob names match
-- exactly, else ignoring case when that names one knob.
--
--   reply_changes.given(proposal, change_keys, by_name) -> { [name] = value }
local json = require("kopt.json")

local M = {}

-- "K=V, K2: V2; K3 = V3" -> { K = "V", ... } (values stay strings; the
-- knob's own values decide what they mean), or nil when there is no pair.
local function pairs_of_text(text)
  local out, any = {}, false
  for name, v in text:gmatch("([%a_][%w_]*)%s*[=:]%s*([^,;%s]+)") do
    out[name], any = v:gsub("^[\"']", ""):gsub("[\"']$", ""), true
  end
  return any and out or nil
end

-- The new value of an entry written as a change: {from=, to=}, {old=, new=},
-- {value=}, {new_value=}; anything else as it is.
local function new_value(v)
  if type(v) ~= "table" or #v > 0 then return v end
  for _, k in ipairs({ "to", "new", "new_value", "value" }) do
    if v[k] ~= nil then return v[k] end
  end
  return v
end

-- One changes field as { name = value }, or nil when it holds none.
local function field_changes(f)
  if type(f) == "string" then
    local decoded = f:find("^%s*[%[{]") and json.decode(f)
    if type(decoded) == "table" then f = decoded else return pairs_of_text(f) end
  end
  if type(f) ~= "table" or f == json.null then return nil end
  local out = {}
  for name, v in pairs(f) do
    if math.type(name) == "integer" then
      -- (a list: {"knob": ..., "value"|"to": ...} objects or "K=V" strings)
      if type(v) == "table" then
        local kname = v.knob or v.name or v.parameter or v.param
        local nv = new_value(v)
        if type(kname) == "string" and nv ~= v then out[kname] = nv else out[name] = v end
      elseif type(v) == "string" and pairs_of_text(v) then
        for k, x in pairs(pairs_of_text(v)) do out[k] = x end
      else
        out[name] = v
      end
    else
      out[name] = new_value(v)
    end
  end
  return out
end

-- A name as the space spells it: itself when it is a knob, else the one
-- knob it names ignoring case (BLOCK_SIZE_X for block_size_x), else itself.
function M.knob_name(name, by_name)
  if type(name) ~= "string" or by_name[name] then return name end
  local lower, found = name:lower(), nil
  for k in pairs(by_name) do
    if k:lower() == lower then
      if found then return name end
      found = k
    end
  end
  return found or name
end

function M.given(p, change_keys, by_name)
  local given = {}
  for _, ck in ipairs(change_keys) do
    local f = field_changes(p[ck])
    if f then
      for name, v in pairs(f) do given[M.knob_name(name, by_name)] = v end
      break
    end
  end
  return given
end

return M
