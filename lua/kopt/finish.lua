-- The end of a run: results.json (T4), best/, the stop event, trace.md's last
-- lines and the summary table on stdout.
local errors = require("kopt.errors")
local json = require("kopt.json")
local rundir_mod = require("kopt.rundir")
local sys = require("kopt.sys")
local progress = require("kopt.progress")

local M = {}

-- A speedup for the summary: 2 decimals, or 4 significant digits once it
-- is large (a recording with an absurd time must not print 300 digits).
local function ratio_text(x)
  if x >= 1e4 then return string.format("%.4g", x) end
  return string.format("%.2f", x)
end

local function status_counts(records)
  local counts, order = {}, {}
  for _, r in ipairs(records) do
    local s = r.result.status
    if not counts[s] then counts[s] = 0 order[#order + 1] = s end
    counts[s] = counts[s] + 1
  end
  table.sort(order)
  local parts = {}
  for _, s in ipairs(order) do parts[#parts + 1] = string.format("%d %s", counts[s], s) end
  return table.concat(parts, ", ")
end

-- The baseline a speedup is measured against: the spec's default config when
-- it was measured, else the first valid measurement.
local function baseline(engine)
  local default = engine.space:default()
  if default then
    local r = engine.cache[engine.space:key(default)]
    if r and r.status == "ok" then return r, "the default config" end
  end
  -- (by evaluation number: a resumed strategy may ask again in another
  -- order than the one the evaluations were measured in)
  local first
  for _, rec in ipairs(engine.records) do
    if rec.result.status == "ok" and (not first or (rec.n or math.huge) < (first.n or math.huge)) then first = rec end
  end
  if first then return first.result, "the first valid config measured" end
end

local function write_best(engine, dir)
  local best = engine.best
  if not best then return end
  local bdir = dir .. "/best"
  local ok, err = sys.mkdir_p(bdir)
  if not ok then errors.write_failed(bdir, err) end
  json.write_file(bdir .. "/config.json", best.config)
  local r = {}
  for k, v in pairs(best.result) do if k ~= "cached" then r[k] = v end end
  json.write_file(bdir .. "/result.json", { key = best.key, evaluation = best.n, result = r,
                                           origin = best.candidate and best.candidate.origin })
  local spec = engine.spec
  if spec and best.source then
    local name = spec.kernel.path:match("([^/]+)$")
    json.write_file(bdir .. "/" .. name, best.source, true)
    local opts = spec:compile_options(best.config)
    json.write_file(bdir .. "/options.txt", table.concat(opts, "\n") .. "\n", true)
    -- (a template entry, "k<TILE>", is instantiated by knobs no option names)
    local entry = spec.entry and spec:entry(best.config)
    if entry and entry ~= spec.kernel.entry then json.write_file(bdir .. "/entry.txt", entry .. "\n", true) end
  end
end

function M.summary(engine, meta)
  local lines = {}
  local best = engine.best
  lines[#lines + 1] = string.format("kopt: %s on %s (%s)", engine.strategy_name, meta.problem, meta.backend_label)
  lines[#lines + 1] = string.format("  %d evaluation%s (%s) in %s%s; stopped: %s", engine.evaluations,
    engine.evaluations == 1 and "" or "s",
    #engine.records > 0 and status_counts(engine.records) or "none", progress.clock(engine:clock()),
    engine.backend.name == "replay" and " simulated" or "", engine.stop_reason)
  if not best then
    if #engine.records > 0 then
      lines[#lines + 1] = "  no valid configuration found"
    elseif engine.stop_reason == "error" then
      lines[#lines + 1] = "  nothing measured: stopped by an error (its message is on stderr)"
    else
      lines[#lines + 1] = "  nothing measured"
    end
    return table.concat(lines, "\n") .. "\n"
  end
  local base, base_label = baseline(engine)
  -- (when the best is the baseline itself there is no speedup to quote)
  local speed = base and base ~= best.result and base.time_ms / best.result.time_ms
  -- with a metric objective the best is quoted in it: a faster time may do
  -- less work (a knob that changes the problem)
  local obj = engine.ctx.spec and engine.ctx.spec.objective
  local by_obj = obj and type(best.result.objective) == "number"
  -- (a ratio only of two positive values: a metric that can be 0 or
  -- negative read "-0.48x that of ...")
  if by_obj then
    local bo = base and base.objective
    lines[#lines + 1] = string.format("  best: %s %.5g (%.5g ms) at evaluation %d%s", obj.metric, best.result.objective,
      best.result.time_ms, best.n, base ~= best.result and type(bo) == "number" and bo > 0 and best.result.objective > 0
        and string.format(
        ", %sx that of %s (%.5g)", ratio_text(best.result.objective / bo), base_label, bo) or "")
  else
    lines[#lines + 1] = string.format("  best: %.5g ms at evaluation %d%s", best.result.time_ms, best.n,
      speed and string.format(", %sx faster than %s (%.5g ms)", ratio_text(speed), base_label, base.time_ms) or "")
  end
  local um = best.result.user_metrics
  if type(um) == "table" and next(um) then
    local names, parts = {}, {}
    for k in pairs(um) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do parts[#parts + 1] = string.format("%s %.5g", k, um[k]) end
    lines[#lines + 1] = "  metrics: " .. table.concat(parts, ", ") ..
      (obj and string.format(" (objective: %s, %s)", obj.metric, obj.goal) or "")
  end
  -- the faster-than-light check (kopt.lightspeed) could not judge the best
  if best.result.sol_check then lines[#lines + 1] = "  speed-of-light check " .. best.result.sol_check end
  for _, l in ipairs(meta.finalists or {}) do lines[#lines + 1] = l end
  for _, l in ipairs(meta.warnings or {}) do lines[#lines + 1] = "  " .. l end  -- kopt.trivial
  for _, l in ipairs(engine.ctx.summary_lines or {}) do lines[#lines + 1] = l end  -- a strategy's own (LLM tokens)
  local ranked = {}
  for _, r in ipairs(engine.records) do if r.result.status == "ok" then ranked[#ranked + 1] = r end end
  local spec = engine.ctx.spec
  -- (ties: the best first, as the line above names it, then in the order
  -- measured; table.sort alone ordered them at random)
  local measured_at = {}
  for i, r in ipairs(ranked) do measured_at[r] = i end
  table.sort(ranked, function(a, b)
    if spec and spec.better then
      if spec:better(a.result, b.result) then return true end
      if spec:better(b.result, a.result) then return false end
    elseif a.result.time_ms ~= b.result.time_ms then
      return a.result.time_ms < b.result.time_ms
    end
    if (a.key == best.key) ~= (b.key == best.key) then return a.key == best.key end
    return measured_at[a] < measured_at[b]
  end)
  lines[#lines + 1] = string.format("  %-4s %-12s %-8s %s", "rank", "time (ms)", by_obj and obj.metric or "speedup",
                                    "config")
  for i = 1, math.min(5, #ranked) do
    local r = ranked[i]
    local col = by_obj and (type(r.result.objective) == "number" and string.format("%.5g", r.result.objective) or "-")
      or base and (ratio_text(base.time_ms / r.result.time_ms) .. "x") or "-"
    local flagged = {}  -- errors kopt.sanitize found in this config's own kernel
    for tool, rep in pairs(r.result.sanitizer or {}) do if rep.blamed then flagged[#flagged + 1] = tool end end
    table.sort(flagged)
    local notes = {}
    if #flagged > 0 then notes[1] = table.concat(flagged, ", ") .. " errors" end
    local probe = r.result.range_probe  -- kopt.range_probe: checked on larger inputs and not ok there
    if probe and probe.status ~= "ok" then notes[#notes + 1] = string.format("fails at %gx inputs", probe.scale) end
    -- (an edited kernel: the same knobs as another row, other code)
    local variant = type(r.key) == "string" and r.key:match("#(%x+)$")
    if variant then table.insert(notes, 1, "edited kernel " .. variant:sub(1, 8)) end
    lines[#lines + 1] = string.format("  %-4d %-12.5g %-8s %s%s", i, r.result.time_ms, col, engine.space:describe(r.config),
                                      #notes > 0 and ("  (" .. table.concat(notes, "; ") .. ")") or "")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- Writes the derived files; returns the summary text.
function M.finish(engine, meta)
  local text = M.summary(engine, meta)
  local rd = engine.rundir
  if rd then
    local best = engine.best
    -- (an error's message too, so the folder says why the run ended)
    local why = engine.stop_reason == "error" and engine.error ~= nil and errors.describe(engine.error) or nil
    -- (kopt.run calls this again when a signal interrupted it while the
    -- files were written: the stop event and its section are written once)
    if not engine.stop_event_written then
      rd:event({ event = "stop", reason = engine.stop_reason, evaluations = engine.evaluations,
                 best = best and { key = best.key, time_ms = best.result.time_ms } or nil,
                 error = why, timestamp = sys.utc_iso() })
      engine.stop_event_written = true
    end
    if not engine.stop_trace_written then
      rd:trace("\n## Stopped: %s after %d evaluations\n\n%s```\n%s```", engine.stop_reason, engine.evaluations,
               why and ("Error: " .. why .. "\n\n") or "", text)
      engine.stop_trace_written = true
    end
    json.write_file(rd.dir .. "/results.json", rundir_mod.t4(engine.records, meta.t4))
    write_best(engine, rd.dir)
    if meta.after_finish then meta.after_finish(engine, rd.dir) end
  end
  return text
end

return M
