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

-- Runs f(...) and turns any non-user error into a user error whose message
-- starts with `what`, keeping the traceback for -v.
function M.guard(code, what, f, ...)
  local ok, a, b, c = xpcall(f, function(e)
    if M.is_user_error(e) then return e end
    return setmetatable({ code = code, msg = what .. ": " .. tostring(e),
                          traceback = debug.traceback(tostring(e), 2) }, UserError)
  end, ...)
  if not ok then error(a, 0) end
  return a, b, c
end

return M
