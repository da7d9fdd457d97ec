-- What OpenAI-compatible servers send, read in the shapes they send it:
-- token usage under its several names, a message's text, the message of
-- an error body, a reply streamed as server-sent events, tool calls and
-- rate-limit durations. kopt.llm re-exports these.
local json = require("kopt.json")

local M = {}

-- A reply's token counts { prompt_tokens=, completion_tokens=,
-- total_tokens= } under the names servers use: prompt_tokens and
-- completion_tokens (OpenAI), input_tokens and output_tokens (Anthropic,
-- the Responses API), or total_tokens alone. Counts sent as strings are
-- read; a usage without a total counts prompt plus completion (the token
-- cap reads the total). nil when it holds no count.
local USAGE_NAMES = { prompt_tokens = { "prompt_tokens", "input_tokens" },
                      completion_tokens = { "completion_tokens", "output_tokens" },
                      total_tokens = { "total_tokens" } }
function M.usage_counts(u)
  if type(u) ~= "table" then return nil end
  local n = {}
  for key, names in pairs(USAGE_NAMES) do
    for _, name in ipairs(names) do
      local v = tonumber(u[name])
      if v and v >= 0 and v < math.huge and not n[key] then n[key] = v end
    end
  end
  if not n.total_tokens and (n.prompt_tokens or n.completion_tokens) then
    n.total_tokens = (n.prompt_tokens or 0) + (n.completion_tokens or 0)
  end
  if not n.total_tokens then return nil end
  return n
end

-- Adds a reply's usage to total; an estimated one (estimate_usage) is
-- also counted in total.estimated_tokens, so the summary can say so.
function M.usage_add(total, u)
  local n = M.usage_counts(u)
  if not n then return end
  for k, v in pairs(n) do total[k] = (total[k] or 0) + v end
  if u.estimated then total.estimated_tokens = (total.estimated_tokens or 0) + n.total_tokens end
end

-- A usage for a reply whose server sent none, so that a token cap still
-- holds: about four bytes a token, of the request's messages and of the
-- reply's texts, marked estimated.
function M.estimate_usage(messages, ...)
  local prompt = math.ceil(#json.encode(messages or {}) / 4)
  local reply = 0
  for i = 1, select("#", ...) do
    local text = select(i, ...)
    if type(text) == "string" then reply = reply + #text end
  end
  local completion = math.ceil(reply / 4)
  return { prompt_tokens = prompt, completion_tokens = completion, total_tokens = prompt + completion,
           estimated = true }
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
-- or nil when body is not such a stream. A stream that ends with neither a
-- finish_reason nor [DONE] was cut off (cut_off = true); one that carries
-- an error event is { error = <the event's error> }, whatever came before.
function M.assemble_stream(body)
  -- (an event stream opens with data:, event: or id: fields, or with a
  -- comment line, ": keep-alive"; its other lines are skipped below)
  if type(body) ~= "string" then return nil end
  local first = body:match("^%s*([^\r\n]*)")
  if not (first:match("^data:") or first:match("^event:") or first:match("^id:") or first:match("^:")) then
    return nil
  end
  local parts, thoughts, finish, usage, seen, calls, slot_of = {}, {}, nil, nil, false, {}, {}
  local done = false
  for line in body:gmatch("[^\r\n]+") do
    local data = line:match("^data:%s*(.-)%s*$")
    if data == "[DONE]" then done = true end
    if data and data ~= "[DONE]" then
      local chunk = json.decode(data)
      if type(chunk) ~= "table" then return nil end
      seen = true
      if chunk.error ~= nil and chunk.error ~= json.null then return { error = chunk.error } end
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
                        finish_reason = finish } }, usage = usage, cut_off = not finish and not done or nil }
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

return M
