-- JSON on top of lua-cjson. cjson decodes every number as a float; kopt wants
-- 16 to stay the integer 16 (config keys, -D defines), so decoded trees are
-- normalised: integral floats within 2^53 become integers.
--
-- Strict both ways: the decoder refuses NaN, Infinity and hex numbers, and the
-- encoder writes a non-finite number (a run without a budget, a time a
-- backend could not measure) as null, so every file kopt writes parses under
-- any strict JSON parser, kopt's own included.
local cjson = require("cjson")
local errors = require("kopt.errors")
local sys = require("kopt.sys")

local M = {}
local decoder = cjson.new()
decoder.decode_invalid_numbers(false)
decoder.decode_max_depth(200)
-- Recordings written by Python (Kernel Tuner, T4 tools) hold NaN and
-- Infinity where a measurement failed: their readers decode those as numbers
-- and judge them (kopt.recording).
local lenient_decoder = cjson.new()
lenient_decoder.decode_invalid_numbers(true)
lenient_decoder.decode_max_depth(200)
local encoder = cjson.new()
encoder.encode_number_precision(14)  -- the most lua-cjson allows
encoder.encode_invalid_numbers("null")
encoder.encode_sparse_array(true, 1, 1)

M.null = cjson.null
M.empty_array = setmetatable({}, { __jsontype = "array" })

local function normalise(v)
  local t = type(v)
  if t == "number" then
    if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then
      return math.tointeger(v)
    end
    return v
  elseif t == "table" then
    for k, x in pairs(v) do v[k] = normalise(x) end
  end
  return v
end

-- Returns the decoded value, or nil and cjson's message.
function M.decode(text)
  local ok, v = pcall(decoder.decode, text)
  if not ok then return nil, (tostring(v):gsub("^.-: ", "")) end
  return normalise(v)
end

-- As decode, but NaN, Infinity and -Infinity are read as numbers.
function M.decode_with_nonfinite(text)
  local ok, v = pcall(lenient_decoder.decode, text)
  if not ok then return nil, (tostring(v):gsub("^.-: ", "")) end
  return normalise(v)
end

-- Numbers lua-cjson would write inexactly (it keeps 14 significant digits:
-- an integer knob value 100000000000001 became 1e+14, a float 1/3
-- 0.33333333333333, so a saved config named no config of the space) are
-- written exactly: each is encoded as a placeholder string, then replaced by
-- its shortest text that reads back as the same number. Only values that
-- hold such a number are copied.
local function inexact(x)
  if math.type(x) == "integer" then return x >= 1e14 or x <= -1e14 end
  return x == x and x ~= math.huge and x ~= -math.huge and tonumber(string.format("%.14g", x)) ~= x
end

local function exact_text(x)
  if math.type(x) == "integer" then return string.format("%d", x) end
  for digits = 15, 17 do
    local t = string.format("%." .. digits .. "g", x)
    if tonumber(t) == x then return t end
  end
  return string.format("%.17g", x)
end

local function has_inexact(v, depth)
  if type(v) == "number" then return inexact(v) end
  if type(v) ~= "table" or depth > 200 then return false end
  for _, x in pairs(v) do if has_inexact(x, depth + 1) then return true end end
  return false
end

local function with_placeholders(v, texts)
  if type(v) == "number" and inexact(v) then
    texts[#texts + 1] = exact_text(v)
    return "\1kopt#" .. #texts .. "\1"
  end
  if type(v) ~= "table" or v == cjson.null then return v end
  local c = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do c[k] = with_placeholders(x, texts) end
  return c
end

-- s with each byte that starts no valid UTF-8 sequence replaced by U+FFFD
-- (a server's message cut mid-character, a reply in Latin-1): JSON text is
-- UTF-8, and strict readers refuse a line with such bytes.
local function valid_utf8(s)
  local parts, from = {}, 1
  while true do
    local n, bad = utf8.len(s, from)
    if n then break end
    parts[#parts + 1] = s:sub(from, bad - 1)
    parts[#parts + 1] = "\239\191\189"
    from = bad + 1
  end
  parts[#parts + 1] = s:sub(from)
  return table.concat(parts)
end

local function with_valid_utf8(v, depth)
  if type(v) == "string" then return utf8.len(v) and v or valid_utf8(v) end
  if type(v) ~= "table" or v == cjson.null or depth > 200 then return v end
  local c = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do c[with_valid_utf8(k, depth + 1)] = with_valid_utf8(x, depth + 1) end
  return c
end

local function encode_exact(v)
  if not has_inexact(v, 0) then return encoder.encode(v) end
  local texts = {}
  local text = encoder.encode(with_placeholders(v, texts))
  return (text:gsub('"\\u0001kopt#(%d+)\\u0001"', function(i) return texts[tonumber(i)] end))
end

local function encode(v)
  local text = encode_exact(v)
  if utf8.len(text) then return text end
  return encode_exact(with_valid_utf8(v, 0))
end
M.valid_utf8 = valid_utf8

function M.encode(v) return encode(v) end

M.BOM = "\239\187\191"
M.READ_LIMIT = 1 << 30  -- bytes; a larger input file is refused, not read

-- Reads a whole regular file of at most `limit` bytes (default READ_LIMIT).
-- Returns the text, or nil and "<path>: <what>" (a directory, a device such
-- as /dev/zero, a file too large: each named). A UTF-8 byte order mark at
-- the start is dropped: JSON forbids it, editors write it.
function M.read_text(path, limit)
  limit = limit or M.READ_LIMIT
  local kind, size = sys.stat(path)
  if not kind then return nil, path .. ": " .. size end
  if kind == "dir" then return nil, path .. ": is a directory, not a file" end
  if kind ~= "file" then return nil, path .. ": not a regular file" end
  if size > limit then
    return nil, string.format("%s: %d bytes, more than the %d kopt reads", path, size, limit)
  end
  local f, err = io.open(path, "rb")
  if not f then return nil, (err:gsub("^[^:]*: ", path .. ": ")) end
  local text, rerr = f:read("a")
  f:close()
  if text == nil then return nil, path .. ": " .. tostring(rerr) end
  if #text > limit then
    return nil, string.format("%s: grew past the %d bytes kopt reads while it was read", path, limit)
  end
  if text:sub(1, 3) == M.BOM then text = text:sub(4) end
  return text
end

-- cjson's message for text, with the line and column of its character
-- offset and a hint for what people write that JSON forbids.
function M.explain_error(text, derr)
  local at = tonumber(derr:match("at character (%d+)"))
  if not at then return derr end
  local before = text:sub(1, at - 1)
  local _, line = before:gsub("\n", "")
  local col = at - (before:match(".*()\n") or 0)
  local msg = string.format("%s (line %d, column %d)", derr, line + 1, col)
  local prev = before:match("(%S)%s*$")
  if prev == "," and (derr:find("T_OBJ_END", 1, true) or derr:find("T_ARR_END", 1, true)) then
    msg = msg .. ": JSON allows no trailing comma"
  elseif text:sub(at, at + 1) == "//" or text:sub(at, at + 1) == "/*" then
    msg = msg .. ": JSON allows no comments"
  elseif text:sub(at, at) == "'" then
    msg = msg .. ": JSON strings take double quotes"
  end
  return msg
end

-- The position of the quote that closes the string opened at `at`, or nil.
local function string_end(text, at)
  local j = at + 1
  while true do
    local q = text:find('["\\]', j)
    if not q then return nil end
    if text:byte(q) == 92 then j = q + 2 else return q end
  end
end

-- The byte range of the value after the key whose opening quote is at
-- `at`: { from, to } (to nil when the text ends first).
local function value_range(text, at)
  local key_end = string_end(text, at)
  local colon = key_end and text:find(":", key_end + 1, true)
  local r = { from = colon and colon + 1 }
  if not colon then return r end
  local depth, pos = 0, colon + 1
  while true do
    local k = text:find('["{}%[%],]', pos)
    if not k then return r end
    local c = text:byte(k)
    if c == 34 then -- a string: to its closing quote
      local j = string_end(text, k)
      if not j then return r end
      pos = j + 1
    elseif c == 123 or c == 91 then
      depth, pos = depth + 1, k + 1
    elseif (c == 125 or c == 93) and depth > 0 then
      depth, pos = depth - 1, k + 1
    elseif depth == 0 then -- the container's , or closing bracket
      r.to = k - 1
      return r
    else
      pos = k + 1
    end
  end
end

-- Every key an object of text (valid JSON) holds again, in the order met
-- (the first `limit`): { path = { names }, line =, first = { from =, to = } }
-- with path the names of the containers down to the key ("[i]" for the
-- i-th element of an array, from 0) and first the byte range of the value
-- the key's first occurrence has. cjson keeps the last of two and says
-- nothing, so a block pasted twice would drop the first silently. (The scan
-- jumps from one bracket, quote or comma to the next, reading bytes, and
-- keeps only where each key starts: a value's range is found for the
-- duplicates alone. A recording of 100 MB is read in seconds.)
function M.duplicate_keys(text, limit)
  local found, stack = {}, {}  -- per open container: { keys = map or nil (array), name =, index =, pending = }
  local expect_key, pos = false, 1
  local find, byte, sub = string.find, string.byte, string.sub
  while not limit or #found < limit do
    local at = find(text, '["{}%[%],]', pos)
    if not at then break end
    local c = byte(text, at)
    local top = stack[#stack]
    pos = at + 1
    if c == 34 then
      local j = string_end(text, at)
      -- (a string cut short ends the scan; the lines are still counted)
      if not j then break end
      if expect_key and top and top.keys then
        local raw = sub(text, at + 1, j - 1)
        local key = find(raw, "\\", 1, true) and (M.decode('"' .. raw .. '"') or raw) or raw
        local first = top.keys[key]
        if first then
          local path = {}
          for _, f in ipairs(stack) do path[#path + 1] = f.name end
          path[#path + 1] = key
          found[#found + 1] = { path = path, at = at, first = first }
        else
          top.keys[key] = at
        end
        top.pending = key
      end
      expect_key = false
      pos = j + 1
    elseif c == 123 or c == 91 then
      local name = top and (top.keys and top.pending or (top.index and ("[" .. top.index .. "]")))
      stack[#stack + 1] = { keys = c == 123 and {} or nil, index = c == 91 and 0 or nil, name = name }
      expect_key = c == 123
    elseif c == 125 or c == 93 then
      stack[#stack] = nil
    elseif top then -- a comma
      if top.keys then expect_key = true else top.index = top.index + 1 end
    end
  end
  -- (lines counted once, between one duplicate and the next; the first
  -- occurrence's value found from where its key starts)
  local line, counted = 1, 1
  for _, d in ipairs(found) do
    local _, n = sub(text, counted, d.at):gsub("\n", "")
    line, counted = line + n, d.at + 1
    d.line, d.at = line, nil
    d.first = value_range(text, d.first)
  end
  return found
end

-- A key's path as "a.b[2].c".
function M.key_path(path)
  local out = ""
  for _, name in ipairs(path) do
    name = tostring(name)
    out = out .. ((out == "" or name:sub(1, 1) == "[") and "" or ".") .. name
  end
  return out
end

-- The first key an object of text (valid JSON) holds twice, as
-- "path.to.key" with its line, or nil.
function M.duplicate_key(text)
  local d = M.duplicate_keys(text, 1)[1]
  if d then return M.key_path(d.path), d.line end
  return nil
end

-- Reads and decodes a file. Errors are returned as "<path>: <what>".
function M.read_file(path)
  local text, err = M.read_text(path)
  if not text then return nil, err end
  local v, derr = M.decode(text)
  if v == nil then return nil, path .. ": malformed JSON: " .. M.explain_error(text, derr), text end
  return v, nil, text
end

-- Pretty printer with sorted keys and two-space indent, for files humans read
-- (best/config.json, results). Arrays are tables with 1..n keys and no others.
local function is_array(t)
  local mt = getmetatable(t)
  if mt and mt.__jsontype == "array" then return true end
  local n = #t
  if n == 0 then return false end
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function pretty(v, indent, out)
  if type(v) ~= "table" or v == cjson.null then
    out[#out + 1] = encode(v)
    return
  end
  local pad = string.rep("  ", indent + 1)
  if is_array(v) then
    if #v == 0 then out[#out + 1] = "[]" return end
    local simple = true
    for _, x in ipairs(v) do if type(x) == "table" then simple = false break end end
    if simple then out[#out + 1] = encode(v) return end
    out[#out + 1] = "[\n"
    for i, x in ipairs(v) do
      out[#out + 1] = pad
      pretty(x, indent + 1, out)
      out[#out + 1] = i < #v and ",\n" or "\n"
    end
    out[#out + 1] = string.rep("  ", indent) .. "]"
    return
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  if #keys == 0 then out[#out + 1] = "{}" return end
  out[#out + 1] = "{\n"
  for i, k in ipairs(keys) do
    local x = v[k]
    if x == nil then x = v[tonumber(k)] end
    out[#out + 1] = pad .. encoder.encode(k) .. ": "
    pretty(x, indent + 1, out)
    out[#out + 1] = i < #keys and ",\n" or "\n"
  end
  out[#out + 1] = string.rep("  ", indent) .. "}"
end

function M.pretty(v)
  local out = {}
  pretty(v, 0, out)
  return table.concat(out) .. "\n"
end

-- Writes atomically and durably (kopt.sys.write_atomic: a temporary file in
-- the same folder, written, fsynced, renamed over `path`, the folder
-- fsynced): a crash or a full disk leaves the old file or the new one, never
-- half of one. A failure raises errors.write_failed. raw: `v` is the text.
function M.write_file(path, v, raw)
  local ok, err = sys.write_atomic(path, raw and v or M.pretty(v))
  if not ok then errors.write_failed(path, err) end
end

return M
