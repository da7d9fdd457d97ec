-- Readers for recorded search spaces: Kernel Tuner cache files (including
-- ones whose closing braces are missing after an interrupted run), T4 results
-- files and KTT result files. Each becomes
--   { format=, device=, kernel=, knobs={ {name=, values=} }, objective=,
--     entries = { {config=, status=, time_ms=, samples=, cost_s=, metrics=} },
--     skipped = { count=, first= }, bad_times = { count=, first= } }
-- time_ms is the objective converted to milliseconds; cost_s is the recorded
-- compile + verify + benchmark time that replay charges to its simulated clock.
--
-- A recording is input like any other and is checked when it is read:
-- entries must be well-formed, inside the recording's own parameter space,
-- with a known time unit. In strict mode (the default) the first bad entry is
-- one sentence naming the file and the entry; in lenient mode bad entries are
-- skipped and counted. A time that is not finite and positive is not a
-- measurement: that entry is replayed as a failure whose log says why, in
-- either mode, so it can never be the best.

local common = require("kopt.recording.common")
local errors = require("kopt.errors")
local json = require("kopt.json")
local kt = require("kopt.recording.kt")
local ktt = require("kopt.recording.ktt")
local space = require("kopt.space")
local sys = require("kopt.sys")
local t4 = require("kopt.recording.t4")

local M = {}
M.unit_to_ms = common.unit_to_ms
M.time_like = common.time_like

-- A configuration recorded twice (under two cache keys, or 1 and "1") is
-- ambiguous: strict mode refuses it naming both entries; lenient mode keeps
-- the first and counts the others as skipped. Two entries are one
-- configuration when the space's key (kopt.space, which replay looks
-- entries up by) is one: 0.1 and 0.10000000000000002 are two, 0.1 and
-- "0.10000000000000001" one.
local function drop_duplicates(rec, r)
  local names = {}
  for i, k in ipairs(rec.knobs) do names[i] = k.name end
  local seen, kept = {}, {}
  for _, e in ipairs(rec.entries) do
    local parts = {}
    for i, name in ipairs(names) do parts[i] = space.format_value(e.config[name]) end
    local key = table.concat(parts, ",")
    local first = seen[key]
    if first then
      local msg = string.format("%s: the same configuration as %s", e.label or "an entry", first.label or "another entry")
      if not r.lenient then
        return string.format("replay file %s: %s; remove one, or replay with --replay-check lenient to keep the first",
                             rec.file, msg)
      end
      r.skipped = r.skipped + 1
      r.first_skipped = r.first_skipped or msg
    else
      seen[key] = e
      kept[#kept + 1] = e
    end
  end
  rec.entries = kept
end

-- A key the file writes twice, which JSON reads as its last value without a
-- word. A cache entry written twice is a configuration recorded twice, as
-- above: strict mode refuses it, lenient mode keeps the first. A field
-- written twice in an entry makes the entry bad (lenient mode skips it); a
-- key twice anywhere else is refused in either mode. Returns why, or nil
-- (doc then holds what lenient mode keeps).
-- The object keys a decoded document holds (array elements are no keys).
local function count_keys(v)
  local n = 0
  for k, x in pairs(v) do
    if type(k) == "string" then n = n + 1 end
    if type(x) == "table" then n = n + count_keys(x) end
  end
  return n
end

local function keys_given_twice(doc, text, r, file)
  -- (every key of the text ends '"' then ':'; so does nothing else but an
  -- escaped quote inside a string: as many of those as decoded keys means
  -- no key was written twice, and the scan below, half the time of reading
  -- a large recording, is spared)
  local _, closings = text:gsub('"%s*:', "")
  if closings == count_keys(doc) then return nil end
  local cache = doc.tune_params ~= nil and type(doc.cache) == "table" and doc.cache
  local kept, dropped = {}, {}
  for _, d in ipairs(json.duplicate_keys(text, not r.lenient and 1 or nil)) do
    local path = d.path
    if not (cache and path[1] == "cache" and #path >= 2) then
      return string.format("replay file %s: line %d: '%s' is given twice (JSON keeps only the last one; merge the two)",
                           file, d.line, json.key_path(path))
    end
    local entry = string.format('cache["%s"]', path[2])
    local field = #path > 2 and "." .. json.key_path({ table.unpack(path, 3) }) or ""
    if not r.lenient then
      return string.format("replay file %s: line %d: %s%s is given twice (JSON keeps only the last one); %s", file,
                           d.line, entry, field, field == "" and "remove one, or replay with --replay-check lenient " ..
                             "to keep the first" or "fix the entry, or replay with --replay-check lenient to skip it")
    end
    if field == "" then
      kept[path[2]] = kept[path[2]] or d.first
    else
      dropped[path[2]] = true
    end
    r.skipped = r.skipped + 1
    r.first_skipped = r.first_skipped or string.format("%s%s (line %d): given twice; %s", entry, field, d.line,
                                                       field == "" and "the first is kept" or "the entry is skipped")
  end
  for key, first in pairs(kept) do
    local value = first.to and json.decode_with_nonfinite(text:sub(first.from, first.to))
    if value == nil then
      return string.format("replay file %s: cache[\"%s\"] is given twice and its first entry cannot be read", file, key)
    end
    cache[key] = value
  end
  for key in pairs(dropped) do cache[key] = nil end
  return nil
end

-- The value of a --replay-check flag: "strict" or "lenient" (the reader's
-- modes); anything else is a usage error naming the flag.
function M.check_mode(v, flag)
  if v == "strict" or v == "lenient" then return v end
  errors.usage("%s: expected strict or lenient, got '%s'", flag, tostring(v))
end

-- The third value read() returns for JSON of another kind (no recording at
-- all, as opposed to a recording it cannot read): compare's default spaces
-- leave such files out.
M.NOT_RECORDING = "not a recording"

-- Reads a recording. mode: "strict" (default) or "lenient". Returns the
-- table above, or nil, one sentence and, for JSON that is no recording,
-- M.NOT_RECORDING.
function M.read(file, mode)
  local text, terr = json.read_text(file)
  if not text then return nil, "cannot read replay file " .. terr end
  if text:sub(1, 2) == "\31\139" then
    return nil, string.format("replay file %s is gzip-compressed: gunzip it first", file)
  end
  if not text:find("%S") then
    return nil, string.format("replay file %s is empty%s", file, #text > 0 and " (only white space)" or "")
  end
  local doc, derr = json.decode_with_nonfinite(text)
  local repaired, tried_repair = false, false
  if doc == nil then
    -- (a CSV file, as KTT writes its results by default: a header line of
    -- comma-separated names, no JSON bracket)
    local first_line = text:gsub("^\239\187\191", ""):match("^[^\r\n]*")
    if not first_line:find("^%s*[%[{]") and first_line:find(",", 1, true) then
      return nil, string.format("replay file %s is CSV, not JSON (KTT writes its results as CSV or JSON; kopt " ..
                                "reads KTT's JSON results, Kernel Tuner caches and T4 files)", file)
    end
    -- only a cache cut short (no closing brace at the end) is repaired: a
    -- complete file that does not parse is an error, not entries to drop
    -- (cut right after an entry's closing brace, the file ends in one too:
    -- more braces opened than closed tells it from a complete file). A file
    -- that ends as a complete one does, with the cache's and the file's
    -- closing braces on lines of their own, was written to its end: a
    -- brace missing inside it is damage, and the entries after it (the
    -- optimum, perhaps) must not be dropped as an interrupted tail
    local _, opened = text:gsub("{", "")
    local _, closed = text:gsub("}", "")
    -- (Kernel Tuner ends a cache "...}}\n}": the last entry shares its line
    -- with the cache's brace; a pretty-printed one "  }\n}": the file's own
    -- brace alone on the last line, unindented)
    -- (and a cache written on one line ends "}}}": the last entry's, the
    -- cache's and the file's braces; a cache cut after an entry ends in one)
    local ends_closed = text:find("}[ \t]*\r?\n}%s*$") ~= nil or text:find("}%s*}%s*}%s*$") ~= nil
    -- (only the file's last brace or two missing, every entry whole: closed
    -- as they were; a file that ends closed is not, since a brace missing
    -- inside it would then nest the later entries in the damaged one)
    if not ends_closed and text:find('"tune_params_keys"', 1, true) and opened > closed then
      tried_repair = true
      for _, tail in ipairs({ "\n}", "\n}\n}" }) do
        local whole = json.decode_with_nonfinite(text .. tail)
        if type(whole) == "table" and type(whole.cache) == "table" then doc, repaired = whole, true break end
      end
    end
    if doc == nil and text:find('"tune_params_keys"', 1, true) and text:find('"cache"', 1, true) and not ends_closed
       and (not text:find("}%s*$") or opened > closed) then
      doc = kt.repair(text)
      repaired, tried_repair = true, true
    end
    if doc == nil and ends_closed and text:find('"cache"', 1, true) then
      return nil, string.format("replay file %s is not valid JSON (%s); it ends as a whole Kernel Tuner cache does, " ..
                                "so it is damaged inside, not cut short: no entry is dropped to read it", file, derr)
    end
    if doc == nil and tried_repair then
      return nil, string.format("replay file %s is not valid JSON (%s); read as a Kernel Tuner cache cut short, " ..
                                "it could not be repaired", file, derr)
    end
    if doc == nil then return nil, string.format("replay file %s is not valid JSON (%s)", file, derr) end
  end
  if type(doc) ~= "table" then return nil, "replay file " .. file .. " holds no object", M.NOT_RECORDING end
  local r = common.new_reader(file, mode)
  local twice = keys_given_twice(doc, text, r, file)
  if twice then return nil, twice end
  local ok, rec, rerr = pcall(function()
    if doc.cache and doc.tune_params then return kt.read(doc, file, repaired, r, text)
    elseif type(doc.results) == "table" then return t4.read(doc, file, r)
    elseif type(doc.Results) == "table" then return ktt.read(doc, file, r)
    end
    return M.NOT_RECORDING
  end)
  if not ok then
    if getmetatable(rec) == common.Bad then return nil, rec.msg end
    error(rec, 0)
  end
  if rec == M.NOT_RECORDING then
    return nil, "replay file " .. file .. " is not a Kernel Tuner cache, a T4 results file or a KTT results file",
           M.NOT_RECORDING
  end
  if not rec then return nil, rerr end
  if #rec.entries == 0 then
    if r.skipped > 0 then
      return nil, string.format("replay file %s records no usable configurations (%d bad entries skipped; the first: %s)",
                                file, r.skipped, r.first_skipped)
    end
    return nil, "replay file " .. file .. " records no configurations"
  end
  rec.file = file
  -- (what a resumed run checks: the same file name with other contents is
  -- another recording)
  rec.digest = sys.sha256(text):sub(1, 16)
  local dup_err = drop_duplicates(rec, r)
  if dup_err then return nil, dup_err end
  if r.skipped > 0 then rec.skipped = { count = r.skipped, first = r.first_skipped } end
  if r.bad_times > 0 then rec.bad_times = { count = r.bad_times, first = r.first_bad_time } end
  return rec
end

-- The notes a reader of the recording should see on stderr: skipped entries
-- (lenient mode) and entries replayed as failures for a bad time.
function M.notes(rec)
  local out = {}
  if rec.skipped then
    out[#out + 1] = string.format("replay file %s: skipped %d bad %s (the first: %s)", rec.file, rec.skipped.count,
                                  rec.skipped.count == 1 and "entry" or "entries", rec.skipped.first)
  end
  if rec.objective_replaced then
    out[#out + 1] = string.format("replay file %s was tuned for '%s'; it is replayed by the time each entry " ..
                                  "records, its '%s' (a spec's objective ranks by its own metric)", rec.file,
                                  rec.objective_replaced, tostring(rec.objective))
  end
  if rec.direction_ignored then
    out[#out + 1] = string.format("replay file %s: objective_higher_is_better is true for '%s', a time: it is " ..
                                  "minimised", rec.file, rec.direction_ignored)
  end
  if rec.extended then
    out[#out + 1] = string.format("replay file %s: its entries use values its tune_params do not list (%s): they " ..
                                  "are in the space (a cache resumed with more values)", rec.file,
                                  table.concat(rec.extended, "; "))
  end
  if rec.edited then
    out[#out + 1] = string.format("replay file %s: %d results of edited kernels are left out (a replay measures " ..
                                  "the spec's own kernel)", rec.file, rec.edited)
  end
  if rec.repaired then
    out[#out + 1] = string.format("replay file %s was cut short (an interrupted run): " ..
                                  "the %d complete entries are read", rec.file, #rec.entries)
  end
  if rec.bad_times then
    out[#out + 1] = string.format("replay file %s: %d %s no positive finite time and %s replayed as failed (the first: %s)",
                                  rec.file, rec.bad_times.count, rec.bad_times.count == 1 and "entry records" or "entries record",
                                  rec.bad_times.count == 1 and "is" or "are", rec.bad_times.first)
  end
  return out
end

return M