-- kopt.llm against replies that look whole and are not, or say less than
-- a run needs (tests/llm_server.py on loopback):
--  1. a stream cut off (no finish_reason, no [DONE]) and a completion cut
--     off with finish_reason null: failed replies, never the proposal
--     object inside them; a replay of the transcript fails them again;
--  2. an error event inside a stream: the server's message is quoted, and
--     the batch counts as the endpoint's failure (the breaker);
--  3. usage under input_tokens / output_tokens is read; a reply with no
--     usage is estimated (and said so), so llm_max_tokens holds;
--  4. the rate-limit wait counts against the batch's deadline: a reset past
--     it is not waited for, and the message says so;
--  5. a 401 to a request sent without a key says no key was sent, not that
--     the key was refused; the line on stderr names what the run does
--     instead (the experts' heuristics, or the caller's fallback).
local T = require("testlib")
local llm = require("kopt.llm")
local json = require("kopt.json")
local sys = require("kopt.sys")
local KEY = "sk-wire-test"
local server, why = require("llm_test_server").start({ key = KEY })
if not server then
  print("skipped: " .. why)
  return 77
end
local dir = T.tmpdir("llm_wire")

local schema = { name = "proposals", schema = { type = "object", required = { "analysis", "proposals" },
  properties = { analysis = { type = "string" }, proposals = { type = "array" } } } }
local prompt = 'Answer in JSON.\nAllowed values (JSON): {"BLOCK": [32, 64, 128], "TILE": [1, 2, 4]}\n' ..
               'Current best (JSON): {"BLOCK": 64, "TILE": 1}\nProposals wanted: 3\n'
local n_clients = 0
local function client(scenario, extra)
  n_clients = n_clients + 1
  local cfg = { base_url = server:base(scenario), model = "m", api_key = KEY, timeout_s = 10, max_retries = 0,
                max_tokens = 500, max_tokens_field = "max_completion_tokens", mode = "json_object",
                transcript = string.format("%s/t%d.jsonl", dir, n_clients) }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return assert(llm.new(cfg)), cfg.transcript
end
local function ask(c, opts)
  return c:chat_many({ { tag = "t", schema = schema, messages = { { role = "user", content = prompt } } } }, opts)[1]
end
-- what a call writes on stderr
local function stderr_of(fn)
  local real, text = io.stderr, {}
  io.stderr = { write = function(_, ...) for _, s in ipairs({ ... }) do text[#text + 1] = s end end } -- luacheck: ignore 122
  local ok, err = pcall(fn)
  io.stderr = real -- luacheck: ignore 122
  assert(ok, err)
  return table.concat(text)
end

-- 1. cut off: failed, and failed again on replay
for _, scenario in ipairs({ "sse_cut", "nofinish" }) do
  local c, transcript = client(scenario)
  local r = ask(c)
  T.check(not r.ok and r.kind == "length" and r.value == nil, "%s: a failed reply, got ok=%s %s: %s", scenario,
          tostring(r.ok), tostring(r.kind), tostring(r.err))
  T.check(tostring(r.err):find("cut off", 1, true), "%s: the reason: %s", scenario, tostring(r.err))
  T.eq(c.usage.failures, 1, scenario .. ": counted as failed")
  c:close()
  local again = ask(assert(llm.new({ replay = transcript, mode = "json_object" })))
  T.check(not again.ok and again.kind == "length", "%s replayed: failed again (%s)", scenario, tostring(again.err))
end
-- (a whole stream without [DONE] but with its finish_reason is whole)
do
  local body = 'data: {"choices":[{"delta":{"content":"{\\"analysis\\": \\"a\\", \\"proposals\\": []}"},' ..
               '"finish_reason":"stop"}]}\n\n'
  local doc = llm.assemble_stream(body)
  T.check(doc and not doc.cut_off and doc.choices[1].finish_reason == "stop", "a finished stream is not cut off")
end

-- 2. an error event in a stream: quoted, and the endpoint's failure
do
  local c = client("sse_error")
  local r
  local err = stderr_of(function()
    for _ = 1, llm.DEAD_BATCHES do r = ask(c) end
  end)
  T.check(not r.ok and tostring(r.err):find("Provider returned error: upstream overloaded", 1, true),
          "sse_error: the server's message: %s", tostring(r.err))
  T.check(c.off and c.off:find("batches in a row failed", 1, true), "sse_error: the breaker counts it: %s",
          tostring(c.off))
  T.check(err:find("upstream overloaded", 1, true), "sse_error: said on stderr: %s", err)
end

-- 3. usage under other names, and none at all
do
  local c = client("usageother")
  T.check(ask(c).ok, "usageother: answered")
  T.eq(c.usage.total_tokens, 120, "usageother: input_tokens + output_tokens")
  T.eq(c.usage.prompt_tokens, 100, "usageother: input_tokens are the prompt's")
  c = client("nousage")
  local r = ask(c)
  T.check(r.ok, "nousage: answered (%s)", tostring(r.err))
  T.check(c.usage.total_tokens > 50 and c.usage.completion_tokens > 0, "nousage: estimated, got %s tokens",
          tostring(c.usage.total_tokens))
  T.eq(c.usage.estimated_tokens, c.usage.total_tokens, "nousage: all of it estimated")
  local ctx = {}
  llm.record_usage(ctx, c, { "t" })
  T.check(ctx.summary_lines[1]:find("estimated: no usage sent", 1, true), "nousage: the summary says so: %s",
          ctx.summary_lines[1])
  T.eq(ctx.llm_usage.estimated_tokens, c.usage.total_tokens, "nousage: results.json says so")
end
-- (the experts strategy's token cap reads the estimate: a run with a budget
-- smaller than one reply stops asking after its first batch)
do
  local out_dir = dir .. "/cap"
  local code, out, err = T.run(string.format("experts --backend replay:tests/data/convolution_A100.json --out %s " ..
                                             "--opt iterations=4 --opt patience=100 --opt llm_max_tokens=200 " ..
                                             "--opt tool_rounds=0", out_dir),
                               string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_API_KEY=%s KOPT_LLM_MODEL=test",
                                             server:base("nousage"), KEY))
  T.eq(code, 0, "nousage cap: the run (" .. err .. ")")
  T.check(out:find("LLM: 3 requests", 1, true), "nousage cap: one batch, then the budget is spent:\n%s", out)
end

-- 4. a rate-limit reset past the batch's deadline is not waited for
do
  local c = client("ratelimit20")
  T.check(ask(c).ok, "ratelimit20: the first batch")
  local t0 = sys.now()
  local r = ask(c, { deadline_s = 3 })
  T.check(sys.now() - t0 < 2, "ratelimit20: no wait past the deadline (%.1f s)", sys.now() - t0)
  T.check(not r.ok and tostring(r.err):find("rate limit's window resets in", 1, true) and
          tostring(r.err):find("past the batch's deadline", 1, true), "ratelimit20: why: %s", tostring(r.err))
end

-- 5. a 401 without a key; the line on stderr
do
  local c = client("ok", { api_key = false })
  local err = stderr_of(function() ask(c) end)
  T.check(c.off and c.off:find("no key was sent", 1, true) and not c.off:find("refused", 1, true),
          "401 without a key: %s", tostring(c.off))
  T.check(err:find("KOPT_LLM_API_KEY", 1, true) and err:find("the experts use their heuristics", 1, true),
          "401 without a key, stderr: %s", err)
  c = client("keyerr", { api_key = "sk-wrong", fallback = "the templates write the kernels" })
  err = stderr_of(function() ask(c) end)
  T.check(c.off and c.off:find("the key was refused", 1, true), "a wrong key: %s", tostring(c.off))
  T.check(err:find("the templates write the kernels", 1, true) and not err:find("experts", 1, true),
          "the caller's fallback on stderr: %s", err)
end

-- every transcript line is JSON
for i = 1, n_clients do
  local path = string.format("%s/t%d.jsonl", dir, i)
  if sys.stat(path) then
    for line in io.lines(path) do T.check(json.decode(line) ~= nil, "t%d: a JSON line", i) end
  end
end
server:stop()
os.execute("rm -rf '" .. dir .. "'")
return T.done()
