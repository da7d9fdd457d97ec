-- `kopt script FILE [ARGS...]`: runs a Lua file inside kopt, with the kopt
-- library on the path and `arg` set. Tests and tools use it.
local errors = require("kopt.errors")

local M = { summary = "run a Lua file with the kopt library (tests, tools)" }

local USAGE = [[
usage: kopt script FILE [ARGS...]
  runs the Lua file FILE inside kopt, with the kopt library (require "kopt.*")
  on the path, FILE's folder first on package.path and ARGS in `arg`; the
  file's return value (an integer, 0-255; none: 0; anything else is status 1) is the exit status
]]

function M.main(argv)
  local file = argv[1]
  if file == "--help" or file == "-h" then io.stdout:write(USAGE) return 0 end
  if not file then errors.usage("script: missing FILE") end
  local chunk, err = loadfile(file, "t")
  if not chunk then errors.usage("%s", err) end
  local dir = file:match("^(.*)/[^/]*$") or "."
  package.path = dir .. "/?.lua;" .. package.path
  _G.arg = { [0] = file, table.unpack(argv, 2) }
  -- an error of the script is the script's, named with its traceback, not
  -- kopt's "internal error"; kopt's own usage errors pass through as such
  local ok, rc = xpcall(chunk, function(e)
    if errors.is_user_error(e) or errors.is_interrupt(e) then return e end
    return { script_error = tostring(e), trace = debug.traceback("", 2) }
  end, table.unpack(argv, 2))
  if not ok then
    if type(rc) ~= "table" or not rc.script_error then error(rc, 0) end
    io.stderr:write(string.format("kopt: script %s failed: %s%s\n", file, rc.script_error, rc.trace))
    return 1
  end
  -- (an exit status is 0-255: the shell would read 256 as 0, a success)
  local code = math.tointeger(rc)
  if rc ~= nil and not code then
    io.stderr:write(string.format("kopt: script %s returned %s, not a whole number: exit status 1\n", file, tostring(rc)))
    return 1
  end
  if code and (code < 0 or code > 255) then
    io.stderr:write(string.format("kopt: script %s returned %d, outside 0-255: exit status 1\n", file, code))
    return 1
  end
  return code or 0
end

return M
