-- The experience database (docs/DATABASE.md): one SQLite file, by default
-- $XDG_DATA_HOME/kopt/experience.db (~/.local/share/kopt/experience.db),
-- that remembers every evaluation of every run across runs. The run folder
-- stays the human-readable record; this file is the cross-run memory.
--
-- A problem is identified by its key: the hash of the spec (what the kernel
-- computes and how it is checked), of the kernel source, of the search space
-- (knobs and constraints), the device's name and the toolkit (NVRTC's
-- version; for replay, the recording's hash). A run whose question was
-- already answered (same key, strategy and its code, options and seed, a finished run
-- with at least this budget) is a hit: kopt prints the known best and its
-- evidence and evaluates nothing. Otherwise every state measured before
-- under the same key is served from the file, not measured again (a warm
-- start), unless --fresh.
--
-- Writes are batched: one short transaction per engine round. A write that
-- fails (the disk is full, another process held the file past the busy
-- timeout) is one warning; the run goes on without the database.
local compile = require("kopt.compile")
local db_mod = require("kopt.db")
local errors = require("kopt.errors")
local gpu = require("kopt.gpu")
local json = require("kopt.json")
local nvrtc = require("kopt.nvrtc")
local sys = require("kopt.sys")

local M = {}

M.SCHEMA_VERSION = 3
-- How long a statement waits for another process's lock in all, and the
-- slices SQLite waits in: its wait is C code, deaf to signals, so kopt waits
-- slice by slice and a signal between two ends the wait (SIGTERM is
-- answered within a slice, inside docker stop's grace, not after 15 s).
M.BUSY_MS = 15000
M.BUSY_SLICE_MS = 200

-- Calls call() (a kopt.db call: its results, or nil, kind, msg) again while
-- it finds the file busy, up to BUSY_MS in all or until a signal comes.
local function patient(call)
  local deadline = sys.now() + M.BUSY_MS / 1000
  while true do
    local res = table.pack(call())
    if res[1] or res[2] ~= "busy" or sys.now() >= deadline then return table.unpack(res, 1, res.n) end
    if sys.interrupted() then
      return nil, "busy", tostring(res[3] or "database is locked") .. " (interrupted while waiting for it)"
    end
  end
end

-- Schema migrations: MIGRATIONS[v] takes a file from version v-1 to v; the
-- first creates everything. A file with a version above SCHEMA_VERSION is
-- refused (an older kopt never rewrites what a newer one wrote).
M.MIGRATIONS = {
  [1] = [[
CREATE TABLE schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL, kopt TEXT);
CREATE TABLE problems (
  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT, spec_hash TEXT, source_hash TEXT,
  space_hash TEXT, device TEXT, toolkit TEXT, first_seen TEXT);
CREATE TABLE sources (hash TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, problem_id INTEGER NOT NULL REFERENCES problems(id),
  strategy TEXT, options TEXT, seed INTEGER, budget INTEGER, time_limit REAL, backend TEXT,
  driver TEXT, device TEXT, out_dir TEXT, host TEXT, kopt TEXT, started TEXT, finished TEXT,
  stop_reason TEXT, evaluations INTEGER, measured INTEGER, best_ms REAL, best_n INTEGER);
CREATE INDEX runs_problem ON runs(problem_id);
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),
  problem_id INTEGER NOT NULL REFERENCES problems(id), n INTEGER, state TEXT NOT NULL,
  config TEXT, source_hash TEXT, status TEXT, time_ms REAL, p90_ms REAL, eval_s REAL,
  method TEXT, expert TEXT, origin TEXT, result TEXT, served_from INTEGER, timestamp TEXT);
CREATE INDEX evaluations_state ON evaluations(problem_id, state);
CREATE INDEX evaluations_run ON evaluations(run_id, n);
CREATE TABLE llm_attempts (
  id INTEGER PRIMARY KEY, evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
  attempt INTEGER, expert TEXT, model TEXT, hint TEXT, outcome TEXT, detail TEXT);
]],
  -- the digest of the strategy's code (kopt.strategy.code_digest): a run
  -- answers only a question asked of the same code; runs from before it
  -- have none, so they answer nothing (their evaluations are still served)
  [2] = [[
ALTER TABLE runs ADD COLUMN strategy_code TEXT;
]],
  -- every name a problem was run under (the name is outside the key: a
  -- renamed spec is the same problem, and `kopt db show` finds it by either)
  [3] = [[
CREATE TABLE problem_names (
  problem_id INTEGER NOT NULL REFERENCES problems(id), name TEXT NOT NULL, last_seen TEXT,
  PRIMARY KEY (problem_id, name));
INSERT OR IGNORE INTO problem_names (problem_id, name, last_seen)
  SELECT id, name, first_seen FROM problems WHERE name IS NOT NULL;
]],
}

-- Where the database is for these options: nil when it is off (--no-db,
-- KOPT_DB=off, or no home to keep it in), and true as a second value when
-- the path is the default one rather than named. --db PATH wins over
-- KOPT_DB, which wins over XDG_DATA_HOME and HOME.
function M.path(opts)
  if opts.no_db then
    if opts.db then errors.usage("--db and --no-db cannot be used together") end
    return nil
  end
  if opts.db then
    -- ("": SQLite's private temporary database, which remembers nothing)
    if opts.db == "" then errors.usage("--db needs a path (an empty one names no file); --no-db says none") end
    return opts.db
  end
  local env = os.getenv("KOPT_DB")
  if env == "off" then return nil end
  if env and env ~= "" then return env end
  local xdg = os.getenv("XDG_DATA_HOME")
  if xdg and xdg:sub(1, 1) == "/" then return xdg .. "/kopt/experience.db", true end
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.local/share/kopt/experience.db", true end
  return nil
end

local DB = {}
DB.__index = DB

local ADVICE = "move it aside to start a new one, or run with --db PATH or --no-db"

-- An error of the file that stops the command: one sentence naming the file
-- (`busy` set when another process held it past BUSY_MS: a run opening
-- the default file goes on without it).
local function refuse(path, kind, msg)
  if kind == "corrupt" then
    errors.usage("the experience database %s is damaged or not a database (%s); %s", path,
                 (msg or ""):gsub("^.-: ", ""), ADVICE)
  end
  local why = (msg or kind or "?"):gsub("^" .. path:gsub("%p", "%%%0") .. ": ", "")
  local _, err = pcall(errors.usage, "the experience database %s cannot be used: %s", path, why)
  err.busy = kind == "busy" or nil
  error(err, 0)
end

function DB:rows(sql, ...)
  local args = table.pack(...)
  local rows, kind, msg = patient(function() return self.h:rows(sql, table.unpack(args, 1, args.n)) end)
  if not rows then refuse(self.path, kind, msg) end
  return rows
end

function DB:run(sql, ...)
  local args = table.pack(...)
  local n, kind, msg = patient(function() return self.h:run(sql, table.unpack(args, 1, args.n)) end)
  if not n then refuse(self.path, kind, msg) end
  return n, kind
end

-- Runs sql (no rows), or refuses the file.
function DB:exec(sql)
  local ok, kind, msg = patient(function() return self.h:exec(sql) end)
  if not ok then refuse(self.path, kind, msg) end
end

-- Brings the file to SCHEMA_VERSION in one immediate transaction (two kopt
-- processes creating it at once take turns), or refuses it.
function DB:migrate()
  local function version()
    local t = self:rows("SELECT name FROM sqlite_master WHERE type = 'table'")
    if #t == 0 then return 0 end
    local has = false
    for _, r in ipairs(t) do if r.name == "schema_version" then has = true end end
    if not has then
      errors.usage("%s is an SQLite file but not a kopt experience database (no schema_version table); %s",
                   self.path, ADVICE)
    end
    local v = self:rows("SELECT max(version) AS v FROM schema_version")[1]
    return v and v.v or 0
  end
  local v = version()
  if type(v) ~= "number" or math.tointeger(v) == nil or v < 0 then
    errors.usage("the experience database %s is damaged: its schema version is %s, not a whole number; %s",
                 self.path, tostring(v), ADVICE)
  end
  v = math.tointeger(v)
  if v > M.SCHEMA_VERSION then
    errors.usage("the experience database %s has schema version %d, newer than this kopt's (%d): use a newer kopt, or %s",
                 self.path, v, M.SCHEMA_VERSION, ADVICE)
  end
  if v == M.SCHEMA_VERSION or self.readonly then return end
  self:exec("BEGIN IMMEDIATE")
  local done, err = pcall(function()
    for step = version() + 1, M.SCHEMA_VERSION do
      self:exec(M.MIGRATIONS[step])
      self:run("INSERT INTO schema_version (version, applied, kopt) VALUES (?, ?, ?)", step, sys.utc_iso(),
               sys.version)
    end
  end)
  if not done then
    self.h:exec("ROLLBACK")
    error(err, 0)
  end
  self:exec("COMMIT")
end

-- Opens the database at path (creating it and its folder unless readonly).
-- A damaged file, another program's SQLite file or a newer schema is a
-- usage error naming the file; nothing is ever reset. With soft, a folder
-- or file that cannot be created or opened (a read-only home), or that
-- another process held past BUSY_MS, returns nil and the reason instead.
function M.open(path, readonly, soft)
  if not readonly then
    local dir = path:match("^(.*)/[^/]*$")
    if dir and dir ~= "" then
      local ok, err = sys.mkdir_p(dir)
      if not ok and soft then return nil, err end
      if not ok then errors.usage("the experience database's folder: %s", err) end
    end
  elseif not sys.stat(path) then
    errors.usage("there is no experience database at %s", path)
  end
  local kind_of, size = sys.stat(path)
  if kind_of == "dir" then
    errors.usage("the experience database %s is a folder, not a file: give the file's path (--db PATH)", path)
  end
  if readonly and kind_of == "file" and size == 0 then
    errors.usage("the experience database %s is empty: no run has written to it yet", path)
  end
  -- (the journal is switched to WAL only once the file is known to be
  -- kopt's or empty: a file of another program is refused untouched)
  local h, kind, msg = patient(function()
    return db_mod.open(path, { readonly = readonly, busy_ms = M.BUSY_SLICE_MS, keep_journal = true })
  end)
  if not h and soft and (kind == "cantopen" or kind == "readonly" or kind == "busy") then return nil, msg end
  if not h then refuse(path, kind, msg) end
  local self = setmetatable({ h = h, path = path, readonly = readonly }, DB)
  local ok, err = pcall(function()
    self:migrate()
    if not readonly then
      local mode = self:rows("PRAGMA journal_mode")[1]
      if not (mode and mode.journal_mode == "wal") then
        self:exec("PRAGMA journal_mode=WAL")
      end
    end
  end)
  if not ok then
    self:close()
    if soft and M.busy_reason(err) then return nil, M.busy_reason(err) end
    error(err, 0)
  end
  return self
end

-- Why the file could not be used when another process held it (refuse's
-- sentence without its beginning), or nil for any other error.
function M.busy_reason(err)
  if not (errors.is_user_error(err) and err.busy) then return nil end
  return (tostring(err.msg):gsub("^the experience database .- cannot be used: ", ""))
end

function DB:close()
  if self.h then self.h:close() self.h = nil end
end

-- Top-level spec fields outside the spec hash.
M.NOT_PROBLEM = { name = true, description = true, recording = true, knobs = true, constraints = true,
                  profile = true, torch = true }

-- Canonical text of a JSON value (sorted keys): the same value, the same hash.
local function canon(v) return json.pretty(v) end
local function hash(s) return sys.sha256(s):sub(1, 16) end
M.canon = canon

-- What a run searches, as three hashes: the spec (what is computed and how
-- it is checked), the kernel's source, the space (knobs and constraints).
local function problem_hashes(spec, space, id)
  if spec then
    -- what is computed and how it is checked; not what names, documents or
    -- reports it (knobs and constraints are the space's hash)
    local raw = {}
    for k, v in pairs(spec.raw) do
      if not M.NOT_PROBLEM[k] then raw[k] = v end
    end
    -- the kernel's and the reference's every field (options, knobs, arch,
    -- state, launch) and their text and headers, not their paths: a
    -- reference switched from ReLU to GELU by an option was answered with
    -- the ReLU results
    -- (the kernel's own text is the source hash, beside this one)
    local function fields_of(k, r, with_text)
      local out = { headers = compile.headers_digest(spec, k), entry = k.entry,
                    source_text = with_text and hash(k.source or "") or nil }
      for f, v in pairs(type(r) == "table" and r or {}) do
        if f ~= "source" and f ~= "entry" then out[f] = v end
      end
      return out
    end
    raw.kernel = fields_of(spec.kernel, spec.raw.kernel, false)
    raw.reference = spec.reference and fields_of(spec.reference, spec.raw.reference, true) or nil
    id.spec_hash = hash(canon(raw))
    id.source = spec.kernel.source
    id.source_hash = hash(spec.kernel.source)
  else
    id.spec_hash, id.source_hash = "none", "none"
  end
  if space then
    local knobs = {}
    for i, k in ipairs(space.knobs) do knobs[i] = { k.name, k.values } end
    local constraints = {}
    for i, e in ipairs(spec and spec.constraints or {}) do constraints[i] = e.text end
    id.space_hash = hash(canon({ knobs = knobs, constraints = constraints }))
  else
    id.space_hash = "recorded"
  end
  return id
end

-- One digest of problem_hashes: a resumed run compares it with its start's,
-- so an edited spec, kernel source, knob or constraint is not mixed into a
-- run measured before the edit.
function M.problem_digest(spec, space)
  local id = problem_hashes(spec, space, {})
  return hash(id.spec_hash .. " " .. id.source_hash .. " " .. id.space_hash)
end

-- The identity of a run's problem, found before any backend opens. args:
-- spec (or nil), space (nil without a spec), choice ({kind=, file=}) and
-- gpus (cuda: the GPUs chosen). A recording's hash stands for its device
-- and, without a spec, for its space; the device's name is filled in by
-- Session:attach once the recording is read.
function M.identity(args)
  local spec, space, choice = args.spec, args.space, args.choice
  local id = problem_hashes(spec, space, { name = args.problem })
  local key_device
  if choice.kind == "replay" then
    local text, err = json.read_text(choice.file, math.maxinteger)
    if not text then errors.usage("%s", err) end
    id.toolkit = "replay " .. hash(text)
    id.backend = "replay"
    key_device = "recorded"
  else
    -- before the workers start, so a hit costs no worker and no compile
    local devices = gpu.devices() or {}
    local d = devices[((args.gpus or {})[1] or 0) + 1] or {}
    id.device = d.name or "unknown device"
    if d.driver_version then
      id.driver = string.format("%d.%d", d.driver_version // 1000, d.driver_version % 1000 // 10)
    end
    local ok, version = pcall(nvrtc.version)
    id.toolkit = "nvrtc " .. (ok and tostring(version) or "?")
    id.backend = "cuda"
    key_device = id.device
  end
  id.key = sys.sha256(table.concat({ id.spec_hash, id.source_hash, id.space_hash, key_device, id.toolkit }, "\n"))
    :sub(1, 32)
  return id
end

function DB:problem(id, create)
  local rows = self:rows("SELECT * FROM problems WHERE key = ?", id.key)
  if rows[1] or not create then return rows[1] end
  self:run("INSERT OR IGNORE INTO problems (key, name, spec_hash, source_hash, space_hash, device, toolkit, first_seen)"
           .. " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", id.key, id.name, id.spec_hash, id.source_hash, id.space_hash,
           id.device or "?", id.toolkit, sys.utc_iso())
  return self:rows("SELECT * FROM problems WHERE key = ?", id.key)[1]
end

-- Whether a finished run r answers question q (same strategy, options and
-- seed are in the query): it ran to the strategy's own end, or with at least
-- this budget (budget NULL: none), and no shorter time limit than asked.
local function covers(r, q)
  local rb = r.budget or math.huge
  -- (a strategy that plans with its budget, anneal's cooling, makes
  -- another search at another budget: only the same budget answers)
  if q.plans_with_budget and r.budget ~= q.budget then return false end
  if r.stop_reason == "strategy finished" or r.stop_reason == "stalled" then return true end
  if r.stop_reason == "budget" then return rb >= q.budget end
  if r.stop_reason == "time limit" then
    return q.time_limit ~= nil and r.time_limit ~= nil and r.time_limit >= q.time_limit and rb >= q.budget
  end
  return false
end

-- The best `limit` ok evaluations WHERE `where` (SQL over evaluations, with
-- its parameters), ranked as the search ranked them: by the result's cost,
-- which is the spec's objective when it declares one (1 / GFLOP/s), else the
-- time. Rows without an objective are ranked in SQL, by time.
function DB:best_rows(limit, where, ...)
  local base = "SELECT * FROM evaluations WHERE (" .. where .. ") AND status = 'ok' AND time_ms IS NOT NULL"
  local any = self:rows("SELECT 1 AS x FROM evaluations WHERE (" .. where .. ") AND status = 'ok' AND " ..
                        "result LIKE '%\"objective\"%' LIMIT 1", ...)
  if #any == 0 then return self:rows(base .. " ORDER BY time_ms ASC, n ASC LIMIT " .. math.tointeger(limit), ...) end
  local rows = self:rows(base, ...)
  for _, e in ipairs(rows) do
    local r = type(e.result) == "string" and json.decode(e.result) or nil
    local cost = type(r) == "table" and r.cost
    -- (no cost, or not a finite number: an objective that could not be
    -- computed ranks last, as the search ranked it)
    e.rank_cost = (type(cost) == "number" and cost == cost and cost < math.huge) and cost
      or (type(r) == "table" and r.objective ~= nil and math.huge) or e.time_ms
  end
  table.sort(rows, function(a, b)
    if a.rank_cost ~= b.rank_cost then return a.rank_cost < b.rank_cost end
    return (a.n or 0) < (b.n or 0)
  end)
  local out = {}
  for i = 1, math.min(limit, #rows) do out[i] = rows[i] end
  return out
end

-- The finished run that answers q for problem id, with its best evaluation
-- and its five best, or nil.
function DB:known_best(id, q)
  local p = self:problem(id, false)
  if not p then return nil end
  local runs = self:rows("SELECT * FROM runs WHERE problem_id = ? AND strategy = ? AND strategy_code = ? AND options = ?"
                         .. " AND seed = ? AND finished IS NOT NULL ORDER BY id DESC", p.id, q.strategy,
                         q.strategy_code or "", canon(q.options), q.seed)
  for _, r in ipairs(runs) do
    if covers(r, q) then
      local top = self:best_rows(5, "run_id = ?", r.id)
      -- the run's own best first: by the spec's objective when it has one
      -- (GFLOP/s), which the fastest time is not
      if r.best_n then
        local own = self:rows("SELECT * FROM evaluations WHERE run_id = ? AND n = ? AND status = 'ok'", r.id,
                              r.best_n)[1]
        if own then
          local rest = { own }
          for _, e in ipairs(top) do
            if e.n ~= own.n and #rest < 5 then rest[#rest + 1] = e end
          end
          top = rest
        end
      end
      return { problem = p, run = r, top = top, path = self.path }
    end
  end
end

-- Every state measured under problem id, the latest measurement of each:
-- state key -> { result =, eval_s =, id = }, the engine's `known` table.
function DB:measured(id)
  local p = self:problem(id, false)
  local out, n = {}, 0
  if not p then return out, 0 end
  for _, e in ipairs(self:rows("SELECT id, state, result, eval_s FROM evaluations"
                               .. " WHERE problem_id = ? AND served_from IS NULL ORDER BY id", p.id)) do
    local r = json.decode(e.result or "")
    if type(r) == "table" and r.status then
      -- (served as the backend measured it: counters another run collected
      -- under --profile, and the symptoms any run derived, are that run's
      -- choices; this run's profiler adds what it would add to a cold run,
      -- so a warm run visits the states a cold one does)
      if r.counters_collected then r.metrics = nil end
      r.symptoms, r.counters_collected = nil, nil
      if not out[e.state] then n = n + 1 end
      out[e.state] = { result = r, eval_s = e.eval_s, id = e.id }
    end
  end
  return out, n
end

-- LLM attempts carried by a candidate's origin (origin.llm, one table, or
-- origin.attempts, a list: {attempt=, expert=, model=, hint= or hints=,
-- outcome=}; or the origin itself when its expert is "llm" and it has a
-- numeric `attempt`, as the kernels strategies/synthesize.lua has the LLM
-- write, with the hint the attempt was written from in origin.hint), one
-- row each; the outcome defaults to the evaluation's status. (Synthesize's
-- tuning of an attempt's knobs, expert "tune", and its templates carry the
-- attempt's number too: no LLM wrote them.)
local function attempts_of(origin, status)
  if type(origin) ~= "table" then return {} end
  local list = type(origin.attempts) == "table" and origin.attempts or (type(origin.llm) == "table" and { origin.llm })
    or (origin.expert == "llm" and math.type(origin.attempt) == "integer" and { origin }) or {}
  local out = {}
  for _, a in ipairs(list) do
    if type(a) == "table" then
      local hint = a.hint or a.hints
      out[#out + 1] = { math.tointeger(a.attempt), a.expert or origin.expert, a.model,
                        type(hint) == "table" and json.encode(hint) or hint, a.outcome or status, json.encode(a) }
    end
  end
  return out
end

-- A run's writer: the engine's on_eval adds, on_round commits the batch.
local Session = {}
Session.__index = Session

function Session:warn(err)
  if self.broken then return end
  self.broken = true
  self.pending = {}
  io.stderr:write(string.format("kopt: the experience database stopped taking this run's results (%s); the run goes on,"
                                .. " its folder keeps everything\n", errors.describe(err)))
end

-- A record of a resumed run's log was written by the process that measured
-- it, unless it was killed before its batch was committed: it is written
-- again as served when the file has the state, as measured when not.
-- engine: for the source of a variant (a state whose key carries a source
-- hash), kept once in `sources`.
function Session:add(rec, engine)
  if self.broken or not self.db then return end
  local served = rec.from_db
  if rec.resumed then
    local k = self.known[rec.key]
    served = k and k.id or nil
  end
  local source
  if engine and (rec.key or ""):find("#", 1, true) and not self.sources_seen[rec.key] then
    self.sources_seen[rec.key] = true
    source = engine:source_of(rec.candidate)
  end
  self.pending[#self.pending + 1] = { rec = rec, served = served, source = source }
end

-- path as an absolute path (a run folder on record is found from any
-- working directory)
local function absolute(path)
  if path == nil or path:sub(1, 1) == "/" then return path end
  local real = sys.realpath(path)
  if real then return real end
  local cwd = sys.realpath(".")
  return cwd and (cwd .. "/" .. path:gsub("^%./", "")) or path
end

function Session:start_run()
  local i, db = self.info, self.db
  local p = db:problem(self.id, true)
  self.problem_id = p.id
  if self.id.source then
    db:run("INSERT OR IGNORE INTO sources (hash, text) VALUES (?, ?)", self.id.source_hash, self.id.source)
  end
  local _, rid = db:run("INSERT INTO runs (problem_id, strategy, strategy_code, options, seed, budget, time_limit, backend,"
                        .. " driver, device, out_dir, host, kopt, started) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        p.id, i.strategy, i.strategy_code or "", canon(i.options), i.seed,
                        i.budget ~= math.huge and i.budget or nil, i.time_limit, i.backend_label, self.id.driver,
                        self.id.device, absolute(i.out_dir), sys.hostname(), sys.version, sys.utc_iso())
  self.run_id = rid
  if i.problem then
    db:run("INSERT OR REPLACE INTO problem_names (problem_id, name, last_seen) VALUES (?, ?, ?)", p.id, i.problem,
           sys.utc_iso())
  end
end

-- Writes the pending evaluations in one transaction.
function Session:flush()
  if self.broken or not self.db or #self.pending == 0 then return end
  local db = self.db
  local ok, err = pcall(function()
    db:exec("BEGIN IMMEDIATE")
    local wok, werr = pcall(function()
      if not self.run_id then self:start_run() end
      for _, item in ipairs(self.pending) do
        local rec, served = item.rec, item.served
        local r, o = rec.result, rec.origin
        local res = {}
        for k, v in pairs(r) do if k ~= "key" and k ~= "cached" then res[k] = v end end
        local src_hash = (rec.key or ""):match("#(%x+)$") or self.id.source_hash
        if type(item.source) == "string" then
          db:run("INSERT OR IGNORE INTO sources (hash, text) VALUES (?, ?)", hash(item.source), item.source)
        end
        local _, eid = db:run("INSERT INTO evaluations (run_id, problem_id, n, state, config, source_hash, status, time_ms,"
                              .. " p90_ms, eval_s, method, expert, origin, result, served_from, timestamp)"
                              .. " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              self.run_id, self.problem_id, rec.n, rec.key, json.encode(rec.config), src_hash,
                              r.status, type(r.time_ms) == "number" and r.time_ms or nil,
                              type(r.p90_ms) == "number" and r.p90_ms or nil, rec.eval_s,
                              type(o) == "table" and o.method and tostring(o.method) or nil,
                              type(o) == "table" and o.expert and tostring(o.expert) or nil,
                              o and json.encode(o) or nil, json.encode(res),
                              math.type(served) == "integer" and served or (served and 0 or nil),
                              rec.timestamp)
        for _, a in ipairs(attempts_of(o, r.status)) do
          db:run("INSERT INTO llm_attempts (evaluation_id, attempt, expert, model, hint, outcome, detail)"
                 .. " VALUES (?, ?, ?, ?, ?, ?, ?)", eid, a[1], a[2], a[3], a[4], a[5], a[6])
        end
        if served then self.served = self.served + 1 else self.measured = self.measured + 1 end
      end
    end)
    if not wok then
      db.h:exec("ROLLBACK")
      error(werr, 0)
    end
    db:exec("COMMIT")
  end)
  self.pending = {}
  if not ok then self:warn(err) end
end

-- The options a finished run is filed under: the question's, but for a run
-- whose LLM went off (the endpoint unreachable, the key refused), which
-- searched with the heuristics under the endpoint's name: its LLM is said
-- as it was, so it answers neither the endpoint's question nor the
-- heuristics' (a run that was not what was asked is never a hit).
function Session:filed_options(engine)
  local options = self.info.options or {}
  local usage = engine.ctx and engine.ctx.llm_usage
  local llm = options["llm (resolved)"]
  if not (usage and usage.off and llm and llm ~= "none" and llm ~= "off") then return options end
  local out = {}
  for k, v in pairs(options) do out[k] = v end
  out["llm (resolved)"] = string.format("%s, off during the run: %s", llm, usage.off)
  return out
end

-- The run's last line in the file: how and why it stopped, and its best.
function Session:finish(engine)
  self:flush()
  if self.broken or not self.db or not self.run_id then return end
  local best = engine.best
  local ok, err = pcall(self.db.run, self.db, "UPDATE runs SET finished = ?, stop_reason = ?, evaluations = ?, measured = ?,"
                        .. " best_ms = ?, best_n = ?, options = ? WHERE id = ?", sys.utc_iso(), engine.stop_reason,
                        engine.evaluations, self.measured, best and best.result.time_ms or nil, best and best.n or nil,
                        canon(self:filed_options(engine)), self.run_id)
  if not ok then self:warn(err) end
end

-- The opened backend: the device of a recording, for the problem's row.
function Session:attach(backend)
  if not self.id.device then
    local d = backend:describe()
    self.id.device = d.device and tostring(d.device) or "unknown device"
  end
end

function Session:close()
  if self.db then self.db:close() self.db = nil end
end

-- Closes the session; a database file this run created and wrote nothing
-- into is removed (a run refused at its start writes nothing).
function Session:discard_unused()
  local remove = false
  if self.db and self.created and not self.run_id then
    local ok, rows = pcall(self.db.rows, self.db, "SELECT count(*) AS n FROM problems")
    remove = ok and rows[1] and rows[1].n == 0
  end
  self:close()
  if remove then
    for _, suffix in ipairs({ "", "-wal", "-shm" }) do os.remove(self.path .. suffix) end
  end
end

-- A hit as data: { path=, run=, time_ms=, config=, result=, n=, key= } (the
-- best: nil fields when the run found no valid configuration).
function Session:hit_summary()
  local h, best = self.hit, self.hit.top[1]
  return { path = h.path, run = h.run.id, key = h.problem.key, stop_reason = h.run.stop_reason, out_dir = h.run.out_dir,
           time_ms = best and best.time_ms, n = best and best.n, config = best and json.decode(best.config or ""),
           result = best and json.decode(best.result or "") }
end

-- A hit's problem asked under a name new to it: the name is kept, so that
-- `kopt db show NAME` finds it. One try, no wait: a busy file costs the
-- hit nothing, and the name is kept by the next run under it.
function Session:note_name()
  local p, name = self.hit.problem, self.info.problem
  if not name or name == p.name then return end
  local known = self.db:rows("SELECT 1 AS x FROM problem_names WHERE problem_id = ? AND name = ?", p.id, name)
  if #known == 0 then
    self.db.h:run("INSERT OR IGNORE INTO problem_names (problem_id, name, last_seen) VALUES (?, ?, ?)", p.id, name,
                  sys.utc_iso())
  end
end

-- The known best of a hit, with its evidence, as the lines a run prints.
function Session:hit_text(space)
  local function describe(c)
    if space then return space:describe(c) end
    local keys, parts = {}, {}
    for k in pairs(c) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do parts[i] = k .. "=" .. tostring(c[k]) end
    return table.concat(parts, ", ")
  end
  local h, r, p = self.hit, self.hit.run, self.hit.problem
  local lines = {
    string.format("kopt: %s on %s (%s)", r.strategy, self.info.problem or p.name or "?", self.info.backend_label),
    string.format("  answered from the experience database %s: 0 evaluations (--fresh searches again)", h.path),
    string.format("  known since run %d of %s on %s (%s): seed %d, %s, %d evaluations, stopped: %s", r.id,
                  r.finished or r.started, r.host or "?", r.out_dir or "?", r.seed,
                  r.budget and ("budget " .. r.budget) or "no budget", r.evaluations or 0, r.stop_reason),
    string.format("  device %s, %s%s, kopt %s", p.device or r.device or "?", p.toolkit, r.driver and (", driver " .. r.driver) or "",
                  r.kopt or "?"),
  }
  if p.name and self.info.problem and p.name ~= self.info.problem then
    -- (the name is outside the key: a renamed spec is the problem it was)
    lines[#lines + 1] = string.format("  problem %d of the database, first run as %s", p.id, p.name)
  end
  local best = h.top[1]
  if not best then
    lines[#lines + 1] = "  no valid configuration found"
    return table.concat(lines, "\n") .. "\n"
  end
  local res = json.decode(best.result or "") or {}
  local ev = {}
  if type(res.p90_ms) == "number" then ev[#ev + 1] = string.format("p90 %.5g ms", res.p90_ms) end
  if res.samples then ev[#ev + 1] = string.format("%s samples", tostring(res.samples)) end
  if type(res.err) == "table" and res.err.rel_l2 then ev[#ev + 1] = string.format("rel. L2 error %.3g", res.err.rel_l2) end
  if type(res.sol) == "number" then ev[#ev + 1] = string.format("%.0f%% of speed of light", 100 * res.sol) end
  if best.method then ev[#ev + 1] = "method " .. best.method end
  lines[#lines + 1] = string.format("  best: %.5g ms at evaluation %d of that run%s", best.time_ms, best.n,
                                    #ev > 0 and (" (" .. table.concat(ev, ", ") .. ")") or "")
  lines[#lines + 1] = string.format("  %-4s %-12s %s", "rank", "time (ms)", "config")
  for i, e in ipairs(h.top) do
    local c = json.decode(e.config or "") or {}
    -- (an edited or written kernel is told by its source hash: the same
    -- knobs, or none, with other code)
    local variant = type(e.state) == "string" and e.state:match("#(%x+)$")
    local text = describe(c)
    if variant then text = (text ~= "" and (text .. " ") or "") .. "(kernel " .. variant:sub(1, 8) .. ")" end
    lines[#lines + 1] = string.format("  %-4d %-12.5g %s", i, e.time_ms, text)
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The database session of one run, or nil when the database is off.
-- info: spec, space, choice, backend (replay), gpus, problem, strategy,
-- strategy_code (kopt.strategy.code_digest), options, seed, budget, time_limit, out_dir, backend_label, fresh, resume.
-- Looks for a hit unless --fresh or --resume; loads what was measured
-- unless --fresh.
function M.session(opts, info)
  local path, default = M.path(opts)
  if not path then return nil end
  -- the default place may be unwritable (a read-only home), or held by
  -- another program past the busy timeout (SQLite's exclusive locking
  -- mode): the run goes on without; a file named with --db or KOPT_DB must
  -- open
  local function without(why)
    why = tostring(why):gsub("^" .. path:gsub("%p", "%%%0") .. ": ", "")
    io.stderr:write(string.format("kopt: the experience database %s cannot be opened (%s); this run goes on without it"
                                  .. " (--db PATH names another, --no-db says none)\n", path, why))
  end
  local created = not sys.stat(path)
  local db, why = M.open(path, false, default)
  if not db then
    without(why)
    return nil
  end
  local self = setmetatable({ db = db, path = path, info = info, pending = {}, measured = 0, served = 0,
                              sources_seen = {}, created = created }, Session)
  self.id = M.identity(info)
  local ok, err = pcall(function()
    if not info.fresh and not info.resume then
      self.hit = db:known_best(self.id, info)
    end
    self.known, self.known_n = {}, 0
    if not info.fresh and not self.hit then self.known, self.known_n = db:measured(self.id) end
    if self.hit then self:note_name() end
  end)
  if not ok then
    db:close()
    if not (default and M.busy_reason(err)) then error(err, 0) end
    without(M.busy_reason(err))
    return nil
  end
  return self
end

M.DB = DB
return M
