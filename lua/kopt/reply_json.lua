-- JSON in a model's reply (kopt.llm re-exports these): the value a reply
-- holds, read in time linear in its size after any reasoning block is set
-- aside; near-JSON and Python literals repaired where the intent is
-- unambiguous.
--
--   reply_json.extract_json(text [, accept]) -> value | nil, why
--   reply_json.strip_reasoning(text), fences(text), repair_json(s), python_to_json(s)
--   reply_json.ends_inside_json(text) -> true when the reply is cut off inside its JSON
local json = require("kopt.json")

local M = {}

-- Replies are read in time linear in their size: one scan finds the fenced
-- blocks and the balanced {...} / [...] spans (a bracket stack, strings
-- skipped; first with a raw newline ending a string, as JSON forbids it, so
-- a stray quote in prose spoils one line; then, when that finds nothing,
-- with strings that span lines), and each span is decoded at most once. A
-- reply of nothing but nested brackets is rejected after that one scan.

-- Decode attempts on balanced spans per reply, the last ones kept (answers
-- come last): the spans do not overlap, so decoding them all stays linear,
-- and the cap only bounds the calls.
M.MAX_SPANS = 1024

-- Removes trailing commas and comments outside strings (one pass). Returns
-- the repaired text, or nil when there was nothing to repair.
local VALID_ESCAPE = { [34] = true, [92] = true, [47] = true, [98] = true, [102] = true, [110] = true, [114] = true,
                       [116] = true }
function M.repair_json(s)
  local out, n, i, len, changed = {}, 0, 1, #s, false
  local in_str, esc = false, false
  local seg = 1
  local function flush(upto)
    if upto >= seg then n = n + 1 out[n] = s:sub(seg, upto) end
  end
  while i <= len do
    local c = s:byte(i)
    if in_str then
      if esc then esc = false
      elseif c == 92 then
        -- an escape JSON does not have: \' is a quote (C's habit), any other
        -- (\0, \x41, \d in a regex) a backslash written once
        local d = s:byte(i + 1)
        if d == 39 then
          flush(i - 1)
          seg, changed = i + 1, true
        elseif d and not (VALID_ESCAPE[d] or (d == 117 and s:find("^%x%x%x%x", i + 2))) then
          flush(i)
          n = n + 1
          out[n] = "\\"
          seg, changed = i + 1, true
        else
          esc = true
        end
      elseif c == 34 then in_str = false end
      i = i + 1
    elseif c == 34 then in_str = true i = i + 1
    elseif c == 47 and s:byte(i + 1) == 47 then          -- // comment
      flush(i - 1)
      local e = s:find("\n", i, true) or len + 1
      i, seg, changed = e, e, true
    elseif c == 47 and s:byte(i + 1) == 42 then          -- /* comment */
      flush(i - 1)
      local _, e = s:find("*/", i + 2, true)
      e = e or len
      i, seg, changed = e + 1, e + 1, true
    elseif c == 44 then                                   -- , followed by } or ]
      local j = s:find("[^%s]", i + 1)
      local d = j and s:byte(j)
      if d == 125 or d == 93 then
        flush(i - 1)
        seg, changed = i + 1, true
      end
      i = i + 1
    else
      i = i + 1
    end
  end
  if not changed then return nil end
  flush(len)
  return table.concat(out)
end

-- A Python literal as a model may print it (a dict's repr: single-quoted
-- strings, None, True, False) -> JSON text, or nil when the text has none of
-- those. Strings keep their content: a double quote inside a single-quoted
-- string is escaped, \' becomes '.
function M.python_to_json(s)
  if #s > 65536 then return nil end  -- (a scan per character: replies, not documents)
  if not (s:find("'", 1, true) or s:find("%f[%w_]None%f[^%w_]") or s:find("%f[%w_]True%f[^%w_]")
          or s:find("%f[%w_]False%f[^%w_]")) then
    return nil
  end
  local out, i, n = {}, 1, #s
  local WORDS = { None = "null", True = "true", False = "false" }
  while i <= n do
    local c = s:sub(i, i)
    if c == '"' then
      local j = i + 1
      while j <= n do
        local d = s:sub(j, j)
        if d == "\\" then j = j + 2 elseif d == '"' then break else j = j + 1 end
      end
      out[#out + 1] = s:sub(i, j)
      i = j + 1
    elseif c == "'" then
      local buf, j = { '"' }, i + 1
      while j <= n do
        local d = s:sub(j, j)
        if d == "\\" and s:sub(j + 1, j + 1) == "'" then buf[#buf + 1] = "'" j = j + 2
        elseif d == "\\" then buf[#buf + 1] = s:sub(j, j + 1) j = j + 2
        elseif d == '"' then buf[#buf + 1] = '\\"' j = j + 1
        elseif d == "'" then break
        else buf[#buf + 1] = d j = j + 1 end
      end
      buf[#buf + 1] = '"'
      out[#out + 1] = table.concat(buf)
      i = j + 1
    else
      local w = s:match("^[%a_][%w_]*", i)
      if w then
        out[#out + 1] = WORDS[w] or w
        i = i + #w
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
  end
  return table.concat(out)
end

-- JSON text -> table, trying the repaired text when the plain one fails
-- (near-JSON, then a Python literal).
local function decode_table(s)
  local v = json.decode(s)
  if type(v) == "table" then return v end
  local fixed = M.repair_json(s)
  if fixed then
    v = json.decode(fixed)
    if type(v) == "table" then return v end
  end
  local py = M.python_to_json(fixed or s)
  if py then
    v = json.decode(py)
    if type(v) == "table" then return v end
    local both = M.repair_json(py)
    v = both and json.decode(both)
    if type(v) == "table" then return v end
  end
end

-- The fenced blocks of a reply, in order (``` with an optional language),
-- and where each begins.
local function fences(text)
  local out, at, pos = {}, {}, 1
  while true do
    local a, b = text:find("```[%w_%-+]*[ \t]*\r?\n", pos)
    if not a then break end
    local c, d = text:find("```", b + 1, true)
    if not c then break end
    out[#out + 1], at[#out + 1] = text:sub(b + 1, c - 1), a
    pos = d + 1
  end
  return out, at
end
M.fences = fences

-- The maximal balanced spans of a text (not inside another balanced span),
-- in order: one scan with a bracket stack. A span is recorded when its
-- bracket closes, at any depth, so an opener that never closes (prose with a
-- stray "[") does not hide the object after it; recording a span drops the
-- ones inside it, so the list stays short and the scan linear. A closing
-- bracket that does not match empties the stack. newline_ends_string: a raw
-- newline ends a string and empties the stack (a stray quote in prose then
-- spoils one line, not the rest of the reply); off, a string may span lines
-- (a multi-line patch written without \n escapes, as local models do).
local function balanced_spans(text, newline_ends_string)
  local spans, ns, stack, top = {}, 0, {}, 0
  local in_str = false
  local find, byte = string.find, string.byte
  local str_stop = newline_ends_string and '["\\\n]' or '["\\]'
  local i = 1
  while true do
    if in_str then
      local j = find(text, str_stop, i)
      if not j then break end
      local c = byte(text, j)
      if c == 92 then i = j + 2
      elseif c == 34 then in_str, i = false, j + 1
      else in_str, top, i = false, 0, j + 1 end       -- a raw newline: not a JSON string
    else
      local j = find(text, '[%[%]{}"]', i)
      if not j then break end
      local c = byte(text, j)
      if c == 34 then
        if top > 0 then in_str = true end
      elseif c == 123 or c == 91 then
        top = top + 1
        stack[top] = j
      else
        local want = c == 125 and 123 or 91
        if top > 0 and byte(text, stack[top]) == want then
          local open = stack[top]
          top = top - 1
          while ns > 0 and spans[ns][1] > open do spans[ns] = nil ns = ns - 1 end
          ns = ns + 1
          spans[ns] = { open, j }
        else
          top = 0
        end
      end
      i = j + 1
    end
  end
  return spans, stack, top
end

-- Whether a reply ends inside a JSON object or array that is never closed
-- (a reply cut off mid-answer): an opener still open at the end that
-- starts like JSON ('{' then a key or '}', '[' then a value), not a stray
-- bracket in prose. The balanced objects inside such a value are
-- fragments of an answer, not one.
local JSON_START = { [123] = '^{%s*["}]', [91] = '^%[%s*[%[{"%d%-tfn%]]' }
function M.ends_inside_json(text)
  if type(text) ~= "string" then return false end
  local answer = M.strip_reasoning(text)
  local _, stack, top = balanced_spans(answer, false)
  for k = 1, top do
    local pattern = JSON_START[answer:byte(stack[k])]
    if pattern and answer:find(pattern, stack[k]) then return true end
  end
  return false
end

-- The answer part of a reply that thinks aloud first: the text after the
-- last closing reasoning tag (<think>, <thinking>, <reasoning>; servers
-- often drop the opening one) or after the final channel's header of the
-- harmony format. A draft answer inside the reasoning is not the answer.
local REASONING_ENDS = { "</think>", "</thinking>", "</reasoning>", "<|channel|>final<|message|>" }
function M.strip_reasoning(text)
  local cut
  for _, tag in ipairs(REASONING_ENDS) do
    local pos, init = nil, 1
    while true do
      local _, e = text:find(tag, init, true)
      if not e then break end
      pos, init = e, e + 1
    end
    if pos and (not cut or pos > cut) then cut = pos end
  end
  if not cut then return text end
  local rest = text:sub(cut + 1)
  return rest:find("%S") and rest or text
end

-- The JSON value in a model's reply, after any reasoning block
-- (strip_reasoning): the whole text, else a fenced block or a bare object
-- (with accept: the two kinds read together in the order they come), else a maximal
-- balanced span that decodes to a table (objects before arrays; spans whose
-- strings may span lines only when none decodes otherwise), each also tried
-- with near-JSON repaired. With accept (value -> true, or a rank, when it is
-- an answer: the request's schema), the last of the highest-ranked accepted
-- candidates of the first kind that has one wins, since a model that
-- corrects itself ("no, final: {...}") puts the answer last, while a
-- fragment after it (a recap) ranks lower; else the first that decodes.
-- Linear in the reply's size. Returns value or nil, why.
local extract_from
function M.extract_json(text, accept, gather)
  if type(text) ~= "string" then return nil, "the reply has no text" end
  local answer = M.strip_reasoning(text)
  local v, why = extract_from(answer, accept, gather)
  -- (an answer only inside the reasoning, then a closing sentence: the
  -- reasoning's answer, the only one there is)
  if v == nil and answer ~= text then v, why = extract_from(text, accept, gather) end
  return v, why
end

function extract_from(text, accept, gather)
  local first
  local function consider(list)
    local chosen, chosen_rank, peers
    for _, v in ipairs(list) do
      first = first or v
      if not accept then return v end
      local rank = accept(v)
      rank = rank == true and 1 or tonumber(rank)
      if rank and rank > 0 and (not chosen_rank or rank >= chosen_rank) then
        if rank ~= chosen_rank then peers = {} end
        chosen, chosen_rank = v, rank
        peers[#peers + 1] = v
      end
    end
    -- (several answers of the best rank, one proposal per object: gather
    -- may join them, where the last alone would drop the others)
    if gather and peers and #peers > 1 then return gather(peers, chosen_rank) or chosen end
    return chosen
  end
  local v = decode_table(text)
  if v then return v end
  -- fenced blocks and bare objects together, in the order they come: a
  -- fenced draft the reply then corrects in prose is not its answer
  local bodies, starts = fences(text)
  local placed = {}
  for i, body in ipairs(bodies) do
    local fv = decode_table(body)
    if fv then placed[#placed + 1] = { starts[i], fv } end
  end
  if not accept and #placed > 0 then return placed[1][2] end
  if #placed > 0 then
    local objects = {}
    for _, sp in ipairs(balanced_spans(text, true)) do
      if text:byte(sp[1]) == 123 then objects[#objects + 1] = sp end
    end
    for k = math.max(1, #objects - M.MAX_SPANS + 1), #objects do
      local ov = decode_table(text:sub(objects[k][1], objects[k][2]))
      if ov then placed[#placed + 1] = { objects[k][1], ov } end
    end
    table.sort(placed, function(a, b) return a[1] < b[1] end)
    local ordered = {}
    for i, p in ipairs(placed) do ordered[i] = p[2] end
    v = consider(ordered)
    if v then return v end
  end
  for _, newline_ends_string in ipairs({ true, false }) do
    local spans = balanced_spans(text, newline_ends_string)
    for pass = 1, 2 do
      local mine, decoded = {}, {}
      for _, sp in ipairs(spans) do
        if (pass == 1) == (text:byte(sp[1]) == 123) then mine[#mine + 1] = sp end
      end
      for k = math.max(1, #mine - M.MAX_SPANS + 1), #mine do
        decoded[#decoded + 1] = decode_table(text:sub(mine[k][1], mine[k][2]))
      end
      v = consider(decoded)
      if v then return v end
    end
  end
  if first then return first end
  return nil, "no JSON object found in the reply"
end

return M
