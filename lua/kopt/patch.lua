-- Unified diffs for kernel sources: apply (with a clear failure naming the hunk
-- that does not match), make (a line diff between two texts), and the policy
-- that only kernel code may be changed.
--
--   patch.apply(source, diff)           -> new_source | nil, "hunk 2 (@@ -10,4 +10,5 @@): ..."
--   patch.diff(old, new [, name])       -> unified diff text ("" when equal)
--   patch.check_kernel_only(diff, opts) -> true | nil, reason
--
-- Model-written diffs are often sloppy about their @@ line counts and the
-- leading space of blank context lines; the applier trusts the hunk body, not
-- the counts, and finds the context near the stated line, then anywhere after
-- the previous hunk, then ignoring trailing whitespace.
local M = {}

local function split_lines(text)
  local lines = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do lines[#lines + 1] = line end
  return lines, text:sub(-1) == "\n" or text == ""
end

-- Parses a diff into hunks { header=, old_start=, old={lines}, new={lines} }.
function M.parse(diff)
  if type(diff) ~= "string" or diff == "" then return nil, "empty patch" end
  local hunks, cur = {}, nil
  local lines = split_lines(diff)
  for n, line in ipairs(lines) do
    local a = line:match("^@@ %-(%d+)")
    if a then
      cur = { header = line:match("^(@@.-@@)") or line, old_start = tonumber(a), old = {}, new = {}, line = n }
      hunks[#hunks + 1] = cur
    elseif cur then
      local c, rest = line:sub(1, 1), line:sub(2)
      if c == " " then
        cur.old[#cur.old + 1] = rest
        cur.new[#cur.new + 1] = rest
      elseif c == "-" and not line:match("^%-%-%- ") then
        cur.old[#cur.old + 1] = rest
      elseif c == "+" and not line:match("^%+%+%+ ") then
        cur.new[#cur.new + 1] = rest
      elseif line == "" then
        cur.old[#cur.old + 1] = ""
        cur.new[#cur.new + 1] = ""
      elseif c == "\\" then -- luacheck: ignore 542 ("\ No newline at end of file")
      elseif line:match("^%-%-%- ") or line:match("^diff ") or line:match("^index ") then
        cur = nil
      else
        return nil, string.format("patch line %d is not part of a hunk: %q", n, line:sub(1, 80))
      end
    end
  end
  if #hunks == 0 then return nil, "the patch has no @@ hunks" end
  -- Blank lines after the last change are usually the diff's trailing newline.
  for _, h in ipairs(hunks) do
    while #h.old > 0 and #h.new > 0 and h.old[#h.old] == "" and h.new[#h.new] == "" do
      h.old[#h.old], h.new[#h.new] = nil, nil
    end
  end
  return hunks
end

local function rtrim(s) return (s:gsub("%s+$", "")) end

local function matches_at(src, pos, old, loose)
  if pos < 1 or pos + #old - 1 > #src then return false end
  for i, l in ipairs(old) do
    local s = src[pos + i - 1]
    if loose then
      if rtrim(s) ~= rtrim(l) then return false end
    elseif s ~= l then
      return false
    end
  end
  return true
end

local function find_hunk(src, h, from, offset)
  local want = h.old_start + offset
  if #h.old == 0 then return math.max(from, math.min(want + 1, #src + 1)) end
  for _, loose in ipairs({ false, true }) do
    if want >= from and matches_at(src, want, h.old, loose) then return want end
    -- Nearest match after the previous hunk.
    local best, dist
    for pos = from, #src - #h.old + 1 do
      if matches_at(src, pos, h.old, loose) then
        local d = math.abs(pos - want)
        if not best or d < dist then best, dist = pos, d end
      end
    end
    if best then return best end
  end
end

-- The first old line of a hunk that appears nowhere in the source: what the
-- error message points at.
local function missing_line(src, h)
  local have = {}
  for _, l in ipairs(src) do have[rtrim(l)] = true end
  for _, l in ipairs(h.old) do
    if not have[rtrim(l)] then return l end
  end
end

function M.apply(source, diff)
  local hunks, err = M.parse(diff)
  if not hunks then return nil, err end
  local src, trailing_nl = split_lines(source)
  if source == "" then src = {} end
  local out, from, offset = {}, 1, 0
  for i, h in ipairs(hunks) do
    local pos = find_hunk(src, h, from, offset)
    if not pos then
      local miss = missing_line(src, h)
      return nil, string.format("hunk %d (%s) does not apply: %s", i, h.header,
                                miss and string.format("context line %q is not in the source", miss:sub(1, 100))
                                  or "its lines are in the source but not in this order")
    end
    for j = from, pos - 1 do out[#out + 1] = src[j] end
    for _, l in ipairs(h.new) do out[#out + 1] = l end
    offset = pos - h.old_start
    from = pos + #h.old
  end
  for j = from, #src do out[#out + 1] = src[j] end
  local text = table.concat(out, "\n")
  if trailing_nl and #out > 0 then text = text .. "\n" end
  return text
end

-- A unified diff from old to new (3 lines of context), by longest common
-- subsequence over lines. Fine for kernels (a few hundred lines).
function M.diff(old, new, name)
  if old == new then return "" end
  local a, b = split_lines(old), split_lines(new)
  local n, m = #a, #b
  -- lcs[i][j] = LCS length of a[i..n], b[j..m]
  local lcs = {}
  for i = n + 1, 1, -1 do
    lcs[i] = {}
    for j = m + 1, 1, -1 do
      if i > n or j > m then lcs[i][j] = 0
      elseif a[i] == b[j] then lcs[i][j] = lcs[i + 1][j + 1] + 1
      else
        local x, y = lcs[i + 1][j], lcs[i][j + 1]
        lcs[i][j] = x > y and x or y
      end
    end
  end
  local ops, i, j = {}, 1, 1   -- { kind=" "|"-"|"+", text, ai, bj }
  while i <= n or j <= m do
    if i <= n and j <= m and a[i] == b[j] then
      ops[#ops + 1] = { " ", a[i], i, j } i, j = i + 1, j + 1
    elseif j <= m and (i > n or lcs[i][j + 1] >= lcs[i + 1][j]) then
      ops[#ops + 1] = { "+", b[j], i, j } j = j + 1
    else
      ops[#ops + 1] = { "-", a[i], i, j } i = i + 1
    end
  end
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

-- Headers an edit may include: device-side CUDA headers only.
M.INCLUDE_ALLOW = {
  "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cuda_pipeline.h", "cuda_pipeline_primitives.h",
  "mma.h", "cooperative_groups.h", "cooperative_groups/reduce.h", "cooperative_groups/memcpy_async.h",
  "cuda/pipeline", "cuda/barrier", "cuda/std/cstdint", "cuda/std/limits", "cuda/std/type_traits",
  "cuda/annotated_ptr", "stdint.h", "cstdint",
}

-- Host-side or harness-evading constructs an edit may not add. Each entry:
-- Lua pattern, what it is.
M.FORBIDDEN = {
  { "%f[%w_]main%s*%(", "a main function" },
  { "%f[%w_]cuda[A-Z]%w*%s*%(", "a CUDA runtime API call" },
  { "%f[%w_]cu[A-Z]%w*%s*%(", "a CUDA driver API call" },
  { "<<<", "a kernel launch" },
  { "%f[%w_]__host__%f[^%w_]", "host code (__host__)" },
  { "%f[%w_]__managed__%f[^%w_]", "managed memory" },
  { "%f[%w_]malloc%s*%(", "dynamic allocation" },
  { "%f[%w_]free%s*%(", "dynamic allocation" },
  { "%f[%w_]std::thread", "host threads" },
  { "%f[%w_]f?open%s*%(", "file access" },
  { "%f[%w_]system%s*%(", "process control" },
  { "#%s*pragma%s+comment", "linker directives" },
}

-- Checks the added lines of a diff: includes from the allow-list only, none
-- of M.FORBIDDEN, no new global __device__ variables (state that survives
-- between runs), no redefinition of the tuning knobs. opts.knobs: names.
function M.check_kernel_only(diff, opts)
  opts = opts or {}
  local allow = {}
  for _, h in ipairs(opts.include_allow or M.INCLUDE_ALLOW) do allow[h] = true end
  local knobs = {}
  for _, k in ipairs(opts.knobs or {}) do knobs[k] = true end
  local n = 0
  for line in (diff .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if line:sub(1, 1) == "+" and not line:match("^%+%+%+ ") then
      local code = line:sub(2):gsub("//.*$", "")
      local inc = code:match("^%s*#%s*include%s*[<\"]([^>\"]+)[>\"]")
      if inc and not allow[inc] then
        return nil, string.format("line %d includes <%s>, which is not on the allow-list", n, inc)
      end
      for _, f in ipairs(M.FORBIDDEN) do
        if code:find(f[1]) then
          return nil, string.format("line %d adds %s: %q", n, f[2], code:sub(1, 80))
        end
      end
      if code:find("%f[%w_]__device__%f[^%w_]") and not code:find("%(") and code:find("[;=%[]") then
        return nil, string.format("line %d adds a global __device__ variable: %q", n, code:sub(1, 80))
      end
      local def = code:match("^%s*#%s*define%s+([%w_]+)") or code:match("^%s*#%s*undef%s+([%w_]+)")
      if def and knobs[def] then
        return nil, string.format("line %d redefines the tuning knob %s", n, def)
      end
    end
  end
  return true
end

return M
