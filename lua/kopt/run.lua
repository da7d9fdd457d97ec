-- `kopt [options] STRATEGY [SPEC]`: validates everything (flags, strategy,
-- spec, backend, run directory) before anything is written, then runs the
-- engine and writes the run's derived files.
local artifacts_mod = require("kopt.artifacts")
local engine_mod = require("kopt.engine")
local errors = require("kopt.errors")
local experience = require("kopt.experience")
local expdb = require("kopt.expdb")
local finalists = require("kopt.finalists")
local finish = require("kopt.finish")
local json = require("kopt.json")
local llm = require("kopt.llm")
local profiling = require("kopt.profiling")
local replay = require("kopt.backends.replay")
local relabel = require("kopt.relabel")
local report = require("kopt.report")
local resume_check = require("kopt.resume_check")
local rng_mod = require("kopt.rng")
local rundir_mod = require("kopt.rundir")
local range_probe = require("kopt.range_probe")
local sanitize = require("kopt.sanitize")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local strategy_mod = require("kopt.strategy")
local sys = require("kopt.sys")

local M = {}

-- Notes (what kopt noticed and goes on with) are said by one process: under
-- MPI kopt.cluster turns them off on every rank but 0, which parses the same
-- command line and says them once. Errors are no notes: a rank that cannot
-- serve stops, and rank 0 says why.
M.notes = true

-- Whether a replayed recording charges its evaluations a cost (the
-- simulated clock --time-limit reads): old Kernel Tuner caches and T4 files
-- without "times" record none.
function M.records_cost(backend)
  for _, e in ipairs(backend.rec and backend.rec.entries or {}) do
    if type(e.cost_s) == "number" and e.cost_s > 0 then return true end
  end
  return false
end

local function cuda_backend()
  -- lazy: optional, a kopt built without the cuda backend still replays
  local ok, cuda = pcall(require, "kopt.backends.cuda")
  if not ok then return nil, "this kopt was built without the cuda backend" end
  return cuda
end

local function gpu_available()
  local cuda, err = cuda_backend()
  if not cuda then return false, err end
  if cuda.available then return cuda.available() end
  return true
end

-- Decides the backend. Returns {kind=, file=, fallback_note=}.
local function choose_backend(opts, spec)
  if opts.backend then return opts.backend end
  local ok, why = gpu_available()
  if ok then return { kind = "cuda" } end
  if spec and spec.recording then
    why = tostring(why):match("^(.-): GPU commands are unavailable") or tostring(why)
    return { kind = "replay", file = spec.recording,
             note = string.format("%s; running on the recorded measurements in %s instead (replay: no kernel runs here)",
                                  why, spec.recording) }
  end
  errors.usage("%s", why)
end

-- Which LLM a strategy's options (with the environment) would ask, as one
-- string for the experience database's question: "off", "none" (no
-- endpoint: the heuristics answer) or "<endpoint> <model>". Nil for a
-- strategy that cannot ask one: no option named llm* and no option value
-- naming the experts (mcgs's moves=...,experts).
local function llm_identity(options)
  local asks = false
  for k, v in pairs(options or {}) do
    if (type(k) == "string" and k:find("^llm")) or (type(v) == "string" and v:find("experts", 1, true)) then
      asks = true
    end
  end
  if not asks then return nil end
  if options.llm == "off" then return "off" end
  local cfg = llm.config(options)
  local where = cfg.base_url or (cfg.replay and ("replay " .. cfg.replay))
  return where and (where .. " " .. cfg.model) or "none"
end

-- What can only be checked with knob values, checked on the first valid
-- configurations before anything runs: every constraint is a boolean
-- expression (a number or a string would silently constrain nothing), and
-- launch dimensions, shapes and work evaluate to what they must.
local function check_first_configs(spec, configs)
  local device = { device = spec.device }
  for _, c in ipairs(configs) do
    for _, e in ipairs(spec.constraints) do
      local v = e:eval(c, spec.problem, device)
      if type(v) ~= "boolean" then
        errors.usage("%s: %s: expression '%s' gave %s (%s), expected true or false", spec.path, e.label, e.text,
                     tostring(v), type(v) == "number" and "a number" or type(v) == "string" and "a string" or type(v))
      end
    end
    if spec.launch_exprs then spec:launch(c) end
    for i = 2, #(spec.pipeline or {}) do spec:launch_for(spec.pipeline[i].launch, c) end
    if spec.reference and spec.reference.launch then spec:reference_launch(c) end
    spec:args(c)
    spec:work(c)
  end
end

M.WALK_STEPS = 5000000

-- A constraint that raised or gave no boolean, met at a config (at: the
-- config, else the walk's current values): one sentence naming it, the
-- config and, for a device field no GPU here knows, that field.
local function constraint_failed(spec, space, err, at)
  local parts = {}
  for _, k in ipairs(spec.knobs) do
    local v
    if at then v = at[k.name] else v = rawget(space.values, k.name) end
    if v ~= nil then parts[#parts + 1] = k.name .. "=" .. tostring(v) end
  end
  local msg = tostring(err):gsub("^(constraints%[%d+%]):%d+:", "%1:")
  -- a device field a constraint reads that this device does not know (the
  -- GPU's clocks, with no GPU attached) is nil: named, as Lua's error is not
  local ci = tonumber(msg:match("^constraints%[(%d+)%]"))
  local e = ci and type(spec.constraints) == "table" and spec.constraints[ci]
  local text = type(e) == "table" and e.text or e
  local unknown = {}
  for field in (type(text) == "string" and text or ""):gmatch("%f[%w_]device%s*%.%s*([%a_][%w_]*)") do
    if type(spec.device) == "table" and spec.device[field] == nil then unknown[#unknown + 1] = "device." .. field end
  end
  if #unknown > 0 then
    msg = msg .. string.format(" (%s is not known on this device%s)", table.concat(unknown, ", "),
                               spec.device.assumed and ": no GPU is attached" or "")
  end
  errors.usage("%s: %s%s", spec.path, msg, #parts > 0 and " (at " .. table.concat(parts, ", ") .. ")" or "")
end

-- The spec's space, with its constraints and the first configs' values
-- checked now (a spec error, in one sentence naming the config).
-- Knobs that all declare defaults which together break a constraint: the
-- baseline (the config a run starts from and speedups are quoted against)
-- is another config then, said once per spec.
local default_noted = {}
local function default_note(spec, space)
  local c, parts = {}, {}
  for _, k in ipairs(spec.knobs) do
    if k.default == nil then return end
    c[k.name] = k.default
    parts[#parts + 1] = k.name .. "=" .. tostring(k.default)
  end
  if not M.notes or #parts == 0 or space:is_valid(c) or default_noted[spec.path] then return end
  default_noted[spec.path] = true
  io.stderr:write(string.format("kopt: %s: note: the knobs' defaults (%s) break the constraints, so the baseline is " ..
                                "the first valid config instead\n", spec.path, table.concat(parts, ", ")))
end

-- The spec's space, unchecked: a constraint that raises wherever a config
-- is checked (a strategy's is_valid, a sample, a recording's configs) stops
-- the command with the sentence constraint_failed says.
local function new_space(spec)
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  local space
  space = space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope,
                          on_error = function(err, config) constraint_failed(spec, space, err, config) end })
  return space
end

function M.build_space(spec)
  local space = new_space(spec)
  -- A constraint that errors or never holds is a spec error, found now.
  local firsts, walk_cut = {}, false
  local ok, first = pcall(function()
    if space:size_raw() <= 1e6 then
      space:walk(function(c) firsts[#firsts + 1] = c return #firsts < 16 end)
    else
      -- sampling first; a space whose valid configs are too rare for it to
      -- find is walked (constraints prune the walk), not declared empty, for
      -- at most WALK_STEPS knob values (seconds, not the days a walk of an
      -- unprunable 1e10 space would take)
      firsts[1] = space:sample(rng_mod.new(0))
      if not firsts[1] then
        walk_cut = space:walk(function(c) firsts[1] = c return false end, M.WALK_STEPS)
      end
    end
    return firsts[1]
  end)
  if not ok then
    -- (met by a sample: is_valid has said it already)
    if errors.is_user_error(first) then error(first, 0) end
    constraint_failed(spec, space, first)
  end
  if not first and walk_cut then
    errors.usage("%s: constraints: no configuration of the %.15g found that satisfies every constraint (random samples " ..
                 "and a walk of %d knob values found none; constraints on fewer knobs at a time let the walk prune)",
                 spec.path, space:size_raw(), M.WALK_STEPS)
  end
  if not first then
    errors.usage("%s: constraints: no configuration of the %.15g satisfies every constraint", spec.path,
                 space:size_raw())
  end
  check_first_configs(spec, firsts)
  default_note(spec, space)
  return space, first
end

-- The knobs' names in the space's order: results.json keeps it, so a replay
-- of that file has its knobs in that order (the moves and their ties follow
-- it), not in the order of names.
local function knob_names(space)
  local out = {}
  for i, k in ipairs(space and space.knobs or {}) do out[i] = k.name end
  return #out > 0 and out or nil
end

function M.main(opts, pos)
  if #pos == 0 then errors.usage("missing STRATEGY (see kopt --help)") end
  if #pos > 2 then errors.usage("too many arguments: '%s' (expected STRATEGY [SPEC])", pos[3]) end
  -- (from before the strategy file runs: a signal interrupts a loop in its
  -- top-level code as in init; a rank serving a cluster keeps the defaults)
  if not opts.cluster then sys.install_signal_handlers() end
  local strategy, strategy_label, strategy_code = strategy_mod.load(pos[1])
  if opts.help then
    io.stdout:write(strategy_mod.help(strategy))
    return 0
  end
  local options = strategy_mod.options(strategy, opts.opt)

  local spec = pos[2] and spec_mod.load(pos[2]) or nil
  for _, note in ipairs(M.notes and spec and spec.notes or {}) do
    io.stderr:write("kopt: " .. spec.path .. ": note: " .. note .. "\n")
  end
  if not spec and not (opts.backend and opts.backend.kind == "replay") then
    errors.usage("missing SPEC (a JSON file); it may be left out only with --backend replay:FILE")
  end
  -- The spec's constraints are checked before any backend starts.
  local space = spec and M.build_space(spec) or nil
  -- a run after one whose strategy hit the memory limit (a suite's next
  -- problem) gets the limit, and its reserve, back once that is collected
  if select(3, sys.memory()) then
    collectgarbage("collect")
    sys.memory_rearm()
  end
  local choice = choose_backend(opts, spec)
  -- the winner's checks on a GPU, asked for where kopt fell back to the
  -- spec's recording for want of one: said and skipped, as the run goes on
  -- as the README says (with --backend replay they are a usage error)
  if choice.note then
    for _, flag in ipairs({ { "sanitize", #(opts.sanitize or {}) > 0 }, { "range_probe", opts.range_probe ~= nil and
                             opts.range_probe ~= "off" } }) do
      if flag[2] then
        if M.notes then
          io.stderr:write(string.format("kopt: --%s skipped: it checks the winner on a GPU, and this run replays %s\n",
                                        flag[1]:gsub("_", "-"), choice.file))
        end
        opts[flag[1]] = nil
      end
    end
  end
  -- flags that act only where kernels run: said once under replay, not
  -- taken silently as if they had
  if choice.kind ~= "cuda" and not opts.q and M.notes then
    local idle = {}
    if opts.gpus then idle[#idle + 1] = "--gpus" end
    if opts.finalists then idle[#idle + 1] = "--finalists" end
    if opts.compile_timeout then idle[#idle + 1] = "--compile-timeout" end
    if #idle > 0 then
      io.stderr:write(string.format("kopt: note: %s %s nothing here: this run replays %s (no kernel is compiled or " ..
                                    "run)\n", table.concat(idle, ", "), #idle == 1 and "does" or "do", choice.file))
    end
  end
  -- the same for the flags of an MPI run, in a run that is none
  if not opts.cluster and not opts.q then
    local idle = {}
    if opts.mpi_root then idle[#idle + 1] = "--mpi-root" end
    if opts.mpi_timeout then idle[#idle + 1] = "--mpi-timeout" end
    if opts.allow_mixed then idle[#idle + 1] = "--allow-mixed" end
    if #idle > 0 then
      io.stderr:write(string.format("kopt: note: %s %s nothing here: this run is not spread over MPI ranks (not " ..
                                    "started by mpirun or srun, or KOPT_MPI=0; docs/MPI.md)\n",
                                    table.concat(idle, ", "), #idle == 1 and "does" or "do"))
    end
  end
  if opts.sanitize and #opts.sanitize > 0 and choice.kind ~= "cuda" then
    errors.usage("--sanitize: checks the winner on a GPU; this run replays %s (no kernel runs)", choice.file)
  end
  if opts.range_probe and opts.range_probe ~= "off" and choice.kind ~= "cuda" then
    errors.usage("--range-probe: checks the winner on a GPU; this run replays %s (no kernel runs)", choice.file)
  end
  -- by default a GPU run's winner is also checked on larger inputs (kopt.range_probe)
  opts.range_probe = opts.range_probe or (choice.kind == "cuda" and "note" or "off")
  -- by default a GPU run's winner goes through racecheck (kopt.sanitize)
  if opts.sanitize == nil then opts.sanitize = choice.kind == "cuda" and { "racecheck" } or {} end
  if choice.kind == "cuda" and opts.cluster and not opts.gpus then
    opts.gpus = opts.cluster:share_gpus()  -- ranks of one host share its GPUs
  end
  local problem = spec and spec.name or (choice.file:match("([^/]+)$"):gsub("%.json$", ""))
  local dir = opts.out or ("runs/" .. problem)
  local budget = opts.budget or strategy.default_budget or 200
  -- The experience database (kopt.expdb): a question it already answered is
  -- printed with its evidence before any backend opens (no recording parsed,
  -- no GPU worker started) or anything is written; otherwise what it
  -- measured before is served, not measured again.
  local backend_label = choice.kind == "replay" and ("replay: " .. choice.file) or "cuda"
  -- --no-db (or KOPT_DB=off): the learned method names stay in memory too
  relabel.set_persistent(not (opts.no_db or os.getenv("KOPT_DB") == "off"))
  -- (--no-db alone: the test suites run with KOPT_DB=off and a dataset of their own)
  experience.set_persistent(not opts.no_db)
  -- (a strategy that can ask an LLM is answered only by runs that asked the
  -- same one: the endpoint and model come from the environment too)
  local question_options = options
  local llm_id = llm_identity(options)
  local files_id = strategy_mod.files_digest(options)
  -- (a lenient replay skips the recording's bad entries, where a strict one
  -- refuses the file: a lenient run answers no strict question)
  local lenient = choice.kind == "replay" and opts.replay_check == "lenient"
  if llm_id or files_id or lenient then
    question_options = {}
    for k, v in pairs(options) do question_options[k] = v end
    question_options["llm (resolved)"] = llm_id
    -- (the contents of the files the options name: an edited generator)
    question_options["files (contents)"] = files_id
    question_options["replay check"] = lenient and "lenient" or nil
  end
  local memory = expdb.session(opts, {
    spec = spec, space = space, choice = choice, gpus = opts.gpus, problem = problem,
    strategy = strategy.name, strategy_code = strategy_code, options = question_options, seed = opts.seed or 1,
    budget = budget,
    time_limit = opts.time_limit, plans_with_budget = strategy.plans_with_budget,
    out_dir = dir, backend_label = backend_label, fresh = opts.fresh, resume = opts.resume })
  if memory and memory.hit then
    opts.db_hit = memory:hit_summary()  -- for a caller such as kopt suite: no run folder is written
    io.stdout:write(memory:hit_text(space))
    memory:close()
    return 0
  end
  local backend
  if choice.kind == "replay" then
    backend = replay.open(spec, { file = choice.file, check = opts.replay_check, quiet = not M.notes,
                                  quiet_edits = opts.q or not M.notes })
    if space then space = M.recorded_part(space, backend, choice.file, spec) end
    -- (the GPU the recording was made on, by name: what experts are told and
    -- transitions are filed under; its limits stay the assumed device's)
    if spec and backend.rec and type(backend.rec.device) == "string" and type(spec.device) == "table"
       and spec.device.assumed then
      spec.recorded_device = backend.rec.device
    end
    if opts.time_limit and not opts.q and M.notes and not M.records_cost(backend) then
      io.stderr:write(string.format("kopt: note: --time-limit: %s records no evaluation cost (no compile or " ..
                                    "benchmark times), so the simulated clock stays at 0 and the limit is never " ..
                                    "reached; --budget bounds this run\n", choice.file))
    end
  else
    local cuda, err = cuda_backend()
    if not cuda then errors.usage("%s", err) end
    backend = cuda.open(spec, { gpus = opts.gpus, seed = opts.seed, profile = opts.profile, verbose = opts.v,
                                compile_timeout_s = opts.compile_timeout })
    if backend.device then
      spec:set_device(backend.device)
      space = M.build_space(spec)
    end
  end
  space = space or backend.space
  if budget == math.huge and space.list == nil and space:size_raw() > space_mod.ENUMERATE_LIMIT then
    errors.usage("strategy %s needs --budget on a space of %.3g raw points", strategy.name, space:size_raw())
  end
  if memory then memory:attach(backend) end

  -- Under mpirun / srun (kopt.cluster): rank 0 spreads the evaluations over
  -- the ranks; the others serve them here and write nothing.
  if opts.cluster then
    backend = opts.cluster:attach(backend, spec)
    if not backend then return 0 end
  end

  -- One process per run folder, from before the first read of its record
  -- to the end (docs/DURABILITY.md). A signal from here on stops the run
  -- between evaluations (a second one, or a strategy that does not return
  -- within a second, from a hook inside the Lua code).
  sys.install_signal_handlers()
  local lock, created = rundir_mod.lock(dir)
  local state = {}
  local ok, rc = xpcall(M.locked, function(e)
    if errors.is_user_error(e) or errors.is_interrupt(e) then return e end
    return debug.traceback(errors.describe(e), 2)
  end, opts, { strategy = strategy, strategy_label = strategy_label, options = options,
                -- (what a resume compares: the file's code and the files its
                -- options name, a move generator edited between the two)
                strategy_code = strategy_code .. (files_id and ("+" .. files_id) or ""),
                spec = spec,
               space = space, backend = backend, choice = choice, problem = problem, dir = dir,
               budget = budget, state = state, memory = memory })
  if not state.opened then rundir_mod.unlock_unused(dir, lock, created) end
  if not ok then error(rc, 0) end
  return rc
end

-- A spec replayed on a recording that holds only part of its space: the
-- search runs over the recorded configs the spec allows. Left as it was, a
-- config missing from the recording comes back invalid and free, so a
-- strategy drawing from the spec's space would mostly draw such configs,
-- and stop as stalled after a handful of evaluations. A recording of the
-- whole space leaves the spec's space as it is.
function M.recorded_part(space, backend, file, spec)
  local inside = {}
  for _, c in ipairs(backend.space.list) do
    -- (a constraint that fails past the configs checked at load is met
    -- here: is_valid raises it as the spec's error)
    if space:is_valid(c) then inside[#inside + 1] = c end
  end
  if #inside == 0 then
    errors.usage("replay file %s holds none of the configurations %s allows (%d recorded, none within its knob " ..
                 "values and constraints)", file, spec.path, #backend.space.list)
  end
  -- counted by a walk (space:size() would cache the list, and sampling from
  -- it draws other configs than the rejection sampling a full recording
  -- gets); a space too large to walk is sampled instead, from a copy of its
  -- own: 256 configs all recorded leave it as it is
  local whole, missing = nil, false
  if space:size_raw() <= 1e6 then
    whole = 0
    local ok, err = pcall(space.walk, space, function() whole = whole + 1 return true end)
    if not ok then constraint_failed(spec, space, err) end
    missing = #inside < whole
  else
    local probe, rng = M.build_space(spec), rng_mod.new(0)
    for _ = 1, 256 do
      local c = probe:sample(rng)
      if c == nil then break end
      if not backend:lookup(c) then missing = true break end
    end
  end
  if not missing then return space end
  local held = whole and string.format("%d of the %d configurations %s allows", #inside, whole, spec.path)
    or string.format("%d configurations, and %s allows others (up to %.3g in all)", #inside, spec.path,
                     space:size_raw())
  if M.notes then
    io.stderr:write(string.format("kopt: %s holds %s; the search runs over those %d\n", file, held, #inside))
  end
  return space_mod.listed({ knobs = space.knobs, configs = inside })
end

-- The run itself, with the folder's lock held.
-- What kopt.sanitize needs to check the winner and, when it has errors of
-- its own, the next fastest ok configs: the run's best first, never a
-- finalist whose re-measurement failed; a finalist named winner keeps its
-- re-measured time.
function M.sanitize_opts(engine, spec, backend, tools, verdict)
  local rows = {}
  for _, row in ipairs(verdict and verdict.rows or {}) do rows[row.key] = row end
  local ranked, best = {}, engine.best
  for _, rec in ipairs(engine.records) do
    if rec.key == best.key then ranked[1] = rec break end
  end
  for _, rec in ipairs(finalists.top(engine, 8)) do
    local row = rows[rec.key]
    if rec.key ~= best.key and #ranked < 4 and not (row and row.failed) then ranked[#ranked + 1] = rec end
  end
  local later = {}  -- a pipeline's later kernels are the candidate's too
  for i = 2, #(spec and spec.pipeline or {}) do later[#later + 1] = spec.pipeline[i].entry end
  return {
    tools = tools, backend = backend, ranked = ranked,
    job_for = function(rec) return engine:job_for(rec.candidate or { config = rec.config }) end,
    entry_for = function(rec)
      local list = { rec.candidate and rec.candidate.entry or spec:entry(rec.config) }
      for _, e in ipairs(later) do list[#list + 1] = e end
      return list
    end,
    describe = function(rec) return engine.space:describe(rec.config) end,
    interrupted = sys.interrupted,
    make_best = function(rec)
      local job = engine:job_for(rec.candidate or { config = rec.config })
      local result, row = {}, rows[rec.key]
      for k, v in pairs(rec.result) do result[k] = v end
      if row and row.median_ms then
        result.first_ms, result.time_ms, result.finalist_times = row.first_ms, row.median_ms, row.times
      end
      engine.best = { key = rec.key, config = rec.config, result = result, candidate = rec.candidate,
                      source = job.source, n = rec.n }
      engine.ctx.best = engine_mod.best_view(engine.best)
    end,
  }
end

function M.locked(opts, r)
  local strategy, strategy_label, options, spec = r.strategy, r.strategy_label, r.options, r.spec
  local space, backend, choice, problem, dir, budget = r.space, r.backend, r.choice, r.problem, r.dir, r.budget
  local events_path = dir .. "/events.jsonl"
  local existing, good_end, size = rundir_mod.read_events(events_path)
  -- a fresh run where a log was deleted by hand: the files derived from it
  -- go too, before this run writes any (transitions were appended to the
  -- old run's, and counted twice by kopt regraph)
  -- (only where a kopt run's own files show it was one: a folder of the
  -- user's that holds a graph.json of theirs is not)
  if not opts.resume and not existing and (sys.stat(dir .. "/trace.md") or sys.stat(dir .. "/results.json")) then
    rundir_mod.clear_derived(dir)
  end
  local torn_at = existing and good_end < size and good_end or nil
  local digest, knobs_digest = expdb.problem_digest(spec, space), resume_check.knobs_digest(spec)
  local info = { strategy = strategy.name, problem = problem, strategy_file = strategy_label, options = options,
                 strategy_code = r.strategy_code, device = opts.resume and backend:describe() or nil,
                 problem_digest = digest, knobs_digest = knobs_digest, space = space, slots = backend.slots or 1 }
  local seed = opts.seed or 1
  local resume_events, prior = nil, 0
  -- the run's identity across its resumes: its lines in the user's
  -- transitions dataset are told from other runs' by it (a run begun
  -- before it was kept has none)
  local run_id = sys.sha256(table.concat({ sys.hostname(), sys.getpid(), sys.utc_iso(), sys.now(), dir }, " ")):sub(1, 16)
  if opts.resume then
    local start = resume_check.check(existing, dir, info, opts)
    seed = start.seed
    run_id = type(start.run_id) == "string" and start.run_id or nil
    -- the budget, time limit and options of the run resumed (as its latest
    -- start or resume event gives them: a resume may have extended it),
    -- unless given again
    local latest = start
    for _, ev in ipairs(existing) do
      if ev.event == "start" or ev.event == "resume" then latest = ev end
    end
    if opts.budget == nil and (type(latest.budget) == "number" or latest.budget == nil) then
      budget = latest.budget or math.huge
    elseif strategy.plans_with_budget and type(latest.budget) == "number" and budget ~= latest.budget then
      -- (anneal cools over its budget: another budget, another schedule,
      -- so the evaluations on record are not all asked for again)
      info.changed = true
      io.stderr:write(string.format("kopt: note: %s plans with its budget; resuming %s with --budget %s (was %s) " ..
                                    "makes another search\n", strategy.name, dir, tostring(budget), tostring(latest.budget)))
    end
    if opts.time_limit == nil and type(latest.time_limit) == "number" then opts.time_limit = latest.time_limit end
    -- (each option on record stays unless given again: a resume with one
    -- --opt changes that one, not the others back to their defaults)
    local given = {}
    for _, kv in ipairs(opts.opt or {}) do given[kv[1]] = true end
    if type(latest.options) == "table" then
      for k, v in pairs(latest.options) do
        if not given[k] and options[k] ~= nil and type(v) == type(options[k]) then
          -- (the log reads -2.0 back as -2: a float option stays a float)
          if math.type(options[k]) == "float" and math.type(v) == "integer" then v = v + 0.0 end
          options[k] = v
        end
      end
    end
    resume_events = existing
    for _, ev in ipairs(existing) do if ev.event == "eval" then prior = prior + 1 end end
  elseif existing and #existing > 0 then
    errors.usage("%s already holds a run; continue it with --resume or choose another --out", dir)
  end
  local backend_label = choice.kind == "replay" and ("replay: " .. choice.file) or "cuda"
  if r.memory then r.memory.info.seed = seed end  -- a resumed run's own
  if choice.note and not opts.q then io.stderr:write("kopt: " .. choice.note .. "\n") end

  local function open_rundir()
    r.state.opened = true
    local rd = rundir_mod.open(dir, opts.resume, torn_at)
    local ev = { event = opts.resume and "resume" or "start", strategy = strategy.name,
                 strategy_file = strategy_label, strategy_code = r.strategy_code, problem = problem,
                 spec = spec and spec.path,
                 backend = backend_label, seed = seed, budget = budget, time_limit = opts.time_limit,
                 options = options, kopt = sys.version, host = sys.hostname(), timestamp = sys.utc_iso(),
                 device = backend:describe(), problem_digest = digest, knobs_digest = knobs_digest, run_id = run_id,
                 slots = backend.slots or 1 }
    rd:event(ev)
    if opts.resume then
      rd:trace("\n## Resumed %s (%d evaluations on record)\n", ev.timestamp, prior)
    else
      rd:trace("# kopt run: %s on %s\n\n- started %s, kopt %s, seed %d, budget %s\n- backend: %s\n",
               strategy.name, problem, ev.timestamp, sys.version, seed,
               budget == math.huge and "none" or tostring(budget), backend_label)
    end
    return rd
  end

  -- a strategy that draws from math.random instead of ctx.rng still makes
  -- the same run for the same seed, and a resumed run asks what it asked
  math.randomseed(seed)
  -- a replay's report names the recording's GPU, not the device a spec's
  -- expressions assumed (no peaks are known for it: no speed of light)
  local recorded = backend.name == "replay" and backend:describe().device
  -- (assumed: its SM count and limits are unknown here, so no tail effect is claimed)
  local report_device = type(recorded) == "string" and { name = recorded .. " (recorded)", assumed = true } or nil
  local profiler = profiling.new({ mode = opts.profile, backend = backend, spec = spec, quiet = opts.q,
                                   report_device = report_device })
  -- Per-variant files in variants/ (kopt.artifacts); none without a spec.
  local artifacts = artifacts_mod.new({ dir = dir, spec = spec, mode = opts.artifacts,
                                        compile = backend.name ~= "replay",
                                        arch = spec and spec.device and spec.device.arch })
  local engine = engine_mod.run({
    strategy = strategy, strategy_name = strategy.name, options = options, space = space, spec = spec,
    backend = backend, budget = budget, time_limit = opts.time_limit, seed = seed,
    run_dir_opener = open_rundir, out_dir = dir, resume_events = resume_events, resumed_changed = info.changed,
    resumed_slots = info.slots_were and { was = info.slots_were, now = info.slots },
    run_id = run_id,
    quiet = opts.q, verbose = opts.v, progress = true, profiler = profiler, stop_when = opts.stop_when,
    on_eval = function(e, rec)
      if e.rundir then artifacts:record(e, rec) end
      if r.memory then r.memory:add(rec, e) end
    end,
    known = r.memory and r.memory.known, on_round = r.memory and function() r.memory:flush() end,
  })
  if engine.stop_reason == "error" and engine.error.io_failed then
    return M.write_failure(engine, backend, nil, prior, opts.resume)
  end
  -- bad input met as the strategy started (an --opt its init refuses), with
  -- nothing measured and no run folder: its one sentence alone, and nothing
  -- written (no summary of a run that never began, no new database file)
  if engine.stop_reason == "error" and engine.evaluations == 0 and not engine.rundir and
     errors.is_user_error(engine.error) and not opts.resume then
    if r.memory then r.memory:discard_unused() end
    backend:close()
    error(engine.error, 0)
  end
  local finalist_lines, final_verdict
  local k = opts.finalists or 3
  if backend.name ~= "replay" and k > 1 and engine.stop_reason ~= "error" and engine.stop_reason ~= "interrupted" then
    local ok, verdict = pcall(finalists.run, engine, k, 3)
    if ok and verdict then
      final_verdict = verdict
      finalist_lines = finalists.apply(engine, verdict)
    elseif not ok then
      io.stderr:write("kopt: the finalists could not be re-measured: " .. tostring(verdict) .. "\n")
    end
  end
  -- under MPI, rank 0's own GPU backend checks (as for the finalists)
  local here = backend.one_place and backend:one_place() or backend
  if opts.sanitize and #opts.sanitize > 0 and here and here.check_under and engine.best
     and engine.stop_reason ~= "error" and engine.stop_reason ~= "interrupted" then
    local sopts = M.sanitize_opts(engine, spec, here, opts.sanitize, final_verdict)
    if not opts.q then sopts.progress = function(text) io.stderr:write(text) end end
    local ok, lines, rows = pcall(sanitize.run, sopts)
    if not ok and errors.is_interrupt(lines) then
      ok, lines, rows = true, { "  sanitizer: interrupted; the winner stays" }, {}
    end
    if ok then
      finalist_lines = finalist_lines or {}
      for _, l in ipairs(lines) do finalist_lines[#finalist_lines + 1] = l end
      if engine.rundir then
        engine.rundir:event({ event = "sanitize", tools = opts.sanitize, rows = rows, winner = engine.best.key })
        engine.rundir:trace("\n## Sanitizer\n\n```\n%s\n```", table.concat(lines, "\n"))
      end
    else
      io.stderr:write("kopt: the sanitizer check failed: " .. tostring(lines) .. "\n")
    end
  end
  local probe_row
  if opts.range_probe ~= "off" and here and here.check_variants and engine.best and spec
     and engine.stop_reason ~= "error" and engine.stop_reason ~= "interrupted" then
    local popts = M.sanitize_opts(engine, spec, here, nil, final_verdict)
    finalist_lines = finalist_lines or {}
    probe_row = range_probe.for_run(engine, spec, popts, opts.range_probe, not opts.q, finalist_lines)
  end
  local spec_warnings = here and here.spec_warnings
  local meta = {
    problem = problem, backend_label = backend_label, finalists = finalist_lines, warnings = spec_warnings,
    t4 = { kopt = sys.version, strategy = strategy.name, seed = seed, backend = backend:describe(),
           knobs = knob_names(space),
           timeunit = "milliseconds", llm = engine.ctx.llm_usage,
           objective = spec and spec.objective and { metric = spec.objective.metric, goal = spec.objective.goal } or nil,
           spec_warnings = spec_warnings and #spec_warnings > 0 and spec_warnings or nil, range_probe = probe_row },
  }
  meta.after_finish = function(e, d)  -- best/REPORT.md: speed of light, counters, symptoms
    artifacts:finish(e)
    if not e.best then return end
    local md, term = report.render(e.best, profiler:finish(e))
    assert(sys.mkdir_p(d .. "/best"))
    json.write_file(d .. "/best/REPORT.md", md, true)  -- checked, atomic
    meta.report = term
  end
  local fok, summary = pcall(finish.finish, engine, meta)
  if not fok and errors.is_interrupt(summary) then
    -- a signal after the search ended, while its files are written: they
    -- are written all the same (the signal answered), not left half done
    sys.interrupted()
    fok, summary = pcall(finish.finish, engine, meta)
  end
  if not fok then
    if errors.is_user_error(summary) and summary.io_failed then
      return M.write_failure(engine, backend, summary, prior, opts.resume)
    end
    error(summary, 0)
  end
  if r.memory then
    r.memory:finish(engine)
    r.memory:close()
  end
  backend:close()
  if engine.rundir then
    local cok, cerr = pcall(engine.rundir.close, engine.rundir)
    if not cok then return M.write_failure(engine, backend, cerr, prior, opts.resume) end
  end
  if not opts.q or engine.stop_reason ~= "error" then io.stdout:write(summary) end
  if engine.served > 0 and not opts.q then
    io.stdout:write(string.format("  %d of them answered by the experience database %s, not measured again\n",
                                  engine.served, r.memory.path))
  end
  if meta.report and not opts.q then io.stdout:write(meta.report) end
  if engine.rundir then io.stdout:write("  run directory: ", dir, "\n") end
  if engine.stop_reason == "error" then error(engine.error, 0) end
  -- (the strategy's finish failed: the run's files are written, the command
  -- fails as for an error in ask or tell; an interrupted run says both)
  if engine.finish_error then
    if engine.stop_reason ~= "interrupted" then error(engine.finish_error, 0) end
    io.stderr:write("kopt: " .. tostring(engine.finish_error) .. "\n")
  end
  if engine.stop_reason == "interrupted" then
    if engine.rundir then
      io.stderr:write(string.format("kopt: interrupted after %d evaluations; continue with --resume (same command)\n",
                                    engine.evaluations))
    else
      io.stderr:write("kopt: interrupted before anything was recorded; run the command again\n")
    end
    return errors.INTERRUPTED
  end
  if engine.stop_reason == "stalled" then
    io.stderr:write(string.format("kopt: strategy %s proposed nothing new for %d rounds; stopped%s\n",
                                  strategy.name, engine_mod.STALL_ROUNDS, engine.last_invalid and
                                    (" (the last candidate it asked for was invalid: " .. engine.last_invalid .. ")") or ""))
  end
  return 0
end

-- A write or fsync in the run folder failed (a full disk, a quota, an I/O
-- error): nothing more is written there, and the one sentence says what
-- stays. Exit code 1.
function M.write_failure(engine, backend, err, prior, resumed)
  err = err or engine.error
  if engine.rundir then engine.rundir:abandon() end
  pcall(backend.close, backend)
  local recorded = (prior or 0) + (engine.rundir and engine.rundir.evals_written or 0)
  -- A failure while the folder is being opened (the trace after the start
  -- line) leaves no engine.rundir but a start line on disk: that folder
  -- needs --resume, so say so (a plain rerun would refuse it).
  local started = engine.rundir and engine.rundir.lines_written > 0
  if not engine.rundir and engine.ctx and engine.ctx.run_dir then
    local on_disk = rundir_mod.read_events(engine.ctx.run_dir .. "/events.jsonl")
    started = on_disk ~= nil and #on_disk > 0
  end
  if not resumed and not started then
    errors.raise(errors.RUNTIME, "%s; the run stopped before it recorded anything: run the same command again once there is room",
                 err.msg)
  end
  errors.raise(errors.RUNTIME, "%s; the run stopped there, its %d recorded evaluations are intact and --resume continues it",
               err.msg, recorded)
end

return M
