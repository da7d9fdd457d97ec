-- Kernel edits as models write them: unified diffs, search/replace blocks and
-- whole replacement sources; apply (with a failure naming the first line that
-- could not be matched and why), make (a line diff between two texts), and the
-- policy that only kernel code may be changed.
--
--   patch.apply(source, diff)           -> new_source, skipped_files | nil, "hunk 2 (@@ -10,4 +10,5 @@): ..."
--   patch.apply_edit(source, edit, opts)-> new_source, kind, note | nil, why, kind
--   patch.detect(text)                  -> "diff" | "search_replace" | "source" | nil
--   patch.diff(old, new [, name])       -> unified diff text ("" when equal)
--   patch.check_kernel_only(diff, opts) -> true | nil, reason (kopt.device_only.check)
--
-- Model-written diffs are sloppy in known ways, and the applier forgives each:
-- wrong or missing @@ line numbers and counts (the hunk body is trusted, the
-- context is searched near the stated line, then anywhere after the previous
-- hunk), no @@ header at all, markdown fences around the diff, CRLF line ends,
-- context lines without their leading space, trailing whitespace and
-- re-indented lines (matched exactly, then ignoring trailing whitespace, then
-- ignoring all whitespace differences), and a last hunk that keeps or removes
-- blank lines after the end of the source (a prompt shows the source followed
-- by a blank line).
local device_only = require("kopt.device_only")
local edit_text = require("kopt.edit_text")
local entry_mod = require("kopt.entry")
local code_same = require("kopt.code_same")

local M = {}
local whole_file_diff  -- (below)

M.MAX_EDIT = 256 * 1024   -- bytes of one edit; more is refused, not scanned
M.fenced_blocks, M.outside_fences, M.normalize = edit_text.fenced_blocks, edit_text.outside_fences, edit_text.normalize
M.elision = edit_text.elision
local replacement_source = edit_text.replacement_source
local entry_name, signature_changed = entry_mod.name, entry_mod.signature_changed
local strip_comments = device_only.strip_comments
M.defines_entry, M.entry_signature = entry_mod.defines, entry_mod.signature

local function split_lines(text)
  local lines = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do lines[#lines + 1] = line end
  return lines, text:sub(-1) == "\n" or text == ""
end

local function rtrim(s) return (s:gsub("%s+$", "")) end

-- The lines of new that old does not have (as many times as new has them
-- more often), in new's order, one text.
local function added_lines(old, new)
  local have = {}
  for _, line in ipairs(split_lines(old)) do have[line] = (have[line] or 0) + 1 end
  local out = {}
  for _, line in ipairs(split_lines(new)) do
    if (have[line] or 0) > 0 then have[line] = have[line] - 1 else out[#out + 1] = line end
  end
  return table.concat(out, "\n")
end
-- (a no-break space, U+00A0, counts as white space: models paste it)
local function squash(s)
  return (s:gsub("\194\160", " "):gsub("^%s+", ""):gsub("%s+$", ""):gsub("%s+", " "))
end

local function is_header(line)
  return line:match("^%-%-%- ") or line:match("^%+%+%+ ") or line:match("^diff ") or line:match("^index ")
    or line:match("^new file mode") or line:match("^similarity index")
end

-- The old and new sides of a list of ops ({kind, old_line, new_line}), and
-- for each new line that is context, its index on the old side: a context
-- line is written back as the source has it, not as the diff quotes it
-- (which may differ in whitespace).
function M.sides(ops)
  local old, new, ctx = {}, {}, {}
  for _, op in ipairs(ops) do
    if op[1] ~= "+" then old[#old + 1] = op[2] end
    if op[1] ~= "-" then new[#new + 1] = op[3] end
    if op[1] == " " then ctx[#new] = #old end
  end
  return old, new, ctx
end

-- Parses a diff into hunks { header=, old_start=|nil, old={lines}, new={lines} }.
-- A diff without @@ lines is one hunk at an unknown place; a line of a hunk
-- with no +/-/space prefix is context that lost its leading space (at the
-- edges of a hunk, where it is more likely prose, it is dropped).
-- Whether the ops from `from` on read as prose, not changes: every +/- line
-- a sentence ("+ This doubles the value."), with no code marks in it.
local function prose_tail(ops, from)
  local any = false
  for q = from, #ops do
    local kind, text = ops[q][1], ops[q][1] == "-" and ops[q][2] or ops[q][3] or ops[q][2]
    if kind == "+" or kind == "-" then
      any = true
      if type(text) ~= "string" or text:find("[;{}=()#<>%[%]]") or not text:match("^%s*%a") then return false end
    end
  end
  return any
end

function M.parse(diff)
  if type(diff) ~= "string" or diff == "" then return nil, "empty patch" end
  diff = M.normalize(diff)
  local hunks, cur = {}, nil
  local lines = split_lines(diff)
  local has_at = diff:find("\n@@", 1, true) or diff:sub(1, 2) == "@@"
  local function new_hunk(header, start, n)
    cur = { header = header, old_start = start, old = {}, new = {}, kinds = {}, line = n }
    hunks[#hunks + 1] = cur
  end
  -- a diff of several files (a benchmark script, a new header, the kernel)
  -- edits the kernel: the hunks of one file are kept, the rest skipped. That
  -- file is the first CUDA source (.cu, .cuh, .h, ...) the diff changes and
  -- does not create, else the first it changes, else the first it names.
  local function file_of(line)
    local named = line:match("^%+%+%+ (%S+)")
    if named and named ~= "/dev/null" then return named:gsub("^[ab]/", ""):match("([^/]+)$") end
  end
  local first_file
  do
    local cuda, changed, any
    for n, line in ipairs(lines) do
      local named = file_of(line)
      if named then
        local created = (n > 1 and lines[n - 1]:match("^%-%-%- /dev/null") ~= nil)
          or (lines[n + 1] or ""):match("^@@%s*%-0,0%s") ~= nil
        any = any or named
        if not created then
          changed = changed or named
          local is_cuda = named:match("%.cuh?$") or named:match("%.hp?p?$") or named:match("%.inl$")
          if is_cuda then cuda = cuda or named end
        end
      end
    end
    first_file = cuda or changed or any
  end
  local skipping, skipped, skipped_set = nil, {}, {}
  for n, line in ipairs(lines) do
    local named = file_of(line)
    if named then
      skipping = named ~= first_file
      if skipping then
        cur = nil
        if not skipped_set[named] then skipped_set[named] = true skipped[#skipped + 1] = named end
      end
    end
    if skipping then -- luacheck: ignore 542 (another file's lines)
    elseif line:match("^@@") then
      local a = line:match("^@@%s*%-(%d+)")
      local b, d = line:match("^@@%s*%-%d+,(%d+)%s+%+%d+,(%d+)%s*@@")
      new_hunk(line:match("^(@@.-@@)") or line, a and tonumber(a), n)
      cur.want_old, cur.want_new = tonumber(b), tonumber(d)
    elseif is_header(line) and not (cur and line:match("^%-%-%- ") and not line:match("^%-%-%- [ab/]")
                                    and not line:match("^%-%-%- %S+%.%w+")) then
      cur = nil
    else
      if not cur and not has_at then new_hunk("(no @@ header)", nil, n) end
      if cur then
        local c, rest = line:sub(1, 1), line:sub(2)
        local k = #cur.kinds + 1
        if c == " " then
          cur.old[#cur.old + 1] = rest cur.new[#cur.new + 1] = rest cur.kinds[k] = " "
        elseif c == "-" then
          cur.old[#cur.old + 1] = rest cur.kinds[k] = "-"
        elseif c == "+" then
          cur.new[#cur.new + 1] = rest cur.kinds[k] = "+"
        elseif c == "\\" then -- luacheck: ignore 542 ("\ No newline at end of file")
        elseif line == "" then
          cur.old[#cur.old + 1] = "" cur.new[#cur.new + 1] = "" cur.kinds[k] = " "
        else
          cur.old[#cur.old + 1] = line cur.new[#cur.new + 1] = line cur.kinds[k] = "?"
        end
      end
    end
  end
  local out = {}
  for n, h in ipairs(hunks) do
    h.n = n
    -- Runs of unprefixed lines at the edges of a hunk are prose around the
    -- diff (or context it can do without): dropped.
    local first, last, changes = nil, nil, false
    for k, kind in ipairs(h.kinds) do
      if kind ~= "?" then first = first or k last = k end
      if kind == "+" or kind == "-" then changes = true end
    end
    if changes then
      local ops, oi, ni, prose_at = {}, 0, 0, nil
      local changed = false
      for k, kind in ipairs(h.kinds) do
        local o, w
        if kind ~= "+" then oi = oi + 1 o = h.old[oi] end
        if kind ~= "-" then ni = ni + 1 w = h.new[ni] end
        if not (kind == "?" and (k < first or k > last)) then
          -- (where a blank line is followed by an unprefixed one after a
          -- change: prose may begin there, "Notes:" and its bullets)
          if kind == "?" and changed and not prose_at and #ops > 0 and ops[#ops][1] == " " and ops[#ops][2] == "" then
            prose_at = #ops
          end
          if kind == "+" or kind == "-" then changed = true end
          ops[#ops + 1] = { kind == "?" and " " or kind, o, w }
        end
      end
      h.ops = ops
      h.old, h.new, h.ctx = M.sides(ops)
      -- the lines the header's counts cover, when the hunk runs on past
      -- them (prose bullets after the diff read as "-" lines): tried when
      -- the whole hunk does not apply
      if not (h.want_old and h.want_new) and prose_at then
        -- without counts: the lines before the blank line that prose follows
        local short = {}
        for q = 1, prose_at - 1 do short[q] = ops[q] end
        h.short = {}
        h.short.old, h.short.new, h.short.ctx = M.sides(short)
        h.short.prose = true
      elseif h.want_old and h.want_new then
        local no, nn = 0, 0
        for k, op in ipairs(ops) do
          if op[1] ~= "+" then no = no + 1 end
          if op[1] ~= "-" then nn = nn + 1 end
          if no == h.want_old and nn == h.want_new and k < #ops then
            local short = {}
            for q = 1, k do short[q] = ops[q] end
            h.short = {}
            h.short.old, h.short.new, h.short.ctx = M.sides(short)
            -- (what follows the counts after a blank line reads as prose:
            -- "+ This doubles ..."; straight on, as changes under counts
            -- written too small)
            local nxt = ops[k + 1]
            h.short.prose = nxt ~= nil and nxt[1] == " " and (nxt[2] or "") == "" and prose_tail(ops, k + 1)
            break
          end
        end
      end
      out[#out + 1] = h
    end
  end
  if #out == 0 then
    return nil, not has_at and "the patch has no @@ hunks and no +/- lines" or "the patch's hunks change nothing"
  end
  if #skipped > 0 then out.skipped_files = skipped end
  return out
end

-- Whether old[i] matches the source line at s (beyond the end of the source
-- only blank lines match: the blank line a prompt adds after the source).
local function line_eq(src, s, l, level)
  local x = src[s]
  if x == nil then return s == #src + 1 and l:find("^%s*$") ~= nil end
  if level == 1 then return x == l end
  if level == 2 then return rtrim(x) == rtrim(l) end
  return squash(x) == squash(l)
end

local function matches_at(src, pos, old, level)
  if pos < 1 or pos + #old - 1 > #src + 1 then return false end
  for i, l in ipairs(old) do
    if not line_eq(src, pos + i - 1, l, level) then return false end
  end
  return true
end

-- Where block `old` is in the source, from line `from` on: at line `want`
-- if it is there, else the match nearest to it; without a line number, the
-- only match (nil and the count when it matches several places: which one
-- the model meant is unknown). Exact lines first, then looser matching.
local function find_block(src, old, from, want)
  for level = 1, 3 do
    if want and want >= from and matches_at(src, want, old, level) then return want end
    local best, dist, count = nil, nil, 0
    for pos = from, #src - #old + 2 do
      if matches_at(src, pos, old, level) then
        count = count + 1
        local d = want and math.abs(pos - want) or pos - from
        if not best or d < dist then best, dist = pos, d end
      end
    end
    if count > 1 and not want then return nil, count end
    if best then return best end
  end
end

-- Why a block of lines is not in the source: the longest run of its first
-- lines that is, and the line after it. Returns a sentence.
function M.explain_miss(src, old, from, what)
  from = from or 1
  local best_k, best_pos = 0, nil
  for pos = from, #src do
    local k = 0
    while k < #old and line_eq(src, pos + k, old[k + 1], 3) do k = k + 1 end
    if k > best_k then best_k, best_pos = k, pos end
  end
  local function where(l)
    for i = 1, #src do if squash(src[i]) == squash(l) then return i end end
  end
  local miss = old[best_k + 1]
  if not miss then return string.format("its lines match only in an order the source does not have") end
  local shown = string.format("line %d of the %s, %q,", best_k + 1, what, rtrim(miss):sub(1, 100))
  if best_k == 0 then
    local at = where(miss)
    if at then
      return string.format("%s is at source line %d, before the previous hunk's end", shown, at)
    end
    return shown .. " is not in the source"
  end
  local after = best_pos + best_k - 1
  local at = where(miss)
  return string.format("%s should follow source line %d (%q) but the source has %q there%s", shown, after,
                       rtrim(src[after] or ""):sub(1, 60), rtrim(src[after + 1] or "(end of file)"):sub(1, 60),
                       at and string.format("; that line is at source line %d", at) or "; that line is not in the source")
end

local function join(out, trailing_nl)
  local text = table.concat(out, "\n")
  if trailing_nl and #out > 0 then text = text .. "\n" end
  return text
end

-- A hunk that does not match as a whole, applied change by change: each run
-- of +/- lines with as much of the context around it as matches (at least
-- two anchoring lines where the hunk has them). This recovers hunks glued
-- together without headers and hunks with a stale or invented context line.
-- Returns the lines to emit and the next source position, or nil.
-- (only the context nearest a change anchors it, GROUP_CONTEXT lines each
-- side: without a bound, a hunk of thousands of context lines costs that
-- many squared searches)
local GROUP_CONTEXT = 8
local function apply_groups(src, h, from)
  local ops = h.ops or {}
  local groups, k = {}, 1
  while k <= #ops do
    if ops[k][1] ~= " " then
      local g = { lead = {}, change = {}, trail = {} }
      local j = k - 1
      while j >= 1 and ops[j][1] == " " and k - j <= GROUP_CONTEXT do j = j - 1 end
      table.move(ops, j + 1, k - 1, 1, g.lead)
      while k <= #ops and ops[k][1] ~= " " do g.change[#g.change + 1] = ops[k] k = k + 1 end
      j = k
      while j <= #ops and ops[j][1] == " " and #g.trail < GROUP_CONTEXT do g.trail[#g.trail + 1] = ops[j] j = j + 1 end
      groups[#groups + 1] = g
    else
      k = k + 1
    end
  end
  if #groups < 1 then return nil end
  local emit = {}
  for _, g in ipairs(groups) do
    local removed = 0
    for _, op in ipairs(g.change) do if op[1] == "-" then removed = removed + 1 end end
    local need = math.min(2, #g.lead + #g.trail + removed)
    local found
    for total = #g.lead + #g.trail, 0, -1 do
      for a = math.min(#g.lead, total), math.max(0, total - #g.trail), -1 do
        local b = total - a
        if a + b + removed >= need then
          local sub = {}
          for i = #g.lead - a + 1, #g.lead do sub[#sub + 1] = g.lead[i] end
          for _, op in ipairs(g.change) do sub[#sub + 1] = op end
          for i = 1, b do sub[#sub + 1] = g.trail[i] end
          local old, new, ctx = M.sides(sub)
          local pos = #old > 0 and find_block(src, old, from, nil)
          if pos then found = { pos = pos, old = old, new = new, ctx = ctx } break end
        end
      end
      if found then break end
    end
    if not found then return nil end
    for j = from, found.pos - 1 do emit[#emit + 1] = src[j] end
    for j, l in ipairs(found.new) do
      local c = found.ctx[j]
      emit[#emit + 1] = c and src[found.pos + c - 1] or l
    end
    from = found.pos + #found.old
  end
  return emit, from
end

local apply_hunks

function M.apply(source, diff)
  if type(diff) == "string" and #diff > M.MAX_EDIT then
    return nil, string.format("the patch is larger than %d bytes", M.MAX_EDIT)
  end
  local hunks, err = M.parse(diff)
  if not hunks then return nil, err end
  -- hunks given out of order, each with its line number: applied in the
  -- source's order (the order is what the numbers say)
  local numbered, sorted = true, true
  for i, h in ipairs(hunks) do
    numbered = numbered and h.old_start ~= nil
    if i > 1 and numbered and h.old_start < hunks[i - 1].old_start then sorted = false end
  end
  if not (numbered and not sorted) then return apply_hunks(source, hunks) end
  table.sort(hunks, function(a, b) if a.old_start ~= b.old_start then return a.old_start < b.old_start end
                                    return a.n < b.n end)
  local text, a, b = apply_hunks(source, hunks)
  if text then return text, a, b end
  -- unless a number was wrong and the reply's order right: its hunks in
  -- that order, by their bodies alone
  local again = M.parse(diff)
  for _, h in ipairs(again) do h.old_start = nil end
  local t2, a2, b2 = apply_hunks(source, again)
  if t2 then return t2, a2, b2 end
  return text, a, b
end

function apply_hunks(source, hunks)
  local crlf = source:find("\r\n", 1, true) ~= nil
  if crlf then source = source:gsub("\r\n", "\n") end
  local src, trailing_nl = split_lines(source)
  if source == "" then src = {} end
  local out, from, offset = {}, 1, 0
  -- trail: how many lines the previous hunk ended with that it kept as they
  -- were (context): a hunk may begin on them again, as models write hunks
  -- whose contexts overlap
  local trail = 0
  for _, h in ipairs(hunks) do
    local pos, places
    if #h.old == 0 then
      pos = h.old_start and math.max(from, math.min(h.old_start + offset + 1, #src + 1)) or #src + 1
    else
      pos, places = find_block(src, h.old, from, h.old_start and (h.old_start + offset))
      local lead = 0
      while lead < #(h.ops or {}) and h.ops[lead + 1][1] == " " do lead = lead + 1 end
      for back = math.min(trail, lead), 1, -1 do
        if pos or places then break end
        local p = find_block(src, h.old, from - back, from - back)
        if p == from - back then
          -- (those lines are out already, as the previous hunk's context)
          for _ = 1, back do out[#out] = nil end
          from, pos = from - back, p
        end
      end
      if not pos and not places and h.short then
        -- the lines the header counts, without what follows them: first
        -- when prose follows them, else after the whole hunk change by
        -- change (the lines past the counts may be changes under counts
        -- written too small)
        local function counted()
          local p2, n2 = find_block(src, h.short.old, from, h.old_start and (h.old_start + offset))
          if p2 then h.old, h.new, h.ctx, pos = h.short.old, h.short.new, h.short.ctx, p2 end
          places = places or n2
          return p2 ~= nil
        end
        if not (h.short.prose and counted()) then
          local emit, next_from = apply_groups(src, h, from)
          if emit then
            h.grouped = { emit, next_from }
          elseif not h.short.prose then
            counted()
          end
        end
      end
    end
    if places then
      return nil, string.format("hunk %d (%s) matches %d places in the source; give its line numbers or more "
                                .. "context", h.n, h.header, places)
    end
    if h.grouped then
      for _, l in ipairs(h.grouped[1]) do out[#out + 1] = l end
      from, trail = h.grouped[2], 0
      h.grouped = nil
    elseif pos then
      for j = from, pos - 1 do out[#out + 1] = src[j] end
      for j, l in ipairs(h.new) do
        local c = h.ctx and h.ctx[j]
        out[#out + 1] = c and src[pos + c - 1] or l
      end
      if h.old_start then offset = pos - h.old_start end
      from = pos + #h.old
      trail = 0
      while trail < #(h.ops or {}) and h.ops[#h.ops - trail][1] == " " do trail = trail + 1 end
    else
      local emit, next_from = apply_groups(src, h, from)
      if not emit then
        return nil, string.format("hunk %d (%s) does not apply: %s", h.n, h.header,
                                  M.explain_miss(src, h.old, from, "hunk's old text"))
      end
      for _, l in ipairs(emit) do out[#out + 1] = l end
      from, trail = next_from, 0
    end
  end
  for j = from, #src do out[#out + 1] = src[j] end
  -- A last hunk that reached past the end: the source's own ending stays.
  while #out > 0 and out[#out] == "" and #src > 0 and src[#src] ~= "" do out[#out] = nil end
  local text = join(out, trailing_nl)
  if crlf then text = text:gsub("\n", "\r\n") end
  return text, hunks.skipped_files
end

---------------------------------------------------------------------------
-- Search/replace blocks:
--   <<<<<<< SEARCH
--   exact lines of the current source
--   =======
--   their replacement
--   >>>>>>> REPLACE

-- The blocks of a text: { {search=, replace=}, ... } or nil, why.
function M.parse_search_replace(text)
  text = M.normalize(text)
  local blocks, cur, part = {}, nil, nil
  for line in (text .. "\n"):gmatch("(.-)\n") do
    -- (the dialects: "<<<<<<< SEARCH" or "<<<<<<< ORIGINAL" ... ">>>>>>>
    -- REPLACE" or ">>>>>>> UPDATED", and "------- SEARCH" ... "+++++++ REPLACE")
    if (not cur and (line:match("^%s*<<<<<+%s*[%a_]*%s*$") or line:match("^%s*%-%-%-%-%-+%s*SEARCH%s*$")))
       or line:match("^%s*<<<<<+%s*SEARCH%s*$") then
      cur, part = { search = {}, replace = {} }, "search"
    elseif cur and part == "search" and line:match("^%s*=====+%s*$") then
      part = "replace"
    elseif cur and part == "replace" and (line:match("^%s*>>>>>+") or line:match("^%s*%+%+%+%+%++%s*REPLACE%s*$")) then
      blocks[#blocks + 1] = cur
      cur, part = nil, nil
    elseif cur then
      local t = cur[part]
      t[#t + 1] = line
    end
  end
  if cur then return nil, string.format("search/replace block %d has no >>>>>>> REPLACE end", #blocks + 1) end
  if #blocks == 0 then return nil, "no <<<<<<< SEARCH block" end
  return blocks
end

-- Applies blocks ({search=lines|string, replace=lines|string}) in order.
function M.apply_search_replace(source, blocks)
  local crlf = source:find("\r\n", 1, true) ~= nil
  if crlf then source = source:gsub("\r\n", "\n") end
  local text = source
  for i, b in ipairs(blocks) do
    local search = type(b.search) == "table" and table.concat(b.search, "\n") or tostring(b.search or "")
    local replace = type(b.replace) == "table" and table.concat(b.replace, "\n") or tostring(b.replace or "")
    search, replace = search:gsub("\r\n", "\n"), replace:gsub("\r\n", "\n")
    if not search:find("%S") then return nil, string.format("search/replace block %d: the SEARCH part is empty", i) end
    -- whole lines searched for, replaced by text without the line end: the
    -- line end stays (else the next source line joins the replacement's,
    -- behind its comment, say)
    if search:sub(-1) == "\n" and replace ~= "" and replace:sub(-1) ~= "\n" then replace = replace .. "\n" end
    local a, e = text:find(search, 1, true)
    local again = a and text:find(search, e + 1, true)
    if again then
      local lines, at = {}, 1
      while true do
        local x, y = text:find(search, at, true)
        if not x then break end
        local _, nl = text:sub(1, x - 1):gsub("\n", "")
        lines[#lines + 1] = tostring(nl + 1)
        at = y + 1
      end
      return nil, string.format("search/replace block %d: the SEARCH part matches %d places (source lines %s); " ..
                                "quote more lines around the one to change", i, #lines, table.concat(lines, ", "))
    end
    if a then
      text = text:sub(1, a - 1) .. replace .. text:sub(e + 1)
    else
      local src, trailing_nl = split_lines(text)
      local old = split_lines(search)
      local pos, count = find_block(src, old, 1, nil)
      if not pos and count then
        return nil, string.format("search/replace block %d: the SEARCH part matches %d places compared line by " ..
                                  "line; quote more lines around the one to change", i, count)
      end
      if not pos then
        return nil, string.format("search/replace block %d does not apply: %s", i,
                                  M.explain_miss(src, old, 1, "SEARCH part"))
      end
      local out = {}
      for j = 1, pos - 1 do out[#out + 1] = src[j] end
      if replace ~= "" then for _, l in ipairs(split_lines(replace)) do out[#out + 1] = l end end
      for j = pos + #old, #src do out[#out + 1] = src[j] end
      text = join(out, trailing_nl)
    end
  end
  if crlf then text = text:gsub("\n", "\r\n") end
  return text
end

-- The format of an edit text.
function M.detect(text)
  if type(text) ~= "string" or not text:find("%S") then return nil end
  local t = M.normalize(text)
  if (t:find("<<<<<<<", 1, true) and t:find("=======", 1, true) and t:find(">>>>>>>", 1, true))
     or t:find("^%s*<<<<<+%s*SEARCH%s*\n") or t:find("\n%s*<<<<<+%s*SEARCH%s*\n")
     or ((t:find("^%s*%-%-%-%-%-+%s*SEARCH%s*\n") or t:find("\n%s*%-%-%-%-%-+%s*SEARCH%s*\n"))
         and (t .. "\n"):find("\n%s*%+%+%+%+%++%s*REPLACE%s*\n")) then
    return "search_replace"
  end
  if t:find("^@@") or t:find("\n@@") or (t:find("^%-%-%- ") or t:find("\n%-%-%- ")) and t:find("\n%+%+%+ ") then
    return "diff"
  end
  -- Lines prefixed by +/- with some context, and no line a kernel would start with.
  local plus, minus, other, code = 0, 0, 0, 0
  for line in (t .. "\n"):gmatch("(.-)\n") do
    local c = line:sub(1, 1)
    if c == "+" then plus = plus + 1
    elseif c == "-" then minus = minus + 1
    elseif c == " " or line == "" then other = other + 1
    else code = code + 1 end
  end
  if plus + minus > 0 and code <= 2 then return "diff" end
  -- (context lines that lost their leading space read as code; a whole
  -- kernel defines a __global__ function, a fragment of changes does not)
  if plus + minus > 0 and code <= 4 * (plus + minus) + 2 and not t:find("__global__", 1, true) then return "diff" end
  return "source"
end

-- The new source of a diff that creates the file (one hunk, from
-- --- /dev/null or @@ -0,0, only added lines), or nil.
function whole_file_diff(text)
  local t = M.normalize(text)
  if not (t:find("^%-%-%- /dev/null") or t:find("\n%-%-%- /dev/null") or t:find("^@@ %-0,0 ") or t:find("\n@@ %-0,0 ")) then
    return nil
  end
  local hunks = M.parse(t)
  if not hunks or #hunks ~= 1 or #hunks[1].old > 0 then return nil end
  return table.concat(hunks[1].new, "\n") .. "\n"
end

-- An edit: a text in any of the formats (detected), or a table
-- {kind="diff"|"search_replace"|"source", text=, blocks=}. opts.entry: the
-- kernel's entry name, which a whole replacement source must define.
-- Returns new_source, kind or nil, why, kind.
function M.apply_edit(source, edit, opts)
  opts = opts or {}
  local kind, text, blocks
  if type(edit) == "table" then
    kind, text, blocks = edit.kind, edit.text, edit.blocks
  else
    text = edit
  end
  if text and #text > M.MAX_EDIT then
    return nil, string.format("the edit is larger than %d bytes", M.MAX_EDIT), kind or "edit"
  end
  -- (a "source" field that holds a diff or search/replace blocks is that)
  local detected = M.detect(text)
  if kind == "source" and detected and detected ~= "source" then kind = detected end
  kind = kind or detected
  if not kind then return nil, "the edit is empty", "edit" end
  if kind == "diff" and text then
    -- a diff that creates the file (--- /dev/null, @@ -0,0 +1,N @@) is the
    -- whole new source, not lines to put above the old one
    local whole = whole_file_diff(text)
    if whole then kind, text = "source", whole end
  end
  -- the entry check holds an edit to the form its base has: a base that
  -- defines `__global__ ... entry(` must keep doing so
  local strict = opts.entry and M.defines_entry(source, opts.entry)
  local new, err, skipped
  if kind == "diff" then
    new, err = M.apply(source, text)
    if new then skipped, err = err, nil end
  elseif kind == "search_replace" then
    if not blocks then blocks, err = M.parse_search_replace(text) end
    if blocks then new, err = M.apply_search_replace(source, blocks) end
  else
    new = replacement_source(text, opts.entry, source)
    if not new:find("__global__", 1, true) then
      return nil, "the edit is not a diff, search/replace blocks or a kernel source (no __global__ function)", kind
    end
    local defines = true
    if strict then
      defines = M.defines_entry(new, opts.entry)
    elseif opts.entry then
      defines = new:find("%f[%w_]" .. entry_name(opts.entry):gsub("%p", "%%%0") .. "%f[^%w_]") ~= nil
    end
    if not defines then
      return nil, string.format("the replacement source does not define the entry kernel %s", opts.entry), kind
    end
    local elided = M.elision(new)
    if elided and not M.elision(source) then
      return nil, string.format("the replacement source leaves code out (%q): send the whole kernel or a diff",
                                elided), kind
    end
    if not entry_mod.braces_balanced(new) and entry_mod.braces_balanced(source) then
      return nil, "the replacement source's braces do not pair up (a part of a kernel, or a reply cut short): " ..
                  "send the whole kernel or a diff", kind
    end
    if source:sub(-1) == "\n" and new:sub(-1) ~= "\n" then new = new .. "\n" end
  end
  if not new then return nil, err, kind end
  if new:find("\0", 1, true) then return nil, "the edit holds a NUL byte, where the compiler would stop reading", kind end
  if kind ~= "source" then
    -- a diff or a search/replace that puts "// ... rest unchanged" where
    -- code was deletes that code, as a whole source with it would
    local elided = M.elision(added_lines(source, new))
    if elided then
      return nil, string.format("the edit replaces code with an elision (%q): write out the lines it stands for",
                                elided), kind
    end
  end
  if strict and kind ~= "source" and not M.defines_entry(new, opts.entry) then
    return nil, string.format("the edit removes or renames the entry kernel %s", opts.entry), kind
  end
  local changed = strict and signature_changed(source, new, opts.entry)
  if changed then return nil, changed, kind end
  local note = skipped and string.format("the diff also changes %s: left out (kopt edits the kernel's file only)",
                                         table.concat(skipped, ", "))
  return new, kind, note
end

-- A unified diff from old to new (3 lines of context), by longest common
-- subsequence over lines. Fine for kernels (a few hundred lines).
function M.diff(old, new, name)
  if old == new then return "" end
  local a, b = split_lines(old), split_lines(new)
  local n, m = #a, #b
  -- Common prefix and suffix first: the LCS table covers only the middle,
  -- and a middle too large for it becomes one replacement.
  local p = 0
  while p < n and p < m and a[p + 1] == b[p + 1] do p = p + 1 end
  local sfx = 0
  while sfx < n - p and sfx < m - p and a[n - sfx] == b[m - sfx] do sfx = sfx + 1 end
  local ops = {}   -- { kind=" "|"-"|"+", text, ai, bj }
  for x = 1, p do ops[#ops + 1] = { " ", a[x], x, x } end
  local n1, m1 = n - sfx, m - sfx
  if (n1 - p) * (m1 - p) > 4000000 then
    for x = p + 1, n1 do ops[#ops + 1] = { "-", a[x], x, p + 1 } end
    for y = p + 1, m1 do ops[#ops + 1] = { "+", b[y], n1 + 1, y } end
  else
    -- lcs[i][j] = LCS length of a[i..n1], b[j..m1]
    local lcs = {}
    for i = n1 + 1, p + 1, -1 do
      local row, below = {}, lcs[i + 1]
      lcs[i] = row
      for j = m1 + 1, p + 1, -1 do
        if i > n1 or j > m1 then row[j] = 0
        elseif a[i] == b[j] then row[j] = below[j + 1] + 1
        else
          local x, y = below[j], row[j + 1]
          row[j] = x > y and x or y
        end
      end
    end
    local i, j = p + 1, p + 1
    while i <= n1 or j <= m1 do
      if i <= n1 and j <= m1 and a[i] == b[j] then
        ops[#ops + 1] = { " ", a[i], i, j } i, j = i + 1, j + 1
      elseif j <= m1 and (i > n1 or lcs[i][j + 1] >= lcs[i + 1][j]) then
        ops[#ops + 1] = { "+", b[j], i, j } j = j + 1
      else
        ops[#ops + 1] = { "-", a[i], i, j } i = i + 1
      end
    end
  end
  for x = 1, sfx do ops[#ops + 1] = { " ", a[n1 + x], n1 + x, m1 + x } end
  local CTX = 3
  local out = { "--- a/" .. (name or "kernel.cu"), "+++ b/" .. (name or "kernel.cu") }
  local k = 1
  while k <= #ops do
    if ops[k][1] == " " then k = k + 1
    else
      local s = math.max(1, k - CTX)
      local e = k
      -- extend while changes are within 2*CTX of each other
      local last_change = k
      while e <= #ops do
        if ops[e][1] ~= " " then last_change = e end
        if e - last_change > 2 * CTX then break end
        e = e + 1
      end
      e = math.min(#ops, last_change + CTX)
      local a_start, b_start, a_len, b_len = ops[s][3], ops[s][4], 0, 0
      local body = {}
      for q = s, e do
        local op = ops[q]
        body[#body + 1] = op[1] .. op[2]
        if op[1] ~= "+" then a_len = a_len + 1 end
        if op[1] ~= "-" then b_len = b_len + 1 end
      end
      out[#out + 1] = string.format("@@ -%d,%d +%d,%d @@", a_len == 0 and a_start - 1 or a_start, a_len,
                                    b_len == 0 and b_start - 1 or b_start, b_len)
      for _, l in ipairs(body) do out[#out + 1] = l end
      k = e + 1
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- The policy that an edit changes device code only (kopt.device_only).
M.INCLUDE_ALLOW, M.FORBIDDEN = device_only.INCLUDE_ALLOW, device_only.FORBIDDEN
M.check_kernel_only = device_only.check

-- Whether two sources are the same code, and the rest of kopt.code_same.
M.same_code, M.code_digest, M.only_knob_defaults = code_same.same_code, code_same.code_digest,
  code_same.only_knob_defaults
M.strip_comments = strip_comments

return M
