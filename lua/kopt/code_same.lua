-- Whether two kernel sources are the same code for the compiler (they differ
-- in comments and white space only), a digest of that code, and whether an
-- edit changes nothing but knobs' guarded defaults (kopt.patch re-exports
-- these; the experts deduplicate and refuse edits with them).
local device_only = require("kopt.device_only")
local sys = require("kopt.sys")

local M = {}

-- A source without its comments, blank lines and runs of white space (line
-- by line, runs of blanks as one).
local function code_norm(s)
  local out = {}
  for line in (device_only.strip_comments(s) .. "\n"):gmatch("(.-)\n") do
    local t = line:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
    if t ~= "" then out[#out + 1] = t end
  end
  return table.concat(out, "\n")
end

function M.same_code(a, b)
  return a == b or code_norm(a) == code_norm(b)
end

-- A digest of the code alone: equal where same_code is.
function M.code_digest(s) return sys.sha256(code_norm(s)):sub(1, 16) end

-- Whether an edit changes nothing but knobs' defaults inside their
-- "#ifndef K / #define K v / #endif" guards: kopt defines every knob ahead
-- of the source, so such a default is never compiled (the model meant the
-- knob's value). names: the knobs kopt defines.
function M.only_knob_defaults(base, new, names)
  local function strip(s)
    for _, k in ipairs(names or {}) do
      local e = k:gsub("%p", "%%%0")
      s = s:gsub("#[ \t]*ifndef[ \t]+" .. e .. "[ \t]*\n[ \t]*#[ \t]*define[ \t]+" .. e .. "[^\n]*\n[ \t]*#[ \t]*endif", "")
    end
    return s
  end
  return not M.same_code(base, new) and M.same_code(strip(base), strip(new))
end

return M
