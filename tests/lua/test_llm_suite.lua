-- A suite of MCGS runs with LLM expert moves (`kopt suite mcgs ... --opt
-- moves=rules,experts`) runs its problems in one process: each problem's
-- run has its own LLM client (kopt.moves.experts keeps one per run), so its
-- transcript is in its own folder and its summary counts its own requests.
-- With the client kept for the process, the later problems' exchanges went
-- to the first problem's transcript and their token counts included it.
local T = require("testlib")
local json = require("kopt.json")

local server, why = require("llm_test_server").start()
if not server then
  print("skipped: " .. why)
  return 77
end
local tmp = T.tmpdir("llm-suite")
local specs = { "specs/softmax.json", "specs/transpose.json" }
local code, _, err = T.run(string.format(
  "suite mcgs %s --backend replay --budget 40 --opt moves=rules,experts --baselines none --out %s/suite",
  table.concat(specs, " "), tmp), "KOPT_LLM_BASE_URL=" .. server:base("ok") .. " KOPT_LLM_MODEL=test")
server:stop()
T.eq(code, 0, "the suite runs (" .. err .. ")")

-- every problem folder: its transcript holds its own requests, and
-- results.json's request count is that transcript's
local folders = {}
for _, name in ipairs(require("kopt.sys").list_dir(tmp .. "/suite")) do
  if T.exists(tmp .. "/suite/" .. name .. "/results.json") then folders[#folders + 1] = name end
end
table.sort(folders)
T.eq(#folders, #specs, "one run folder per problem: " .. table.concat(folders, ", "))
for _, name in ipairs(folders) do
  local dir = tmp .. "/suite/" .. name
  local requests, others = 0, 0
  if T.exists(dir .. "/llm_transcript.jsonl") then
    for line in io.lines(dir .. "/llm_transcript.jsonl") do
      local rec = json.decode(line)
      if rec.kind == "request" then
        requests = requests + 1
        local body = json.encode(rec.body or rec)
        -- a request about another problem names that problem's spec
        for _, other in ipairs(folders) do
          if other ~= name and body:find(other, 1, true) then others = others + 1 end
        end
      end
    end
  end
  T.check(requests > 0, "%s: its own transcript has its requests", name)
  T.eq(others, 0, name .. ": requests about another problem in its transcript")
  local res = json.decode(T.slurp(dir .. "/results.json"))
  local llm = res.metadata and res.metadata.llm
  T.eq(llm and llm.requests, requests, name .. ": results.json counts its transcript's requests")
end
return T.done()
