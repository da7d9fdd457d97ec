-- A spec's objective steers the search, not only the choice of the best.
-- Replayed space: a 1-D convolution whose FILTER knob sets the work; a larger
-- filter takes longer but gives more GFLOP/s, and the spec maximises GFLOP/s.
-- Strategies written for time used to minimise time, so they searched the
-- small filters (the worst GFLOP/s), guided ones worse than random search.
-- Now each gets the objective as its `cost` (kopt.engine) and must spend its
-- evaluations after the first 20 on filters larger than the space's mean.
-- Also: a metric that cannot be computed for one config (here a division by
-- a knob that is zero there) used to end the run; it is left out of that
-- result, which then ranks last. results.json names the objective and keeps
-- the metrics (it held the time alone).
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("objective-steer")
local spec = cjson.decode(T.slurp("examples/kt/filter/conv1d.json"))
local cwd = io.popen("pwd"):read("l")
spec.kernel.source = cwd .. "/examples/kt/filter/" .. spec.kernel.source
spec.reference.source = cwd .. "/examples/kt/filter/" .. spec.reference.source
local filters = {}
for f = 3, 31, 2 do filters[#filters + 1] = f end
spec.knobs = {
  { name = "FILTER", values = filters, default = 7 },
  { name = "block_size_x", values = { 32, 64, 128, 256, 512, 1024 }, default = 256 },
  { name = "items", values = { 1, 2, 4, 8 }, default = 1 },
}
spec.recording = nil
T.write(tmp .. "/spec.json", cjson.encode(spec))

-- time grows with the filter, GFLOP/s (2 F n / time) grows faster
local cache, h = {}, 12345
for _, f in ipairs(filters) do
  for _, b in ipairs({ 32, 64, 128, 256, 512, 1024 }) do
    for _, it in ipairs({ 1, 2, 4, 8 }) do
      h = (h * 1103515245 + 12345) % 2147483648
      local t = 0.01 * (1 + f / 30) * (1 + 0.3 * h / 2147483648)
      cache[string.format("%d,%d,%d", f, b, it)] = { FILTER = f, block_size_x = b, items = it, time = t,
                                                     compile_time = 10, benchmark_time = 5, verification_time = 0 }
    end
  end
end
T.write(tmp .. "/rec.json", cjson.encode({ device_name = "Test GPU", kernel_name = "conv1d",
  tune_params_keys = { "FILTER", "block_size_x", "items" },
  tune_params = { FILTER = filters, block_size_x = { 32, 64, 128, 256, 512, 1024 }, items = { 1, 2, 4, 8 } },
  objective = "time", cache = cache }))

for _, s in ipairs({ "mcgs", "rules", "anneal", "genetic", "surrogate" }) do
  local dir = tmp .. "/" .. s
  local code, _, err = T.run(string.format("%s %s/spec.json --backend replay:%s/rec.json --budget 60 -q --out %s",
                                           s, tmp, tmp, dir))
  T.eq(code, 0, s .. ": exit code\n" .. err)
  local evals = T.events(dir)
  local sum, n = 0, 0
  for i = 21, #evals do sum, n = sum + evals[i].config.FILTER, n + 1 end
  T.check(n > 0 and sum / n > 17, "%s: mean FILTER of evaluations 21-60 is %.1f, the space's 17: it steers by time",
          s, n > 0 and sum / n or 0)
end

-- results.json names the objective and carries the metrics beside the time
do
  local res = cjson.decode(T.slurp(tmp .. "/mcgs/results.json"))
  T.check(res.metadata.objective and res.metadata.objective.metric == "GFLOP/s" and
          res.metadata.objective.goal == "max", "results.json: metadata.objective")
  local names = {}
  for _, m in ipairs(res.results[1].measurements) do names[m.name] = true end
  T.check(names.time and names["GFLOP/s"], "results.json: the metrics beside the time")
end

-- the experience database answers the same question with the run's best by
-- the objective (it named the fastest time: the smallest filter, the worst
-- GFLOP/s)
do
  local db = tmp .. "/exp.db"
  local run = string.format("random %s/spec.json --backend replay:%s/rec.json --budget 40 --out %s/dbrun", tmp, tmp, tmp)
  local code, out1, err = T.run(run .. " -q", "KOPT_DB=" .. db)
  T.eq(code, 0, "objective run for the database: exit code\n" .. err)
  local best1 = (T.slurp(tmp .. "/dbrun/best/config.json") or "")
  local _, out2 = T.run(run, "KOPT_DB=" .. db)
  T.check(out2:find("answered from the experience database", 1, true), "the second run is a hit:\n%s", out2)
  local filt = math.tointeger(cjson.decode(best1).FILTER)
  T.check(out2:find("FILTER=" .. tostring(filt) .. " ", 1, true), "the hit names the run's best by GFLOP/s (FILTER=%s):\n%s%s",
          tostring(filt), out1, out2)
end

-- a metric that fails at one config: the run goes on
do
  spec.metrics["per item"] = "flops / time_s / (items - 1)"
  T.write(tmp .. "/spec_div.json", cjson.encode(spec))
  local code, _, err = T.run(string.format("exhaustive %s/spec_div.json --backend replay:%s/rec.json -q --out %s/div",
                                           tmp, tmp, tmp))
  T.eq(code, 0, "a failing metric: exit code\n" .. err)
  T.eq(#(T.events(tmp .. "/div")), 360, "a failing metric: every config measured")
  T.check(err:find("metrics.per item", 1, true) and err:find("items=1", 1, true), "a failing metric: named once\n%s", err)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
