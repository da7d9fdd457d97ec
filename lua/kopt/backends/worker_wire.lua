-- The contract between the GPU backend and its worker process
-- (core/worker/): the fields of a run request and of its reply, read from the
-- worker's own lists, so a field either side does not know is caught as a
-- bug in kopt, and the launch fields of a request.
local errors = require("kopt.errors")
local gpu = require("kopt.gpu")

local M = {}

-- Writes launch l's grid, block and dynamic shared memory into msg under
-- prefix ("" for the kernel, "ref_" for the reference); the cluster and the
-- cooperative flag are the kernel's only. False and why when a size is not
-- an integer.
local function launch_fields(msg, prefix, l)
  msg[prefix .. "grid_x"], msg[prefix .. "grid_y"], msg[prefix .. "grid_z"] =
    math.tointeger(l.grid[1]), math.tointeger(l.grid[2]), math.tointeger(l.grid[3])
  msg[prefix .. "block_x"], msg[prefix .. "block_y"], msg[prefix .. "block_z"] =
    math.tointeger(l.block[1]), math.tointeger(l.block[2]), math.tointeger(l.block[3])
  msg[prefix .. "smem"] = math.tointeger(l.smem or 0)
  if l.cluster and prefix == "" then
    msg.cluster_x, msg.cluster_y, msg.cluster_z =
      math.tointeger(l.cluster[1]), math.tointeger(l.cluster[2]), math.tointeger(l.cluster[3])
  end
  if l.cooperative and prefix == "" then msg.cooperative = 1 end
  for _, k in ipairs({ "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "smem" }) do
    if msg[prefix .. k] == nil then return false, prefix .. k .. " is not an integer" end
  end
  return true
end

-- The fields of a run request, from the worker's own list
-- (core/worker/request_fields.h through kopt.gpu.request_fields()).
local RUN_FIELDS, ARG_FIELDS = {}, {}
do
  local run, args = gpu.request_fields()
  for _, f in ipairs(run) do RUN_FIELDS[#RUN_FIELDS + 1], RUN_FIELDS[f.name] = f, f end
  for _, f in ipairs(args) do ARG_FIELDS[#ARG_FIELDS + 1], ARG_FIELDS[f.name] = f, f end
end

-- The fields of a run reply, from the worker's list
-- (core/worker/reply_fields.h through kopt.gpu.reply_fields()): the backend
-- reads a reply through reply_view, so reading a field the worker does not
-- list raises (a bug: the two sides drifted apart), absent or not.
local REPLY_FIELDS, REPLY_PREFIXES = {}, {}
do
  local fields, prefixes = gpu.reply_fields()
  for _, f in ipairs(fields) do REPLY_FIELDS[f.name] = f end
  for _, p in ipairs(prefixes) do REPLY_PREFIXES[#REPLY_PREFIXES + 1] = p.prefix end
end

local function reply_listed(k)
  if REPLY_FIELDS[k] then return true end
  if type(k) ~= "string" then return false end
  for _, p in ipairs(REPLY_PREFIXES) do
    if k:sub(1, #p) == p then return true end
  end
  return false
end

function M.reply_view(reply)
  return setmetatable({}, { __index = function(_, k)
    if not reply_listed(k) then
      error(string.format("bug: reply field '%s' is not in core/worker/reply_fields.h", tostring(k)), 2)
    end
    return reply[k]
  end })
end

local function type_ok(f, v)
  if f.type == "int" then return math.tointeger(v) ~= nil end
  if f.type == "flag" then return type(v) == "boolean" or math.tointeger(v) ~= nil end
  if f.type == "number" then return type(v) == "number" end
  return type(v) == "string" -- "string", "bytes"
end

-- A string the worker would cut at its buffer's end (a long lowered C++
-- name, many pipeline stages): the candidate cannot be run as it is, and
-- says so (a user error: the run goes on, the candidate is invalid).
local function too_long(name, v, max_len)
  if max_len and type(v) == "string" and #v > max_len then
    errors.usage("the worker takes at most %d bytes in '%s', and this candidate's is %d (%s...)", max_len, name, #v,
                 v:sub(1, 60))
  end
end
M.too_long = too_long

-- Checks a run request against the worker's field list: every key listed
-- (or "op", or "a<i>.<field>" for i up to nargs), every required field
-- present, every value of its field's type. A mismatch is a bug in kopt (the
-- Lua side and core/worker/request_fields.h drifted apart), so it raises.
function M.check_request(msg)
  local function bad(fmt, ...)
    error(string.format("worker run request: " .. fmt .. " (core/worker/request_fields.h)", ...), 2)
  end
  local nargs = math.tointeger(msg.nargs) or 0
  for k, v in pairs(msg) do
    local f = RUN_FIELDS[k]
    if not f and type(k) == "string" then
      local i, name = k:match("^a(%d+)%.(.+)$")
      f = i and tonumber(i) >= 1 and tonumber(i) <= nargs and ARG_FIELDS[name] or nil
    end
    if k ~= "op" then
      if not f then bad("unknown field '%s'", tostring(k)) end
      if not type_ok(f, v) then bad("field '%s' is not of type %s: %s", k, f.type, tostring(v)) end
      too_long(k, v, f.max_len)
    end
  end
  for _, f in ipairs(RUN_FIELDS) do
    if f.required and msg[f.name] == nil then bad("missing field '%s'", f.name) end
  end
  for i = 1, nargs do
    for _, f in ipairs(ARG_FIELDS) do
      if f.required and msg["a" .. i .. "." .. f.name] == nil then bad("missing field 'a%d.%s'", i, f.name) end
    end
  end
  return msg
end

M.launch_fields = launch_fields

-- The message that loads the reference, its entry checked as a run's.
function M.set_ref(cubin, entry)
  too_long("entry", entry, RUN_FIELDS.entry.max_len)
  return { op = "set_ref", cubin = cubin, entry = entry }
end

return M
