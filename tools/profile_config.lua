-- Measures one config of a spec on the GPU and collects its hardware counters
-- with kopt's CUPTI profiler; prints one JSON line (counters, symptoms,
-- speed-of-light figures) and the terminal report block, and writes
-- DIR/best/REPORT.md with --out DIR.
--   kopt script tools/profile_config.lua SPEC [KNOB=VALUE ...] [--metrics a,b,...] [--out DIR] [--no-profile]
-- --no-profile only evaluates (for running the same launch under ncu).
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  io.stderr:write(why, "\n")
  return 77
end
local json = require("cjson")
local argv = { ... }
local spec_path = assert(argv[1], "usage: profile_config.lua SPEC KNOB=VALUE ...")
local config, metrics, out_dir, profile = {}, nil, nil, true
local i = 2
while i <= #argv do
  local a = argv[i]
  if a == "--metrics" then
    metrics = {}
    for m in argv[i + 1]:gmatch("[^,]+") do metrics[#metrics + 1] = m end
    i = i + 1
  elseif a == "--out" then out_dir = argv[i + 1]; i = i + 1
  elseif a == "--no-profile" then profile = false
  else
    local k, v = a:match("^([%w_]+)=(.*)$")
    assert(k, "expected KNOB=VALUE, got " .. a)
    config[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
  end
  i = i + 1
end
local spec = require("kopt.spec").load(spec_path)
local be = cuda.open(spec, { timing = { min_samples = 10, max_samples = 50, max_time_s = 0.3 } })
local job = { key = "x", config = config }
local r = be:evaluate({ job })[1]
local line = { spec = spec.name, config = config, status = r.status, time_ms = r.time_ms, log = r.log,
               resources = r.resources, tflops = r.tflops, gbps = r.gbps }
local term
if profile and r.status == "ok" then
  local t0 = require("kopt.sys").now()
  local m, err = be:profile(job, metrics)
  line.profile_s = require("kopt.sys").now() - t0
  if m then
    r.metrics = m
    line.metrics = m
    local prof = require("kopt.profiling").new({ mode = "none", backend = be, spec = spec, quiet = true })
    prof:annotate(config, r)
    line.symptoms = r.symptoms
    local best = { config = config, result = r, key = "x" }
    local facts = prof:finish({ ctx = { best = best } })
    local md
    md, term = require("kopt.report").render(best, facts)
    if out_dir then
      require("kopt.sys").mkdir_p(out_dir)
      term = require("kopt.report").write(out_dir, best, facts)
    end
    line.report = md
  else
    line.profile_error = err
  end
end
be:close()
print(json.encode(line))
if term then io.stdout:write(term) end
return r.status == "ok" and 0 or 1
