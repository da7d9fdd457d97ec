-- OpenAI-compatible chat completions: several requests at once (kopt.http),
-- structured output with fallbacks, JSON extraction and local validation,
-- token totals, and a transcript of every exchange (never the key).
--
--   local client = llm.new(llm.config(options))      -- nil, why when no endpoint
--   local replies = client:chat_many({ {tag=, messages=, schema={name=, schema=}}, ... })
--   reply = { ok=true, value=<decoded JSON>, content=, usage=, attempts=, elapsed_s= }
--        or { ok=false, kind="http"|"transport"|"parse"|"schema"|"length"|"refusal"|"replay", err= }
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

local M = {}
local Client = {}
Client.__index = Client

M.MODES = { "json_schema", "json_object", "none" }
M.null = json.null

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
    local n = tonumber(v)
    n = n and (math.tointeger(n) or n)
    if not (n and fits(n)) then errors.usage("%s=%s: expected %s", from, tostring(v), expected) end
    return n
  end
  local mode, mode_from = pick("llm_mode", "KOPT_LLM_MODE")
  if mode ~= nil and not ({ json_schema = true, json_object = true, none = true })[mode] then
    errors.usage("%s=%s: expected json_schema, json_object or none", mode_from, tostring(mode))
  end
  local field, field_from = pick("llm_max_tokens_field", "KOPT_LLM_MAX_TOKENS_FIELD")
  if field ~= nil and not tostring(field):match("^[%a_][%w_]*$") then
    errors.usage("%s=%s: expected a request field name such as max_completion_tokens or max_tokens", field_from,
                 tostring(field))
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
  if not cfg.base_url and not cfg.replay then return nil, "no LLM endpoint configured" end
  local self = setmetatable({ cfg = cfg, mode = cfg.mode or "json_schema", seq = 0,
                              usage = { prompt_tokens = 0, completion_tokens = 0, total_tokens = 0,
                                        requests = 0, failures = 0 },
                              by_tag = {} }, Client)
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
    for _, rec in ipairs(recorded) do
      -- (a resumed run appends to the same file: its ids go on from there)
      if self.replay.prefix and math.type(rec.id) == "integer" and rec.id > self.seq then self.seq = rec.id end
      if rec.kind == "reply" and not rec.superseded then
        local tag = rec.tag or ""
        self.replay.by_tag[tag] = self.replay.by_tag[tag] or {}
        table.insert(self.replay.by_tag[tag], rec)
      end
    end
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
-- from it alone). A bad setting is a usage error naming `who`.
function M.for_run(ctx, o, who)
  if o.llm == "off" then return nil, "llm=off" end
  local options = { llm_base_url = o.llm_base_url, llm_model = o.llm_model, llm_timeout = o.llm_timeout,
                    llm_mode = o.llm_mode, llm_replay = o.llm_replay }
  local cfg = M.config(options)
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
    -- to the heuristics. Its transcript is read, not written to.
    if not (own and sys.stat(own)) then return nil, "no LLM endpoint configured" end
    cfg.replay, own = own, nil
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

-- JSON in replies: kopt.reply_json, re-exported
for _, name in ipairs({ "extract_json", "strip_reasoning", "fences", "repair_json", "python_to_json" }) do
  M[name] = reply_json[name]
end

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

-- Adds a reply's usage to total. Counts sent as strings are read; a usage
-- without total_tokens counts prompt plus completion (the token cap reads
-- the total).
local function usage_add(total, u)
  if type(u) ~= "table" then return end
  local n = {}
  for _, k in ipairs({ "prompt_tokens", "completion_tokens", "total_tokens" }) do
    local v = tonumber(u[k])
    if v and v >= 0 and v < math.huge then n[k] = v end
  end
  if not n.total_tokens and (n.prompt_tokens or n.completion_tokens) then
    n.total_tokens = (n.prompt_tokens or 0) + (n.completion_tokens or 0)
  end
  for k, v in pairs(n) do total[k] = total[k] + v end
end

local function decode_content(req, reply, finish_reason)
  if finish_reason == "length" then
    reply.kind, reply.err = "length", "the reply was cut off at the token limit (finish_reason=length)"
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

-- A message's text: the content string, or the text parts of a content
-- list (some servers send [{type="thinking"}, {type="text", text=}]); nil
-- when it has none.
function M.content_text(content)
  if type(content) == "string" then return content end
  if type(content) ~= "table" then return nil end
  local parts = {}
  for _, part in ipairs(content) do
    if type(part) == "string" then
      parts[#parts + 1] = part
    elseif type(part) == "table" and type(part.text) == "string"
           and (part.type == nil or part.type == "text" or part.type == "output_text") then
      parts[#parts + 1] = part.text
    end
  end
  return #parts > 0 and table.concat(parts, "\n") or nil
end

-- What a server said about a failed request, in the shapes servers use:
-- {"error": {"message": ...}} (OpenAI, Anthropic), {"error": "..."}
-- (Ollama), {"message": ...} (vLLM), {"detail": ...} (FastAPI), else the
-- body's first line (an HTML page, a proxy's text). nil when empty.
function M.server_message(body)
  if type(body) ~= "string" or not body:find("%S") then return nil end
  local doc = json.decode(body)
  if type(doc) == "table" then
    local e = doc.error
    local msg = type(e) == "table" and e.message or e or doc.message or doc.detail
    if type(msg) == "string" and msg:find("%S") then return msg:sub(1, 300) end
    if type(msg) == "table" then return json.encode(msg):sub(1, 300) end
  end
  local line = body:gsub("<[^>]*>", " "):match("%S[^\n]*") or ""
  return (line:gsub("%s+", " "):gsub("%s$", ""):sub(1, 200))
end

-- A reply sent as server-sent events (a server that streams although the
-- request says stream=false): its chunks' deltas joined into one completion
-- { choices = { { message = { content = }, finish_reason = } }, usage = },
-- or nil when body is not such a stream.
function M.assemble_stream(body)
  -- (an event stream opens with data:, event: or id: fields, or with a
  -- comment line, ": keep-alive"; its other lines are skipped below)
  if type(body) ~= "string" then return nil end
  local first = body:match("^%s*([^\r\n]*)")
  if not (first:match("^data:") or first:match("^event:") or first:match("^id:") or first:match("^:")) then
    return nil
  end
  local parts, thoughts, finish, usage, seen, calls, slot_of = {}, {}, nil, nil, false, {}, {}
  for line in body:gmatch("[^\r\n]+") do
    local data = line:match("^data:%s*(.-)%s*$")
    if data and data ~= "[DONE]" then
      local chunk = json.decode(data)
      if type(chunk) ~= "table" then return nil end
      seen = true
      local c = type(chunk.choices) == "table" and chunk.choices[1]
      if type(c) == "table" then
        local d = type(c.delta) == "table" and c.delta or type(c.message) == "table" and c.message or {}
        local text = M.content_text(d.content)
        if text then parts[#parts + 1] = text end
        local thought = M.content_text(d.reasoning_content) or M.content_text(d.reasoning)
        if thought then thoughts[#thoughts + 1] = thought end
        -- tool calls come in pieces: by index, the name once, the
        -- arguments' JSON text in parts
        if type(d.tool_calls) == "table" then
          for j, tc in ipairs(d.tool_calls) do
            if type(tc) == "table" then
              local at = math.tointeger(tc.index) or (j - 1)
              local call = slot_of[at]
              -- (a new id at an index already taken is another call: some
              -- servers send every call at index 0)
              if call and type(tc.id) == "string" and tc.id ~= "" and call.id and call.id ~= tc.id then call = nil end
              if not call then
                call = { type = "function", ["function"] = { arguments = "" } }
                calls[#calls + 1] = call
                slot_of[at] = call
              end
              if type(tc.id) == "string" and tc.id ~= "" then call.id = tc.id end
              local fn = type(tc["function"]) == "table" and tc["function"] or {}
              if type(fn.name) == "string" then call["function"].name = (call["function"].name or "") .. fn.name end
              if type(fn.arguments) == "string" then
                call["function"].arguments = call["function"].arguments .. fn.arguments
              end
            end
          end
        end
        if type(c.finish_reason) == "string" then finish = c.finish_reason end
      end
      if type(chunk.usage) == "table" then usage = chunk.usage end
    end
  end
  if not seen then return nil end
  local tool_calls = {}
  for _, c in ipairs(calls) do
    if c["function"].name then tool_calls[#tool_calls + 1] = c end
  end
  return { choices = { { message = { content = table.concat(parts), reasoning_content = #thoughts > 0 and table.concat(thoughts) or nil,
                                     tool_calls = #tool_calls > 0 and tool_calls or nil },
                        finish_reason = finish } }, usage = usage }
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
  reply.usage = doc.usage
  usage_add(self.usage, doc.usage)
  local choice = type(doc.choices) == "table" and doc.choices[1]
  local msg = type(choice) == "table" and choice.message
  if type(msg) ~= "table" then
    -- (some gateways answer 200 with an error object)
    local said = M.server_message(resp.body)
    reply.kind, reply.err = "parse", "the response has no choices[1].message" ..
                            (said and ("; the server said: " .. said) or "")
    return reply
  end
  if type(msg.refusal) == "string" and msg.refusal:find("%S") then
    reply.kind, reply.err = "refusal", "the model refused: " .. msg.refusal
    return reply
  end
  reply.content = M.content_text(msg.content)
  -- (kept in the transcript: a reply cut off is cut off again on replay)
  reply.finish_reason = type(choice.finish_reason) == "string" and choice.finish_reason or nil
  local reasoning = M.content_text(msg.reasoning_content) or M.content_text(msg.reasoning)
  if reasoning and reasoning:find("%S") then reply.reasoning = reasoning end
  if req.tools and type(msg.tool_calls) == "table" and #msg.tool_calls > 0 then
    reply.ok, reply.tool_calls = true, M.tool_calls_of(msg.tool_calls)
    return reply
  end
  return decode_content(req, reply, choice.finish_reason)
end

-- A reply's tool calls in one shape: { id=, type="function", ["function"] =
-- {name=, arguments=<JSON text>} }; a call without an id gets one, arguments
-- sent as an object are encoded, a call without a name keeps name "".
function M.tool_calls_of(list)
  local out = {}
  for i, c in ipairs(list) do
    local f = type(c) == "table" and type(c["function"]) == "table" and c["function"] or {}
    local args = f.arguments
    if type(args) == "table" then args = json.encode(args) end
    out[i] = { id = type(c) == "table" and type(c.id) == "string" and c.id or ("call_" .. i), type = "function",
               ["function"] = { name = type(f.name) == "string" and f.name or "",
                                arguments = type(args) == "string" and args or "" } }
  end
  return out
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


-- OpenAI-style durations: "12ms", "1s", "6m0s", "1h2m3.5s". Seconds or nil.
function M.parse_duration(s)
  if type(s) ~= "string" or s == "" then return nil end
  local total, rest = 0, s
  local units = { h = 3600, m = 60, s = 1, ms = 0.001 }
  while rest ~= "" do
    local num, unit, tail = rest:match("^([%d.]+)(ms)(.*)$")
    if not num then num, unit, tail = rest:match("^([%d.]+)([hms])(.*)$") end
    if not num or not tonumber(num) then return nil end
    total = total + tonumber(num) * units[unit]
    rest = tail
  end
  return total
end

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

function Client:pace()
  if self.paused_until then
    local wait = self.paused_until - sys.now()
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
  local reply
  if not rec then
    reply = { kind = "replay", err = string.format("the transcript has no reply #%d for '%s'", n, tag) }
  elseif type(rec.tool_calls) == "table" then
    reply = { ok = true, tool_calls = M.tool_calls_of(rec.tool_calls), content = rec.content, status = rec.status,
              attempts = 0, elapsed_s = 0, usage = rec.usage }
    usage_add(self.usage, rec.usage)
  elseif rec.content == nil then
    reply = { kind = rec.error_kind or "replay", err = rec.err or "recorded failure", status = rec.status,
              tools_rejected = rec.tools_rejected }
  else
    reply = decode_content(req, { content = rec.content, status = rec.status, attempts = 0,
                                       elapsed_s = 0 }, rec.finish_reason)
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
-- stderr and in its summary (Client.off). A resumed run replays the same
-- failures, so it turns the LLM off at the same point.
M.DEAD_BATCHES = 3
local FATAL_STATUS = { [401] = "the key was refused", [403] = "the key may not use it" }

function Client:watch(out)
  if self.off then return end
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
      self.off = string.format("%s (%s)", r.err, FATAL_STATUS[r.status])
      break
    end
    if not (r.kind == "transport" or (r.kind == "http" and (r.status == 404 or r.status == 408 or r.status == 429 or
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
  io.stderr:write(string.format("kopt: LLM at %s: %s; the LLM is off for the rest of the run (the experts use " ..
                                "their heuristics)\n", self.cfg.base_url or "the transcript", self:redact(self.off)))
end

function Client:chat_many(reqs, opts)
  if #reqs == 0 then return {} end
  opts = opts or {}
  if self.off then
    local out = {}
    for i = 1, #reqs do out[i] = { kind = "off", err = "the LLM is off: " .. self.off } end
    return out
  end
  self.usage.requests = self.usage.requests + #reqs
  local out, todo = {}, {}
  for i, req in ipairs(reqs) do
    out[i] = self.replay and self:replay_one(req) or nil
    if out[i] == nil then todo[#todo + 1] = i end
  end
  if #todo > 0 and not self.url then
    for _, i in ipairs(todo) do out[i] = { kind = "replay", err = "no endpoint to go on from the transcript" } end
    todo = {}
  end
  local started = sys.now()
  while #todo > 0 do
    if opts.deadline_s and sys.now() - started >= opts.deadline_s then
      for _, i in ipairs(todo) do
        out[i] = { kind = "transport", err = string.format("the batch's deadline (%g s) passed", opts.deadline_s) }
      end
      break
    end
    self:pace()
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
      for _, i in ipairs(todo) do out[i] = { kind = "transport", err = err } end
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
                 content = reply.content, finish_reason = reply.finish_reason, tool_calls = reply.tool_calls,
                 tools_rejected = reply.tools_rejected, usage = reply.usage, ok = reply.ok or false,
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
    local u = self:tag_usage(reqs[i].tag)
    u.requests = u.requests + 1
    usage_add(u, r.usage)
    if not r.ok then
      self.usage.failures = self.usage.failures + 1
      u.failures = u.failures + 1
    end
  end
  self:watch(out)
  return out
end

-- The run's record of the client's use: ctx.llm_usage (results.json) and
-- the summary's "LLM:" line (ctx.summary_lines; one such line, replaced),
-- with the tokens of each tag in `tags` when given, and why the LLM went off.
function M.record_usage(ctx, client, tags)
  local u = client.usage
  local per = {}
  for _, tag in ipairs(tags or {}) do
    local t = client.by_tag[tag]
    if t then per[#per + 1] = string.format("%s %d", tag, t.total_tokens) end
  end
  ctx.llm_usage = { requests = u.requests, failures = u.failures, prompt_tokens = u.prompt_tokens,
                    completion_tokens = u.completion_tokens, total_tokens = u.total_tokens, experts = {},
                    off = client.off }
  for tag, t in pairs(client.by_tag) do ctx.llm_usage.experts[tag] = t end
  local unusable = u.unusable or 0
  ctx.llm_usage.unusable = unusable > 0 and unusable or nil
  local line = string.format("  LLM: %d requests, %d failed%s, %d tokens (%d prompt, %d completion)%s%s",
                             u.requests, u.failures,
                             unusable > 0 and string.format(", %d answered without proposals", unusable) or "",
                             u.total_tokens, u.prompt_tokens, u.completion_tokens,
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
