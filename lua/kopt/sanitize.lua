-- The winner under the compute sanitizer (`--sanitize TOOLS`): after the
-- finalists, the run's best candidate is checked once more in a GPU worker
-- started by the CUDA toolkit's compute-sanitizer with each tool asked for
-- (racecheck: shared-memory hazards; memcheck: out-of-bounds and misaligned
-- accesses; synccheck: barriers; initcheck: reads of memory never written).
-- The output comparison cannot see a race that happens not to change the
-- result on the day it is measured; racecheck sees the hazard itself. A
-- candidate with errors in its own kernel loses the title to the next
-- fastest one that is clean (at most `max_tries` are checked), and the run
-- says so. Errors in other kernels (the reference, kopt's own) are reported,
-- never held against the candidate.
local sys = require("kopt.sys")

local M = {}

M.TOOLS = { racecheck = true, memcheck = true, synccheck = true, initcheck = true }

-- "none", or a comma-separated list of tools. Returns the list or nil, why.
function M.parse_tools(text)
  if text == "none" then return {} end
  local list, seen = {}, {}
  for item in (text .. ","):gmatch("([^,]*),") do
    if not M.TOOLS[item] then
      return nil, string.format("expected none or a comma-separated list of racecheck, memcheck, synccheck, initcheck; got '%s'", text)
    end
    if not seen[item] then list[#list + 1], seen[item] = item, true end
  end
  return list
end

local function executable(path)
  local f = path and io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The compute-sanitizer program: $KOPT_SANITIZER, the toolkit's bin folder
-- ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda), or the PATH. nil, why otherwise.
function M.find()
  local env = os.getenv("KOPT_SANITIZER")
  if env and env ~= "" then
    if executable(env) then return env end
    return nil, "KOPT_SANITIZER names '" .. env .. "', which is no file"
  end
  local dirs = {}
  for _, var in ipairs({ "CUDA_HOME", "CUDA_PATH" }) do
    local v = os.getenv(var)
    if v and v ~= "" then dirs[#dirs + 1] = v .. "/bin" end
  end
  dirs[#dirs + 1] = "/usr/local/cuda/bin"
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do dirs[#dirs + 1] = dir end
  for _, d in ipairs(dirs) do
    local p = d .. "/compute-sanitizer"
    if executable(p) then return p end
  end
  return nil, "compute-sanitizer not found (CUDA toolkit's bin, $CUDA_HOME, PATH, or $KOPT_SANITIZER)"
end

-- The function's own name in a kernel name as kopt or the tool writes it:
-- `stencil<float, 128>`, `ns::stencil<float>(float *, int)` and
-- `void stencil(float *)` all give "stencil".
function M.base_name(name)
  local s = tostring(name):gsub("%b()", ""):gsub("%b<>", "")
  return s:match("([%w_]+)%s*$") or s
end

-- Reads a tool's report. Returns { errors=, warnings=, kernels = {name=count},
-- lines = {first error lines} }; errors is nil when no summary was found
-- (the tool did not finish).
function M.parse(text)
  local out = { kernels = {}, lines = {} }
  local e, w = text:match("RACECHECK SUMMARY:%s*%d+ hazards? displayed %((%d+) errors?, (%d+) warnings?%)")
  if e then
    out.errors, out.warnings = tonumber(e), tonumber(w)
  else
    e = text:match("ERROR SUMMARY:%s*(%d+) errors?")
    out.errors, out.warnings = tonumber(e), 0
  end
  local in_error = false
  for line in text:gmatch("[^\n]+") do
    local body = line:gsub("^=+%s*", "")
    if body:match("^Error") or body:match("^Invalid") or body:match("^Race") or body:match("^Barrier") or
       body:match("^Uninitialized") or body:match("^Program hit") then
      in_error = true
      if #out.lines < 6 then out.lines[#out.lines + 1] = body end
    elseif body:match("^Warning") then
      in_error = false
    end
    -- "at NAME+0x1f0" names the kernel of an error record (NAME may carry
    -- a template and a parameter list: `ref_mul(float *, const float *)`)
    if in_error then
      for name in body:gmatch("at (.-)%+0x%x+") do
        name = name:gsub("^%s+", "")
        out.kernels[name] = (out.kernels[name] or 0) + 1
      end
    end
  end
  return out
end

-- Whether the errors of a report are the candidate's: one of its kernels
-- (entries: the candidate's entry, and a pipeline's later kernels) is named,
-- by the function's own name or its lowered (mangled) one, or no kernel is
-- named at all (then kopt cannot tell, and holds it against the candidate
-- rather than trust it).
function M.blames(report, entries, lowered)
  if (report.errors or 0) == 0 then return false end
  if type(entries) ~= "table" then entries = { entries } end
  local mine = {}
  for _, e in ipairs(entries) do mine[M.base_name(e)] = true end
  local named = false
  for name in pairs(report.kernels) do
    named = true
    if mine[M.base_name(name)] or (lowered and name:find(lowered, 1, true)) then return true end
  end
  return not named
end

-- Checks one candidate (a backend job; entry: its kernel's name) under
-- every tool. Returns { tool = {report fields, status=, note=, blamed=} } and
-- whether the candidate is clean.
function M.check(backend, job, entries, tools, exe, limit_s)
  local verdict, clean, finished = {}, true, true
  for _, tool in ipairs(tools) do
    local log = os.tmpname()
    local wrap = { exe, "--tool", tool, "--log-file", log, "--print-limit", "20" }
    local t0 = sys.now()
    local ok, r, why = pcall(backend.check_under, backend, job, wrap, limit_s)
    if not ok then r, why = nil, tostring(r) end
    local f = io.open(log, "rb")
    local text = f and f:read("a") or ""
    if f then f:close() end
    os.remove(log)
    local rep = M.parse(text)
    rep.seconds, rep.text = sys.now() - t0, text
    if not r then
      rep.note = "not run: " .. tostring(why)
    elseif rep.errors == nil then
      rep.note = string.format("no report (the check ended %s: %s)", tostring(r.status), tostring(r.how))
    end
    rep.status = r and r.status
    rep.blamed = rep.errors ~= nil and M.blames(rep, entries, r and r.lowered)
    if rep.blamed then clean = false end
    -- a check that did not finish says nothing: not clean, not flagged
    if rep.errors == nil then finished = false end
    verdict[tool] = rep
  end
  return verdict, clean and finished, finished
end

local function describe(tool, rep)
  if rep.note then return tool .. ": " .. rep.note end
  local kernels = {}
  for name, n in pairs(rep.kernels) do kernels[#kernels + 1] = string.format("%s (%d)", name, n) end
  table.sort(kernels)
  local s = string.format("%s: %d error%s%s, %.1f s", tool, rep.errors, rep.errors == 1 and "" or "s",
    (rep.warnings or 0) > 0 and string.format(", %d warning%s", rep.warnings, rep.warnings == 1 and "" or "s") or "",
    rep.seconds)
  if rep.errors > 0 then
    s = s .. (rep.blamed and " in the candidate" or " in other kernels") ..
      (#kernels > 0 and (": " .. table.concat(kernels, ", ")) or "")
  end
  return s
end

-- Runs the check on the run's best, then on the next fastest ok records
-- while the checked one has errors of its own. `ranked` is the ok records
-- fastest first (the best first); make_best(rec) names a record the winner.
-- Returns lines for the summary and the rows of the "sanitize" event.
function M.run(opts)
  local lines, rows = {}, {}
  local exe, why = M.find()
  if not exe then
    lines[1] = "  sanitizer not run: " .. why
    return lines, { { note = why } }
  end
  local limit_s = opts.limit_s or 300
  for i, rec in ipairs(opts.ranked) do
    if i > (opts.max_tries or 4) then
      lines[#lines + 1] = string.format("  sanitizer: the %d fastest configs all have errors; the winner stays, flagged", i - 1)
      break
    end
    if opts.progress then
      opts.progress(string.format("kopt: checking %s under %s (compute-sanitizer)\n", opts.describe(rec),
                                  table.concat(opts.tools, ", ")))
    end
    local job = opts.job_for(rec)
    local verdict, clean, finished = M.check(opts.backend, job, opts.entry_for(rec), opts.tools, exe, limit_s)
    local parts = {}
    for _, tool in ipairs(opts.tools) do parts[#parts + 1] = describe(tool, verdict[tool]) end
    lines[#lines + 1] = string.format("  sanitizer, %s: %s", opts.describe(rec), table.concat(parts, "; "))
    local row = { key = rec.key, clean = clean, finished = finished, tools = {} }
    for tool, rep in pairs(verdict) do
      row.tools[tool] = { errors = rep.errors, warnings = rep.warnings, blamed = rep.blamed, note = rep.note,
                          kernels = rep.kernels, first = rep.lines, seconds = rep.seconds, status = rep.status }
    end
    rows[#rows + 1] = row
    rec.result.sanitizer = row.tools
    if not finished then
      -- (a check that did not finish cannot clear the next config either)
      lines[#lines + 1] = "  sanitizer: the check did not finish; the winner stays, unchecked"
      break
    end
    if opts.interrupted and opts.interrupted() then
      lines[#lines + 1] = "  sanitizer: interrupted; the winner stays"
      break
    end
    if clean then
      if i > 1 then
        opts.make_best(rec)
        lines[#lines + 1] = "  the sanitizer changed the winner: the faster configs above have errors of their own"
      end
      break
    end
    if i == #opts.ranked then
      lines[#lines + 1] = "  sanitizer: no config checked is clean; the winner stays, flagged"
    end
  end
  return lines, rows
end

return M
