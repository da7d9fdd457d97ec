-- The kernel edit a model's proposal carries, in the shapes models write
-- (kopt.experts reads proposals with it): a unified diff or a whole source in
-- "patch", "diff", "edit", "source" or "kernel", search/replace pairs under
-- several names, lists of either; "None", "none needed", "N/A (knob change
-- only)" and the like are no edit.
--
--   reply_edit.edit_of(proposal) -> { kind=, text=, blocks= } | nil
--   reply_edit.unflatten(text), kernel_beside(reply_text), points_elsewhere(edit)
local edit_text = require("kopt.edit_text")

local M = {}

local function str(v) return type(v) == "string" and v:find("%S") and v or nil end

-- A text escaped twice by its writer: no line break, but "\n" written out
-- (two or more) where the breaks belong. Code needs lines, so such a text
-- gets them back (with "\t" and "\""); any other text is returned as it is.
function M.unflatten(t)
  if type(t) ~= "string" or t:find("\n", 1, true) then return t end
  local _, escapes = t:gsub("\\n", "")
  if escapes < 2 then return t end
  return (t:gsub("\\r\\n", "\n"):gsub("\\[nt\"]", { ["\\n"] = "\n", ["\\t"] = "\t", ['\\"'] = '"' }))
end

-- An edit field that refers to another proposal's edit ("Same patch as
-- proposal 1.", "the diff from proposal 2", "same as above"): the number of
-- the proposal it names, or "previous"; nil for any other text.
function M.refers_to(text)
  if type(text) ~= "string" or #text > 160 or text:find("\n") then return nil end
  local t = text:lower()
  if t:find("[{};=#@]") then return nil end
  -- ("None: knob-only, unlike proposal 1", "not the kernel from proposal 1")
  for _, w in ipairs({ "none", "unlike", "not ", "n't", "no code", "no change", "no edit", "instead of", "without" }) do
    if t:find(w, 1, true) then return nil end
  end
  local n = t:match("proposal%s*#?%s*(%d+)") or t:match("option%s*#?%s*(%d+)") or t:match("suggestion%s*#?%s*(%d+)")
  if n and (t:find("same", 1, true) or t:find("from", 1, true) or t:find("as in", 1, true)
            or t:find("keep", 1, true) or t:find("reuse", 1, true)) then
    return math.tointeger(tonumber(n))
  end
  if t:find("same[%s%a]*as%s+above") or t:find("same[%s%a]*as%s+the%s+previous") or t:find("previous proposal", 1, true)
     or t:find("same[%s%a]*as%s+before") then
    return "previous"
  end
end

-- Text a model writes in an edit field to say there is no edit.
local NO_EDIT_START = { "^no%s", "^no%-", "^none", "^not needed", "^not applicable", "^not required", "^unchanged",
                        "^nothing", "^n/a", "^na%s", "^knob", "^only knob", "^keep", "^same" }
local NO_EDIT_PHRASES = { "unchanged", "no change", "no_change", "no code", "no edit", "no patch", "no diff",
                          "no modification", "knob-only", "knob only", "knob change", "config-only", "config only",
                          "configuration change only", "configuration only", "as is", "as-is", "not need to change",
                          "n't need to change", "need not change", "not needed", "not required", "no need",
                          "identical to the current", "same kernel", "same as current", "same as the current",
                          "leave the kernel", "n.a" }
local function says_no_edit(text)
  -- (brackets, quotes and trailing punctuation around the words do not count:
  -- "(none)", "<none>", "N/A (knob change only)")
  -- (nor an empty fence, or comment marks: "// no code change")
  local t = text:lower():gsub("^%s*```%w*", ""):gsub("```%s*$", "")
  t = t:gsub("^[%s%(%[<\"'`]+", ""):gsub("^//+", ""):gsub("^/%*", ""):gsub("%*/%s*$", "")
  t = t:gsub("^[%s%(%[<\"'`]+", ""):gsub("[%s%.!;,%)%]>\"'`]+$", "")
  if t == "" or t == "none" or t == "null" or t == "nil" or t == "n/a" or t == "na" or t == "-" or t == "no" or t == "empty"
     or t == "\226\128\148" or t == "\226\128\147" then  -- (an em or en dash)
    return true
  end
  if #t >= 200 or t:find("\n") then return false end
  for _, pat in ipairs(NO_EDIT_START) do
    if #t < 80 and t:find(pat) then return true end
  end
  -- a sentence that says so anywhere ("The kernel remains unchanged.", "This
  -- is a knob-only change."), in a line with no code in it; a line that
  -- describes an edit ("Replace the loop with float4 loads") is no edit
  -- either, but a repair turn asks for the edit itself, so it stays one
  if t:find("[{}=#]") then return false end
  for _, phrase in ipairs(NO_EDIT_PHRASES) do
    if t:find(phrase, 1, true) then return true end
  end
  return t:find("^only .* changes?$") ~= nil
end

-- A search/replace pair in the shapes models use: {search, replace},
-- {find, replace}, {old_str, new_str}, {old, new}, {original, updated}.
local PAIR_KEYS = { { "search", "replace" }, { "find", "replace" }, { "old_str", "new_str" }, { "old", "new" },
                    { "original", "updated" }, { "before", "after" } }
local function pair_of(b)
  if type(b) ~= "table" then return nil end
  for _, k in ipairs(PAIR_KEYS) do
    if str(b[k[1]]) and type(b[k[2]]) == "string" then return { search = b[k[1]], replace = b[k[2]] } end
  end
end

-- The fields of an edit object that hold its text (a diff or a whole
-- source: kopt.patch detects which), and those that hold a whole source.
local TEXT_KEYS = { "diff", "patch", "text", "unified_diff", "content", "code", "hunk", "body" }
local SOURCE_KEYS = { "source", "new_source", "kernel", "kernel_source" }
-- The proposal fields that carry an edit, for the note when none is read.
local EDIT_FIELDS = { "patch", "diff", "edit", "edits", "source", "kernel", "kernel_source", "new_source" }
local SOURCE_FIELD = { source = true, kernel = true, kernel_source = true, new_source = true }

-- The keys of an edit object that carry its text (what decides whether an
-- object is an empty edit).
local CARRIES = {}
for _, k in ipairs(TEXT_KEYS) do CARRIES[k] = true end
for _, k in ipairs(SOURCE_KEYS) do CARRIES[k] = true end
for _, pk in ipairs(PAIR_KEYS) do CARRIES[pk[1]], CARRIES[pk[2]] = true, true end

-- The edit a proposal carries, or nil: { kind=, text=, blocks= }. An edit
-- field that is an object or a list holds search/replace pairs or a
-- {diff=} / {patch=} / {source=} text (a list of hunk objects: their texts
-- joined); "None", "no changes" and the like are no edit. A field that holds
-- none of these gives nil and why, so the proposal is not measured as a
-- plain knob change under its edit's name.
local function edit_of(p)
  local function text_of(v)
    local t = str(v)
    if t and not M.refers_to(t) and not says_no_edit(t) then return M.unflatten(t) end
  end
  -- (an edit field that names another proposal's edit: kopt.experts takes
  -- that edit, or refuses this proposal)
  for _, key in ipairs({ "patch", "diff", "edit", "source" }) do
    local ref = M.refers_to(p[key])
    if ref then return { ref = ref } end
  end
  local function object_text(b)
    for _, k in ipairs(TEXT_KEYS) do
      local t = text_of(b[k])
      if t then return { text = t } end
    end
    for _, k in ipairs(SOURCE_KEYS) do
      local t = text_of(b[k])
      if t then return { kind = "source", text = t } end
    end
  end
  -- (a one-line "kernel" or "source" names the kernel or its file; code
  -- has lines; a list of strings is the source's lines, an object holds
  -- it under a text key)
  local function code_of(v)
    if type(v) == "table" then
      local lines = {}
      for _, x in ipairs(v) do
        if type(x) ~= "string" then lines = nil break end
        lines[#lines + 1] = x
      end
      if lines and #lines > 0 and #lines == #v then v = table.concat(lines, "\n")
      elseif #v == 0 then
        local e = object_text(v)
        v = e and e.text
      end
    end
    local t = text_of(v)
    if t and (t:find("\n") or t:find("__global__", 1, true)) then return t end
  end
  local src = code_of(p.source) or code_of(p.kernel) or code_of(p.kernel_source)
  local text = text_of(p.patch) or text_of(p.diff) or text_of(p.edit) or text_of(p.edits)
  -- (a patch that only points at the proposal's own source field: "see
  -- source" beside the kernel)
  if text and not (src and M.points_elsewhere({ text = text })) then return { text = text } end
  if src then return { kind = "source", text = src } end
  -- (a field that holds nothing but empty text, nulls and "none" is no
  -- edit: {"diff": ""}, [{"search": "", "replace": ""}], {"type": "none"})
  -- (an object's text fields decide: {"type": "unified", "diff": ""} is no
  -- edit; an object with no such field is none when all it holds is empty)
  local function empty(v, depth)
    if v == nil or v == false or type(v) == "userdata" then return true end  -- (userdata: JSON null)
    if type(v) == "string" then return not v:find("%S") or says_no_edit(v) end
    if type(v) == "table" and depth < 4 then
      local carries = false
      for k in pairs(v) do if CARRIES[k] or math.type(k) == "integer" then carries = true end end
      for k, x in pairs(v) do
        if (not carries or CARRIES[k] or math.type(k) == "integer") and not empty(x, depth + 1) then return false end
      end
      return true
    end
    return false
  end
  local blocks = {}
  local b1 = pair_of(p)
  if b1 then blocks[1] = b1 end
  for _, key in ipairs({ "edits", "edit", "patch", "diff" }) do
    local v = p[key]
    if type(v) == "table" then
      local list = #v > 0 and v or { v }
      local texts, unread = {}, nil
      for i, b in ipairs(list) do
        local pair = pair_of(b)
        if pair then
          blocks[#blocks + 1] = pair
        elseif type(b) == "table" then
          local e = object_text(b)
          if e and e.kind == "source" then return e end
          if e then texts[#texts + 1] = e.text end
          if not e and not empty(b, 0) then unread = unread or i end
        elseif type(b) == "string" and text_of(b) then
          -- a patch given as a list of lines: its strings only (a list that
          -- mixes prose with pairs, or holds nulls, is not one patch)
          local lines = {}
          for _, x in ipairs(list) do
            if type(x) == "string" then lines[#lines + 1] = x end
          end
          if #lines == #list then return { text = table.concat(lines, "\n") } end
        end
      end
      -- an item kopt cannot read, or texts beside pairs: measuring the
      -- rest as the whole edit would measure another kernel than the reply's
      if unread or (#texts > 0 and #blocks > 0) then
        return nil, string.format("its \"%s\" field's item %d is not an edit kopt reads (a search/replace pair " ..
          "needs a non-empty search and a string replace; diffs and pairs are not mixed): no part of the edit " ..
          "was applied", key, unread or #blocks + 1)
      end
      if #texts > 0 and #blocks == 0 then
        -- (hunks given one per object: one diff)
        for i, t in ipairs(texts) do if t:sub(-1) ~= "\n" then texts[i] = t .. "\n" end end
        return { text = table.concat(texts) }
      end
    end
  end
  if #blocks > 0 then return { kind = "search_replace", blocks = blocks } end
  for _, key in ipairs(EDIT_FIELDS) do
    local v = p[key]
    -- ("kernel" or "source" may name the kernel: as a string, a list of
    -- names or an object {name=, file=}; one that holds code kopt could
    -- not read refuses the proposal)
    local function holds_code(x, depth)
      if type(x) == "string" then return x:find("\n") ~= nil or x:find("__global__", 1, true) ~= nil end
      if type(x) ~= "table" or depth > 3 then return false end
      for _, y in pairs(x) do if holds_code(y, depth + 1) then return true end end
      return false
    end
    if (not SOURCE_FIELD[key] or (type(v) == "table" and holds_code(v, 0))) and not empty(v, 0) then
      return nil, string.format("its \"%s\" field (%s) is not an edit kopt reads: a unified diff, " ..
        "search/replace pairs or a whole kernel source", key, type(v) == "table" and "an object or list" or type(v))
    end
  end
end
M.edit_of = edit_of

-- A kernel a reply wrote in a code block of its own, beside its JSON (the
-- one block that defines a __global__ function with a body), for an edit
-- field that only points at it ("see the full kernel below"); nil when
-- there is none, or more than one.
function M.kernel_beside(text)
  if type(text) ~= "string" then return nil end
  local found
  for _, b in ipairs(edit_text.fenced_blocks(text)) do
    -- (not the JSON's own fence, whose strings may hold a kernel)
    if b.info ~= "json" and not b.body:find("^%s*[{%[]") and b.body:find("__global__", 1, true)
       and b.body:find("{", 1, true) then
      if found then return nil end
      found = b.body
    end
  end
  return found
end

-- A diff or search/replace blocks a reply wrote in a code block of its own,
-- beside its JSON, for an edit field that points at it ("see the diff
-- below"): the one such block, or nil when there is none or more than one.
function M.diff_beside(text)
  if type(text) ~= "string" then return nil end
  local found
  for _, b in ipairs(edit_text.fenced_blocks(text)) do
    local body = b.body
    local is_diff = b.info == "diff" or b.info == "patch" or body:find("^@@") or body:find("\n@@")
      or body:find("^%-%-%- ") or body:find("<<<<<<< SEARCH", 1, true)
    if b.info ~= "json" and not body:find("^%s*[{%[]") and is_diff then
      if found then return nil end
      found = body
    end
  end
  return found
end

-- An edit text that is a pointer, not code: one line, no code in it.
function M.points_elsewhere(edit)
  local t = edit and edit.kind ~= "search_replace" and edit.text
  return type(t) == "string" and not t:find("\n") and #t < 200 and not t:find("[;{}=#@]")
    and not t:find("__global__", 1, true)
end

return M
