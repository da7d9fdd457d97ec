-- kopt.llm against servers that misbehave in ways users meet, on loopback
-- (tests/llm_server.py): a key quoted back in an error message or a reply
-- (redacted in the reply, the transcript, whatever the escaping); a
-- Retry-After longer than the batch's deadline (the deadline holds); usage
-- without total_tokens or with counts as strings (the token cap still reads
-- a total); a 200 carrying an error object or an HTML page (the message says
-- what the server sent); a reply streamed as server-sent events (assembled);
-- bytes that are not UTF-8 (the transcript stays valid JSON text); a
-- redirect (named); a URL kopt cannot use (not retried); a transcript whose
-- last line a kill cut (cut back on resume); and tools not switched off by
-- batches the server failed.
local T = require("testlib")
local llm = require("kopt.llm")
local json = require("kopt.json")
local sys = require("kopt.sys")
local tools = require("kopt.tools")
local KEY = "sk-qa/SECRET+abc/0123456789"
local server, why = require("llm_test_server").start({ key = KEY })
if not server then
  print("skipped: " .. why)
  return 77
end
local dir = T.tmpdir("llm_hardening")
local transcript = dir .. "/llm_transcript.jsonl"

local schema = { name = "proposals", schema = { type = "object", required = { "analysis", "proposals" },
  properties = { analysis = { type = "string" }, proposals = { type = "array" } } } }
local prompt = 'Answer in JSON.\nAllowed values (JSON): {"BLOCK": [32, 64, 128]}\n' ..
               'Current best (JSON): {"BLOCK": 64}\nProposals wanted: 2\n'
local function client(scenario, extra)
  local cfg = { base_url = server:base(scenario), model = "m", api_key = KEY, timeout_s = 10, max_retries = 2,
                max_tokens = 500, max_tokens_field = "max_completion_tokens", mode = "json_object",
                transcript = transcript, backoff_initial_s = 0.05 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return assert(llm.new(cfg))
end
local function ask(c, opts)
  return c:chat_many({ { tag = "t", schema = schema, messages = { { role = "user", content = prompt } } } }, opts)[1]
end

-- the key, quoted by the server: never in what kopt passes on
do
  local r = ask(client("keyerr"))
  T.check(not r.ok and r.status == 401, "keyerr: %s", tostring(r.err))
  T.check(not tostring(r.err):find(KEY, 1, true) and tostring(r.err):find("[redacted]", 1, true),
          "keyerr: the error keeps the key: %s", tostring(r.err))
  local s = ask(client("keyslash"))
  T.check(s.ok, "keyslash: %s", tostring(s.err))
  T.check(not tostring(s.content):find(KEY, 1, true), "keyslash: the content keeps the key: %s", tostring(s.content))
end

-- a Retry-After of 30 s against a deadline of 3 s (attempts of 1 s: three
-- of them would fit, the waits between them do not)
do
  local t0 = sys.now()
  local r = ask(client("wait429", { timeout_s = 1 }), { deadline_s = 3 })
  local dt = sys.now() - t0
  T.check(not r.ok and r.status == 429, "wait429: %s", tostring(r.err))
  T.check(dt < 4, "wait429: the batch took %.1f s against a deadline of 3 s", dt)
end

-- usage without total_tokens, counts as strings
do
  local c = client("nototal")
  local r = ask(c)
  T.check(r.ok, "nototal: %s", tostring(r.err))
  T.eq(c.usage.total_tokens, 1500, "nototal: the total is prompt plus completion")
end

-- 200 that is no completion: what the server sent is in the message
do
  local r = ask(client("error200"))
  T.check(not r.ok and tostring(r.err):find("model overloaded", 1, true), "error200: %s", tostring(r.err))
  r = ask(client("html200"))
  T.check(not r.ok and tostring(r.err):find("502 Bad Gateway", 1, true), "html200: %s", tostring(r.err))
  r = ask(client("moved"))
  T.check(not r.ok and tostring(r.err):find("redirected to http://example.invalid/v2", 1, true), "moved: %s",
          tostring(r.err))
end

-- a streamed reply
do
  local c = client("sse")
  local r = ask(c)
  T.check(r.ok and type(r.value) == "table" and #r.value.proposals == 2, "sse: %s", tostring(r.err))
  T.eq(c.usage.total_tokens, 12, "sse: usage from the last chunk")
  -- opened by a keep-alive comment, with event: and id: fields (OpenRouter)
  c = client("sse_framed")
  r = ask(c)
  T.check(r.ok and type(r.value) == "table" and #r.value.proposals == 2, "sse_framed: %s", tostring(r.err))
end

-- Latin-1 in a reply
do
  local r = ask(client("latin1"))
  T.check(r.ok, "latin1: %s", tostring(r.err))
end

-- a URL kopt cannot use: one attempt
do
  local c = assert(llm.new({ base_url = "ftp://127.0.0.1:9/v1", model = "m", api_key = KEY, timeout_s = 5,
                             max_retries = 2, max_tokens = 10, max_tokens_field = "max_tokens", mode = "none" }))
  local r = ask(c)
  T.check(not r.ok and r.kind == "transport" and r.attempts == 1, "ftp: attempts %s, %s", tostring(r.attempts),
          tostring(r.err))
end

-- the transcript: no key in any form, every line valid UTF-8 and JSON
do
  local text = assert(io.open(transcript)):read("a")
  local n = 0
  for line in text:gmatch("[^\n]+") do
    n = n + 1
    T.check(utf8.len(line) ~= nil, "transcript line %d is not UTF-8", n)
    local rec = json.decode(line)
    T.check(rec ~= nil, "transcript line %d is not JSON", n)
    T.check(not json.encode(rec):gsub("\\/", "/"):find(KEY, 1, true), "transcript line %d keeps the key", n)
  end
  T.check(n >= 10, "%d transcript lines", n)
  local body_kept = text:find("model overloaded", 1, true)
  T.check(body_kept, "%s", "the body of a 200 that was no completion is in the transcript")
end

-- a torn last line: read without it, and cut when the run appends
do
  local path = dir .. "/torn.jsonl"
  local f = assert(io.open(path, "w"))
  f:write('{"kind":"request","id":1,"tag":"a"}\n{"kind":"reply","id":1,"tag":"a","content":"{}","ok":true}\n')
  f:write('{"kind":"request","id":2,"tag":"a","body":{"model":"gp')
  f:close()
  local recs, err = llm.read_transcript(path)
  T.check(recs and #recs == 2, "torn: %s", tostring(err))
  local c, cerr = llm.new({ base_url = server:base("ok"), model = "m", transcript = path, prefix = path, mode = "none",
                            max_tokens = 10, max_tokens_field = "max_tokens", timeout_s = 5, max_retries = 0 })
  T.check(c ~= nil, "a resumed client over a torn transcript: %s", tostring(cerr))
  if c then c:close() end
  local after = assert(io.open(path)):read("a")
  T.check(after:sub(-1) == "\n" and not after:find('"gp', 1, true), "%s", "the torn line was cut")
  f = assert(io.open(path, "a"))
  f:write("not json\n")
  f:close()
  local bad, berr = llm.read_transcript(path)
  T.check(not bad and tostring(berr):find("torn.jsonl:3: malformed transcript line", 1, true),
          "a bad whole line is still an error: %s", tostring(berr))
end

-- tools: two batches the server failed do not switch tools off
do
  local calls = 0
  local fake = { usage = {}, log = function() end }
  function fake.chat_many(_, batch)
    calls = calls + 1
    local out = {}
    for i = 1, #batch do
      if calls <= 2 then
        out[i] = { ok = false, kind = "http", status = 503, err = "HTTP 503" }
      else
        out[i] = { ok = true, value = { analysis = "", proposals = {} }, content = "{}" }
      end
    end
    return out
  end
  for _ = 1, 3 do
    tools.converse(fake, { { tag = "t", messages = { { role = "user", content = "x" } }, env = {} } }, { rounds = 2 })
  end
  T.check(not fake.tools_off, "tools off after failed batches: %s", tostring(fake.tools_off))
  T.eq(fake.tools_ignored or 0, 1, "only the answered batch without a call counts as ignoring tools")
end
server:stop()
return T.done()
