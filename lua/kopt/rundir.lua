-- The run directory: events.jsonl (append-only, flushed per line: the source
-- of truth for --resume), trace.md (the narrative), results.json (T4) and
-- best/. Everything except events.jsonl is derived and rewritten at the end.
--
-- Durability (docs/DURABILITY.md): one process at a time holds the folder's
-- lock file (M.lock); every write is checked, and a failed one raises
-- errors.write_failed after cutting the file back to its last whole line;
-- events.jsonl and trace.md are fsynced when the run closes; derived files
-- are replaced atomically (kopt.json.write_file).
local errors = require("kopt.errors")
local json = require("kopt.json")
local sys = require("kopt.sys")

local M = {}
local Run = {}
Run.__index = Run

M.LOCK_NAME = ".kopt.lock"

-- Takes the run folder's lock, creating the folder (and its missing parents)
-- first. Returns the lock (held until it is closed or the process ends; the
-- kernel releases it even after kill -9) and the list of folders this call
-- created, deepest first, so a run that records nothing can remove them.
-- Another process holding the lock is one sentence naming its PID.
function M.lock(dir)
  local created, p = {}, dir
  while p ~= "" and p ~= "." and p ~= "/" and not sys.stat(p) do
    created[#created + 1] = p
    p = p:match("^(.*)/[^/]*$") or ""
  end
  local ok, err = sys.mkdir_p(dir)
  if not ok then errors.usage("--out: %s", err) end
  local lock, lerr, pid = sys.lock(dir .. "/" .. M.LOCK_NAME)
  if not lock then
    if pid then
      errors.usage("%s is in use by another kopt process (PID %d); wait for it to end, or choose another --out",
                   dir, pid)
    end
    errors.usage("--out: cannot lock %s: %s", dir, lerr)
  end
  return lock, created
end

-- Undoes M.lock for a run that recorded nothing: releases the lock and
-- removes the lock file and the folders that lock() created, if empty.
function M.unlock_unused(dir, lock, created)
  os.remove(dir .. "/" .. M.LOCK_NAME)
  lock:close()
  for _, d in ipairs(created) do
    if not sys.rmdir(d) then break end
  end
end

-- Reads an existing events.jsonl. A torn last line (kill -9 mid-write) is
-- dropped and its byte offset returned so the file can be cut back to it.
function M.read_events(path)
  if not sys.stat(path) then return nil end
  local text, rerr = json.read_text(path, math.maxinteger)
  -- (read by a fresh run too, to find a run already there: no "--resume")
  if not text then errors.usage("cannot read the run's log %s", rerr) end
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

-- Files a run writes beside its log that a later run in the folder reads
-- or appends to.
M.DERIVED = { "transitions.jsonl", "regraph.json", "llm_transcript.jsonl", "graph.kgr", "graph.json" }

-- Removes the derived files of a run that is not this one's (kopt.run, for
-- a fresh run in a folder with no log, before anything of its own is
-- written: an LLM transcript begins before the log).
function M.clear_derived(dir)
  for _, name in ipairs(M.DERIVED) do os.remove(dir .. "/" .. name) end
end

-- torn_at: the byte offset read_events returned, when the file on record
-- ends in a torn line that must be cut before appending.
function M.open(dir, resume, torn_at)
  local self = setmetatable({ dir = dir, resume = resume, events_path = dir .. "/events.jsonl",
                              trace_path = dir .. "/trace.md", evals_written = 0, lines_written = 0 }, Run)
  local ok, err = sys.mkdir_p(dir)
  if not ok then errors.usage("--out: %s", err) end
  -- what a process killed in the middle of an atomic write left behind
  -- (FILE.tmpPID, FILE.tmp.PID: the file itself is whole); the folder's
  -- lock is held, so no live kopt is writing them
  for _, sub in ipairs({ "", "/best" }) do
    for _, name in ipairs(sys.list_dir(dir .. sub) or {}) do
      if name:find("%.tmp%.?%d+$") then os.remove(dir .. sub .. "/" .. name) end
    end
  end
  if not resume and sys.stat(self.events_path) then
    -- a fresh start in a run folder whose log holds no whole line (a run
    -- killed before its first): what that run began to write is not this
    -- run's, and some of it would be read or appended to (transitions
    -- counted twice by kopt regraph, priors from regraph.json, answers
    -- from the transcript). A log deleted by hand: M.clear_derived.
    M.clear_derived(dir)
  end
  if torn_at then
    -- cut the torn tail so appended lines start on a fresh line (a fresh
    -- run too: a file holding only a torn first line is started again, the
    -- way kopt's message says); truncation needs no free space, so a full
    -- disk cannot lose the whole lines
    local tok, terr = sys.truncate(self.events_path, torn_at)
    if not tok then errors.write_failed(self.events_path, terr) end
  end
  local f, ferr = sys.open_log(self.events_path, "a")
  if not f then errors.write_failed(self.events_path, ferr) end
  self.events = f
  local t, terr = sys.open_log(self.trace_path, resume and "a" or "w")
  if not t then errors.write_failed(self.trace_path, terr) end
  self.trace_file = t
  return self
end

-- One line per event, written with one write(2): a crash leaves whole lines
-- and at most one torn last line, which the next --resume cuts off.
function Run:event(ev)
  if not self.events then return end
  local ok, err = self.events:write(json.encode(ev) .. "\n")
  if not ok then self:fail(self.events_path, err) end
  self.lines_written = self.lines_written + 1
  if ev.event == "eval" then self.evals_written = self.evals_written + 1 end
end

function Run:trace(fmt, ...)
  if not self.trace_file then return end
  local text = string.format(fmt, ...)
  -- (a server's message cut mid-character: trace.md stays UTF-8 text)
  if not utf8.len(text) then text = json.valid_utf8(text) end
  local ok, err = self.trace_file:write(text .. "\n")
  if not ok then self:fail(self.trace_path, err) end
end

-- After a failed write nothing more is written to the folder: later writes
-- would fail the same way or, worse, succeed out of order.
function Run:fail(path, err)
  self:abandon()
  errors.write_failed(path, err)
end

function Run:abandon()
  if self.events then self.events:close() self.events = nil end
  if self.trace_file then self.trace_file:close() self.trace_file = nil end
  self.failed = true
end

-- Flushes both files to the disk (fsync) and closes them.
function Run:close()
  for _, f in ipairs({ { "events", self.events_path }, { "trace_file", self.trace_path } }) do
    local file = self[f[1]]
    if file then
      self[f[1]] = nil
      local ok, err = file:sync()
      file:close()
      if not ok then self:fail(f[2], err) end
    end
  end
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
    -- what the evaluation cost in all (eval_s: its wall time, or a replay's
    -- recorded cost): the compile, the one run, and the rest (checks,
    -- repetitions) as validation, so a replay of this file spends the same
    -- simulated time under --time-limit
    local compile_ms = res.compile_s and res.compile_s * 1000 or 0
    local run_ms = type(res.time_ms) == "number" and res.time_ms or 0
    -- (a replay's own recorded cost first: with several slots a batch's
    -- eval_s is its average)
    local total_ms = (type(res.cost_s) == "number" and res.cost_s or type(r.eval_s) == "number" and r.eval_s or 0) * 1000
    results[i] = {
      timestamp = r.timestamp,
      configuration = r.config,
      times = { compilation = compile_ms,
                runtimes = res.time_ms and { res.time_ms } or json.empty_array,
                framework = 0, search_algorithm = 0,
                validation = math.max(0, total_ms - compile_ms - run_ms) },
      invalidity = T4_INVALIDITY[res.status] or "runtime",
      correctness = res.status == "ok" and 1 or 0,
      measurements = { { name = "time", value = value, unit = "ms" } },
      objectives = { "time" },
      -- an edited kernel's source hash (its folder under variants/): the
      -- same knobs with other code are another kernel
      variant = type(r.key) == "string" and r.key:match("#(%x+)$") or nil,
    }
    -- the spec's metrics beside the time (its objective, when it declares
    -- one, is named in the metadata), so a reader can rank as kopt did
    if res.status == "ok" and type(res.user_metrics) == "table" then
      local names = {}
      -- (a metric named "time" would stand beside the time itself, and a
      -- replay would read the first of the two)
      for name in pairs(res.user_metrics) do if name ~= "time" then names[#names + 1] = name end end
      table.sort(names)
      for _, name in ipairs(names) do
        local m = results[i].measurements
        m[#m + 1] = { name = name, value = res.user_metrics[name], unit = "" }
      end
    end
  end
  return { schema_version = "1.0.0", metadata = meta, results = results }
end

return M
