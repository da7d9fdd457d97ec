-- Tools for LLM experts: a registry of Lua functions the model may call
-- through the chat-completions `tools` interface (function calling), and the
-- bounded loop that answers its calls.
--
--   local tools = require("kopt.tools")
--   tools.register("occupancy", { type = "object", properties = {} },
--                  function(args, env) return "62.5 % ..." end, "what it tells the model")
--
-- A handler gets the decoded arguments (checked against the schema) and the
-- question's environment `env` (kopt.tools.builtin: the strategy's ctx, the
-- spec, the state asked about, its source, caches); it returns the answer as
-- a string or a table (sent as JSON), or nil and a message (sent as
-- "error: ..."). A handler that raises is answered the same way: a tool never
-- stops a search. `--opt tools=FILE.lua` loads a user's file that calls
-- register (or returns a list of {name=, schema=, fn=, description=}).
--
-- The loop (M.converse): every request of a batch goes out with the tool
-- definitions; a reply with tool_calls gets its answers as `role: "tool"`
-- messages and the conversation goes out again, all pending ones in one
-- parallel batch, for at most `rounds` rounds; then the tools are offered
-- with tool_choice "none", and a model that still calls them has failed
-- (kind "tools"). Servers without tool support are detected three ways and
-- the client drops tools for the rest of its life, falling back to the
-- single-shot prompt with the overview inlined (req.inline()):
--   - an HTTP 400/422 whose body mentions tools (kopt.llm marks the reply
--     tools_rejected); the request is sent again without tools;
--   - a reply whose text is a tool call (a server that does not parse the
--     model's calls: {"name": "overview", "arguments": {}} or <tool_call>);
--     the request is sent again without tools;
--   - IGNORED_BATCHES batches in a row in which no reply called any tool
--     while the client never saw a call (a server that drops `tools`); those
--     answers are kept, and later questions get the overview inlined.
-- Every call and its answer go to the transcript (kind "tool").
local json = require("kopt.json")
local llm = require("kopt.llm")
local sys = require("kopt.sys")

local M = {}

M.ANSWER_CAP = 8000       -- characters of one tool answer sent back
M.CALLS_PER_ROUND = 8     -- calls answered per reply; more get an error
M.IGNORED_BATCHES = 2
M.DEFAULT_ROUNDS = 4

local registry, order = {}, {}

-- Adds (or replaces) a tool. schema: the JSON schema of the arguments (an
-- object; default: no arguments). Raises on misuse.
function M.register(name, schema, fn, description)
  if type(name) ~= "string" or not name:match("^[%a_][%w_%-]*$") or #name > 64 then
    error("kopt.tools.register: a tool name is letters, digits, '_' or '-' (at most 64), got " .. tostring(name), 2)
  end
  if type(fn) ~= "function" then error("kopt.tools.register: " .. name .. ": the handler must be a function", 2) end
  schema = schema or { type = "object", properties = {} }
  if type(schema) ~= "table" then error("kopt.tools.register: " .. name .. ": the schema must be a table", 2) end
  if not registry[name] then order[#order + 1] = name end
  registry[name] = { name = name, schema = schema, fn = fn, description = description or name }
end

function M.get(name) return registry[name] end

-- Registered names, in registration order.
function M.names()
  local out = {}
  for i, n in ipairs(order) do out[i] = n end
  return out
end

-- Loads a user's tool file. Returns the names it added, or nil and why.
function M.load_file(path)
  local chunk, err = loadfile(path, "t")
  if not chunk then return nil, "tools file " .. tostring(err) end
  local before = #order
  local ok, ret = pcall(chunk)
  if not ok then return nil, string.format("tools file %s failed: %s", path, tostring(ret)) end
  if type(ret) == "table" then
    for _, t in ipairs(ret) do
      if type(t) ~= "table" then return nil, "tools file " .. path .. ": the list holds a non-table" end
      local rok, rerr = pcall(M.register, t.name, t.schema, t.fn, t.description)
      if not rok then return nil, "tools file " .. path .. ": " .. tostring(rerr) end
    end
  end
  local added = {}
  for i = before + 1, #order do added[#added + 1] = order[i] end
  return added
end

-- The definitions of some tools (default: all) for a request's `tools`.
function M.definitions(names)
  local out = {}
  for _, n in ipairs(names or order) do
    local t = registry[n]
    if t then
      out[#out + 1] = { type = "function",
                        ["function"] = { name = t.name, description = t.description, parameters = t.schema } }
    end
  end
  return out
end

local function cap(text)
  if #text > M.ANSWER_CAP then return text:sub(1, M.ANSWER_CAP) .. "\n[answer cut at " .. M.ANSWER_CAP .. " characters]" end
  return text
end

-- Calls one tool: name, its arguments as JSON text (or a table), env.
-- Returns the answer text and true, or "error: ..." and false. Never raises.
function M.call(name, arguments, env, allowed)
  local t = registry[name]
  if not t or (allowed and not allowed[name]) then
    local names = {}
    for _, n in ipairs(order) do if not allowed or allowed[n] then names[#names + 1] = n end end
    return string.format("error: unknown tool '%s'; the tools are %s", tostring(name), table.concat(names, ", ")), false
  end
  local args = arguments
  if type(args) ~= "table" then
    local text = tostring(args or "")
    if not text:match("%S") then text = "{}" end
    local derr
    args, derr = json.decode(text)
    if type(args) ~= "table" then
      return string.format("error: the arguments of %s are not a JSON object (%s): %s", name,
                           derr or ("got " .. type(args)), text:sub(1, 200)), false
    end
  end
  local ok, verr = llm.validate(args, t.schema)
  if not ok then return string.format("error: %s: bad arguments: %s", name, verr), false end
  local pok, res, why = pcall(t.fn, args, env)
  if not pok then return string.format("error: %s failed: %s", name, tostring(res):match("^[^\n]*")), false end
  if res == nil then return string.format("error: %s: %s", name, tostring(why or "no answer")), false end
  if type(res) == "table" then res = json.encode(res) end
  return cap(tostring(res)), true
end

-- A reply whose text is a tool call the server did not parse.
local function text_tool_call(reply)
  local c = reply.content
  -- (Hermes/Qwen tags, Llama's function tag, and gpt-oss's harmony format:
  -- "<|channel|>commentary to=functions.overview ... <|call|>")
  if type(c) == "string" and (c:find("<tool_call>", 1, true) or c:find("<|tool_call", 1, true)
                              or c:find("<function=[%w_]+>") or c:find("to=functions%.[%w_]+")
                              or c:find("<|call|>", 1, true)) then
    return true
  end
  local v = reply.value
  if type(v) == "table" and #v > 0 then v = v[1] end
  if type(v) ~= "table" or v.proposals ~= nil then return false end
  if type(v.tool_calls) == "table" then return true end
  local name = type(v.name) == "string" and v.name:gsub("^functions%.", "") or nil
  return name ~= nil and registry[name] ~= nil and (v.arguments ~= nil or v.parameters ~= nil)
end
M.text_tool_call = text_tool_call

local function copy(list)
  local out = {}
  for i, m in ipairs(list) do out[i] = m end
  return out
end

-- Asks a batch of questions with tools. reqs: kopt.llm requests, each with
-- env (handed to the handlers) and inline (a function returning the
-- single-shot messages with the overview inlined; default: the messages).
-- opts: rounds (tool rounds per request), names (the tools offered; default
-- all), on_tool(req, call, answer, ok) (a trace line), note(msg), and
-- chat_many's own options (deadline_s bounds the whole loop: each round gets
-- what is left of it, and once it is spent the next request is the last,
-- with tool_choice "none"). Returns replies in order, as chat_many does, each
-- with `messages` (the first turn as sent: for a repair turn) and `tool_calls_made`.
function M.converse(client, reqs, opts)
  opts = opts or {}
  local rounds = math.max(0, math.floor(tonumber(opts.rounds) or M.DEFAULT_ROUNDS))
  local function note(msg)
    client:log({ kind = "note", msg = msg })
    if opts.note then opts.note(msg) end
  end
  local function single(i)
    local r = reqs[i]
    local msgs = r.inline and r.inline() or r.messages
    return { tag = r.tag, messages = msgs, schema = r.schema, temperature = r.temperature, max_tokens = r.max_tokens }
  end
  local out = {}
  if rounds == 0 or client.tools_off then
    local plain = {}
    for i = 1, #reqs do plain[i] = single(i) end
    local replies = client:chat_many(plain, opts)
    for i, r in ipairs(replies) do
      r.messages, r.tool_calls_made = plain[i].messages, 0
      out[i] = r
    end
    return out
  end
  local allowed = {}
  local names = opts.names or order
  for _, n in ipairs(names) do allowed[n] = true end
  local defs = M.definitions(names)
  local st = {}
  for i, r in ipairs(reqs) do
    st[i] = { msgs = copy(r.messages), used = 0, calls = 0, tools = true, first = r.messages }
  end
  -- (a reply that calls tools under tool_choice "none" fails with this:
  -- kopt.llm marks it kind "tools")
  local spent = string.format("the model still called tools after %d round%s", rounds, rounds == 1 and "" or "s")
  local first_batch = true
  local t0, deadline = sys.now(), tonumber(opts.deadline_s)
  local round_opts = {}
  for k, v in pairs(opts) do round_opts[k] = v end
  while true do
    local left = deadline and deadline - (sys.now() - t0)
    if left then
      round_opts.deadline_s = math.max(1, left)
      if left <= 0 then for _, s in ipairs(st) do s.used = math.max(s.used, rounds) end end
    end
    local active, batch = {}, {}
    for i = 1, #reqs do
      if out[i] == nil then
        local s, r = st[i], reqs[i]
        active[#active + 1] = i
        local q = { tag = r.tag, messages = s.msgs, schema = r.schema, temperature = r.temperature,
                    max_tokens = r.max_tokens }
        if s.tools then
          q.tools = defs
          q.tool_choice = s.used >= rounds and "none" or "auto"
          q.tools_spent = spent
        end
        batch[#batch + 1] = q
      end
    end
    if #batch == 0 then break end
    local replies = client:chat_many(batch, round_opts)
    local called_now, answered_now = false, false
    for j, i in ipairs(active) do
      local s, r, req = st[i], replies[j], reqs[i]
      answered_now = answered_now or r.ok == true
      local function fall_back(why)
        if not client.tools_off then
          client.tools_off = why
          note("tools off for this run: " .. why .. "; the overview goes into the prompt")
        end
        local sq = single(i)
        s.tools, s.msgs, s.first = false, sq.messages, sq.messages
      end
      if s.tools and r.tool_calls then
        -- (calls past the limit too: the server parses them)
        called_now = true
        client.tools_seen = true
      end
      if s.tools and r.tools_rejected then
        fall_back("the server rejected tools (" .. tostring(r.err) .. ")")
      elseif s.tools and r.ok and r.tool_calls then
        s.used = s.used + 1
        s.msgs[#s.msgs + 1] = { role = "assistant", content = r.content or json.null, tool_calls = r.tool_calls }
        for k, call in ipairs(r.tool_calls) do
          local name, args = call["function"].name, call["function"].arguments
          local answer, ok
          if k > M.CALLS_PER_ROUND then
            answer, ok = string.format("error: at most %d tool calls per turn", M.CALLS_PER_ROUND), false
          else
            answer, ok = M.call(name, args, req.env, allowed)
          end
          s.calls = s.calls + 1
          client:log({ kind = "tool", tag = req.tag, call_id = call.id, name = name, arguments = args,
                       answer = answer, ok = ok })
          if opts.on_tool then opts.on_tool(req, call, answer, ok) end
          s.msgs[#s.msgs + 1] = { role = "tool", tool_call_id = call.id, content = answer }
        end
      elseif s.tools and text_tool_call(r) then
        fall_back("the server returned a tool call as text (it does not parse tool calls)")
      else
        r.messages, r.tool_calls_made = s.first, s.calls
        out[i] = r
      end
    end
    -- (a batch the server failed, an outage or a 400, says nothing about tools)
    if first_batch and answered_now and not called_now and not client.tools_seen and not client.tools_off then
      client.tools_ignored = (client.tools_ignored or 0) + 1
      if client.tools_ignored >= M.IGNORED_BATCHES then
        client.tools_off = string.format("no tool was called in %d batches (the server seems to ignore tools)",
                                         client.tools_ignored)
        note("tools off for this run: " .. client.tools_off .. "; the overview goes into the prompt")
      end
    end
    first_batch = false
  end
  return out
end

return M
