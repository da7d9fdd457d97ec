-- Summarises a run directory as one JSON line: evaluations, statuses, the
-- best config and its speed.   kopt script tools/sweep_summary.lua RUNDIR [WALL_S]
local cjson = require("cjson")
local dir, wall = ...
local n, statuses, eval_s, best = 0, {}, 0, nil
for line in io.lines(dir .. "/events.jsonl") do
  local ev = cjson.decode(line)
  if ev.result and ev.config then
    n = n + 1
    local st = ev.result.status
    statuses[st] = (statuses[st] or 0) + 1
    eval_s = eval_s + (tonumber(ev.eval_s) or 0)
    if st == "ok" and (not best or ev.result.time_ms < best.result.time_ms) then best = ev end
  end
end
local out = { run = dir, evaluations = n, statuses = statuses, wall_s = tonumber(wall),
              configs_per_s = wall and n / tonumber(wall) or nil }
if best then
  out.best = { config = best.config, time_ms = best.result.time_ms, p90_ms = best.result.p90_ms,
               tflops = best.result.tflops, gbps = best.result.gbps, samples = best.result.samples,
               err = best.result.err, resources = best.result.resources }
end
print(cjson.encode(out))
