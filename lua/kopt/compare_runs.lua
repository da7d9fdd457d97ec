-- The runs of `kopt compare` (lua/kopt/commands/compare.lua): one run of a
-- strategy on a recorded space, and the same runs dealt out to child
-- processes (--jobs). Each run depends only on its strategy, options, space
-- and seed, so the children's curves are the ones this process would make;
-- they come back through JOBFILE.out files (`kopt compare --shard JOBFILE`).
local engine_mod = require("kopt.engine")
local errors = require("kopt.errors")
local experience = require("kopt.experience")
local json = require("kopt.json")
local profiling = require("kopt.profiling")
local relabel = require("kopt.relabel")
local replay = require("kopt.backends.replay")
local strategy_mod = require("kopt.strategy")
local sys = require("kopt.sys")

local M = {}

-- One run; returns the best-so-far curve, extended flat to `length`.
function M.run_one(name, label, options, backend, seed, length)
  -- (a benchmark neither writes the user's dataset and method map nor
  -- learns from them: a seed would learn from the seeds before it, and
  -- the figures would change from one compare to the next)
  experience.set_persistent(false)
  relabel.set_persistent(false)
  local saved = package.path
  local strategy = strategy_mod.load(label)
  package.path = saved
  local curve, best = {}, math.huge
  local e = engine_mod.run({
    strategy = strategy, strategy_name = name, options = options, space = backend.space,
    backend = backend, budget = length, seed = seed, quiet = true,
    -- (as `kopt STRATEGY` runs it: a recording's counters become the
    -- results' symptoms, which MCGS and rules read)
    profiler = profiling.new({ mode = "none", backend = backend, quiet = true }),
    on_eval = function(_, rec)
      local r = rec.result
      if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms < best then best = r.time_ms end
      curve[#curve + 1] = best
    end,
  })
  if e.stop_reason == "error" or e.finish_error then
    e.error = e.stop_reason == "error" and e.error or e.finish_error
    -- (which run: a strategy that fails on one space or seed only)
    local where = string.format("compare: %s on %s (seed %d)", name, backend.rec and backend.rec.file or "?", seed)
    if errors.is_user_error(e.error) then
      e.error.msg = where .. ": " .. e.error.msg
      error(e.error, 0)
    end
    errors.raise(errors.RUNTIME, "%s: %s", where, tostring(e.error))
  end
  -- (the evaluations made: a strategy that exhausts a small space stops
  -- early, and its curve is padded with its best to the run's length)
  local made = #curve
  for n = #curve + 1, length do curve[n] = best end
  -- a strategy's own counters (MCGS: expert calls), summed over seeds
  return curve, strategy.stats and strategy.stats(e.ctx) or {}, made
end

-- A curve travels as its steps { evaluation, best time } (a failure-only
-- prefix is absent), so a run of 400 evaluations is a few dozen numbers.
local function curve_steps(curve)
  local out, last = {}, math.huge
  for n, t in ipairs(curve) do
    if t ~= last then out[#out + 1] = { n, t } last = t end
  end
  return out
end

function M.curve_of(steps, length)
  local curve, best, k = {}, math.huge, 1
  for n = 1, length do
    if steps[k] and steps[k][1] == n then best, k = steps[k][2], k + 1 end
    curve[n] = best
  end
  return curve
end

-- A strategy that plans with its budget (anneal's cooling; a strategy
-- declares it with `plans_with_budget = true`, or `kopt compare
-- --per-budget` assumes it of every one) would see a longer budget in the
-- long run than the one reported. It gets a run of its own for each
-- reported budget shorter than the long run: { {index in budgets, budget} }.
function M.own_budgets(st, budgets, length)
  local out = {}
  if not st.per_budget then return out end
  for i, b in ipairs(budgets) do
    if b < length then out[#out + 1] = { i, b } end
  end
  return out
end

-- Every run of a compare as units for --jobs: for each space, strategy and
-- seed the long run (`length` evaluations), then its runs of their own
-- budgets (`own` = the budget's index).
function M.units(files, lengths, loaded, budgets, o)
  local units = {}
  for fi, file in ipairs(files) do
    for si, st in ipairs(loaded) do
      for run = 1, o.seeds do
        local function unit(length, own)
          units[#units + 1] = { file = file, check = o.check, label = st.label, base = st.base, pairs = st.pairs,
                                seed = o.first_seed + run - 1, length = length, fi = fi, si = si, run = run,
                                own = own }
        end
        unit(lengths[fi])
        for _, ib in ipairs(M.own_budgets(st, budgets, lengths[fi])) do unit(ib[2], ib[1]) end
      end
    end
  end
  return units
end

-- The units' results by space, strategy and seed: ran[fi][si][run] is the
-- long run's result with its curve, `own[i]` the best time of the run of
-- budgets[i] evaluations, and `extra` the cost of those runs.
function M.gather(units, results)
  local ran = {}
  for i, r in ipairs(results) do
    local u = units[i]
    ran[u.fi] = ran[u.fi] or {}
    ran[u.fi][u.si] = ran[u.fi][u.si] or {}
    local slot = ran[u.fi][u.si][u.run] or { own = {}, extra = { seconds = 0, cpu_s = 0, made = 0 } }
    ran[u.fi][u.si][u.run] = slot
    local curve = M.curve_of(r.steps, u.length)
    if u.own then
      slot.own[u.own] = curve[u.length]
      slot.extra.seconds, slot.extra.cpu_s = slot.extra.seconds + r.seconds, slot.extra.cpu_s + r.cpu_s
      slot.extra.made = slot.extra.made + r.made
    else
      slot.curve, slot.stats, slot.made, slot.seconds, slot.cpu_s = curve, r.stats, r.made, r.seconds, r.cpu_s
    end
  end
  return ran
end

-- Replaces a summary's fractions at the budgets that had runs of their own:
-- own[s][i] is seed s's best time in its run of budgets[i] evaluations.
function M.apply_own_budgets(sum, facts, own)
  for i in pairs(own[1] or {}) do
    local acc = 0
    for s, row in ipairs(own) do
      local f = row[i] < math.huge and facts.opt / row[i] or 0
      sum.seed_fraction[s][i], acc = f, acc + f
    end
    sum.fraction[i] = acc / #own
  end
end

local function shell_quote(x) return "'" .. tostring(x):gsub("'", "'\\''") .. "'" end

-- The child: runs the units of its job file in order.
function M.shard(path)
  local job, err = json.read_file(path)
  if not job then errors.usage("compare: --shard: %s", err) end
  -- (killed with the parent: a compare killed by SIGKILL leaves no children
  -- running on; they are started with exec, so kopt is their parent)
  if math.type(job.parent) == "integer" and not sys.die_with_parent(job.parent) then
    errors.raise(errors.RUNTIME, "compare: --shard: the parent process is gone")
  end
  local backends, options_of, out = {}, {}, {}
  local t_start, step = sys.now(), math.max(1, math.ceil(#job.units / 10))
  for i, u in ipairs(job.units) do
    local backend = backends[u.file]
    if not backend then
      -- (quiet: the parent has said the recording's notes once)
      backend = replay.open(nil, { file = u.file, check = u.check, quiet = true })
      backends[u.file] = backend
    end
    -- (each strategy's options resolved once: run_one loads it per run)
    local okey = u.label .. "\0" .. json.encode(u.pairs)
    local options = options_of[okey]
    if not options then
      local saved = package.path
      options = strategy_mod.options(strategy_mod.load(u.label), u.pairs)
      package.path = saved
      options_of[okey] = options
    end
    local t0, c0 = sys.now(), os.clock()
    local curve, counters, made = M.run_one(u.base, u.label, options, backend, u.seed, u.length)
    out[i] = { steps = curve_steps(curve), stats = counters, made = made, seconds = sys.now() - t0,
               cpu_s = os.clock() - c0 }
    -- (progress: about ten lines per process, one line per write)
    if job.progress and (i % step == 0 or i == #job.units) then
      io.stderr:write(string.format("compare: process %d of %d: %d of %d runs in %.1f s\n", job.index, job.of, i,
                                    #job.units, sys.now() - t_start))
    end
  end
  for _, b in pairs(backends) do b:close() end
  json.write_file(path .. ".out", json.encode({ results = out }), true)
  return 0
end

-- The parent: deals the units out round-robin to `jobs` children, waits for
-- them all and returns the results in the units' order.
function M.parallel(units, jobs, dir, progress)
  local made, merr = sys.mkdir_p(dir)
  if not made then errors.usage("compare: --jobs: %s", tostring(merr)) end
  jobs = math.min(jobs, #units)
  local exe = sys.realpath("/proc/self/exe")
  local shards, procs = {}, {}
  for j = 1, jobs do shards[j] = {} end
  for i, u in ipairs(units) do table.insert(shards[(i - 1) % jobs + 1], u) end
  for j = 1, jobs do
    local path = string.format("%s/shard_%d.json", dir, j)
    json.write_file(path, json.encode({ units = shards[j], index = j, of = jobs, progress = progress,
                                        parent = sys.getpid() }), true)
    os.remove(path .. ".out")
    procs[j] = { path = path, pipe = assert(io.popen("exec " .. shell_quote(exe) .. " compare --shard " ..
                                                     shell_quote(path))) }
  end
  local failed = {}
  for j, p in ipairs(procs) do
    p.pipe:read("a")
    local ok, how, code = p.pipe:close()
    if not ok then failed[#failed + 1] = string.format("%d (%s %s)", j, tostring(how), tostring(code)) end
  end
  local results, unread = {}, nil
  for j, p in ipairs(procs) do
    if #failed == 0 then
      local got, err = json.read_file(p.path .. ".out")
      if got then
        for k, r in ipairs(got.results) do results[(k - 1) * jobs + j] = r end
      else
        unread = unread or err
      end
    end
    os.remove(p.path .. ".out")
    os.remove(p.path)
  end
  sys.rmdir(dir)
  if #failed > 0 then
    errors.raise(errors.RUNTIME, "compare: --jobs: child process %s of %d failed; its messages are above",
                 table.concat(failed, ", "), jobs)
  end
  if unread then errors.raise(errors.RUNTIME, "compare: --jobs: %s", unread) end
  return results
end

return M
