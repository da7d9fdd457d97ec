-- What the worker found when it ran the reference (reply field `trivial`,
-- core/worker/numerics_trivial.h): outputs a kernel could write without
-- computing the problem that still pass both checks. Such a spec cannot
-- tell that kernel from an honest one, so the run says so at its start and
-- in its summary (docs/TRUST.md, "Specs a trivial kernel passes").
local M = {}

local WHAT = {
  zeros = function() return "all zeros" end,
  constant = function(arg) return string.format("the value %s everywhere", arg) end,
  copy = function(arg) return string.format("a copy of input '%s'", arg) end,
}

-- The reply's words ("y:zeros y:copy:x y:round:f16") as lines: per output
-- in the order they first appear, a warning (trivial kernels pass) and a
-- note (a narrower float type passes); {} when none.
-- spec (optional): an output whose init is a copy of the input named is
-- an in/out buffer, which an exact copy leaves stale (caught); a copy moved
-- by a rounding step is not, so the words say that.
function M.describe(words, spec)
  local order, trivial, narrow = {}, {}, {}
  local init_of = {}
  -- (a loaded spec's arguments, init = { dist = "copy", from = NAME }; or
  -- a spec's JSON, init = "copy:NAME")
  local list = spec and (spec.arg_specs or spec.args)
  for _, a in ipairs(type(list) == "table" and list or {}) do
    local init = a.init
    if type(init) == "string" then
      init_of[a.name] = init:match("^copy:(.+)$")
    elseif type(init) == "table" and init.dist == "copy" then
      init_of[a.name] = init.from
    end
  end
  for word in tostring(words or ""):gmatch("%S+") do
    local out, kind, arg = word:match("^([^:]+):([^:]+):?(.*)$")
    if out and (WHAT[kind] or kind == "round") then
      if not trivial[out] then order[#order + 1], trivial[out], narrow[out] = out, {}, {} end
      if kind == "round" then
        narrow[out][#narrow[out] + 1] = arg
      elseif kind == "copy" and init_of[out] == arg then
        trivial[out][#trivial[out] + 1] = string.format(
          "its own initial content ('%s') moved by a rounding step (an exact copy is caught as stale)", arg)
      else
        trivial[out][#trivial[out] + 1] = WHAT[kind](arg)
      end
    end
  end
  local lines = {}
  for _, out in ipairs(order) do
    if #trivial[out] > 0 then
      lines[#lines + 1] = string.format(
        "warning: output '%s' passes both checks when a kernel writes %s: such a kernel would be ok. " ..
        "Make the inputs or the tolerance stricter (docs/TRUST.md, \"Specs a trivial kernel passes\")",
        out, table.concat(trivial[out], ", or "))
    end
    if #narrow[out] > 0 then
      lines[#lines + 1] = string.format(
        "note: output '%s': the tolerance accepts the reference rounded to %s in both checks, so arithmetic in %s " ..
        "may pass too", out, table.concat(narrow[out], " or "), narrow[out][#narrow[out]])
    end
  end
  return lines
end

return M
