-- The worker's copies between the host and the device are ordered with its
-- own stream (core/worker/data.c, kopt_worker_upload): honest kernels that
-- only read their inputs are `ok` on fresh input sets (one backend per
-- seed, so sets A, B and C are new each time), every time. With the copies
-- on the legacy stream, an upload from pageable memory could return before
-- its DMA landed, the input hash raced it, and the kernel was told it
-- "modified its input": on an H200, 3 of 8 fresh backends of
-- tests/cheats/luacheck_skip's honest config failed check 2 so (that
-- spec's output is read by its own Lua check), while upload_race (three
-- 1 MiB inputs, compared on the device) passed 48 of 48. Needs a GPU: exits
-- 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local spec_mod = require("kopt.spec")
local run_mod = require("kopt.run")

local seeds = tonumber(os.getenv("UPLOAD_SEEDS") or "") or 12
-- { spec, which configs are honest }
local CASES = {
  { "tests/honest/upload_race.json", function() return true end },
  { "tests/cheats/luacheck_skip.json", function(c) return c.CHEAT == 0 end },
}
for _, case in ipairs(CASES) do
  local spec = spec_mod.load(case[1])
  local jobs = {}
  for _, c in ipairs(run_mod.build_space(spec):enumerate()) do
    if case[2](c) then jobs[#jobs + 1] = { key = tostring(#jobs + 1), config = c } end
  end
  local bad = 0
  for seed = 1, seeds do
    local be = cuda.open(spec, { seed = 1000 + seed, timing = { max_time_s = 0.05 } })
    local res = be:evaluate(jobs)
    be:close()
    for i, r in ipairs(res) do
      local line = string.format("%s seed %d config %d: %s", spec.name, seed, i, tostring(r.status))
      if r.status ~= "ok" then
        bad = bad + 1
        line = line .. "  " .. (tostring(r.log or r.error or ""):gsub("%s+", " ")):sub(1, 200)
      end
      print(line)
    end
  end
  T.eq(bad, 0, case[1] .. ": every honest evaluation is ok on every fresh input set")
end
return T.done()
