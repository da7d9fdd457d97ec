-- A resumed run and its LLM transcript (kopt.llm, tests/llm_server.py on
-- loopback):
--  1. resumed with no endpoint: the recorded answers are replayed and
--     counted as before, the questions past them go to the heuristics
--     unasked and uncounted (not "no reply #4" failures);
--  2. the structured-output fallback holds across a resume with the same
--     endpoint (no json_schema request refused again); another endpoint
--     starts from the configured mode;
--  3. a batch cut short by an interruption: each request gets a reply
--     record marked interrupted, none counts as a request or a failure,
--     and a resumed run asks them again rather than replaying a failure.
local T = require("testlib")
local json = require("kopt.json")
local REC = "tests/data/convolution_A100.json"
local KEY = "sk-resume-test"
local server, why = require("llm_test_server").start({ key = KEY })
if not server then
  print("skipped: " .. why)
  return 77
end
local tmp = T.tmpdir("llm_resume")
local function records(path, kind)
  local out = {}
  for line in io.lines(path) do
    local r = json.decode(line)
    if r.kind == kind then out[#out + 1] = r end
  end
  return out
end

-- 1. resumed with no endpoint
for _, case in ipairs({ { "ok", "LLM: 9 requests, 0 failed" }, { "garbage", "LLM: 9 requests, 9 failed" } }) do
  local scenario, line = case[1], case[2]
  local d = tmp .. "/" .. scenario
  local code, out, err = T.run(string.format("experts --backend replay:%s --out %s --opt iterations=3 " ..
                                             "--opt patience=100", REC, d),
                               string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_API_KEY=%s KOPT_LLM_MODEL=test",
                                             server:base(scenario), KEY))
  T.eq(code, 0, scenario .. ": the first run (" .. err .. ")")
  T.check(out:find(line, 1, true), "%s: the first run's summary:\n%s", scenario, out)
  code, out, err = T.run(string.format("experts --backend replay:%s --out %s --resume --opt iterations=8 " ..
                                       "--opt patience=100", REC, d), "KOPT_LLM_BASE_URL= OPENAI_BASE_URL=")
  T.eq(code, 0, scenario .. ": resumed without an endpoint (" .. err .. ")")
  T.check(out:find(line, 1, true), "%s resumed: the same requests and failures, none invented:\n%s", scenario, out)
  T.eq(#records(d .. "/llm_transcript.jsonl", "request"), 9, scenario .. " resumed: nothing sent")
  T.check(not T.slurp(d .. "/trace.md"):find("has no reply #", 1, true), "%s resumed: no replay failure", scenario)
end

-- 2. the structured-output fallback across a resume
do
  local llm = require("kopt.llm")
  local transcript = tmp .. "/format.jsonl"
  local base = server:base("noschema")
  local function ask(c, tag)
    return c:chat_many({ { tag = tag, schema = { name = "p", schema = { type = "object" } },
                           messages = { { role = "user", content = "Proposals wanted: 1" } } } })[1]
  end
  local cfg = { base_url = base, model = "m", api_key = KEY, timeout_s = 10, max_retries = 0, max_tokens = 100,
                max_tokens_field = "max_tokens", mode = "json_schema", transcript = transcript }
  local c = assert(llm.new(cfg))
  T.check(ask(c, "a").ok and c.mode == "json_object", "noschema: fell back to json_object (%s)", c.mode)
  c:close()
  local resumed = assert(llm.new({ base_url = base, model = "m", api_key = KEY, timeout_s = 10, max_retries = 0,
                                   max_tokens = 100, max_tokens_field = "max_tokens", mode = "json_schema",
                                   transcript = transcript, prefix = transcript }))
  T.eq(resumed.mode, "json_object", "resumed: the fallback holds")
  T.check(ask(resumed, "a").ok and ask(resumed, "b").ok, "resumed: the replayed and the live answer")
  resumed:close()
  local reqs = records(transcript, "request")
  T.eq(#reqs, 3, "resumed: one live request, not a refused one first")
  T.eq(reqs[3].mode, "json_object", "resumed: sent with json_object")
  local other = assert(llm.new({ base_url = server:base("ok"), model = "m", mode = "json_schema",
                                 prefix = transcript }))
  T.eq(other.mode, "json_schema", "another endpoint: the configured mode")
end

-- 3. a batch interrupted before it ran (kopt.http answers nil, "interrupted")
do
  local real_http, real_llm = package.loaded["kopt.http"], package.loaded["kopt.llm"]
  local interrupt = true
  package.loaded["kopt.http"] = { request_many = function(batch, opts)
    if interrupt then return nil, "interrupted" end
    return real_http.request_many(batch, opts)
  end }
  package.loaded["kopt.llm"] = nil
  local llm = require("kopt.llm")
  package.loaded["kopt.http"], package.loaded["kopt.llm"] = real_http, real_llm
  local transcript = tmp .. "/interrupted.jsonl"
  local base = server:base("ok")
  local function cfg(extra)
    local c = { base_url = base, model = "m", api_key = KEY, timeout_s = 10, max_retries = 0, max_tokens = 100,
                max_tokens_field = "max_tokens", mode = "json_object", transcript = transcript }
    for k, v in pairs(extra or {}) do c[k] = v end
    return c
  end
  local reqs = {}
  for i, tag in ipairs({ "a", "b", "c" }) do
    reqs[i] = { tag = tag, schema = { name = "p", schema = { type = "object" } },
                messages = { { role = "user", content = "Proposals wanted: 1" } } }
  end
  local c = assert(llm.new(cfg()))
  local out = c:chat_many(reqs)
  T.check(not out[1].ok and out[1].interrupted, "interrupted: a failed reply marked so")
  T.eq(c.usage.requests, 0, "interrupted: no request counted")
  T.eq(c.usage.failures, 0, "interrupted: no failure counted")
  T.check(not c.off, "interrupted: not the endpoint's failure")
  c:close()
  local replies = records(transcript, "reply")
  T.eq(#replies, 3, "interrupted: a reply record for each request")
  T.check(replies[1].interrupted and replies[1].err == "interrupted", "interrupted: the record says why")
  interrupt = false
  local resumed = assert(llm.new(cfg({ prefix = transcript })))
  out = resumed:chat_many(reqs)
  T.check(out[1].ok and out[2].ok and out[3].ok, "resumed: asked again and answered (%s)", tostring(out[1].err))
  T.eq(resumed.usage.requests, 3, "resumed: three requests")
  T.eq(#records(transcript, "request"), 6, "resumed: sent again")
  resumed:close()
end

server:stop()
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
