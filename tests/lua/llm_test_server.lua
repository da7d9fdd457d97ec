-- Starts tests/llm_server.py on loopback for a Lua test and stops it again.
--   local server = require("llm_test_server").start{ key = "sk-test" }  -- nil, why without python3
--   server:base("ok")  -> "http://127.0.0.1:PORT/s/ok-<n>/v1" (a fresh hit counter each call)
--   server:stop()
local http = require("kopt.http")

local M = {}
local Server = {}
Server.__index = Server

function M.start(opts)
  opts = opts or {}
  local cmd = "python3 tests/llm_server.py --max-life " .. (opts.max_life or 300)
  if opts.key then cmd = cmd .. " --key " .. opts.key end
  local pipe = io.popen(cmd .. " 2>/dev/null", "r")
  local line = pipe and pipe:read("l")
  local port = line and line:match("^PORT (%d+)$")
  if not port then
    if pipe then pipe:close() end
    return nil, "cannot start tests/llm_server.py (is python3 installed?)"
  end
  return setmetatable({ pipe = pipe, port = tonumber(port), n = 0 }, Server)
end

function Server:base(scenario)
  self.n = self.n + 1
  return string.format("http://127.0.0.1:%d/s/%s-%d/v1", self.port, scenario, self.n)
end

function Server:stop()
  http.request_many({ { url = string.format("http://127.0.0.1:%d/shutdown", self.port), body = "{}" } },
                    { max_retries = 0, timeout_s = 5 })
  self.pipe:close()
end

return M
