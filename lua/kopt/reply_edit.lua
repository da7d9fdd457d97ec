-- The kernel edit a model's proposal carries, in the shapes models write
-- (kopt.experts reads proposals with it): a unified diff or a whole source in
-- "patch", "diff", "edit", "source" or "kernel", search/replace pairs under
-- several names, lists of either; "None", "none needed", "N/A (knob change
-- only)" and the like are no edit.
--
--   reply_edit.edit_of(proposal) -> { kind=, text=, blocks= } | nil
local M = {}

local function str(v) return type(v) == "string" and v:find("%S") and v or nil end

-- Text a model writes in an edit field to say there is no edit.
local NO_EDIT_START = { "^no%s", "^no%-", "^none", "^not needed", "^not applicable", "^not required", "^unchanged",
                        "^nothing", "^n/a", "^na%s", "^knob", "^only knob", "^keep", "^same" }
local function says_no_edit(text)
  -- (brackets, quotes and trailing punctuation around the words do not count:
  -- "(none)", "<none>", "N/A (knob change only)")
  -- (nor an empty fence, or comment marks: "// no code change")
  local t = text:lower():gsub("^%s*```%w*", ""):gsub("```%s*$", "")
  t = t:gsub("^[%s%(%[<\"'`]+", ""):gsub("^//+", ""):gsub("^/%*", ""):gsub("%*/%s*$", "")
  t = t:gsub("^[%s%(%[<\"'`]+", ""):gsub("[%s%.!%)%]>\"'`]+$", "")
  if t == "" or t == "none" or t == "null" or t == "nil" or t == "n/a" or t == "na" or t == "-" or t == "no"
     or t == "\226\128\148" or t == "\226\128\147" then  -- (an em or en dash)
    return true
  end
  if #t >= 80 or t:find("\n") then return false end
  for _, pat in ipairs(NO_EDIT_START) do
    if t:find(pat) then return true end
  end
  return false
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

-- The edit a proposal carries, or nil: { kind=, text=, blocks= }. An edit
-- field that is an object or a list holds search/replace pairs or a
-- {diff=} / {patch=} / {source=} text; "None", "no changes" and the like
-- are no edit.
local function edit_of(p)
  local function text_of(v)
    local t = str(v)
    if t and not says_no_edit(t) then return t end
  end
  local text = text_of(p.patch) or text_of(p.diff) or (type(p.edit) == "string" and text_of(p.edit)) or nil
  if text then return { text = text } end
  local src = text_of(p.source) or text_of(p.kernel) or text_of(p.kernel_source)
  if src then return { kind = "source", text = src } end
  local blocks = {}
  local b1 = pair_of(p)
  if b1 then blocks[1] = b1 end
  for _, key in ipairs({ "edits", "edit", "patch", "diff" }) do
    local v = p[key]
    if type(v) == "table" then
      local list = #v > 0 and v or { v }
      for _, b in ipairs(list) do
        local pair = pair_of(b)
        if pair then
          blocks[#blocks + 1] = pair
        elseif type(b) == "table" then
          local t = text_of(b.diff) or text_of(b.patch) or text_of(b.text)
          if t then return { text = t } end
          local s = text_of(b.source)
          if s then return { kind = "source", text = s } end
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
    end
  end
  if #blocks > 0 then return { kind = "search_replace", blocks = blocks } end
end
M.edit_of = edit_of

return M
