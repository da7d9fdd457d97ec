-- Two kinds of failure. A user error (bad flag, bad spec, bad strategy output)
-- is raised as a UserError table carrying an exit code and one sentence; the
-- CLI prints the sentence alone. Anything else is an internal error and gets a
-- traceback.
local M = {}

local UserError = {}
UserError.__index = UserError
UserError.__tostring = function(e) return e.msg end

-- Exit codes shared by every command.
M.USAGE = 2      -- bad input: flags, files, specs, strategy scripts
M.RUNTIME = 1    -- a run could not go on (strategy crashed mid-run, backend died)
M.INTERRUPTED = 130

function M.raise(code, fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(setmetatable({ code = code, msg = msg }, UserError), 0)
end

function M.usage(fmt, ...) M.raise(M.USAGE, fmt, ...) end

-- A user error with a traceback kept for -v.
function M.with_traceback(code, msg, traceback)
  error(setmetatable({ code = code, msg = msg, traceback = traceback }, UserError), 0)
end

function M.is_user_error(e) return getmetatable(e) == UserError end

-- A failed write or fsync in a run folder: one sentence, exit code 1, and
-- `io_failed` set so the caller writes nothing more into that folder.
function M.write_failed(path, err)
  error(setmetatable({ code = M.RUNTIME, msg = string.format("cannot write %s: %s", path, err),
                       io_failed = true }, UserError), 0)
end

-- The interruption raised from the Lua hook (kopt.sys) when a signal is not
-- answered between evaluations in time.
function M.is_interrupt(e)
  local sys = package.loaded["kopt.sys"]
  return sys ~= nil and sys.interrupt_error ~= nil and rawequal(e, sys.interrupt_error)
end

-- Any Lua error value as one line: a table raised with error({...}) shows its
-- fields ("{code = 3, why = \"x\"}") rather than "table: 0x...".
function M.describe(e)
  if type(e) ~= "table" then return tostring(e) end
  local mt = getmetatable(e)
  if mt and mt.__tostring then return tostring(e) end
  local keys = {}
  for k in pairs(e) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for i, k in ipairs(keys) do
    if i > 8 then parts[#parts + 1] = "..." break end
    local v = e[k]
    local vs = type(v) == "string" and string.format("%q", v) or type(v) == "table" and "{...}" or tostring(v)
    parts[#parts + 1] = (math.type(k) == "integer" and "" or tostring(k) .. " = ") .. vs
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- Whether a source path (a chunk's, or an error message's position) is
-- one of kopt's own modules: embedded ("lua/kopt/space.lua"), or read from
-- a tree with --lua-dev ("/src/kopt/lua/kopt/space.lua", "./lua/kopt/...",
-- or a long path shortened to ".../lua/kopt/...").
function M.kopt_source(path)
  path = path:gsub("^@", "")
  return path:find("^lua/kopt/") ~= nil or path:find("^[^:\n]*/lua/kopt/") ~= nil
end

-- The innermost line of the user's own code (a strategy, a sibling module,
-- a move generator) on the stack of an error, from its handler: an error
-- raised inside kopt's modules by a call the user's code made
-- (ctx:key(nil)), or with no position at all (a C function: `for _, k in
-- ipairs(nil)` says only "attempt to index a nil value"), is reported with
-- the line that made it.
local function user_line()
  for level = 3, 60 do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    local src = info.short_src or ""
    if (info.currentline or 0) > 0 and src ~= "[C]" and not M.kopt_source(info.source or src) then
      -- (a file's whole path: short_src cuts a long one to ".../x.lua")
      local file = (info.source or ""):match("^@(.+)$") or src
      return file .. ":" .. info.currentline
    end
  end
end

-- An error's message (from its handler) with that line added where the
-- message itself names no line of the user's: " (called from FILE:LINE)"
-- after a position inside kopt, " (at FILE:LINE)" after none.
function M.with_user_line(err)
  local msg = M.describe(err)
  local pos = msg:match("^([^\n]-):%d+: ")
  if not pos or M.kopt_source(pos) then
    local at = user_line()
    if at then msg = msg .. (pos and " (called from " or " (at ") .. at .. ")" end
  end
  return msg
end

-- Runs f(...) and turns any non-user error into a user error whose message
-- starts with `what`, keeping the traceback for -v.
function M.guard(code, what, f, ...)
  local ok, a, b, c = xpcall(f, function(e)
    if M.is_user_error(e) then return e end
    if M.is_interrupt(e) then return e end
    return setmetatable({ code = code, msg = what .. ": " .. M.describe(e),
                          traceback = debug.traceback(M.describe(e), 2) }, UserError)
  end, ...)
  if not ok then error(a, 0) end
  return a, b, c
end

return M
