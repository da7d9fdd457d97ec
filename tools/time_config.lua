-- Times one config of a spec on the GPU with the cuda backend and prints the
-- result as one JSON line (for repeatability checks: run it twice, in two
-- processes, and compare the medians).
--   kopt script tools/time_config.lua SPEC [KNOB=VALUE ...] [--config FILE.json] [--samples N] [--time S]
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  io.stderr:write(why, "\n")
  return 77
end
local argv = { ... }
local spec_path = assert(argv[1], "usage: time_config.lua SPEC KNOB=VALUE ...")
local config, timing = {}, { min_samples = 30, max_samples = 400, max_time_s = 1.0, max_noise = 0.002 }
local i = 2
while i <= #argv do
  local a = argv[i]
  if a == "--samples" then timing.max_samples = math.tointeger(tonumber(argv[i + 1])); i = i + 1
  elseif a == "--time" then timing.max_time_s = tonumber(argv[i + 1]); i = i + 1
  elseif a == "--config" then
    local f = assert(io.open(argv[i + 1]))
    for k, v in pairs(require("cjson").decode(f:read("a"))) do config[k] = v end
    f:close()
    i = i + 1
  else
    local k, v = a:match("^([%w_]+)=(.*)$")
    assert(k, "expected KNOB=VALUE, got " .. a)
    config[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
  end
  i = i + 1
end
local spec = require("kopt.spec").load(spec_path)
local be = cuda.open(spec, { timing = timing })
local r = be:evaluate({ { key = "x", config = config } })[1]
local d = be:describe()
be:close()
print(require("cjson").encode({ spec = spec.name, config = config, status = r.status, time_ms = r.time_ms,
  p10_ms = r.p10_ms, p90_ms = r.p90_ms, samples = r.samples, noise = r.noise, clock_mhz = r.clock_mhz,
  tflops = r.tflops, gbps = r.gbps, reference_ms = d.reference_ms, device = d.device, log = r.log,
  timer = r.timer, events_ms = r.events_ms }))
return r.status == "ok" and 0 or 1
