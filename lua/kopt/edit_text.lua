-- The text of an edit as models write it, before it is applied
-- (kopt.patch): its fenced blocks and the prose around them, the whole
-- replacement source a reply means (not a signature quoted after it, nor
-- prose around it), and the elisions ("// ... rest unchanged") that make a
-- source not whole.
--
--   edit_text.fenced_blocks(text)      -> { {body=, info=, open=}, ... }
--   edit_text.outside_fences(text)     -> the lines outside them
--   edit_text.normalize(text)          -> LF line ends, the fences' bodies
--   edit_text.replacement_source(text, entry, current) -> source
--   edit_text.elision(source)          -> the first elided line, or nil
local entry_mod = require("kopt.entry")

local M = {}

local function split_lines(text)
  local lines = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do lines[#lines + 1] = line end
  return lines, text:sub(-1) == "\n" or text == ""
end

-- (a no-break space, U+00A0, counts as white space: models paste it)
local function squash(s)
  return (s:gsub("\194\160", " "):gsub("^%s+", ""):gsub("%s+$", ""):gsub("%s+", " "))
end

-- The fenced blocks of a text, in order: ``` or ~~~ fences (three or more,
-- with any info string), at any indentation (a fence inside a list item);
-- each body loses the opening fence's indentation. A last fence left open
-- (a reply cut short) runs to the end. Returns { {body=, info=}, ... }.
function M.fenced_blocks(text)
  local blocks, cur = {}, nil
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
    if cur then
      local ind, mark = line:match("^([ \t]*)([`~]+)[ \t]*$")
      -- (a fence closed on the code's last line, "}```": no CUDA line ends
      -- in backticks)
      local code, tail = line:match("^(.-%S)(```+)[ \t]*$")
      if tail and cur.char == "`" and #tail >= cur.width and not code:find("`$") then
        if line:sub(1, #cur.indent) == cur.indent then code = code:sub(#cur.indent + 1) end
        cur.lines[#cur.lines + 1] = code
        blocks[#blocks + 1] = { body = table.concat(cur.lines, "\n") .. "\n", info = cur.info }
        cur = nil
      elseif mark and mark:sub(1, 1) == cur.char and #mark >= cur.width and #ind <= #cur.indent + 3 then
        blocks[#blocks + 1] = { body = table.concat(cur.lines, "\n") .. (#cur.lines > 0 and "\n" or ""), info = cur.info }
        cur = nil
      else
        if line:sub(1, #cur.indent) == cur.indent then line = line:sub(#cur.indent + 1) end
        cur.lines[#cur.lines + 1] = line
      end
    else
      local ind, mark, info = line:match("^([ \t]*)(```+)([^`]*)$")
      if not mark then ind, mark, info = line:match("^([ \t]*)(~~~+)(.*)$") end
      if mark then
        cur = { indent = ind, char = mark:sub(1, 1), width = #mark, info = info:match("^%s*(%S*)"), lines = {} }
      end
    end
  end
  if cur and #cur.lines > 0 then
    blocks[#blocks + 1] = { body = table.concat(cur.lines, "\n") .. "\n", info = cur.info, open = true }
  end
  return blocks
end

-- The lines of a text outside its fenced blocks (fence lines dropped).
function M.outside_fences(text)
  local out, inside, char, width = {}, false, nil, 0
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
    local mark = line:match("^[ \t]*(```+)") or line:match("^[ \t]*(~~~+)")
    if not inside and mark then
      inside, char, width = true, mark:sub(1, 1), #mark
    elseif inside then
      local close = line:match("^[ \t]*([`~]+)[ \t]*$")
      local tail = line:match("%S(```+)[ \t]*$")
      if (close and close:sub(1, 1) == char and #close >= width) or (tail and char == "`" and #tail >= width) then
        inside = false
      end
    else
      out[#out + 1] = line
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Line ends and fences: CRLF and lone CR become LF; a text with fenced
-- blocks is reduced to their bodies, joined in order (prose around them is
-- dropped; a diff or search/replace edit split over several fences is
-- whole again).
function M.normalize(text)
  text = text:gsub("\r\n", "\n"):gsub("\r", "\n")
  local blocks = M.fenced_blocks(text)
  if #blocks == 0 then return text end
  -- a diff written outside the fences, then a fenced "after the change, the
  -- line reads:": the diff
  local outside = M.outside_fences(text)
  if outside:find("^@@") or outside:find("\n@@") then
    local fenced_diff = false
    for _, b in ipairs(blocks) do
      if b.body:find("^@@") or b.body:find("\n@@") then fenced_diff = true end
    end
    if not fenced_diff then return outside end
  end
  -- a diff fence followed by the whole kernel "for reference": the diff
  local diffs, bodies = {}, {}
  for i, b in ipairs(blocks) do
    bodies[i] = b.body
    if b.info == "diff" or b.info == "patch" or b.body:find("^@@") or b.body:find("\n@@")
       or b.body:find("^%-%-%- ") then
      diffs[#diffs + 1] = b.body
    end
  end
  return table.concat(#diffs > 0 and diffs or bodies)
end

-- A line of prose around an unfenced source ("Updated kernel:", "Here it
-- is."): words ending in a colon or a full stop, no code punctuation (no C
-- line ends in '.', and none at a file's edge in ':').
local function prose_line(line)
  local t = line:gsub("^%s+", ""):gsub("%s+$", "")
  if t:find("[;{}#=]") or t:find("^/[/*]") or t:find("^%*") then return false end
  return t:find("[:%.!]$") ~= nil and t:find("%a%a") ~= nil
end

-- An unfenced source without the prose before and after it, and without
-- the indentation every line of it shares (a source indented as a block).
local function unfenced_source(text)
  local lines = split_lines(text)
  local first, last = 1, #lines
  while first <= last and (not lines[first]:find("%S") or prose_line(lines[first])) do first = first + 1 end
  while last >= first and (not lines[last]:find("%S") or prose_line(lines[last])) do last = last - 1 end
  if first == 1 and last == #lines then return text end
  local indent
  for i = first, last do
    local ind = lines[i]:find("%S") and lines[i]:match("^[ \t]*")
    if ind and (not indent or #ind < #indent) then indent = ind end
  end
  local out = {}
  for i = first, last do out[#out + 1] = lines[i]:sub(#(indent or "") + 1) end
  return table.concat(out, "\n") .. "\n"
end

-- The kernel source an edit of kind "source" gives: with several fenced
-- blocks ("before: ... after: ..."), the last whole kernel that defines the
-- entry (its braces paired), else the last that defines it, else the last
-- block; unfenced, the text without the prose around it.
function M.replacement_source(text, entry, current)
  text = text:gsub("\r\n", "\n"):gsub("\r", "\n")
  local blocks = M.fenced_blocks(text)
  if #blocks == 0 then return unfenced_source(text) end
  -- (a block that is the current source again, "the original, for
  -- comparison", is not the edit; nor is a snippet quoted after the
  -- kernel, "the new signature:", whose braces do not pair up)
  local same = function(b) return current and squash(b) == squash(current) end
  for _, want_whole in ipairs({ true, false }) do
    for _, want_new in ipairs({ true, false }) do
      for i = #blocks, 1, -1 do
        local b = blocks[i].body
        if (not entry or entry_mod.defines(b, entry)) and (not want_new or not same(b))
           and (not want_whole or entry_mod.braces_balanced(b)) then
          return b
        end
      end
    end
  end
  return blocks[#blocks].body
end

-- Elisions a model writes in place of code it did not repeat: a line that
-- is only "..." (or a comment of only dots), a comment that begins with
-- "..." and says what it stands for ("// ... rest unchanged"), or a comment
-- that is only such a phrase ("// rest of the kernel unchanged", "// existing
-- code"). A replacement source with one its base lacks is not a whole
-- source: compiled, it loses the elided code. Comments that merely use the
-- words ("// the rest of y stays unchanged", "// ... then fold the sums")
-- are code's comments, not elisions.
local ELIDED_WORDS = { "unchanged", "same", "existing", "omitted", "as before", "rest of", "remaining", "original",
                       "elided", "not shown", "as is" }
local ELISION_PHRASES = { "^rest of [%a ]+ unchanged$", "^rest of [%a ]+ as before$", "^rest of [%a ]+ the same$",
                          "^rest of [%a ]+ omitted$", "^rest unchanged$", "^rest is unchanged$", "^rest as before$",
                          "^existing code$", "^existing code unchanged$", "^unchanged code$", "^code unchanged$",
                          "^unchanged$", "^same as before$", "^same as above$", "^as before$", "^omitted$",
                          "^code omitted$", "^remaining code unchanged$", "^remaining code$",
                          "^truncated$" }  -- (the marker of a prompt's cut source, kopt.experts)
local function elided_comment(raw)
  raw = raw:lower():gsub("\226\128\166", "...")
  local c = raw:gsub("^[%s%(%[]+", ""):gsub("[%s%)%]%.:;,!]+$", "")
  if c == "" or c:find("^%.%.%.[%.%s]*$") then return raw:find("...", 1, true) ~= nil end
  if c:find("^%.%.%.") then
    for _, w in ipairs(ELIDED_WORDS) do
      if c:find(w, 1, true) then return true end
    end
    return false
  end
  for _, pat in ipairs(ELISION_PHRASES) do
    if c:find(pat) then return true end
  end
  return false
end
function M.elision(source)
  for line in (source .. "\n"):gmatch("(.-)\n") do
    if line:find("^%s*%.%.%.%s*$") or line:find("^%s*\226\128\166%s*$") then return (line:gsub("^%s+", "")) end
    local comments = {}
    for c in line:gmatch("/%*(.-)%*/") do comments[#comments + 1] = c end
    comments[#comments + 1] = line:gsub("/%*.-%*/", " "):match("//+(.*)$")
    for _, c in ipairs(comments) do
      if c:find("%S") and elided_comment(c) then return (line:gsub("^%s+", ""):gsub("%s+$", "")) end
    end
  end
end

return M
