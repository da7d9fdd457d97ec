-- Replay backend: answers evaluations from a recorded search space, with
-- Kernel Tuner's simulation semantics. A config's first visit costs its
-- recorded compile + verify + benchmark time on a simulated clock (the engine
-- never asks twice for the same state); failed configs stay failures; a
-- config absent from the recording is invalid and free.
local errors = require("kopt.errors")
local recording = require("kopt.recording")
local space_mod = require("kopt.space")

local M = {}
local Replay = {}
Replay.__index = Replay

-- opts.file: the recording; opts.rec: the recording already read from it
-- (kopt.recording), if it was; spec may be nil (the space then comes from the
-- file). opts.check: "strict" (default) or "lenient" (kopt.recording);
-- opts.quiet: no notes on stderr about skipped or failed entries;
-- opts.quiet_edits: none about edited sources it cannot measure (-q).
-- A value as a float32 holds it (Kernel Tuner's float32 knobs are written
-- as 0.10000000149011612 where the script said 0.1).
local function as_f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- Recorded knob values that are a spec's float values read as float32 are
-- that value (so a spec listing 0.1 replays a cache that recorded
-- 0.10000000149011612): in the knob lists and every entry's config.
function M.align_floats(rec, spec)
  for _, rk in ipairs(rec.knobs) do
    local sk
    for _, k in ipairs(spec.knobs) do if k.name == rk.name then sk = k end end
    if sk then
      local listed, map = {}, {}
      for _, v in ipairs(sk.values) do listed[v] = true end
      for _, v in ipairs(rk.values) do
        if math.type(v) == "float" and not listed[v] then
          for _, w in ipairs(sk.values) do
            if type(w) == "number" and as_f32(w) == as_f32(v) then map[v] = w end
          end
        end
      end
      if next(map) then
        for i, v in ipairs(rk.values) do rk.values[i] = map[v] or v end
        for _, e in ipairs(rec.entries) do
          local v = e.config[rk.name]
          if map[v] then e.config[rk.name] = map[v] end
        end
      end
    end
  end
end

-- KOPT_REPLAY_SLOTS's value: 1 when unset or empty, else a whole number of
-- at least 1 (a typo is said, not read as 1).
local function slots_from_env(text)
  if text == nil or text == "" then return 1 end
  local n = math.tointeger(tonumber(text))
  if not n or n < 1 then
    errors.usage("KOPT_REPLAY_SLOTS: expected a whole number of candidates per round, at least 1, got '%s'", text)
  end
  return n
end

function M.open(spec, opts)
  local rec, err = opts.rec, nil
  if not rec then rec, err = recording.read(opts.file, opts.check) end
  if not rec then errors.usage("%s", err) end
  if not opts.quiet then
    for _, note in ipairs(recording.notes(rec)) do io.stderr:write("kopt: " .. note .. "\n") end
  end
  -- KOPT_REPLAY_SLOTS: candidates per round, so a one-process replay can be
  -- compared with an MPI run of as many ranks (docs/MPI.md)
  local slots = opts.slots or slots_from_env(os.getenv("KOPT_REPLAY_SLOTS"))
  if spec then M.align_floats(rec, spec) end
  local self = setmetatable({ name = "replay", slots = math.max(1, slots), rec = rec, clock = 0, spec = spec,
                              quiet_edits = opts.quiet_edits }, Replay)
  local configs = {}
  for i, e in ipairs(rec.entries) do configs[i] = e.config end
  self.space = space_mod.listed({ knobs = rec.knobs, configs = configs })
  self.by_key = {}
  for _, e in ipairs(rec.entries) do self.by_key[self.space:key(e.config)] = e end
  if spec then
    local in_spec = {}
    for _, k in ipairs(spec.knobs) do in_spec[k.name] = true end
    for _, k in ipairs(rec.knobs) do
      if not in_spec[k.name] then
        errors.usage("replay file %s records the parameter '%s', which %s has no knob for", opts.file, k.name,
                     spec.path)
      end
    end
    for _, k in ipairs(spec.knobs) do
      if not self.space.index[k.name] then
        errors.usage("replay file %s has no parameter '%s' (knob of %s); it records: %s", opts.file,
                     k.name, spec.path, table.concat((function()
                       local n = {}
                       for i, kk in ipairs(rec.knobs) do n[i] = kk.name end
                       return n
                     end)(), ", "))
      end
    end
  end
  return self
end

local function copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = copy(v) end
  return c
end

function Replay:lookup(config)
  return self.by_key[self.space:key(config)]
end

function Replay:evaluate(jobs)
  local out = {}
  for i, job in ipairs(jobs) do
    local e = self:lookup(job.config)
    local cand = job.candidate or {}
    local own = self.spec and self.spec.kernel and self.spec.kernel.source
    local edited = (job.source ~= nil and job.source ~= own) or
                   (job.source == nil and (cand.source ~= nil or cand.patch ~= nil))
    if edited then
      -- (the recording holds the spec's kernel only: an edited one given its
      -- time could win unmeasured)
      -- (an evaluation all the same, as asked: recorded, and counted, so a
      -- strategy that proposes only edits here ends at its budget)
      out[i] = { status = "invalid",
                 log = "a replay measures the recorded kernel only: this candidate's edited source cannot be measured" }
      if not self.said_edited and not self.quiet_edits then
        self.said_edited = true
        io.stderr:write("kopt: a replay measures the recorded kernel only: candidates with an edited source are " ..
                        "invalid here (a GPU backend measures them)\n")
      end
    elseif not e then
      out[i] = { status = "invalid", free = true, log = "not in the recorded space" }
    else
      self.clock = self.clock + (e.cost_s or 0)
      out[i] = { status = e.status, time_ms = e.time_ms, p90_ms = e.p90_ms, samples = e.samples,
                 median_ms = e.median_ms, metrics = copy(e.metrics), resources = copy(e.resources),
                 launch = copy(e.launch),
                 log = e.log, cost_s = e.cost_s, compile_s = e.compile_s }
      -- the spec's metrics and objective from the recorded time, as the
      -- cuda backend reports them
      local spec, r = self.spec, out[i]
      if spec and spec.metrics and r.status == "ok" and type(r.time_ms) == "number" and r.time_ms > 0 then
        r.user_metrics = spec:metrics(job.config, r.time_ms)
        if r.user_metrics and spec.objective then r.objective = r.user_metrics[spec.objective.metric] end
      end
    end
  end
  return out
end

function Replay:elapsed() return self.clock end

function Replay:describe()
  return { backend = "replay", file = self.rec.file, format = self.rec.format,
           device = self.rec.device, kernel = self.rec.kernel, objective = self.rec.objective,
           recording = self.rec.digest }
end

function Replay:close() end

-- Why a run that replayed as `was` describes (its start event's device)
-- cannot be resumed with the recording `now` describes, or nil: the
-- recording's contents differ (the file measured again or edited, or
-- another file of the same name), so its times would mix with the run's.
function M.other_recording(was, now)
  local was_rec = type(was) == "table" and was.recording
  local now_rec = type(now) == "table" and now.recording
  if type(was_rec) ~= "string" or type(now_rec) ~= "string" or was_rec == now_rec then return nil end
  local was_file, now_file = tostring(was.file), tostring(now.file)
  local why = string.format("replayed %s as it was then; the file has changed since", was_file)
  -- (under another path: another file, as far as kopt can tell)
  if was_file ~= now_file then
    why = string.format("replayed %s; %s is another recording (other contents)", was_file, now_file)
  end
  return why .. ", and its times cannot be mixed with that run's (start again in another --out)"
end

return M
