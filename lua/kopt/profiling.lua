-- Who gets profiled, and what becomes of the counters. The engine creates one
-- profiler per run and calls it after each round with the records that round
-- added; the profiler asks the backend for counters (`backend:profile(job,
-- metrics)`: the backend knows how, this module decides whom and what)
-- for the candidates --profile selects, diagnoses them with kopt.symptoms and
-- writes the findings into the result, events.jsonl and trace.md.
--
--   --profile none      nobody (default)
--   --profile top-k     the current best M.DEFAULT_K results, as they appear
--   --profile top-N     the current best N
--   --profile every-N   every N-th valid result
--
-- Results that already carry counters (replay of a recording with counters,
-- such as the KTT files) are diagnosed for free, whatever the mode.
local spec_mod = require("kopt.spec")
local symptoms = require("kopt.symptoms")

local M = { DEFAULT_K = 3 }
local P = {}
P.__index = P

function M.parse(mode)
  if mode == nil or mode == "none" then return { kind = "none" } end
  if mode == "top-k" then return { kind = "top", n = M.DEFAULT_K } end
  local n = mode:match("^top%-(%d+)$")
  if n then return { kind = "top", n = math.tointeger(tonumber(n)) } end
  n = mode:match("^every%-(%d+)$")
  if n then return { kind = "every", n = math.max(1, math.tointeger(tonumber(n))) } end
  return nil, string.format("--profile: expected none, top-k, top-N or every-N, got '%s'", tostring(mode))
end

-- opts: mode (the --profile string), backend, spec (or nil), device (table
-- or nil), report_device (the device REPORT.md names, when not that one), metrics (names; default: spec.profile_metrics, then the backend's).
function M.new(opts)
  local policy = assert(M.parse(opts.mode))
  local self = setmetatable({ policy = policy, backend = opts.backend, spec = opts.spec,
                              device = opts.device or (opts.spec and opts.spec.device),
                              report_device = opts.report_device,
                              metrics = opts.metrics or (opts.spec and opts.spec.profile_metrics),
                              profiled = {}, valid_seen = 0, count = 0, seconds = 0 }, P)
  self.matrix = opts.matrix
  if self.matrix == nil then self.matrix = spec_mod.is_matrix(opts.spec and opts.spec.kernel and opts.spec.kernel.source) end
  self.quiet = opts.quiet
  if policy.kind ~= "none" and not (opts.backend and opts.backend.profile) then
    self.off = string.format("the %s backend cannot profile", opts.backend and opts.backend.name or "current")
    if not self.quiet then
      io.stderr:write("kopt: profiling off: ", self.off, " (counters in a recording are still used)\n")
    end
  end
  return self
end

-- Calls a spec method, nil when it fails (a spec without launch or work).
local function spec_call(spec, name, ...)
  local f = spec[name]
  if type(f) ~= "function" then return nil end
  local ok, v = pcall(f, spec, ...)
  return ok and v or nil
end
M.spec_call = spec_call

-- Static facts for symptoms: launch geometry and work from the spec, resources
-- from the result.
function P:facts(config, result)
  local launch, work
  if self.spec and config then
    launch = spec_call(self.spec, "launch", config)
    work = spec_call(self.spec, "work", config)
  end
  return symptoms.facts_from(result, launch, self.device, { matrix = self.matrix, work = work })
end

-- The symptoms a measured result's static facts support without counters
-- (the spec's launch, the compile's resources, the device: occupancy and its
-- limiter, spills), as the run's report finds them for a best without
-- counters: a list of {name, severity, summary}, empty when none.
function P:static_symptoms(config, result)
  local facts = self:facts(config, result)
  -- (the report's device: a replayed recording's GPU, whose limits are assumed)
  if self.report_device then facts.device = self.report_device end
  local ok, list = pcall(symptoms.diagnose, { resources = result.resources, time_ms = result.time_ms }, facts)
  local brief = {}
  for i, s in ipairs(ok and list or {}) do brief[i] = { name = s.name, severity = s.severity, summary = s.summary } end
  return brief
end

-- Diagnoses a result that has counters; stores result.symptoms (a list of
-- {name, severity, summary}) and returns the full diagnosis.
function P:annotate(config, result)
  if type(result.metrics) ~= "table" or next(result.metrics) == nil then return nil end
  local list = symptoms.diagnose(result, self:facts(config, result))
  local brief = {}
  for i, s in ipairs(list) do
    brief[i] = { name = s.name, severity = s.severity, summary = s.summary,
                 detail = s.pipe or s.limiter or s.unit or s.kind }
  end
  result.symptoms = brief
  return list
end

local function trace(engine, fmt, ...)
  if engine.rundir then engine.rundir:trace(fmt, ...) end
end

local function describe(engine, config)
  local ok, text = pcall(function() return engine.space:describe(config) end)
  return ok and text or "?"
end

-- Collects counters for one record through the backend. Failures switch
-- profiling off for the run, said once.
function P:collect(engine, rec)
  if self.off then return nil end
  local job = engine.job_for and engine:job_for(rec.candidate or { config = rec.config }) or
    { key = rec.key, config = rec.config, candidate = rec.candidate }
  local t0 = os.clock()
  local metrics, why, detail = self.backend:profile(job, self.metrics)
  if not metrics then
    local permanent = not (type(detail) == "table" and detail.kind == "candidate")
    if permanent then
      self.off = why or "profiling failed"
      trace(engine, "- profiling is off for this run: %s", self.off)
      if engine.rundir then engine.rundir:event({ event = "profile_off", reason = self.off }) end
      if not self.quiet then io.stderr:write("kopt: ", self.off, "; continuing without counters\n") end
    end
    return nil
  end
  self.count, self.seconds = self.count + 1, self.seconds + (os.clock() - t0)
  if type(detail) == "table" and detail.warning and not self.warned then
    self.warned = true
    trace(engine, "- profiling: %s (collected the others)", detail.warning)
    if not self.quiet then io.stderr:write("kopt: profiling: ", detail.warning, " (collected the others)\n") end
  end
  return metrics
end

function P:process(engine, rec, chosen)
  local r = rec.result
  if self.profiled[rec.key] or (not chosen and r.symptoms) then return end
  local has = symptoms.has_counters(r.metrics)
  if not has and chosen then
    local m = self:collect(engine, rec)
    if m then
      r.metrics = r.metrics or {}
      for k, v in pairs(m) do r.metrics[k] = v end
      -- (collected under --profile, not part of the measurement: the
      -- experience database does not serve them, kopt.expdb)
      r.counters_collected = true
      has = true
    end
  end
  if not has then return end
  if chosen then self.profiled[rec.key] = true end
  local list = self:annotate(rec.config, r)
  if chosen and list then
    trace(engine, "- profiled %s: %s%s", describe(engine, rec.config), symptoms.brief(list),
          list[1] and ("; " .. list[1].summary) or "")
    if engine.rundir then
      engine.rundir:event({ event = "profile", key = rec.key, metrics = r.metrics, symptoms = r.symptoms })
    end
  end
end

-- Called by the engine after each round with the records it added.
function P:after_round(engine, recs)
  local chosen = {}
  for _, rec in ipairs(recs) do
    if rec.result.status == "ok" then
      self.valid_seen = self.valid_seen + 1
      if self.policy.kind == "every" and self.valid_seen % self.policy.n == 0 then chosen[rec.key] = true end
    end
  end
  if self.policy.kind == "top" then
    local ok = {}
    for _, rec in ipairs(engine.records) do
      if rec.result.status == "ok" then ok[#ok + 1] = rec end
    end
    table.sort(ok, function(a, b) return a.result.time_ms < b.result.time_ms end)
    for i = 1, math.min(self.policy.n, #ok) do
      if not self.profiled[ok[i].key] then
        chosen[ok[i].key] = true
        recs[#recs + 1] = ok[i]
      end
    end
  end
  local done = {}
  for _, rec in ipairs(recs) do
    if not done[rec.key] then
      done[rec.key] = true
      self:process(engine, rec, chosen[rec.key] or false)
    end
  end
end

-- ctx:profile(candidate) from a strategy: counters for a candidate (measured
-- or not yet), diagnosed. Returns metrics, symptoms; or nil and the reason.
function P:profile(engine, candidate)
  local job = engine:job_for(candidate)
  local cached = engine.cache[job.key]
  if cached and symptoms.has_counters(cached.metrics) then
    if not cached.symptoms then self:annotate(job.config, cached) end
    return cached.metrics, cached.symptoms
  end
  if self.off then return nil, self.off end
  if not (self.backend and self.backend.profile) then return nil, "the backend cannot profile" end
  local metrics, why = self.backend:profile(job, self.metrics)
  if not metrics then return nil, why end
  local r = cached or { status = "ok" }
  r.metrics = r.metrics or {}
  for k, v in pairs(metrics) do r.metrics[k] = v end
  r.counters_collected = true
  self:annotate(job.config, r)
  if cached then self.profiled[job.key] = true end
  return r.metrics, r.symptoms
end

-- At the end: make sure the best has counters when profiling is on; returns
-- the facts report.write needs.
function P:finish(engine)
  local best = engine.best
  if best and self.policy.kind ~= "none" then
    self:process(engine, { key = best.key, config = best.config, result = best.result,
                           candidate = best.candidate }, true)
  end
  local facts = { name = self.spec and self.spec.name, device = self.report_device or self.device, matrix = self.matrix,
                  profiling = self.off or (self.policy.kind == "none" and "--profile none" or nil) }
  if best and self.spec then
    local f = self:facts(best.config, best.result)
    facts.work = f.work
    facts.launch = spec_call(self.spec, "launch", best.config)
  end
  return facts
end

return M
