-- residue_xeval with the scrub on or off (KOPT_VERIFY_OFF=scrub): statuses,
-- times and the scrub's cost per evaluation
local cuda = require("kopt.backends.cuda")
local spec = require("kopt.spec").load("tests/cheats/residue_xeval.json")
local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
local jobs = {}
for _, c in ipairs({ {0,0,1}, {0,0,2}, {1,0,1}, {1,0,2}, {1,1,1}, {1,1,2}, {1,0,1}, {1,0,2} }) do
  jobs[#jobs + 1] = { key = table.concat(c, ","), config = { CHEAT = c[1], STORE = c[2], UNROLL = c[3] } }
end
local res = be:evaluate(jobs)
for i, r in ipairs(res) do
  print(string.format("CHEAT,STORE,UNROLL=%s %-6s time %.4f ms charged %s check2 %.4f scrub %.3f ms local %s",
    jobs[i].key, tostring(r.status), r.time_ms or -1, tostring(r.charged_check2), r.check2_ms or -1,
    r.scrub_ms or -1, tostring(r.resources and r.resources.local_bytes)))
end
be:close()
