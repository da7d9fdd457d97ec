-- Helpers for Lua tests run through the real binary (`kopt script FILE`):
-- run kopt as a child process, capture stdout/stderr/exit code, assert.
local T = { failures = 0, count = 0 }

T.kopt = os.getenv("KOPT") or "./build/kopt"
local tmp_root = os.getenv("TMPDIR") or "/tmp"

function T.tmpdir(tag)
  local dir = string.format("%s/kopt-test-%s-%d-%d", tmp_root, tag or "t", require("kopt.sys").getpid(),
                            math.random(1, 1e9))
  assert(os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'"))
  return dir
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end
T.slurp = slurp

function T.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- Runs `kopt ARGS` (a shell-quoted string); returns code, stdout, stderr.
function T.run(args, env)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = string.format("%s %s %s >%s 2>%s", env or "", T.kopt, args, out, err)
  local _, _, code = os.execute(cmd)
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  return code, o, e
end

function T.check(cond, fmt, ...)
  T.count = T.count + 1
  if not cond then
    T.failures = T.failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
  return cond
end

function T.eq(got, want, what)
  return T.check(got == want, "%s: expected %s, got %s", what, tostring(want), tostring(got))
end

-- A run directory's evaluations (in order) and its stop event, read with
-- plain cjson (not kopt's own reader).
function T.events(dir)
  local cjson = require("cjson")
  local evals, stop = {}, nil
  for line in io.lines(dir .. "/events.jsonl") do
    local ev = cjson.decode(line)
    if ev.event == "eval" then evals[#evals + 1] = ev end
    if ev.event == "stop" then stop = ev end
  end
  return evals, stop
end

function T.exists(path)
  return require("kopt.sys").stat(path) ~= nil
end

-- Ends the test: exit code 0 when every check passed.
function T.done()
  io.stdout:write(string.format("%d checks, %d failed\n", T.count, T.failures))
  return T.failures == 0 and 0 or 1
end

function T.skip(reason)
  io.stdout:write("SKIPPED: ", reason, "\n")
  os.exit(77)
end

return T
