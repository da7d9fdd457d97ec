-- The knob changes a model's proposal carries, in the shapes models write
-- (kopt.experts reads proposals with it): an object {"K": v}, the same sent
-- as a JSON string, "K=V, K2=V2" (or "K: 2 -> 8", "-DK=8", "#define K 8"),
-- a list of "K=V" strings or of {knob=, value=} objects, one such object,
-- and a value written as {from=, to=} or "2 -> 8". Knob names match
-- exactly, else ignoring case when that names one knob.
--
--   reply_changes.given(proposal, change_keys, by_name) -> { [name] = value }
local json = require("kopt.json")

local M = {}

-- The arrows models write (=>, → and ⟶) as "->".
local function ascii_arrows(t) return (t:gsub("\xE2\x86\x92", "->"):gsub("\xE2\x9F\xB6", "->"):gsub("=>", "->")) end

-- A value written as a change, "256 -> 512" or "from 256 to 512": the new
-- one; anything else as it is.
local function arrow_value(v)
  if type(v) ~= "string" then return v end
  local t = ascii_arrows(v)
  local after = t:match("%->%s*([^>]-)%s*$")
  if after and after ~= "" then return after end
  return t:match("^%s*[Ff]rom%s+%S+%s+to%s+(%S+)%s*$") or v
end

local function unquote(v) return (v:gsub("^[\"']", ""):gsub("[\"']$", "")) end

-- "K=V, K2: V2; K3 = V3" -> { K = "V", ... } (values stay strings; the
-- knob's own values decide what they mean), or nil when there is no pair.
-- Also as models write a change: "K: 2 -> 8" (the new value), "K from 2 to
-- 8", "set K to 8", "-DK=8" and "#define K 8" (the knobs are defines).
local function pairs_of_text(text)
  local out, any = {}, false
  local function put(name, v)
    if out[name] == nil and v ~= nil and v ~= "" then out[name], any = unquote(v), true end
  end
  text = ascii_arrows(text):gsub("%-D([%a_])", "%1")
  -- (a change written out is read only for a number that ends its clause:
  -- "TILE=8 -> fewer loads" is TILE=8 and prose, "move X from registers to
  -- shared" no change of X)
  local NUM = "(%-?[%d][%w%.]*)%s*[,;]?"
  local function ends(t, at) return t:sub(at):match("^%s*[,;]") or t:sub(at):match("^%s*$") end
  local function scan(pattern)
    local from = 1
    while true do
      local s0, e0, name, v = text:find(pattern, from)
      if not s0 then break end
      if ends(text, e0 + 1) or text:sub(e0, e0):match("[,;]") then put(name, (v:gsub("[,;]$", ""))) end
      from = e0 + 1
    end
  end
  for name, v in text:gmatch("#%s*define%s+([%a_][%w_]*)%s+([^%s,;]+)") do put(name, v) end
  scan("([%a_][%w_]*)%s+[Ff]rom%s+%-?[%d][%w%.]*%s+to%s+" .. NUM)
  scan("([%a_][%w_]*)%s*[=:]%s*%-?[%d][%w%.]*%s*%->%s*" .. NUM)
  scan("([%a_][%w_]*)%s*%->%s*" .. NUM)
  scan("[Ss]et%s+([%a_][%w_]*)%s+to%s+" .. NUM)
  for name, v in text:gmatch("([%a_][%w_]*)%s*[=:]%s*([^,;%s]+)") do put(name, v) end
  return any and out or nil
end

-- The new value of an entry written as a change: {from=, to=}, {old=, new=},
-- {current=, proposed=}, {value=}, {new_value=}, "256 -> 512"; anything
-- else as it is.
local function new_value(v)
  if type(v) == "string" then return arrow_value(v) end
  if type(v) ~= "table" or #v > 0 then return v end
  for _, k in ipairs({ "to", "new", "new_value", "proposed", "suggested", "target", "value" }) do
    if v[k] ~= nil then return arrow_value(v[k]) end
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
  -- (one change written as the object itself: {"knob": K, "value": V})
  local one = #f == 0 and (f.knob or f.name or f.parameter or f.param)
  if type(one) == "string" and new_value(f) ~= f then return { [one] = new_value(f) } end
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
