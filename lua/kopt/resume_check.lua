-- What `--resume` checks before it replays a run's record
-- (docs/DURABILITY.md, "A resume continues the same measurement"): the
-- record's shape, line by line, and that the strategy, problem, spec, seed
-- and device are the ones the run began with.
local errors = require("kopt.errors")
local json = require("kopt.json")
local replay = require("kopt.backends.replay")
local sys = require("kopt.sys")

local M = {}

-- The statuses a backend gives a result (kopt.rundir's T4 invalidities,
-- plus kopt.lightspeed's "suspect").
M.STATUSES = { ok = true, compile_error = true, launch_error = true, crash = true, wrong = true, invalid = true,
               timeout = true, suspect = true }

-- A digest of the spec's whole knobs section but their help text: a
-- knob's default (the baseline), tags (what the moves know of it),
-- compiler options or define make another search or another kernel, and
-- the problem digest keys the experience database with names and values
-- alone. Nil without a spec.
function M.knobs_digest(spec)
  if not (spec and type(spec.raw) == "table" and type(spec.raw.knobs) == "table") then return nil end
  local knobs = {}
  for i, k in ipairs(spec.raw.knobs) do
    local copy = {}
    if type(k) == "table" then
      for f, v in pairs(k) do if f ~= "help" then copy[f] = v end end
    end
    knobs[i] = copy
  end
  return sys.sha256(json.pretty(knobs)):sub(1, 16)
end

local function bad_eval(dir, i, fmt, ...)
  errors.usage("--resume: %s/events.jsonl: event %d, an evaluation, has %s; the run cannot be resumed", dir, i,
               string.format(fmt, ...))
end

-- An evaluation line's own fields; nil when sound, else what is wrong.
local function eval_shape(ev)
  local r = ev.result
  if type(ev.key) ~= "string" then return "no 'key'" end
  if type(ev.config) ~= "table" then return "no 'config'" end
  if type(r) ~= "table" then return "no 'result'" end
  if type(r.status) ~= "string" then return "no result 'status'" end
  if not M.STATUSES[r.status] then
    local names = {}
    for s in pairs(M.STATUSES) do names[#names + 1] = s end
    table.sort(names)
    return string.format("the result status '%s', which is none of kopt's (%s)", r.status, table.concat(names, ", "))
  end
  if r.time_ms ~= nil and type(r.time_ms) ~= "number" then return "a result 'time_ms' that is not a number" end
  if r.status == "ok" and not (type(r.time_ms) == "number" and r.time_ms > 0 and r.time_ms < math.huge) then
    return "an ok result whose 'time_ms' is not a positive time"
  end
  if ev.n == nil then return "no number 'n'" end
  -- (a whole number of 2^53 or more is read as a float: whole, and past the
  -- count, which check_evals says)
  local past_2_53 = math.type(ev.n) == "float" and ev.n >= 2 ^ 53 and ev.n < math.huge and ev.n == math.floor(ev.n)
  if not past_2_53 and (math.type(ev.n) ~= "integer" or ev.n < 1) then
    return string.format("the number n=%s, which is no whole number of at least 1", json.encode(ev.n))
  end
end

-- A whole number as written: 1e18 read as a float is 1000000000000000000.
local function whole_text(n)
  local i = math.tointeger(n)
  if i then return string.format("%d", i) end
  return string.format("%.17g", n)
end

-- Every evaluation line: its shape, a number and a state of its own, and
-- numbers within the count on record (kopt numbers its evaluations 1, 2, ...
-- and a resume goes on after the highest: n=10^12 would leave a gap of as
-- many).
local function check_evals(events, dir)
  local count = 0
  for _, ev in ipairs(events) do if ev.event == "eval" then count = count + 1 end end
  local at_n, at_key = {}, {}
  for i, ev in ipairs(events) do
    if ev.event == "eval" then
      local why = eval_shape(ev)
      if why then bad_eval(dir, i, "%s", why) end
      if ev.n > count then
        bad_eval(dir, i, "the number n=%s, past the %d evaluations on record", whole_text(ev.n), count)
      end
      if at_n[ev.n] then bad_eval(dir, i, "the number n=%d of event %d too", ev.n, at_n[ev.n]) end
      if at_key[ev.key] then bad_eval(dir, i, "the state '%s' of event %d too", ev.key, at_key[ev.key]) end
      at_n[ev.n], at_key[ev.key] = i, i
    end
  end
end

-- A state's key is its config's (an edited kernel's adds '#' and its
-- source's hash): a line whose key names another config would be answered
-- for the wrong one.
local function check_keys(events, dir, space)
  if not space then return end
  for i, ev in ipairs(events) do
    if ev.event == "eval" then
      local ok, key = pcall(space.key, space, ev.config)
      local base = ev.key:match("^(.-)#%x+$") or ev.key
      if ok and key ~= base then
        bad_eval(dir, i, "the state '%s', which is not its config's ('%s')", ev.key, key)
      end
    end
  end
end

-- Raises a usage error naming what stops the resume; returns the start
-- event. info: strategy, problem, problem_digest, knobs_digest, space,
-- device, strategy_file, strategy_code, options; info.changed is set when
-- the run goes on with another strategy file or other options (said).
function M.check(events, dir, info, opts)
  if not events then
    errors.usage("--resume: %s holds no run to resume (no events.jsonl)", dir)
  end
  if #events == 0 then
    -- (a file of one torn line, a kill during the first write, is no empty one)
    local f = io.open(dir .. "/events.jsonl", "rb")
    local size = f and f:seek("end") or 0
    if f then f:close() end
    if size > 0 then
      errors.usage("--resume: %s/events.jsonl holds only a line cut short (%d bytes): the run recorded nothing " ..
                   "whole to resume; start it again without --resume", dir, size)
    end
    errors.usage("--resume: %s/events.jsonl is empty: the run recorded nothing to resume; start it again without --resume", dir)
  end
  -- a line edited by hand (valid JSON of the wrong shape: null, a number,
  -- an ok result with no time or a time of 0, a config outside the space)
  -- is named, not met later as an internal error or crowned the winner
  for i, ev in ipairs(events) do
    if type(ev) ~= "table" or #ev > 0 or type(ev.event) ~= "string" then
      errors.usage("--resume: %s/events.jsonl: event %d is not a JSON object; the run cannot be resumed", dir, i)
    end
  end
  local start = events[1]
  if start.event ~= "start" then errors.usage("--resume: %s/events.jsonl does not begin with a start event", dir) end
  check_evals(events, dir)
  if start.strategy ~= info.strategy then
    errors.usage("--resume: %s was started with strategy '%s', not '%s'", dir, tostring(start.strategy), info.strategy)
  end
  if start.problem ~= info.problem then
    errors.usage("--resume: %s was started on '%s', not '%s'", dir, tostring(start.problem), info.problem)
  end
  -- an edited spec, kernel source, knob list or constraint: the times on
  -- record were measured on another problem (runs begun before the digest
  -- was kept have none)
  if type(start.problem_digest) == "string" and start.problem_digest ~= info.problem_digest then
    errors.usage("--resume: the spec of %s (its kernel source, knobs, constraints, sizes or checks) has changed " ..
                 "since the run began; its measurements cannot be mixed with the new problem's (start again in " ..
                 "another --out)", dir)
  end
  -- a knob's default, tags, options or define edited: another baseline,
  -- other moves, another kernel (runs begun before this digest have none)
  if type(start.knobs_digest) == "string" and start.knobs_digest ~= info.knobs_digest then
    errors.usage("--resume: the spec's knobs (a default, tags, compiler options or define) have changed since " ..
                 "the run in %s began; the resumed search would not be the one on record (start again in another " ..
                 "--out)", dir)
  end
  if opts.seed and opts.seed ~= start.seed then
    errors.usage("--resume: %s was started with --seed %s, not %d", dir, tostring(start.seed), opts.seed)
  end
  -- (after the spec's digest: an edited constraint is said as such)
  for i, ev in ipairs(events) do
    if ev.event == "eval" and ev.result.status == "ok" and info.space then
      local okv, valid = pcall(info.space.is_valid, info.space, ev.config)
      if okv and not valid then
        errors.usage("--resume: %s/events.jsonl: event %d, an evaluation, has an ok result for a config outside the " ..
                     "spec's space; the run cannot be resumed", dir, i)
      end
    end
  end
  -- (after the space: a config edited by hand outside it is said as such)
  check_keys(events, dir, info.space)
  -- another GPU's measurements would mix with these (a recording of another
  -- device under the same name, or another card)
  local was_dev = type(start.device) == "table" and start.device.device
  local now_dev = type(info.device) == "table" and info.device.device
  if type(was_dev) == "string" and type(now_dev) == "string" and was_dev ~= now_dev then
    errors.usage("--resume: %s was measured on %s, this backend is %s; its results cannot be mixed with that run's",
                 dir, was_dev, now_dev)
  end
  -- a recording of the same name with other contents: its times would mix with the ones on record
  local other_rec = replay.other_recording(start.device, info.device)
  if other_rec then errors.usage("--resume: %s %s", dir, other_rec) end
  M.note_changes(events, start, dir, info, opts)
  M.note_slots(events, dir, info)
  return start
end

-- The number of evaluation slots (the n of ask(ctx, n)) the record was made
-- with, against this resume's (info.slots): with another, the strategy is
-- asked for other batches, so its questions after the first may differ,
-- through no fault of its own (a GPU run's slots follow the compile pool
-- and --gpus: another machine has others). Said, and info.slots_were set.
function M.note_slots(events, dir, info)
  if math.type(info.slots) ~= "integer" then return end
  for _, ev in ipairs(events) do
    if (ev.event == "start" or ev.event == "resume") and math.type(ev.slots) == "integer" and ev.slots ~= info.slots then
      info.slots_were = ev.slots
      io.stderr:write(string.format("kopt: note: %s was run with %d evaluation slots, this resume has %d: the " ..
                                    "strategy is asked for other batches, so the search after the record may " ..
                                    "differ from the one the first run would have made\n", dir, ev.slots, info.slots))
      return
    end
  end
end

-- A different file of the same strategy name, or other options, make
-- another search: said, not refused (a fixed bug is a fair reason).
function M.note_changes(events, start, dir, info, opts)
  -- (the same code under another path, such as the same file from another
  -- folder, is the same strategy: the path as typed alone says nothing)
  local same_code = info.strategy_code ~= nil and info.strategy_code == start.strategy_code
  if info.strategy_file and start.strategy_file and info.strategy_file ~= start.strategy_file and not same_code then
    info.changed = true
    io.stderr:write(string.format("kopt: note: %s was started with the strategy file %s; resuming with %s\n", dir,
                                  tostring(start.strategy_file), info.strategy_file))
  elseif info.strategy_code and start.strategy_code and info.strategy_code ~= start.strategy_code then
    -- the same path, edited since (or another kopt): its questions may differ
    info.changed = true
    io.stderr:write(string.format("kopt: note: %s was started with another version of the strategy file %s (its code, " ..
                                  "a file its options name, or kopt's has changed since)\n", dir, info.strategy_file))
  end
  -- (the options not given again are the run's own, taken back by
  -- kopt.run: only those given can differ)
  local latest = start
  for _, ev in ipairs(events) do
    if ev.event == "start" or ev.event == "resume" then latest = ev end
  end
  local given = {}
  for _, kv in ipairs(opts.opt or {}) do given[kv[1]] = true end
  if info.options and type(latest.options) == "table" and next(given) then
    local diff = {}
    for k in pairs(given) do
      local v, was = info.options[k], latest.options[k]
      -- (numbers by value: the log reads -2.0 back as -2)
      local same = type(was) == "number" and type(v) == "number" and was == v or tostring(was) == tostring(v)
      if was ~= nil and not same then
        diff[#diff + 1] = string.format("%s=%s (was %s)", k, tostring(v), tostring(was))
      end
    end
    table.sort(diff)
    if #diff > 0 then
      info.changed = true
      io.stderr:write(string.format("kopt: note: resuming %s with other options: %s\n", dir, table.concat(diff, ", ")))
    end
  end
end

return M
