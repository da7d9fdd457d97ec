-- The runs of `kopt compare` (lua/kopt/commands/compare.lua): one run of a
-- strategy on a recorded space, and the same runs dealt out to child
-- processes (--jobs). Each run depends only on its strategy, options, space
-- and seed, so the children's curves are the ones this process would make;
-- they come back through JOBFILE.out files (`kopt compare --shard JOBFILE`).
local engine_mod = require("kopt.engine")
local errors = require("kopt.errors")
local json = require("kopt.json")
local replay = require("kopt.backends.replay")
local strategy_mod = require("kopt.strategy")
local sys = require("kopt.sys")

local M = {}

-- One run; returns the best-so-far curve, extended flat to `length`.
function M.run_one(name, label, options, backend, seed, length)
  local saved = package.path
  local strategy = strategy_mod.load(label)
  package.path = saved
  local curve, best = {}, math.huge
  local e = engine_mod.run({
    strategy = strategy, strategy_name = name, options = options, space = backend.space,
    backend = backend, budget = length, seed = seed, quiet = true,
    on_eval = function(_, rec)
      local r = rec.result
      if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms < best then best = r.time_ms end
      curve[#curve + 1] = best
    end,
  })
  if e.stop_reason == "error" then
    if errors.is_user_error(e.error) then error(e.error, 0) end
    errors.raise(errors.RUNTIME, "compare: %s (seed %d): %s", name, seed, tostring(e.error))
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

local function shell_quote(x) return "'" .. tostring(x):gsub("'", "'\\''") .. "'" end

-- The child: runs the units of its job file in order.
function M.shard(path)
  local job, err = json.read_file(path)
  if not job then errors.usage("compare: --shard: %s", err) end
  local backends, options_of, out = {}, {}, {}
  local t_start, step = sys.now(), math.max(1, math.ceil(#job.units / 10))
  for i, u in ipairs(job.units) do
    local backend = backends[u.file]
    if not backend then
      backend = replay.open(nil, { file = u.file, check = u.check })
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
    json.write_file(path, json.encode({ units = shards[j], index = j, of = jobs, progress = progress }), true)
    os.remove(path .. ".out")
    procs[j] = { path = path, pipe = assert(io.popen(shell_quote(exe) .. " compare --shard " .. shell_quote(path))) }
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
