-- Finalists: before a GPU run names its winner, the few best configs are
-- measured again, interleaved (A B C, then C B A, ...), in the same process
-- and thermal state. A race decided by one noisy median, or by a clock that
-- sagged while one candidate ran, is decided again on equal terms. The
-- re-measurements are outside the budget and never enter the cache; they are
-- recorded as a "finalists" event and in trace.md.
local engine_mod = require("kopt.engine")

local M = {}

local function median(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- The k fastest distinct ok records of the run.
function M.top(engine, k)
  local ranked = {}
  for _, r in ipairs(engine.records) do
    if r.result.status == "ok" and type(r.result.time_ms) == "number" then ranked[#ranked + 1] = r end
  end
  local spec = engine.ctx and engine.ctx.spec
  table.sort(ranked, function(a, b)
    -- the spec's objective (a metric) when it declares one, else time
    if spec and spec.better then return spec:better(a.result, b.result) end
    return a.result.time_ms < b.result.time_ms
  end)
  local out = {}
  for i = 1, math.min(k, #ranked) do out[i] = ranked[i] end
  return out
end

-- Re-measures the top k over `rounds` interleaved rounds. Returns
-- { rows = { {key=, config=, first_ms=, times={...}, median_ms=, failed=} },
--   winner = row, changed = bool } or nil when there is nothing to decide.
-- A finalist that fails a re-measurement (wrong, crash) is out of the race.
function M.run(engine, k, rounds)
  local top = M.top(engine, k)
  if #top < 2 then return nil end
  local rows = {}
  for i, rec in ipairs(top) do
    rows[i] = { key = rec.key, config = rec.config, first_ms = rec.result.time_ms, times = {}, rec = rec }
  end
  for round = 1, rounds do
    local order = {}
    for i = 1, #rows do order[i] = round % 2 == 1 and rows[i] or rows[#rows + 1 - i] end
    local jobs = {}
    for i, row in ipairs(order) do
      local cand = row.rec.candidate or { config = row.config }
      jobs[i] = engine:job_for(cand)
    end
    -- one process and thermal state: under MPI, rank 0's own backend
    local backend = engine.backend.one_place and engine.backend:one_place() or engine.backend
    local out = backend:evaluate(jobs)
    for i, row in ipairs(order) do
      local r = out[i]
      if r and r.status == "ok" and type(r.time_ms) == "number" then
        row.times[#row.times + 1] = r.time_ms
      else
        row.failed = (r and r.status or "no result") .. (r and r.log and (": " .. r.log) or "")
      end
    end
  end
  local winner
  local spec = engine.ctx and engine.ctx.spec
  for _, row in ipairs(rows) do
    row.median_ms = median(row.times)
    if row.median_ms and spec and spec.objective and spec.metrics then
      row.user_metrics = spec:metrics(row.config, row.median_ms)
      row.objective = row.user_metrics and row.user_metrics[spec.objective.metric]
    end
    local better = winner and (spec and spec.better
      and spec:better({ time_ms = row.median_ms or math.huge, objective = row.objective },
                      { time_ms = winner.median_ms, objective = winner.objective })
      or (row.median_ms or math.huge) < winner.median_ms)
    if not row.failed and row.median_ms and (not winner or better) then winner = row end
  end
  if not winner then return nil end
  return { rows = rows, winner = winner, rounds = rounds, changed = winner.key ~= top[1].key }
end

-- Applies the verdict: the winner becomes the run's best, its time the
-- re-measured median; logs the event. Returns lines for the summary.
function M.apply(engine, verdict)
  local lines = {}
  lines[1] = string.format("  finalists re-measured (%d interleaved rounds):", verdict.rounds)
  local ev_rows = {}
  for i, row in ipairs(verdict.rows) do
    local again = {}
    for j, v in ipairs(row.times) do again[j] = string.format("%.5g", v) end
    lines[#lines + 1] = string.format("    %s %-10s first %.5g ms, again %s  %s", row == verdict.winner and "*" or " ",
      row.failed and "failed" or string.format("%.5g ms", row.median_ms), row.first_ms,
      #again > 0 and table.concat(again, " ") or "-", engine.space:describe(row.config))
    ev_rows[i] = { key = row.key, first_ms = row.first_ms, times = row.times, median_ms = row.median_ms,
                   failed = row.failed }
  end
  local w = verdict.winner
  local result = {}
  for k, v in pairs(w.rec.result) do result[k] = v end
  result.first_ms, result.time_ms, result.finalist_times = w.first_ms, w.median_ms, w.times
  if w.user_metrics then result.user_metrics, result.objective = w.user_metrics, w.objective end
  local job = engine:job_for(w.rec.candidate or { config = w.config })
  engine.best = { key = w.key, config = w.config, result = result, candidate = w.rec.candidate,
                  source = job.source, n = w.rec.n }
  engine.ctx.best = engine_mod.best_view(engine.best)
  if verdict.changed then
    lines[#lines + 1] = "    the re-measurement changed the winner"
  end
  if engine.rundir then
    engine.rundir:event({ event = "finalists", rounds = verdict.rounds, rows = ev_rows, winner = w.key,
                          changed = verdict.changed })
    engine.rundir:trace("\n## Finalists\n\n```\n%s\n```", table.concat(lines, "\n"))
  end
  return lines
end

return M
