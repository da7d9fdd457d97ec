-- The run directory: events.jsonl (append-only, flushed per line: the source
-- of truth for --resume), trace.md (the narrative), results.json (T4) and
-- best/. Everything except events.jsonl is derived and rewritten at the end.
local errors = require("kopt.errors")
local json = require("kopt.json")
local sys = require("kopt.sys")

local M = {}
local Run = {}
Run.__index = Run

-- Reads an existing events.jsonl. A torn last line (kill -9 mid-write) is
-- dropped and its byte offset returned so the file can be cut back to it.
function M.read_events(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local events, good_end, pos, lineno = {}, 0, 1, 0
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    if not nl then break end
    lineno = lineno + 1
    local line = text:sub(pos, nl - 1)
    local ev, err = json.decode(line)
    if not ev then
      errors.usage("%s:%d: corrupt event line (%s); the run cannot be resumed", path, lineno, err)
    end
    events[#events + 1] = ev
    good_end = nl
    pos = nl + 1
  end
  return events, good_end, #text
end

-- torn_at: the byte offset read_events returned, when the file on record
-- ends in a torn line that must be cut before appending.
function M.open(dir, resume, torn_at)
  local self = setmetatable({ dir = dir, events_path = dir .. "/events.jsonl" }, Run)
  local ok, err = sys.mkdir_p(dir)
  if not ok then errors.usage("--out: %s", err) end
  if resume and torn_at then
    -- cut the torn tail so appended lines start on a fresh line
    local f = assert(io.open(self.events_path, "rb"))
    local keep = f:read(torn_at)
    f:close()
    f = assert(io.open(self.events_path, "wb"))
    f:write(keep)
    f:close()
  end
  local f, ferr = io.open(self.events_path, "ab")
  if not f then errors.raise(errors.RUNTIME, "cannot write %s: %s", self.events_path, ferr) end
  self.events = f
  local t = io.open(dir .. "/trace.md", resume and "ab" or "wb")
  self.trace_file = t
  return self
end

function Run:event(ev)
  self.events:write(json.encode(ev), "\n")
  self.events:flush()
end

function Run:trace(fmt, ...)
  if not self.trace_file then return end
  self.trace_file:write(string.format(fmt, ...), "\n")
  self.trace_file:flush()
end

function Run:close()
  if self.events then self.events:close() self.events = nil end
  if self.trace_file then self.trace_file:close() self.trace_file = nil end
end

local T4_INVALIDITY = { ok = "correct", compile_error = "compile", launch_error = "runtime",
                        crash = "runtime", wrong = "correctness", invalid = "constraints",
                        timeout = "timeout" }

-- results.json in the T4 format (kernel_tuner schema T4 1.0.0).
function M.t4(records, meta)
  local results = {}
  for i, r in ipairs(records) do
    local res = r.result
    local value = res.status == "ok" and res.time_ms or (res.status or "failed")
    results[i] = {
      timestamp = r.timestamp,
      configuration = r.config,
      times = { compilation = res.compile_s and res.compile_s * 1000 or 0,
                runtimes = res.time_ms and { res.time_ms } or json.empty_array,
                framework = 0, search_algorithm = 0, validation = 0 },
      invalidity = T4_INVALIDITY[res.status] or "runtime",
      correctness = res.status == "ok" and 1 or 0,
      measurements = { { name = "time", value = value, unit = "ms" } },
      objectives = { "time" },
    }
  end
  return { schema_version = "1.0.0", metadata = meta, results = results }
end

return M
