-- OpenAI-compatible chat completions: several requests at once (kopt.http),
-- structured output with fallbacks, JSON extraction and local validation,
-- token totals, and a transcript of every exchange (never the key).
--
--   local client = llm.new(llm.config(options))      -- nil, why when no endpoint
--   local replies = client:chat_many({ {tag=, messages=, schema={name=, schema=}}, ... })
--   reply = { ok=true, value=<decoded JSON>, content=, usage=, attempts=, elapsed_s= }
--        or { ok=false, kind="http"|"transport"|"parse"|"schema"|"length"|"refusal"|"tools"|"replay"|"off", err= }
--   (replayed: answered from a resumed run's own transcript; interrupted:
--   the batch was cut short, no answer; unasked: nothing to ask, no
--   endpoint: none of these three is the endpoint's answer now)
--
-- Structured output is tried in this order, each step taken once for the
-- client's life when the server answers 400 to the previous one:
-- response_format json_schema (strict) -> json_object -> no response_format.
-- Whatever the server promises, replies are validated locally.
--
-- Replay: with config.replay = <transcript.jsonl>, answers come from the
-- recorded replies instead of the network: the n-th request with tag T gets
-- the n-th recorded reply with tag T, so a strategy run is reproducible.
local errors = require("kopt.errors")
local http = require("kopt.http")
local json = require("kopt.json")
local json_schema = require("kopt.json_schema")
local reply_json = require("kopt.reply_json")
local sys = require("kopt.sys")
local wire = require("kopt.llm_wire")

local M = {}
local Client = {}
Client.__index = Client

M.MODES = { "json_schema", "json_object", "none" }
M.null = json.null

-- A mode's place in the fallback order (0: not a mode).
local function mode_rank(mode)
  for i, m in ipairs(M.MODES) do if m == mode then return i end end
  return 0
end

-- The names chat-completions servers take for the reply cap: OpenAI's
-- current one (reasoning models need it), and the older one most other
-- servers read. Another name would be sent, ignored, and the cap lost.
M.MAX_TOKENS_FIELDS = { max_completion_tokens = true, max_tokens = true }

-- Reads the endpoint settings: options (llm_base_url, llm_model, llm_api_key,
-- llm_timeout, llm_replay, ...) first, then KOPT_LLM_*, then OPENAI_*.
-- A value out of its range is a usage error naming where it came from,
-- raised here, before anything runs (read mid-run, it stopped the run or
-- silently cost the experts their moves).
local function positive(n) return n > 0 and n < math.huge end
local function whole(lo, hi) return function(n) return math.type(n) == "integer" and n >= lo and n <= hi end end
function M.config(options, getenv)
  options = options or {}
  getenv = getenv or os.getenv
  local function pick(opt, ...)
    local v = opt and options[opt]
    if v ~= nil and v ~= "" then return v, "--opt " .. opt end
    for _, name in ipairs({ ... }) do
      local e = getenv(name)
      if e ~= nil and e ~= "" then return e, name end
    end
    return nil
  end
  local function number(default, fits, expected, opt, ...)
    local v, from = pick(opt, ...)
    if v == nil then return default end
    -- (decimal only: Lua reads "0x10" as 16, which nobody means by it)
    local hex = tostring(v):find("^%s*[+-]?0[xX]")
    local n = not hex and tonumber(v) or nil
    n = n and (math.tointeger(n) or n)
    if not (n and fits(n)) then
      errors.usage("%s=%s: expected %s%s", from, tostring(v), expected, hex and ", written in decimal" or "")
    end
    return n
  end
  local mode, mode_from = pick("llm_mode", "KOPT_LLM_MODE")
  if mode ~= nil and not ({ json_schema = true, json_object = true, none = true })[mode] then
    errors.usage("%s=%s: expected json_schema, json_object or none", mode_from, tostring(mode))
  end
  local field, field_from = pick("llm_max_tokens_field", "KOPT_LLM_MAX_TOKENS_FIELD")
  if field ~= nil and not M.MAX_TOKENS_FIELDS[field] then
    errors.usage("%s=%s: expected max_completion_tokens or max_tokens", field_from, tostring(field))
  end
  return {
    base_url = pick("llm_base_url", "KOPT_LLM_BASE_URL", "OPENAI_BASE_URL"),
    model = pick("llm_model", "KOPT_LLM_MODEL", "OPENAI_MODEL") or "gpt-4o-mini",
    api_key = pick("llm_api_key", "KOPT_LLM_API_KEY", "OPENAI_API_KEY"),
    timeout_s = number(120, positive, "a number of seconds above 0 (e.g. 120)", "llm_timeout", "KOPT_LLM_TIMEOUT"),
    max_retries = number(2, whole(0, 100), "an integer from 0 to 100", "llm_retries", "KOPT_LLM_RETRIES"),
    -- (the environment only: the experts' llm_max_tokens option is the
    -- run's token budget, not the reply's)
    max_tokens = number(4096, whole(1, math.maxinteger), "an integer above 0", nil, "KOPT_LLM_MAX_TOKENS"),
    max_tokens_field = field or "max_completion_tokens",
    temperature = number(nil, function(n) return n >= 0 and n <= 2 end, "a number from 0 to 2",
                         "llm_temperature", "KOPT_LLM_TEMPERATURE"),
    mode = mode or "json_schema",
    replay = pick("llm_replay", "KOPT_LLM_REPLAY"),
  }
end

-- A client, or nil and the reason when neither an endpoint nor a replay
-- transcript is configured. cfg.transcript: path of the JSONL transcript to
-- append to (nil: none).
function M.new(cfg)
  cfg = cfg or M.config()
  if not cfg.base_url and not cfg.replay and not cfg.prefix then return nil, "no LLM endpoint configured" end
  local self = setmetatable({ cfg = cfg, mode = cfg.mode or "json_schema", seq = 0,
                              usage = { prompt_tokens = 0, completion_tokens = 0, total_tokens = 0,
                                        requests = 0, failures = 0 },
                              by_tag = {}, fallback = cfg.fallback or "the experts use their heuristics" },
                        Client)
  local ok_mode = false
  for _, m in ipairs(M.MODES) do if m == self.mode then ok_mode = true end end
  if not ok_mode then return nil, "llm mode must be json_schema, json_object or none, got " .. tostring(self.mode) end
  if cfg.base_url then
    self.url = cfg.base_url:gsub("/+$", "") .. "/chat/completions"
  end
  -- A resumed run first answers from its own transcript (prefix), then goes
  -- live: the same prompts get the same answers as before the interruption.
  local source = cfg.replay or cfg.prefix
  if source then
    local recorded, err = M.read_transcript(source, cfg.transcript == source)
    if not recorded then return nil, err end
    self.replay = { by_tag = {}, next = {}, prefix = cfg.replay == nil }
    local fell_back_to
    for _, rec in ipairs(recorded) do
      -- (a resumed run appends to the same file: its ids go on from there)
      if self.replay.prefix and math.type(rec.id) == "integer" and rec.id > self.seq then self.seq = rec.id end
      -- (a batch cut short by an interruption got no answer: asked again)
      if rec.kind == "reply" and not rec.superseded and not rec.interrupted then
        local tag = rec.tag or ""
        self.replay.by_tag[tag] = self.replay.by_tag[tag] or {}
        table.insert(self.replay.by_tag[tag], rec)
      end
      if rec.kind == "request" and not rec.replay and rec.url == self.url then fell_back_to = rec.mode end
    end
    -- The structured-output fallback holds for the run: a resumed run
    -- starts where its transcript left off with the same endpoint, rather
    -- than paying for the same refused requests again.
    if self.replay.prefix and mode_rank(fell_back_to) > mode_rank(self.mode) then self.mode = fell_back_to end
  end
  if cfg.transcript then
    self.transcript = io.open(cfg.transcript, "a")
  end
  return self
end

-- The client of a strategy run from its options (llm, llm_base_url,
-- llm_model, llm_key_env, llm_timeout, llm_mode, llm_replay): nil and why
-- when it is off or no endpoint is configured. Its transcript is the run
-- folder's llm_transcript.jsonl; a resumed run first answers from it, so it
-- asks what it asked before and gets the same answers (with no endpoint,
-- from it alone). A bad setting is a usage error naming `who`. fallback:
-- what the run does instead once the LLM is off (said on stderr).
function M.for_run(ctx, o, who, fallback)
  if o.llm == "off" then return nil, "llm=off" end
  local options = { llm_base_url = o.llm_base_url, llm_model = o.llm_model, llm_timeout = o.llm_timeout,
                    llm_mode = o.llm_mode, llm_replay = o.llm_replay }
  local cfg = M.config(options)
  cfg.fallback = fallback
  if o.llm_key_env and o.llm_key_env ~= "" then
    cfg.api_key = os.getenv(o.llm_key_env)
    if (cfg.api_key or "") == "" and (cfg.base_url or cfg.replay == nil) then
      errors.usage("%s: llm_key_env names %s, which is not set (or empty): no key would be sent", who, o.llm_key_env)
    end
  end
  local own = ctx.run_dir and (ctx.run_dir .. "/llm_transcript.jsonl")
  if not cfg.base_url and not cfg.replay then
    -- a run resumed with no endpoint still gets the answers it was given
    -- (so it proposes what it proposed before); the questions after them go
    -- to the heuristics, unasked and uncounted. Its transcript is read, not
    -- written to.
    if not (own and sys.stat(own)) then return nil, "no LLM endpoint configured" end
    cfg.prefix, own = own, nil
  end
  if own then
    sys.mkdir_p(ctx.run_dir)
    cfg.transcript = own
    if not cfg.replay and sys.stat(cfg.transcript) then cfg.prefix = cfg.transcript end
  end
  local client, err = M.new(cfg)
  if not client then errors.usage("%s: %s", who, err) end
  return client
end

-- The records of a transcript. A last line without its newline (a run
-- killed mid-write) is dropped; with cut = true (the run appends to the
-- file) the file is also cut back to its last whole line.
function M.read_transcript(path, cut)
  local text, err = json.read_text(path, math.maxinteger)
  if not text then return nil, "cannot read LLM transcript: " .. tostring(err) end
  local out, pos, n, good_end = {}, 1, 0, 0
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    if not nl then break end
    n = n + 1
    local line = text:sub(pos, nl - 1)
    if line:match("%S") then
      local rec, derr = json.decode(line)
      if not rec then
        return nil, string.format("%s:%d: malformed transcript line: %s", path, n, derr)
      end
      out[#out + 1] = rec
    end
    good_end, pos = nl, nl + 1
  end
  if cut and good_end < #text then
    local ok, terr = sys.truncate(path, good_end)
    if not ok then return nil, string.format("%s: cannot cut its torn last line: %s", path, tostring(terr)) end
  end
  return out
end

function Client:describe()
  if self.replay and not self.replay.prefix then return "replay of " .. self.cfg.replay end
  if not self.url then return "the answers recorded in " .. tostring(self.cfg.prefix) .. " (no endpoint)" end
  return string.format("%s (model %s)", self.cfg.base_url, self.cfg.model)
end

-- s with the API key replaced by "[redacted]" (a server may echo it back,
-- in an error message or a reply); other values as they are.
function Client:redact(s)
  local key = self.cfg.api_key
  if type(s) ~= "string" or not key or #key < 4 then return s end
  local at = s:find(key, 1, true)
  if not at then return s end
  local parts, from = {}, 1
  while at do
    parts[#parts + 1] = s:sub(from, at - 1)
    parts[#parts + 1] = "[redacted]"
    from = at + #key
    at = s:find(key, from, true)
  end
  parts[#parts + 1] = s:sub(from)
  return table.concat(parts)
end

-- A copy of v with every string redacted (tables walked, keys too).
local function redact_deep(self, v, depth)
  if type(v) == "string" then return self:redact(v) end
  if type(v) ~= "table" or v == json.null or depth > 32 then return v end
  local out = {}
  for k, x in pairs(v) do out[redact_deep(self, k, depth + 1)] = redact_deep(self, x, depth + 1) end
  return setmetatable(out, getmetatable(v))
end

-- Appends one record to the transcript. The key is scrubbed from its
-- strings before they are encoded (an escape such as "\/" would hide it
-- from a scrub of the encoded line).
function Client:log(rec)
  if not self.transcript then return end
  rec.t = sys.utc_iso()
  local line = json.encode(redact_deep(self, rec, 0))
  self.transcript:write(line, "\n")
  self.transcript:flush()
end

function Client:close()
  if self.transcript then self.transcript:close() self.transcript = nil end
end

-- JSON in replies: kopt.reply_json, re-exported; the shapes servers send
-- (kopt.llm_wire) too
for _, name in ipairs({ "extract_json", "strip_reasoning", "fences", "repair_json", "python_to_json" }) do
  M[name] = reply_json[name]
end
for _, name in ipairs({ "content_text", "server_message", "assemble_stream", "tool_calls_of", "parse_duration",
                        "usage_counts" }) do
  M[name] = wire[name]
end
local usage_add = wire.usage_add

function M.validate(value, schema) return json_schema.validate(value, schema) end

---------------------------------------------------------------------------
-- Requests

function Client:body(req, mode)
  local cfg = self.cfg
  local b = { model = cfg.model, messages = req.messages, stream = false }
  b[cfg.max_tokens_field] = req.max_tokens or cfg.max_tokens
  local temp = cfg.temperature or req.temperature
  if temp then b.temperature = temp end
  if req.tools then
    -- function calling (kopt.tools): the tool definitions, and "none" once
    -- the tool rounds are spent
    b.tools = req.tools
    b.tool_choice = req.tool_choice
  end
  if req.schema and mode == "json_schema" then
    b.response_format = { type = "json_schema",
                          json_schema = { name = req.schema.name, strict = true, schema = req.schema.schema } }
  elseif req.schema and mode == "json_object" then
    b.response_format = { type = "json_object" }
  end
  return b
end

-- A reply cut off is a failed reply, never the fragment it holds: one
-- stopped at the token limit, a stream that ended with neither a
-- finish_reason nor [DONE] (reply.cut_off), and one without a
-- finish_reason whose text ends inside an unclosed JSON value (its inner
-- objects would read as an answer).
local function decode_content(req, reply, finish_reason)
  if finish_reason == "length" then
    reply.kind, reply.err = "length", "the reply was cut off at the token limit (finish_reason=length)"
    return reply
  end
  if reply.cut_off then
    reply.kind, reply.err = "length", "the streamed reply ended with neither a finish_reason nor [DONE]: cut off"
    return reply
  end
  if finish_reason == nil and reply_json.ends_inside_json(reply.content) then
    reply.kind, reply.err = "length", "the reply has no finish_reason and ends inside its JSON: cut off"
    return reply
  end
  if finish_reason == "content_filter" then
    -- (cut off too: what was sent before the stop is no whole answer)
    reply.kind, reply.err = "refusal", "the server's content filter stopped the reply (finish_reason=content_filter)"
    return reply
  end
  local value, err = M.extract_json(reply.content, req.schema and req.schema.accept, req.schema and req.schema.gather)
  if value == nil and reply.reasoning then
    -- a server that puts a reply without its closing reasoning tag wholly in
    -- reasoning_content (vLLM's reasoning parsers): the answer is in there;
    -- the content then keeps it, so a transcript replays the same answer
    local rv = M.extract_json(reply.reasoning, req.schema and req.schema.accept, req.schema and req.schema.gather)
    if rv ~= nil then
      value, err = rv, nil
      reply.content = "<think>" .. reply.reasoning .. "</think>\n" .. (reply.content or "")
    end
  end
  if value == nil then
    reply.kind, reply.err = "parse", err
    return reply
  end
  if req.schema then
    local ok, verr = M.validate(value, req.schema.local_schema or req.schema.schema)
    if not ok then
      reply.kind, reply.err = "schema", "the reply does not match the schema: " .. verr
      reply.value = value
      return reply
    end
  end
  reply.ok, reply.value = true, value
  return reply
end

-- A reply that calls tools under tool_choice "none" (the tool rounds are
-- spent) has failed, kind "tools", in the transcript as in the run; its calls
-- are kept, so a replay fails the same way. req.tools_spent: why, in words.
local function calls_past_limit(req, reply)
  if req.tool_choice ~= "none" or not reply.tool_calls then return reply end
  reply.ok, reply.kind = nil, "tools"
  reply.err = req.tools_spent or 'the model called tools under tool_choice "none"'
  return reply
end

-- Turns an HTTP response into a reply table (see the top of the file).
function Client:interpret(req, resp)
  local reply = { status = resp.status, attempts = resp.attempts, elapsed_s = resp.elapsed_s,
                  request_id = resp.headers and resp.headers["x-request-id"] }
  if resp.err then
    -- (curl names the host in some errors, not in "Empty reply from server")
    local host = (self.url or ""):match("^%a+://([^/]+)")
    reply.kind, reply.err = "transport", resp.err
    if host and not resp.err:find(host:match("^[^:]+"), 1, true) then reply.err = resp.err .. " (" .. host .. ")" end
    return reply
  end
  if resp.status ~= 200 then
    local msg = M.server_message(resp.body)
    local location = resp.status >= 300 and resp.status < 400 and resp.headers and resp.headers.location
    reply.kind = "http"
    reply.err = string.format("HTTP %d%s%s", resp.status, msg and (": " .. msg) or "",
                              location and ("; redirected to " .. location .. " (kopt does not follow redirects: " ..
                                            "set llm_base_url to it)") or "")
    return reply
  end
  local doc, derr = json.decode(resp.body or "")
  if type(doc) ~= "table" then doc = M.assemble_stream(resp.body) end
  if type(doc) ~= "table" then
    local said = M.server_message(resp.body)
    reply.kind, reply.err = "parse", "the response body is not JSON: " .. tostring(derr) ..
                            (said and ("; it begins: " .. said) or "")
    return reply
  end
  local choice = type(doc.choices) == "table" and doc.choices[1]
  local msg = type(choice) == "table" and choice.message
  if type(msg) ~= "table" then
    -- (a gateway that answers 200 with an error object, or sends one as
    -- an event of its stream: the server failed, as with a 5xx)
    local said = M.server_message(json.encode({ error = doc.error, message = doc.message, detail = doc.detail }))
    if doc.error ~= nil and doc.error ~= json.null then
      reply.kind, reply.server_error = "http", true
      reply.err = "HTTP 200 with an error instead of a reply" .. (said and (": " .. said) or "")
      return reply
    end
    reply.kind, reply.err = "parse", "the response has no choices[1].message" ..
                            (said and ("; the server said: " .. said) or "")
    return reply
  end
  -- (a server that sends no usage: estimated, so a token cap holds)
  reply.usage = M.usage_counts(doc.usage) and doc.usage or
    wire.estimate_usage(req.messages, M.content_text(msg.content), M.content_text(msg.reasoning_content),
                        M.content_text(msg.reasoning), type(msg.tool_calls) == "table" and json.encode(msg.tool_calls))
  usage_add(self.usage, reply.usage)
  if type(msg.refusal) == "string" and msg.refusal:find("%S") then
    reply.kind, reply.err = "refusal", "the model refused: " .. msg.refusal
    return reply
  end
  reply.content = M.content_text(msg.content)
  -- (kept in the transcript: a reply cut off is cut off again on replay)
  reply.finish_reason = type(choice.finish_reason) == "string" and choice.finish_reason or nil
  reply.cut_off = doc.cut_off
  local reasoning = M.content_text(msg.reasoning_content) or M.content_text(msg.reasoning)
  if reasoning and reasoning:find("%S") then reply.reasoning = reasoning end
  if req.tools and type(msg.tool_calls) == "table" and #msg.tool_calls > 0 and not reply.cut_off then
    reply.ok, reply.tool_calls = true, M.tool_calls_of(msg.tool_calls)
    return calls_past_limit(req, reply)
  end
  return decode_content(req, reply, reply.finish_reason)
end

-- A server that does not take `tools` says so with a 400 (or 422) whose
-- body mentions tools (function calling); a 400 about anything else is the
-- structured-output fallback's.
local function rejects_tools(req, resp)
  if not req.tools or resp.err or (resp.status ~= 400 and resp.status ~= 422) then return false end
  local body = (resp.body or ""):lower()
  return body:find("tool", 1, true) ~= nil or body:find("function[ _]call") ~= nil
end
M.rejects_tools = rejects_tools


-- Client-side pacing: when the server says no requests are left in its
-- window (x-ratelimit-remaining-requests: 0), the next batch waits for the
-- window's reset (at most 60 s) instead of collecting 429s.
function Client:note_limits(resp)
  local h = resp.headers or {}
  local left = tonumber(h["x-ratelimit-remaining-requests"])
  local reset = M.parse_duration(h["x-ratelimit-reset-requests"])
  if left and reset and left <= 0 then
    local until_t = sys.now() + math.min(reset, 60)
    if not self.paused_until or until_t > self.paused_until then self.paused_until = until_t end
  end
end

-- ends_at: the batch's deadline (sys.now() time) or nil. A wait that would
-- end past it is not made: the window's reset is returned as the reason,
-- and the next batch waits for it instead.
function Client:pace(ends_at)
  if self.paused_until then
    local wait = self.paused_until - sys.now()
    if ends_at and wait > 0 and self.paused_until >= ends_at then
      return string.format("the rate limit's window resets in %.1f s, past the batch's deadline", wait)
    end
    self.paused_until = nil
    if wait > 0 then
      self:log({ kind = "note", msg = string.format("rate limit: waiting %.2f s for the window to reset", wait) })
      sys.sleep(wait)
    end
  end
end

-- A 400 that names the request's length (a context window exceeded) is not
-- about the response format: dropping the format would not help, and the
-- rest of the run would go without structured output for nothing.
local LENGTH_WORDS = { "context_length", "context length", "context window", "maximum context", "too many tokens",
                       "prompt is too long", "input is too long", "token limit", "tokens exceed", "maximum number of tokens" }
local function names_length(body)
  local b = tostring(body or ""):lower()
  for _, w in ipairs(LENGTH_WORDS) do
    if b:find(w, 1, true) then return true end
  end
  return false
end

local function wants_downgrade(resp)
  return resp.status == 400 and not resp.err and not names_length(resp.body)
end

-- The recorded answer to a request, or nil when a prefix transcript has
-- none left for its tag (the request then goes to the server).
function Client:replay_one(req)
  local tag = req.tag or ""
  local n = (self.replay.next[tag] or 0) + 1
  local rec = (self.replay.by_tag[tag] or {})[n]
  if not rec and self.replay.prefix then return nil end
  self.replay.next[tag] = n
  -- (a recorded failure of a run resumed is not the endpoint's answer now:
  -- Client:watch leaves it alone)
  local reply
  if not rec then
    reply = { kind = "replay", err = string.format("the transcript has no reply #%d for '%s'", n, tag) }
  elseif type(rec.tool_calls) == "table" then
    reply = calls_past_limit(req, { ok = true, tool_calls = M.tool_calls_of(rec.tool_calls), content = rec.content,
                                    status = rec.status, attempts = 0, elapsed_s = 0, usage = rec.usage })
    usage_add(self.usage, rec.usage)
  elseif rec.content == nil then
    reply = { kind = rec.error_kind or "replay", err = rec.err or "recorded failure", status = rec.status,
              tools_rejected = rec.tools_rejected, server_error = rec.server_error }
  else
    reply = decode_content(req, { content = rec.content, status = rec.status, attempts = 0,
                                       elapsed_s = 0, cut_off = rec.cut_off }, rec.finish_reason)
    usage_add(self.usage, rec.usage)
    reply.usage = rec.usage
  end
  if not self.replay.prefix then
    -- A prefix is already in the transcript being appended to.
    self.seq = self.seq + 1
    self:log({ kind = "request", id = self.seq, tag = tag, replay = true, messages = req.messages })
    self:log({ kind = "reply", id = self.seq, tag = tag, replay = true, status = reply.status,
               content = reply.content, finish_reason = rec and rec.finish_reason, tool_calls = reply.tool_calls,
               ok = reply.ok or false, error_kind = reply.kind, err = reply.err, tools_rejected = reply.tools_rejected })
  end
  reply.replayed = self.replay.prefix or nil
  return reply
end

-- Token totals per tag (an expert's requests and its repair turns share the
-- expert's name before a '#'): { prompt_tokens=, completion_tokens=,
-- total_tokens=, requests=, failures= }.
function Client:tag_usage(tag)
  tag = tostring(tag or ""):match("^[^#]*")
  local u = self.by_tag[tag]
  if not u then
    u = { prompt_tokens = 0, completion_tokens = 0, total_tokens = 0, requests = 0, failures = 0 }
    self.by_tag[tag] = u
  end
  return u
end

-- Sends every request at once; returns replies in the same order. Never
-- raises for network or model trouble: those are replies with ok=false.
-- opts.deadline_s: the whole batch, retries, their waits and the format
-- fallback included, ends within about this long (kopt.http's deadline_s).
-- An endpoint that cannot serve this run is not asked again: one that
-- refused the key (HTTP 401, 403) in a batch with no answer, or one that
-- failed every request of DEAD_BATCHES batches in a row without answering
-- (transport errors, HTTP 404: a model or path unknown, or a gateway with
-- no provider for the request; 408, 429, 5xx after their retries; a reply
-- that answers wrongly is the model's fault, not the endpoint's).
-- The experts fall back to their heuristics; the run says so once on
-- stderr and in its summary (Client.off). A replay of a transcript
-- (llm_replay) replays the same failures, so it turns the LLM off at the
-- same point; a resumed run does not act on the failures it replays from
-- its own transcript (the key or URL may have been fixed since): its live
-- requests decide.
M.DEAD_BATCHES = 3
local FATAL_STATUS = { [401] = "the key was refused", [403] = "the key may not use it" }

function Client:watch(all)
  if self.off then return end
  local out = {}
  for _, r in ipairs(all) do
    if not r.replayed and not r.interrupted and not r.unasked then out[#out + 1] = r end
  end
  if #out == 0 then return end
  for _, r in ipairs(out) do
    if r.ok then
      self.dead_batches = 0
      return
    end
  end
  local dead, last = true, nil
  for _, r in ipairs(out) do
    last = r
    if r.kind == "http" and FATAL_STATUS[r.status] then
      -- (a 401 to a request without a key is no key refused)
      local why = (r.status == 401 and not self.cfg.api_key) and
                  "no key was sent: set KOPT_LLM_API_KEY or OPENAI_API_KEY, or name its variable with llm_key_env"
                  or FATAL_STATUS[r.status]
      self.off = string.format("%s (%s)", r.err, why)
      break
    end
    if not (r.kind == "transport" or r.server_error or
            (r.kind == "http" and (r.status == 404 or r.status == 408 or r.status == 429 or
                                   (r.status or 0) >= 500))) then
      dead = false
    end
  end
  if not self.off then
    if not dead or not last then
      self.dead_batches = 0
      return
    end
    self.dead_batches = (self.dead_batches or 0) + 1
    if self.dead_batches < M.DEAD_BATCHES then return end
    self.off = string.format("%d batches in a row failed without an answer (the last: %s)", self.dead_batches,
                             self:redact(tostring(last.err)))
  end
  self:log({ kind = "note", msg = "the LLM is off for the rest of the run: " .. self.off })
  io.stderr:write(string.format("kopt: LLM at %s: %s; the LLM is off for the rest of the run (%s)\n",
                                self.cfg.base_url or "the transcript", self:redact(self.off), self.fallback))
end

function Client:chat_many(reqs, opts)
  if #reqs == 0 then return {} end
  opts = opts or {}
  if self.off then
    local out = {}
    for i = 1, #reqs do out[i] = { kind = "off", err = "the LLM is off: " .. self.off } end
    return out
  end
  local out, todo = {}, {}
  for i, req in ipairs(reqs) do
    out[i] = self.replay and self:replay_one(req) or nil
    if out[i] == nil then todo[#todo + 1] = i end
  end
  if #todo > 0 and not self.url then
    -- (a run resumed without an endpoint, past its transcript's answers:
    -- nothing is asked, so nothing is counted; the heuristics answer)
    for _, i in ipairs(todo) do
      out[i] = { kind = "off", unasked = true, err = "the transcript's answers are used up and no endpoint is configured" }
    end
    todo = {}
  end
  local started = sys.now()
  while #todo > 0 do
    local paced = self:pace(opts.deadline_s and started + opts.deadline_s)
    if paced or (opts.deadline_s and sys.now() - started >= opts.deadline_s) then
      local why = string.format("the batch's deadline (%g s) passed", opts.deadline_s)
      for _, i in ipairs(todo) do
        out[i] = { kind = "transport", err = paced and string.format("%s (%g s)", paced, opts.deadline_s) or why }
      end
      break
    end
    local mode = self.mode
    local batch, ids = {}, {}
    local headers = { ["Content-Type"] = "application/json" }
    if self.cfg.api_key then headers.Authorization = "Bearer " .. self.cfg.api_key end
    for j, i in ipairs(todo) do
      local req = reqs[i]
      local body = self:body(req, mode)
      self.seq = self.seq + 1
      ids[j] = self.seq
      self:log({ kind = "request", id = self.seq, tag = req.tag, url = self.url, mode = mode, body = body })
      batch[j] = { url = self.url, headers = headers, body = json.encode(body), timeout_s = self.cfg.timeout_s }
    end
    local timeout_s, retries, left_s = self.cfg.timeout_s, self.cfg.max_retries, nil
    if opts.deadline_s then
      -- (the format fallback's second batch gets what the first one left)
      left_s = math.max(0.5, opts.deadline_s - (sys.now() - started))
      timeout_s = math.max(0.5, math.min(timeout_s, left_s))
      for _, b in ipairs(batch) do b.timeout_s = timeout_s end
    end
    local resps, err = http.request_many(batch, { timeout_s = timeout_s, max_retries = retries,
                                                  deadline_s = left_s,
                                                  backoff_initial_s = self.cfg.backoff_initial_s,
                                                  connect_timeout_s = self.cfg.connect_timeout_s })
    if not resps then
      -- (the batch did not run: each request gets its reply record; one
      -- cut short by an interruption had no answer, so it counts as no
      -- request, and a resumed run asks it again)
      local interrupted = err == "interrupted" or nil
      for j, i in ipairs(todo) do
        out[i] = { kind = "transport", err = err, interrupted = interrupted }
        self:log({ kind = "reply", id = ids[j], tag = reqs[i].tag, ok = false, error_kind = "transport", err = err,
                   interrupted = interrupted })
      end
      break
    end
    local again, last_said = {}, nil
    for j, i in ipairs(todo) do
      local resp = resps[j]
      self:note_limits(resp)
      local no_tools = rejects_tools(reqs[i], resp)
      local downgrade = not no_tools and wants_downgrade(resp) and reqs[i].schema and mode ~= "none"
      local said = downgrade and M.server_message(resp.body)
      local reply = downgrade and { kind = "http", status = 400, err = "HTTP 400" .. (said and (": " .. said) or "") ..
                                    " (retrying without " .. mode .. ")", said = said }
        or self:interpret(reqs[i], resp)
      if downgrade then last_said = said end
      reply.tools_rejected = no_tools or nil
      self:log({ kind = "reply", id = ids[j], tag = reqs[i].tag, status = resp.status, attempts = resp.attempts,
                 elapsed_s = resp.elapsed_s, request_id = resp.headers and resp.headers["x-request-id"],
                 content = reply.content, finish_reason = reply.finish_reason, cut_off = reply.cut_off,
                 tool_calls = reply.tool_calls, tools_rejected = reply.tools_rejected, usage = reply.usage,
                 ok = reply.ok or false, server_error = reply.server_error,
                 error_kind = reply.kind, err = reply.err,
                 body = (not reply.ok and reply.content == nil) and (resp.body or ""):sub(1, 2000) or nil,
                 superseded = downgrade or nil })
      if downgrade then again[#again + 1] = i else out[i] = reply end
    end
    if #again > 0 then
      self.mode = mode == "json_schema" and "json_object" or "none"
      -- (a server rarely says that the format was the problem; what it did
      -- say is kept, so a context too long is not read as a format refused)
      self:log({ kind = "note", msg = string.format("HTTP 400 with response_format %s%s; now using %s", mode,
                                                    last_said and (" (the server said: " .. last_said .. ")") or "",
                                                    self.mode) })
    end
    todo = again
  end
  for i, r in ipairs(out) do
    -- what a reply carries reaches the run's log, events and prompts
    r.err, r.content, r.said = self:redact(r.err), self:redact(r.content), self:redact(r.said)
    -- (counted: what was sent, and what a transcript answered for it)
    if not (r.unasked or r.interrupted) then
      local u = self:tag_usage(reqs[i].tag)
      self.usage.requests = self.usage.requests + 1
      u.requests = u.requests + 1
      usage_add(u, r.usage)
      if not r.ok then
        self.usage.failures = self.usage.failures + 1
        u.failures = u.failures + 1
      end
    end
  end
  self:watch(out)
  return out
end

-- The run's record of the client's use: ctx.llm_usage (results.json) and
-- the summary's "LLM:" line (ctx.summary_lines; one such line, replaced),
-- with the tokens of each tag in `tags` when given, then of the client's
-- other tags (relabel's request: the parts add up to the total), and why
-- the LLM went off.
function M.record_usage(ctx, client, tags)
  local u = client.usage
  local per, named, others = {}, {}, {}
  for _, tag in ipairs(tags or {}) do
    local t = client.by_tag[tag]
    named[tag] = true
    if t then per[#per + 1] = string.format("%s %d", tag, t.total_tokens) end
  end
  if tags then
    for tag, t in pairs(client.by_tag) do
      if not named[tag] and (t.requests > 0 or t.total_tokens > 0) then others[#others + 1] = tag end
    end
    table.sort(others)
    for _, tag in ipairs(others) do per[#per + 1] = string.format("%s %d", tag, client.by_tag[tag].total_tokens) end
  end
  ctx.llm_usage = { requests = u.requests, failures = u.failures, prompt_tokens = u.prompt_tokens,
                    completion_tokens = u.completion_tokens, total_tokens = u.total_tokens, experts = {},
                    off = client.off }
  for tag, t in pairs(client.by_tag) do ctx.llm_usage.experts[tag] = t end
  local unusable = u.unusable or 0
  ctx.llm_usage.unusable = unusable > 0 and unusable or nil
  local estimated = u.estimated_tokens or 0
  ctx.llm_usage.estimated_tokens = estimated > 0 and estimated or nil
  local line = string.format("  LLM: %d requests, %d failed%s, %d tokens (%d prompt, %d completion%s)%s%s",
                             u.requests, u.failures,
                             unusable > 0 and string.format(", %d answered without proposals", unusable) or "",
                             u.total_tokens, u.prompt_tokens, u.completion_tokens,
                             estimated > 0 and string.format("; %d estimated: no usage sent",
                                                             estimated) or "",
                             #per > 0 and ("; " .. table.concat(per, ", ")) or "",
                             client.off and ("; off since: " .. client.off) or "")
  local lines = ctx.summary_lines or {}
  for i, l in ipairs(lines) do
    if l:find("^  LLM: ") then
      lines[i] = line
      ctx.summary_lines = lines
      return
    end
  end
  lines[#lines + 1] = line
  ctx.summary_lines = lines
end

return M
