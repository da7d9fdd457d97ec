-- The engine owns the loop around a strategy: it asks for candidates, checks
-- them, answers repeats from its cache, sends new states to the backend,
-- records every evaluation, and tells the strategy. Budget by evaluations and
-- by time; a failed candidate costs one evaluation, a candidate rejected by
-- the constraints costs none. On --resume the recorded evaluations answer the
-- strategy's questions again (it is deterministic given its seed), so nothing
-- recorded is measured twice and the evaluated set equals an uninterrupted run.
local errors = require("kopt.errors")
local json = require("kopt.json")
local patch = require("kopt.patch")
local rng_mod = require("kopt.rng")
local sys = require("kopt.sys")
local progress_mod = require("kopt.progress")

local M = {}
local Engine = {}
Engine.__index = Engine

-- Rounds in a row without one new evaluation before the engine gives up on a
-- strategy that only proposes what it has already seen.
M.STALL_ROUNDS = 200
M.LOG_CAP = 8192

-- A copy of a result or config for the strategy, nested tables too (a
-- result's metrics, resources, errors): what a strategy does to its copy,
-- in tell() or through ctx.best, never reaches what was recorded. (Results
-- are plain data: no cycles.) Despite its name, a copy all the way down.
local function shallow(t)
  local c = {}
  for k, v in pairs(t) do c[k] = type(v) == "table" and shallow(v) or v end
  return c
end

-- The strategy's view of the run.
local Ctx = {}
Ctx.__index = Ctx

-- No validity check: a config that was never answered (invalid ones included)
-- has no entry, and strategies call this for every neighbour they consider.
function Ctx:lookup(config)
  local space = self._engine.space
  if type(config) ~= "table" then error("ctx:lookup: expected a config (a table of knob values), got " .. type(config), 2) end
  local first = space.names[1]
  if first and config[first] == nil then
    error(string.format("ctx:lookup: the config has no value for knob '%s'%s", first,
                        type(config.config) == "table" and " (a result was passed: its .config is the config)" or ""), 2)
  end
  local r = self._engine.cache[space:key(config)]
  return r and shallow(r) or nil
end

-- The result recorded under a state's key (a config's ctx:key, or that of a
-- config with a code edit, "KEY#hash"), or nil.
function Ctx:result_of(key)
  local r = self._engine.cache[key]
  return r and shallow(r) or nil
end

-- What a strategy reads as ctx.best: the engine's best with its own config
-- and result tables, so a strategy that edits the best config in place to
-- make a neighbour does not rewrite the best.
function M.best_view(best)
  if not best then return nil end
  local v = shallow(best)
  v.config, v.result = shallow(best.config), shallow(best.result)
  return v
end

-- (one message is cut at LOG_CAP bytes, as a result's log is: a strategy
-- that logs its whole state each round must not fill the disk)
function Ctx:log(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt)
  if #msg > M.LOG_CAP then msg = msg:sub(1, M.LOG_CAP) .. string.format(" [%d bytes cut]", #msg - M.LOG_CAP) end
  self._engine:strategy_event(msg)
end

-- A transient state shown on the progress line (an LLM batch in flight, say),
-- not recorded; nil clears it.
function Ctx:status(fmt, ...)
  local e = self._engine
  local msg = fmt and (select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt)) or nil
  e.progress:status(e, msg, e.verbose)
end

-- (a config missing a knob has no key: "nil" in its place would name a
-- state no evaluation can have)
function Ctx:key(config)
  local space = self._engine.space
  if type(config) == "table" then
    for _, k in ipairs(space.knobs) do
      if config[k.name] == nil then error(string.format("ctx:key(config): the config has no value for knob '%s'", k.name), 2) end
    end
  end
  return space:key(config)
end

-- The last n evaluations (default all), oldest first: {config=, key=,
-- origin=, result=} (an LLM expert's history tool reads them).
function Ctx:recent(n)
  if n ~= nil and (math.type(n) ~= "integer" or n < 0) then
    error(string.format("ctx:recent(n): n must be a whole number of evaluations (0 or more), got %s",
                        type(n) == "string" and string.format("the string %q", n) or tostring(n)), 2)
  end
  local recs = self._engine.records
  local out = {}
  for i = math.max(1, #recs - (n or #recs) + 1), #recs do
    local r = recs[i]
    -- (copies: a strategy that edits what it reads must not rewrite the record)
    out[#out + 1] = { config = shallow(r.config), key = r.key, result = shallow(r.result),
                      origin = type(r.origin) == "table" and shallow(r.origin) or r.origin }
  end
  return out
end

-- The symptoms a measured candidate's static facts support, without
-- counters (kopt.profiling's static_symptoms): a list, nil when the run has
-- no profiler to know the launch and the device.
function Ctx:static_symptoms(candidate, result)
  local p = self._engine.profiler
  if not p or type(candidate) ~= "table" or type(candidate.config) ~= "table" or type(result) ~= "table" then
    return nil
  end
  return p:static_symptoms(shallow(candidate.config), shallow(result))
end

-- Profiles a measured candidate when the backend can (CUPTI); nil and a
-- reason otherwise.
function Ctx:profile(candidate)
  local e = self._engine
  if type(candidate) ~= "table" or type(candidate.config) ~= "table" then
    error(string.format("ctx:profile(candidate): expected a candidate { config = {...} }, got %s",
                        type(candidate) == "table" and "a table with no config (a bare config? wrap it: { config = c })"
                        or type(candidate)), 2)
  end
  local a, b
  if e.profiler then
    a, b = e.profiler:profile(e, candidate)
  elseif not e.backend.profile then
    return nil, "the " .. e.backend.name .. " backend cannot profile"
  else
    a, b = e.backend:profile(e:job_for(candidate))
  end
  -- (copies: the metrics are the record's)
  return type(a) == "table" and shallow(a) or a, type(b) == "table" and shallow(b) or b
end

local function call_strategy(self, fname, ...)
  local f = self.strategy[fname]
  if f == nil then return nil end
  sys.in_strategy(true)  -- a signal the strategy does not yield to is raised in it (kopt.sys)
  local ok, a = xpcall(f, function(err)
    if errors.is_user_error(err) or errors.is_interrupt(err) then return err end
    -- past the memory limit, this handler itself may need the reserve
    if select(3, sys.memory()) then sys.memory_grant() end
    return debug.traceback(errors.with_user_line(err), 2)
  end, ...)
  sys.in_strategy(false)
  if ok then return a end
  if errors.is_user_error(a) or errors.is_interrupt(a) then error(a, 0) end
  local first = tostring(a):match("^[^\n]*")
  local used, limit, hit = sys.memory()
  if hit and first:find("not enough memory", 1, true) then
    -- the ceiling of core/memlimit.h: room to write the run, and the reason
    sys.memory_grant()
    first = string.format("%s (kopt's Lua memory reached its limit of %.3g GiB, KOPT_MEMORY_LIMIT; %.3g GiB held: "
                          .. "a strategy that keeps more than that needs a higher limit, or 0 for none)",
                          first, limit / 2 ^ 30, used / 2 ^ 30)
  end
  errors.with_traceback(errors.RUNTIME,
    string.format("strategy '%s' failed in %s(): %s", self.strategy_name, fname, first), a)
end

function M.new(opts)
  local self = setmetatable({}, Engine)
  self.strategy, self.strategy_name = opts.strategy, opts.strategy_name or opts.strategy.name or "strategy"
  self.space, self.spec, self.backend = opts.space, opts.spec, opts.backend
  self.budget = opts.budget or 200
  self.time_limit = opts.time_limit or math.huge
  self.run = opts.run_dir_opener  -- function() -> rundir object, called at the first evaluation
  self.rundir = nil
  self.cache = {}        -- key -> result (every state answered in this run)
  self.records = {}      -- evaluated states in order: {key, config, origin, result, timestamp}
  self.resumed = {}      -- key -> recorded eval event (from a killed run)
  -- key -> { result =, eval_s = } measured by earlier runs (the experience
  -- database, kopt.expdb): answered like a resumed run's log, written to
  -- events.jsonl with from_db, never measured again
  self.known, self.served = opts.known or {}, 0
  self.evaluations, self.failures, self.restored_clock = 0, 0, 0
  self.verbose, self.quiet = opts.verbose, opts.quiet
  -- On resume the strategy says again much of what it said before: a
  -- message equal to the next one on record is already in events.jsonl and
  -- trace.md. Anything it says differently (an answer now taken from a
  -- transcript, say) is new and written.
  self.logged, self.logged_next = {}, 1
  -- resumed_left: evaluations on record not asked for again yet; they count
  -- against the budget (kept at the end if never asked). last_n: the
  -- highest evaluation number on record, so a new one never repeats one.
  self.resumed_left, self.last_n = 0, 0
  -- resumed with other options or another strategy file (kopt.run said so)
  self.resumed_changed = opts.resumed_changed
  -- resumed with another number of evaluation slots ({ was =, now = }):
  -- other batches, so another search after the first round
  self.resumed_slots = opts.resumed_slots
  for _, ev in ipairs(opts.resume_events or {}) do
    if ev.event == "eval" then
      if not self.resumed[ev.key] then self.resumed_left = self.resumed_left + 1 end
      self.resumed[ev.key] = ev
      if math.type(ev.n) == "integer" and ev.n > self.last_n then self.last_n = ev.n end
    end
    if ev.event == "log" then self.logged[#self.logged + 1] = ev.msg end
  end
  self.progress = progress_mod.new({ quiet = opts.quiet or not opts.progress, budget = self.budget,
                                     label = opts.label })
  self.ctx = setmetatable({
    _engine = self, spec = opts.spec, space = opts.space, rng = rng_mod.new(opts.seed or 1),
    -- (a copy: a strategy that edits its options must not change what the
    -- run records as them, nor the next run of kopt compare)
    seed = opts.seed or 1, options = shallow(opts.options or {}), budget = self.budget, evaluations = 0,
    best = nil, run_dir = opts.out_dir, backend_name = opts.backend.name,
    -- the run's identity, kept across its resumes (the transitions it
    -- writes carry it), and whether this is a resume
    run_id = opts.run_id, resumed = opts.resume_events ~= nil,
  }, Ctx)
  -- record_best: the best on record, for what the trace and the progress
  -- line call a new best (a resumed strategy that asks in another order is
  -- told of its best as it asks: ctx.best stays its own view)
  for _, ev in ipairs(opts.resume_events or {}) do
    if ev.event == "eval" and type(ev.result) == "table" and self:improves(ev.result, self.record_best) then
      self.record_best = ev.result
    end
  end
  self.on_eval = opts.on_eval
  self.on_round = opts.on_round  -- after a round's results are recorded, before tell
  self.profiler = opts.profiler  -- kopt.profiling: counters and symptoms after each round
  -- stop_when(engine) -> a reason to stop (a target reached, say), or nil;
  -- asked before every round, so a resumed run stops where the first did.
  self.stop_when = opts.stop_when
  -- Test hook: die by SIGKILL right after this many evaluations are recorded,
  -- exactly as an external `kill -9` would leave the run.
  self.kill_after = math.tointeger(tonumber(os.getenv("KOPT_TEST_SIGKILL_AFTER") or ""))
  -- and a Ctrl-C after this many (counting those a resume replays), pressed
  -- twice with "N,2" (the second raises the interruption in the code that runs)
  local int_after = os.getenv("KOPT_TEST_SIGINT_AFTER") or ""
  self.int_after = math.tointeger(tonumber(int_after:match("^%d+") or ""))
  self.int_twice = int_after:find(",2$") ~= nil
  return self
end

-- The run's clock. A resume's floor (restore_clock) is reached here, when
-- the clock is next read: after the round that replayed its batch, so the
-- batch's evaluations measured again in that round count inside it.
function Engine:clock()
  local now = self.restored_clock + self.backend:elapsed()
  if self.clock_floor then
    if self.clock_floor > now then
      self.restored_clock = self.restored_clock + (self.clock_floor - now)
      now = self.clock_floor
    end
    self.clock_floor = nil
  end
  return now
end

-- A recorded evaluation replayed on resume: the run's clock moves on by its
-- time, and to the clock it was recorded at (clock_s) when that is later:
-- the first run's clock counted more than evaluation times (a GPU's
-- compiles and checks between them), and a resumed run under --time-limit
-- must stop where it did, not make up the difference with more evaluations.
-- Every evaluation of a batch is recorded at the clock after the whole
-- batch, so that clock is a floor for when the batch is done (Engine:clock),
-- not for the clock before the batch's other evaluations are added.
function Engine:restore_clock(ev)
  if type(ev.eval_s) == "number" and ev.eval_s == ev.eval_s then
    self.restored_clock = self.restored_clock + ev.eval_s
  end
  if type(ev.clock_s) == "number" and ev.clock_s == ev.clock_s then
    self.clock_floor = math.max(self.clock_floor or ev.clock_s, ev.clock_s)
  end
end

-- A log message as one bullet of trace.md: its line breaks, which may come
-- from a model's reply, must not start lines of their own (a heading).
local function one_line(msg) return (msg:gsub("\r?\n%s*", " / ")) end

function Engine:strategy_event(msg)
  if self.logged[self.logged_next] == msg then
    self.logged_next = self.logged_next + 1
    return
  end
  if self.verbose then self.progress:message("%s: %s", self.strategy_name, msg) end
  if self.rundir then
    self.rundir:event({ event = "log", n = self.evaluations, msg = msg })
    self.rundir:trace("- [%d] %s", self.evaluations, one_line(msg))
  else
    self.pending_logs = self.pending_logs or {}
    table.insert(self.pending_logs, msg)
  end
end

-- The materialised source of a candidate, or nil + reason when its patch
-- cannot be applied.
function Engine:source_of(cand)
  if not self.spec then return nil end
  if cand.source then return cand.source end
  if cand.patch then
    -- (patch.apply's second value on success is the files it left out)
    local source, err = patch.apply(self.spec.kernel.source, cand.patch)
    if source then return source end
    return nil, err
  end
  return self.spec.kernel.source
end

-- State identity: the config key, plus a hash of the source when a candidate
-- carries its own source (a patch); spec, options and problem are fixed for a run.
-- An edit with no source to apply it to (no spec, or a patch that does not
-- apply) is named by a hash of its own text: it is never the plain config's
-- state, whose result it must neither take nor give.
function Engine:job_for(cand)
  local key = self.space:key(cand.config)
  local source, err = self:source_of(cand)
  local edit = type(cand.source) == "string" and cand.source or type(cand.patch) == "string" and cand.patch or nil
  if self.spec and source and source ~= self.spec.kernel.source then
    key = key .. "#" .. sys.sha256(source):sub(1, 16)
  elseif not source and edit then
    key = key .. "#" .. sys.sha256(edit):sub(1, 16)
  end
  -- (a copy: a strategy that edits its config table after ask(), or hands
  -- out the space's own, must not rewrite what was measured)
  -- (by knob name: a config table may inherit its values through a
  -- metatable, which pairs does not see)
  local config = {}
  for _, k in ipairs(self.space.knobs) do config[k.name] = cand.config[k.name] end
  return { key = key, config = config, candidate = cand, source = source, source_error = err }
end

local function bad_candidate(self, i, fmt, ...)
  errors.usage("strategy '%s' returned a bad candidate from ask(): candidates[%d]%s", self.strategy_name, i,
               string.format(fmt, ...))
end

-- Checks a candidate's shape; returns nil when it passes the constraints or
-- the reason it does not (a free 'invalid' result).
function Engine:check_candidate(i, cand)
  if type(cand) ~= "table" then bad_candidate(self, i, ": expected a table, got %s", type(cand)) end
  if type(cand.config) ~= "table" then bad_candidate(self, i, ".config: expected a table of knob values") end
  for name in pairs(cand.config) do
    if not self.space.index[name] then bad_candidate(self, i, ".config.%s: no such knob", tostring(name)) end
  end
  for _, k in ipairs(self.space.knobs) do
    local v = cand.config[k.name]
    if v == nil then bad_candidate(self, i, ".config.%s: missing", k.name) end
    -- 128.0 (what any `/` gives) is the knob value 128: a float with an
    -- integral value stands for that integer, in the key as in the defines.
    if math.type(v) == "float" and math.tointeger(v) and self.space.index[k.name].pos[v] then
      cand.config[k.name] = math.tointeger(v)
    elseif not self.space.index[k.name].pos[v] then
      local vals = {}
      for j, x in ipairs(k.values) do
        if j > 12 then vals[j] = "..." break end
        vals[j] = tostring(x)
      end
      bad_candidate(self, i, ".config.%s: %s is not one of the knob's values (%s)", k.name,
                    type(v) == "string" and string.format("'%s' (a string)", v) or tostring(v), table.concat(vals, ", "))
    end
  end
  if cand.patch ~= nil and type(cand.patch) ~= "string" then bad_candidate(self, i, ".patch: expected a string") end
  if cand.source ~= nil and type(cand.source) ~= "string" then
    bad_candidate(self, i, ".source: expected the kernel's source as a string, got %s", type(cand.source))
  end
  if cand.origin ~= nil and type(cand.origin) ~= "table" and type(cand.origin) ~= "string" then
    bad_candidate(self, i, ".origin: expected a table (such as {method = \"...\"}) or a string, got %s",
                  type(cand.origin))
  end
  if cand.origin ~= nil then
    -- (written to events.jsonl with the result: it must be plain data)
    local ok, err = pcall(json.encode, cand.origin)
    if not ok then
      bad_candidate(self, i, ".origin: must be plain data (tables, strings, numbers, booleans): %s",
                    (tostring(err):gsub("^.-: ", "")))
    end
    -- (the record keeps its own: a strategy that edits the table it returned
    -- must not rewrite what events.jsonl already says)
    if type(cand.origin) == "table" then cand.origin = shallow(cand.origin) end
  end
  local ok, why = self.space:is_valid(cand.config)
  if not ok then return why end
end

-- What the search minimises, on every ok result (`cost`): its time, or,
-- when the spec declares an objective metric, that metric (goal min) or its
-- reciprocal (goal max), so that strategies written for time steer by the
-- objective. An ok result whose objective is missing, not finite or not
-- positive costs math.huge: ranked last, as a failure would be.
function M.cost_of(spec, result)
  if result.status ~= "ok" then return nil end
  local obj = spec and spec.objective
  if not obj then return result.time_ms end
  local v = result.objective
  if type(v) ~= "number" or v ~= v or v <= 0 or v == math.huge then return math.huge end
  return obj.goal == "max" and 1 / v or v
end

-- Whether result beats `than` (a result; default: the best the strategy
-- has been told of).
function Engine:improves(result, than)
  if result.status ~= "ok" or type(result.time_ms) ~= "number" then return false end
  local spec = self.ctx.spec
  than = than or (self.best and self.best.result)
  if not than then return true end
  -- the spec's objective (a metric to maximise or minimise), else time
  if spec and spec.better then return spec:better(result, than) end
  return result.time_ms < than.time_ms
end

function Engine:ensure_rundir()
  if self.rundir or not self.run then return end
  self.rundir = self.run()
  for _, msg in ipairs(self.pending_logs or {}) do
    self.rundir:event({ event = "log", n = 0, msg = msg })
    self.rundir:trace("- [0] %s", one_line(msg))
  end
  self.pending_logs = nil
end

-- Numbers as events.jsonl stores them (lua-cjson writes 14 significant
-- digits): a fresh result is rounded the same way before anyone sees it, so a
-- resumed run tells its strategy exactly what the uninterrupted run told it.
local function as_logged(v)
  if math.type(v) == "float" then return tonumber(string.format("%.14g", v)) end
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = as_logged(x) end
  end
  return v
end

function Engine:record(job, result, eval_s, from_log)
  if not from_log then as_logged(result) end
  result.key = job.key
  result.cost = M.cost_of(self.ctx.spec, result)
  if result.cost == math.huge and type(result.objective) == "number" and not self.noted_objective then
    self.noted_objective = true  -- (once: a metric that can be 0 or negative is a spec to fix)
    self.progress:clear()  -- (else written onto the live line)
    io.stderr:write(string.format("kopt: the objective %s is %s for %s: kopt ranks a result whose objective is " ..
                                  "not a positive number last (make the metric a positive quantity)\n",
                                  self.ctx.spec.objective.metric, tostring(result.objective), job.key))
  end
  if result.log and #result.log > M.LOG_CAP then result.log = result.log:sub(1, M.LOG_CAP) .. "\n[truncated]" end
  self.cache[job.key] = result
  if result.free then return end
  self.evaluations = self.evaluations + 1
  self.ctx.evaluations = self.evaluations
  -- (read from the resumed log or served by the database: no time spent
  -- here, so the progress line's rate leaves them out)
  if from_log or job.from_db then self.not_measured = (self.not_measured or 0) + 1 end
  if result.status ~= "ok" then self.failures = self.failures + 1 end
  -- its number: the one on record when it comes from the log; else the next
  -- after every number used (equal to the count unless a resumed strategy
  -- asked for others than it did before)
  local n = from_log and math.type(from_log.n) == "integer" and from_log.n or nil
  if not n then
    n = math.max(self.evaluations, self.last_n + 1)
    self.last_n = n
  end
  local rec = { key = job.key, config = job.config, origin = job.candidate.origin, result = result,
                candidate = job.candidate, n = n, from_db = job.from_db, eval_s = eval_s,
                resumed = from_log ~= nil or nil,
                timestamp = from_log and from_log.timestamp or sys.utc_iso() }
  self.records[#self.records + 1] = rec
  local improved = self:improves(result)
  -- (a new best to say: better than everything on record too)
  local said = improved and (from_log ~= nil or not self.record_best or self:improves(result, self.record_best))
  if said and not from_log then self.record_best = nil end
  if improved then
    -- (the engine's own copy decides; ctx.best is the strategy's to read)
    self.best = { key = job.key, config = job.config, result = result, candidate = job.candidate,
                  source = job.source, n = n }
    self.ctx.best = M.best_view(self.best)
  end
  self:ensure_rundir()
  if self.rundir and not from_log then
    local r = shallow(result)
    r.key, r.cached, r.cost = nil, nil, nil
    self.rundir:event({ event = "eval", n = n, key = job.key, config = job.config,
                        origin = job.candidate.origin, patch = job.candidate.patch, result = r,
                        eval_s = eval_s, clock_s = self:clock(), timestamp = rec.timestamp,
                        from_db = job.from_db })
  end
  if self.rundir and said and not from_log then
    local obj = self.spec and self.spec.objective
    self.rundir:trace("- [%d] new best %.5g ms%s: %s%s", n, result.time_ms,
                      obj and type(result.objective) == "number" and
                        string.format(" (%s %.5g)", obj.metric, result.objective) or "",
                      self.space:describe(job.config),
                      job.candidate.origin and job.candidate.origin.method and
                        (" (" .. tostring(job.candidate.origin.method) .. ")") or "")
  end
  if self.on_eval then self.on_eval(self, rec) end
  if self.kill_after and self.evaluations >= self.kill_after then sys.kill_self() end
  if self.int_after and self.evaluations == self.int_after then
    sys.kill_self("INT")
    if self.int_twice then sys.kill_self("INT") end
  end
  self.progress:update(self, said)
end

-- One round: ask, check, answer from cache/log, evaluate the rest, tell.
-- Returns false when the strategy has nothing more to propose.
function Engine:round(n)
  local cands = call_strategy(self, "ask", self.ctx, n)
  -- a signal that came while ask() waited (an LLM request it then gave up
  -- on) stops the run before its answer is measured
  if sys.interrupted() then
    self.interrupted_in_ask = true
    return true
  end
  if type(cands) ~= "table" then
    errors.usage("strategy '%s': ask() must return a table of candidates, got %s", self.strategy_name, type(cands))
  end
  -- a list 1..#cands and nothing else: {config = c} unwrapped, a 0-based
  -- list or one keyed by config key would otherwise read as "finished"
  local count = 0
  for k in pairs(cands) do
    count = count + 1
    if math.type(k) ~= "integer" or k < 1 or k > #cands then
      errors.usage("strategy '%s': ask() must return a list of candidates ({ {config = ...}, ... }); " ..
                   "the table it returned has the key %s", self.strategy_name,
                   type(k) == "string" and ("'" .. k .. "'") or tostring(k))
    end
  end
  if count ~= #cands then
    errors.usage("strategy '%s': ask() returned a list with holes (%d entries, length %d)", self.strategy_name,
                 count, #cands)
  end
  if #cands == 0 then return false end
  if #cands > n then
    local slots = self.backend.slots or 1
    errors.usage("strategy '%s': ask(ctx, %d) returned %d candidates; at most n may be returned (n is the number " ..
                 "of evaluation slots free now, %d here, or the evaluations left in the budget when fewer%s)",
                 self.strategy_name, n, #cands, slots,
                 n < slots and string.format(": %d left", n) or "")
  end
  local results, pending, new_evals = {}, {}, 0
  local seen_in_batch = {}
  local first_record = #self.records + 1
  for i, cand in ipairs(cands) do
    local why = self:check_candidate(i, cand)
    local job = self:job_for(cand)
    -- (the stall message names an invalid candidate only if it was the last)
    self.last_invalid = why or job.source_error
    if why or job.source_error then
      results[i] = { status = "invalid", free = true, log = why or job.source_error, key = job.key }
    elseif self.cache[job.key] then
      results[i] = shallow(self.cache[job.key])
      results[i].cached = true
    elseif seen_in_batch[job.key] then
      results[i] = { dup_of = seen_in_batch[job.key] }
    elseif self.resumed[job.key] then
      local ev = self.resumed[job.key]
      self.resumed_left = self.resumed_left - 1
      local r = ev.result
      self:restore_clock(ev)
      self:record(job, r, ev.eval_s, ev)
      results[i] = shallow(r)
      -- (resumed: measured before the interruption, not a repeat in this run;
      -- served then by the experience database, it stays so)
      results[i].cached, results[i].resumed = true, true
      if ev.from_db then results[i].served = true end
      new_evals = new_evals + 1
      seen_in_batch[job.key] = i
    elseif self.known[job.key] then
      local k = self.known[job.key]
      job.from_db = k.id or true
      self.restored_clock = self.restored_clock + (k.eval_s or 0)
      self.served = self.served + 1
      self:record(job, shallow(k.result), k.eval_s)
      results[i] = shallow(self.cache[job.key])
      -- (served: measured by an earlier run, not a repeat in this one)
      results[i].cached, results[i].served = true, true
      new_evals = new_evals + 1
      seen_in_batch[job.key] = i
    elseif self.resumed_left > 0 and #pending >= self.budget - self.evaluations - self.resumed_left then
      -- a new measurement the budget has no room for once the evaluations
      -- on record that were not asked for again are counted: the run ends
      -- at its budget (only a strategy that asks otherwise than before
      -- gets here)
      self.budget_spent = true
    else
      seen_in_batch[job.key] = i
      pending[#pending + 1] = { i = i, job = job }
    end
  end
  if #pending > 0 then
    local jobs = {}
    for j, p in ipairs(pending) do jobs[j] = p.job end
    local before = self.backend:elapsed()
    local out = self.backend:evaluate(jobs)
    local per = as_logged((self.backend:elapsed() - before) / #jobs)
    for j, p in ipairs(pending) do
      local r = out[j] or { status = "crash", log = "backend returned no result" }
      self:record(p.job, r, per)
      results[p.i] = shallow(r)
      if not r.free then new_evals = new_evals + 1 end
    end
  end
  for i, r in ipairs(results) do
    if r.dup_of then
      results[i] = shallow(results[r.dup_of])
      results[i].cached = true
    end
  end
  if self.profiler then
    self.profiler:after_round(self, { table.unpack(self.records, first_record) })
    for _, r in ipairs(results) do
      local c = r.key and self.cache[r.key]
      if c and c.symptoms then
        r.metrics, r.symptoms = c.metrics and shallow(c.metrics), shallow(c.symptoms)
      end
    end
  end
  if self.budget_spent then return true end  -- (not told: the run ends here)
  self.stalled = new_evals == 0 and (self.stalled or 0) + 1 or 0
  if self.on_round then self.on_round(self) end
  call_strategy(self, "tell", self.ctx, results)
  return true
end

-- Runs to the end. Returns the reason it stopped.
function Engine:loop()
  call_strategy(self, "init", self.ctx)
  while true do
    if self.interrupted_in_ask or sys.interrupted() then return "interrupted" end
    if self.evaluations >= self.budget or self.budget_spent then return "budget" end
    if self:clock() >= self.time_limit then return "time limit" end
    if (self.stalled or 0) >= M.STALL_ROUNDS then return "stalled" end
    local why = self.stop_when and self.stop_when(self)
    if why then return why end
    local n = math.min(self.backend.slots or 1, self.budget - self.evaluations)
    if not self:round(n) then return "strategy finished" end
  end
end

-- Evaluations on record that the resumed strategy did not ask for again (a
-- strategy that is not deterministic, or a smaller --budget): still the
-- run's measurements, so they join its records, results.json and the best.
function Engine:keep_unasked(reason)
  local left = {}
  for key, ev in pairs(self.resumed) do
    if not self.cache[key] and type(ev.config) == "table" and type(ev.result) == "table" then left[#left + 1] = ev end
  end
  if #left == 0 then return end
  table.sort(left, function(a, b) return (a.n or 0) < (b.n or 0) end)
  for _, ev in ipairs(left) do
    local job = self:job_for({ config = ev.config, patch = ev.patch, origin = ev.origin })
    job.key = ev.key
    -- (their time is the run's too: the summary's clock counts it)
    self:restore_clock(ev)
    self:record(job, ev.result, ev.eval_s, ev)
  end
  local msg
  local on_record = 0
  for _ in pairs(self.resumed) do on_record = on_record + 1 end
  -- (past the budget only when more are on record than it allows: a
  -- strategy that asks for others under the same budget is not deterministic)
  if reason == "error" then
    msg = string.format("%d evaluation%s on record kept in the results (the strategy stopped with an error " ..
                        "before asking for %s again)", #left, #left == 1 and "" or "s", #left == 1 and "it" or "them")
  elseif reason == "interrupted" then
    msg = string.format("%d evaluation%s on record not replayed yet when the run was interrupted; kept in the " ..
                        "results", #left, #left == 1 and "" or "s")
  elseif (reason == "budget" and on_record > self.budget) or reason == "time limit" then
    msg = string.format("%d evaluation%s on record %s past this run's %s (--%s); kept in the results",
                        #left, #left == 1 and "" or "s", #left == 1 and "lies" or "lie",
                        reason == "budget" and ("budget of " .. self.budget) or "time limit",
                        reason == "budget" and "budget" or "time-limit")
  elseif self.resumed_slots then
    msg = string.format("%d evaluation%s on record %s not asked for again by the resumed strategy (resumed with " ..
                        "%d evaluation slots, the record made with %d: other batches, another search); kept in " ..
                        "the results", #left, #left == 1 and "" or "s", #left == 1 and "was" or "were",
                        self.resumed_slots.now, self.resumed_slots.was)
  elseif self.resumed_changed then
    msg = string.format("%d evaluation%s on record %s not asked for again by the resumed strategy (resumed with " ..
                        "other options, another strategy file or, for a strategy that plans with its budget, " ..
                        "another budget: another search); kept in the results",
                        #left, #left == 1 and "" or "s", #left == 1 and "was" or "were")
  else
    msg = string.format("%d evaluation%s on record %s not asked for again by the resumed strategy (is it " ..
                        "deterministic? math.random is seeded by --seed; use ctx.rng); kept in the results",
                        #left, #left == 1 and "" or "s", #left == 1 and "was" or "were")
  end
  if not self.quiet then
    self.progress:clear()  -- (else written onto the live line)
    io.stderr:write("kopt: " .. msg .. "\n")
  end
  if self.rundir then self.rundir:trace("\n%s\n", msg) end
end

function M.run(opts)
  local self = M.new(opts)
  local ok, reason = pcall(self.loop, self)
  if ok then
    local kept, err = pcall(self.keep_unasked, self, reason)
    if not kept then ok, reason = false, err end
  elseif errors.is_interrupt(reason) then
    -- (a resume interrupted while it replays: what is on record and not yet
    -- replayed is still the run's, in its results and its best)
    sys.interrupted()
    pcall(self.keep_unasked, self, "interrupted")
  else
    -- (a strategy that fails on resume still leaves the run what is on record)
    pcall(self.keep_unasked, self, "error")
  end
  self.progress:finish()
  if not ok and errors.is_interrupt(reason) then
    sys.interrupted()  -- answered: the hook is removed, the rest of the run is written
    ok, reason = true, "interrupted"
  end
  if not ok then
    self.error = reason
    reason = "error"
  end
  self.stop_reason = reason
  -- the strategy's own last word (MCGS writes its graph snapshot), however
  -- the run stopped, guarded as ask and tell are: a signal interrupts a
  -- finish that does not return, and an error names the strategy's line.
  -- The run's record stands either way: its files are written, then a
  -- failure there ends the command as one in ask or tell would
  -- (finish_error). After a failed write into the run folder nothing more
  -- is written there: finish is called without ctx.run_dir, so the files it
  -- would write (MCGS's snapshot) are left out quietly, and an error it
  -- raises is not said: the failure's one sentence stays the only one.
  local e, run_dir = self.error, self.ctx.run_dir
  local folder_failed = (type(e) == "table" and e.io_failed) or (self.rundir and self.rundir.failed)
  if folder_failed then self.ctx.run_dir = nil end
  local fok, ferr = pcall(call_strategy, self, "finish", self.ctx, reason)
  self.ctx.run_dir = run_dir  -- (the failure's message reads the folder)
  if fok or (folder_failed and not errors.is_interrupt(ferr)) then return self end
  local msg
  if errors.is_interrupt(ferr) then
    sys.interrupted()  -- answered: the rest of the run is written
    msg = string.format("strategy '%s' was interrupted by a signal in finish(); the run's files are written",
                        self.strategy_name)
  else
    msg = errors.describe(ferr)
  end
  if self.rundir then pcall(self.rundir.trace, self.rundir, "\n%s\n", msg) end
  if errors.is_interrupt(ferr) or self.error then
    -- (said, not raised: the run's own error, if any, is the one it ends with)
    self.progress:clear()
    io.stderr:write("kopt: " .. msg .. "\n")
  else
    self.finish_error = ferr
  end
  return self
end

M.Engine = Engine
return M
