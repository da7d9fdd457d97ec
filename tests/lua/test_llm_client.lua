-- kopt.llm against tests/llm_server.py on loopback: normal replies, JSON in
-- prose and code fences, 429 with retry-after, 500 then success, a reply
-- slower than the timeout, a truncated body, schema violations, a server
-- without json_schema support, cut-off replies, quota errors, parallelism,
-- the transcript (never the key) and its replay.
local llm = require("kopt.llm")
local sys = require("kopt.sys")
local server, why = require("llm_test_server").start({ key = "sk-secret-test-key" })
if not server then
  print("skipped: " .. why)
  return 77
end

local dir = os.tmpname()
os.remove(dir)
assert(sys.mkdir_p(dir))
local transcript = dir .. "/llm_transcript.jsonl"

local schema = {
  name = "proposals",
  schema = {
    type = "object", additionalProperties = false, required = { "analysis", "proposals" },
    properties = {
      analysis = { type = "string" },
      proposals = { type = "array", items = {
        type = "object", additionalProperties = false, required = { "method", "changes", "reason", "patch" },
        properties = {
          method = { type = "string" },
          changes = { type = "object", additionalProperties = false, required = { "BLOCK" },
                      properties = { BLOCK = { anyOf = { { enum = { 32, 64, 128 } }, { type = "null" } } } } },
          reason = { type = "string" },
          patch = { type = { "string", "null" } },
        } } },
    },
  },
}
local prompt = 'Answer in JSON.\nAllowed values (JSON): {"BLOCK": [32, 64, 128]}\n' ..
               'Current best (JSON): {"BLOCK": 64}\nProposals wanted: 2\n'

local function client(scenario, extra)
  local cfg = { base_url = server:base(scenario), model = "test-model", api_key = "sk-secret-test-key",
                timeout_s = 10, max_retries = 2, max_tokens = 500, max_tokens_field = "max_completion_tokens",
                mode = "json_schema", transcript = transcript, backoff_initial_s = 0.05 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return assert(llm.new(cfg))
end

local function ask(c, tag)
  return c:chat_many({ { tag = tag or "t", schema = schema,
                         messages = { { role = "system", content = "You are a test." },
                                      { role = "user", content = prompt } } } })[1]
end

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

-- Normal, prose, fence: the same proposals come out.
for _, sc in ipairs({ "ok", "prose", "fence" }) do
  local c = client(sc)
  local r = ask(c)
  check(r.ok, "%s: %s", sc, tostring(r.err))
  check(#r.value.proposals == 2, "%s: expected 2 proposals", sc)
  local b = r.value.proposals[1].changes.BLOCK
  check(b == 32 or b == 128 or b == llm.null, "%s: proposal BLOCK=%s", sc, tostring(b))
  check(c.usage.total_tokens == 120 and c.usage.requests == 1, "%s: usage totals", sc)
  c:close()
end

-- 429 with retry-after: 1 -> waits about 1 s, then succeeds on attempt 2.
do
  local t0 = sys.now()
  local r = ask(client("429"))
  local dt = sys.now() - t0
  check(r.ok and r.attempts == 2, "429: ok=%s attempts=%s err=%s", tostring(r.ok), tostring(r.attempts),
        tostring(r.err))
  check(dt >= 0.9 and dt < 3, "429: retry-after not honoured (%.2f s)", dt)
end

-- 500 then success.
do
  local r = ask(client("500"))
  check(r.ok and r.attempts == 2, "500: ok=%s attempts=%s", tostring(r.ok), tostring(r.attempts))
end

-- Slower than the timeout: a transport failure, quickly.
do
  local t0 = sys.now()
  local r = ask(client("slow", { timeout_s = 1, max_retries = 0 }))
  check(not r.ok and r.kind == "transport", "slow: kind=%s", tostring(r.kind))
  check(sys.now() - t0 < 2.5, "slow: the timeout did not cut the request")
end

-- Truncated body.
do
  local r = ask(client("truncated", { max_retries = 0 }))
  check(not r.ok and r.kind == "transport", "truncated: kind=%s err=%s", tostring(r.kind), tostring(r.err))
end

-- Schema violations, prose without JSON, cut-off replies, quota.
local cases = { badschema = "schema", garbage = "parse", length = "length", quota = "http", filtered = "refusal" }
for sc, kind in pairs(cases) do
  local r = ask(client(sc), "cut_" .. sc)
  check(not r.ok and r.kind == kind, "%s: expected kind %s, got %s (%s)", sc, kind, tostring(r.kind), tostring(r.err))
end
do
  local r = ask(client("quota"))
  check(r.attempts == 1 and r.status == 429, "quota must not be retried (attempts %s)", tostring(r.attempts))
end

-- A server that rejects json_schema: the client falls back to json_object.
do
  local c = client("noschema")
  local r = ask(c)
  check(r.ok, "noschema: %s", tostring(r.err))
  check(c.mode == "json_object", "noschema: mode is %s", c.mode)
  r = ask(c)
  check(r.ok, "noschema second request: %s", tostring(r.err))
end

-- A 400 that names the context length is not about the format: that
-- request fails, and the next keeps json_schema (it dropped to json_object,
-- then to none, for the rest of the run)
do
  local c = client("ctx400")
  local r = ask(c)
  check(not r.ok and r.kind == "http", "ctx400: the request fails (%s, %s)", tostring(r.kind), tostring(r.err))
  check(c.mode == "json_schema", "ctx400: mode is %s", c.mode)
  r = ask(c)
  check(r.ok and c.mode == "json_schema", "ctx400 second request: %s, mode %s", tostring(r.err), c.mode)
end

-- A server that echoes the key: the reply is unusable, and the transcript
-- must not keep the key (checked below).
do
  local r = ask(client("echokey"))
  check(not r.ok and r.kind == "parse", "echokey: kind %s", tostring(r.kind))
end

-- Rate-limit headers: after a reply saying the window is used up, the next
-- batch waits for the reset (1 s) rather than hitting 429s.
do
  check(llm.parse_duration("6m0s") == 360 and llm.parse_duration("12ms") == 0.012 and
        llm.parse_duration("1h2m3.5s") == 3723.5 and llm.parse_duration("soon") == nil, "durations")
  local c = client("ratelimit")
  check(ask(c).ok, "ratelimit: first request")
  local t0 = sys.now()
  check(ask(c).ok, "ratelimit: second request")
  local dt = sys.now() - t0
  check(dt >= 0.9 and dt < 2.5, "ratelimit: the second request did not wait for the reset (%.2f s)", dt)
end

-- Wrong key: 401, not retried.
do
  local r = ask(client("ok", { api_key = "sk-wrong" }))
  check(not r.ok and r.status == 401 and r.attempts == 1, "401: status %s attempts %s", tostring(r.status),
        tostring(r.attempts))
end

-- Three experts answering after 1 s each finish in about 1 s.
do
  local c = client("delay")
  local reqs = {}
  for i, tag in ipairs({ "throughput", "memory", "robustness" }) do
    reqs[i] = { tag = tag, schema = schema, messages = { { role = "user", content = prompt .. "#" .. i } } }
  end
  local t0 = sys.now()
  local rs = c:chat_many(reqs)
  local dt = sys.now() - t0
  for i = 1, 3 do check(rs[i].ok, "delay %d: %s", i, tostring(rs[i].err)) end
  print(string.format("three 1-second experts in parallel: %.2f s", dt))
  check(dt >= 0.95 and dt < 2, "three 1-second requests took %.2f s", dt)
end

-- Extraction and validation on their own.
do
  local v = llm.extract_json('Sure! {"a": [1, 2, {"b": "}"}]} and more {"c": 1}')
  check(v and v.a[3].b == "}", "balanced extraction")
  check(llm.extract_json("```json\n{\"x\": 1}\n```").x == 1, "fence extraction")
  check(not llm.extract_json("no json here"), "no json")
  local ok, err = llm.validate({ analysis = "x", proposals = { { method = "m", changes = { BLOCK = 48 },
                                                                reason = "r", patch = llm.null } } }, schema.schema)
  check(not ok and err:find("BLOCK"), "validate names the path: %s", tostring(err))
end

server:stop()

-- The transcript has every exchange and never the key.
local f = assert(io.open(transcript))
local text = f:read("a")
f:close()
check(not text:find("sk-secret-test-key", 1, true), "the API key leaked into the transcript")
check(text:find("You sent: Bearer [redacted]", 1, true), "the echoed key was not redacted")
check(not text:find("sk-wrong", 1, true), "the wrong API key leaked into the transcript")
local recs = assert(llm.read_transcript(transcript))
local requests, replies = 0, 0
for _, r in ipairs(recs) do
  if r.kind == "request" then requests = requests + 1 end
  if r.kind == "reply" then replies = replies + 1 end
end
check(requests >= 18 and requests == replies, "transcript: %d requests, %d replies", requests, replies)

-- Replay: answers come from the transcript by tag, in order, without a server.
do
  local rc = assert(llm.new({ replay = transcript, mode = "json_schema" }))
  local rs = rc:chat_many({ { tag = "memory", schema = schema, messages = { { role = "user", content = "x" } } } })
  check(rs[1].ok and #rs[1].value.proposals == 2, "replay: %s", tostring(rs[1].err))
  local again = rc:chat_many({ { tag = "memory", schema = schema, messages = { { role = "user", content = "x" } } } })
  check(not again[1].ok and again[1].kind == "replay", "replay: a second 'memory' reply does not exist")
  -- a reply cut off (finish_reason length or content_filter) is cut off
  -- again on replay: its text alone parsed, the filtered one whole to its
  -- first proposal, and a replayed run measured other proposals
  for sc, kind in pairs({ length = "length", filtered = "refusal" }) do
    local cut = rc:chat_many({ { tag = "cut_" .. sc, schema = schema, messages = { { role = "user", content = "x" } } } })
    check(not cut[1].ok and cut[1].kind == kind, "replay of %s: expected kind %s, got %s (%s)", sc, kind,
          tostring(cut[1].kind), tostring(cut[1].err))
  end
end
os.remove(transcript)
os.remove(dir)
print("ok")
