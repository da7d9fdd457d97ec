-- Helpers for the GPU tests (test_gpu_*.lua): a spec written with its
-- sources into a folder, and configs evaluated through the cuda backend
-- with short timing (these tests check statuses, not times).
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local spec_mod = require("kopt.spec")

local M = {}

-- files: name -> text, written beside DIR/s.json (json_text); the loaded spec.
function M.write_spec(dir, files, json_text)
  os.execute("mkdir -p '" .. dir .. "'")
  for n, text in pairs(files) do T.write(dir .. "/" .. n, text) end
  T.write(dir .. "/s.json", json_text)
  return spec_mod.load(dir .. "/s.json")
end

-- The results in the configs' order, or nil and the error (a spec error
-- raised by the backend).
function M.try_evaluate(spec, configs, max_time_s)
  local be = cuda.open(spec, { seed = 5, timing = { max_time_s = max_time_s or 0.05 } })
  local jobs = {}
  for i, c in ipairs(configs) do jobs[i] = { key = tostring(i), config = c } end
  local done, res = pcall(be.evaluate, be, jobs)
  be:close()
  if not done then return nil, tostring(res) end
  return res
end

-- The same, a failure counted when the backend raised (then empty results).
function M.evaluate(spec, configs, max_time_s)
  local res, err = M.try_evaluate(spec, configs, max_time_s)
  T.check(res ~= nil, "%s: %s", spec.path, tostring(err))
  return res or { {}, {} }
end

-- A result's log or error, "" when none (for messages and searches).
function M.log_of(r) return tostring(r and (r.log or r.error) or "") end

return M
