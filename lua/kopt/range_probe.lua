-- The range probe (`--range-probe`): after the finalists, the winner is
-- checked once more on inputs far larger than the spec's distributions.
--
-- Checks 1 and 2 draw float inputs from N(0,1), U(-1,1) or U(0,1). A kernel
-- that takes a shortcut valid only there (`__sinf` and `__expf` are within
-- the tolerance for small arguments and wrong for large ones:
-- tests/cheats/fastmath_range.cu) passes both. The probe draws every such
-- input again from its own distribution times a scale (1000, else 100, else
-- 10) and compares the winner with the reference there, check 1 and then
-- a timing with every timed launch compared (a kernel exact only on a
-- module's first launch, check 1's, is fast and wrong on the others:
-- tests/cheats/probe_first_launch), by the relative tolerances alone (an absolute bound, max_abs, is set for
-- the spec's magnitudes: one f16 rounding step is 16 at 20000). The
-- scale is the largest at which the reference itself, run as the candidate,
-- passes: where the reference overflows, the problem has no answer to hold
-- the winner to, so that scale says nothing. A winner that passes there is
-- checked again with only one element in 64 scaled, and then with one
-- element alone (kopt_check_fill_sparse), the rest drawn as in check 1: a
-- kernel that samples a few inputs and takes its exact path only when it
-- sees a large one passes the whole-array pass and fails one of these.
--
-- The spec's distributions are the contract, so by default (note) a winner
-- wrong on the larger inputs stays the winner and the run says so; strict
-- hands the title to the next fastest ok config that passes (at most
-- max_tries checked), as the sanitizer does. Inputs read from a file, made
-- by a generator, held fixed or copied are the spec's own choice and are
-- never scaled. Integer inputs drawn by kopt (from [-64, 64], 16 N(0, 1)
-- or {0, 1}) are probed the same way after the float ones, on their own: a
-- kernel that narrowed them to 8 bits, or summed their products in 32 bits
-- where the output has 64, passes every check and fails there.
local errors = require("kopt.errors")

local M = {}

M.SCALES = { 1000, 100, 10 }
-- Then the float inputs scaled down (whole arrays only; a note in either
-- mode): a shortcut exact for inputs of order 1 and wrong near 0 (expm1 as
-- __expf(x) - 1, whose error is absolute where the answer is small) passes
-- every check and the larger scales.
M.SMALL = 1e-3
-- The passes after the whole-array one: one element in 64 scaled (and one
-- chosen element), then that element alone (every = -1 to the worker).
M.SPARSE = { { every = 64, what = "one element in 64" }, { every = -1, what = "one element alone" } }
M.MODES = { off = true, note = true, strict = true }

local FLOAT = { f32 = true, f64 = true, f16 = true, bf16 = true }
local DRAWN = { normal = true, uniform = true, uniform01 = true }

-- "off", "note" or "strict"; nil, why otherwise.
function M.parse_mode(text)
  if M.MODES[text] then return text end
  return nil, string.format("expected off, note or strict, got '%s'", tostring(text))
end

-- The indices (in spec:args order) of the inputs the probe scales: float
-- arrays (integer ones with `integers`) that are not outputs, drawn by kopt
-- from a named distribution.
function M.scaled_inputs(args, integers)
  local out = {}
  for i, a in ipairs(args) do
    local init = a.init or { dist = "normal" }
    if (a.kind == "array" or a.kind == "constant") and not a.output and (FLOAT[a.type] or false) ~= (integers or false)
       and DRAWN[init.dist] and not init.fixed then
      out[#out + 1] = i
    end
  end
  return out
end

-- { [arg index] = scale } for the inputs to scale: the worker draws each
-- from its own distribution as in check 1 and multiplies the draws by the
-- scale before rounding to the type (kopt_check_fill_scaled), so no data
-- passes through the host and no input is too large to probe.
local function scales_of(inputs, scale)
  local out = {}
  for _, i in ipairs(inputs) do out[i] = scale end
  return out
end

-- The first line of a worker's log (what the comparison found).
local function first_line(log)
  return (tostring(log or ""):match("[^\n]+") or ""):gsub("%s+$", "")
end

-- The summary line and event row of a probe that could not say anything.
local function not_run(why) return { "  range probe not run: " .. why }, { note = why } end

-- Runs the probe. opts: backend (with check_variants), ranked (ok records,
-- the winner first), job_for(rec), args_for(rec) (spec:args of its
-- config), describe(rec), make_best(rec), mode ("note" or "strict"),
-- max_tries, limit_s, progress(text) or nil, interrupted() or nil.
-- Returns lines for the summary and the row of the "range_probe" event.

-- One family of inputs (floats, or integers) probed on the winner: lines
-- and the row, as M.run returns them. what: "" or " (integers)".
local function probe(opts, winner, args, inputs, what, scale_list, whole_only)
  local names = {}
  for k, i in ipairs(inputs) do names[k] = args[i].name end
  local small = what == " (small)"
  local label = table.concat(names, ", ") .. (small and "" or what)
  local limit_s = opts.limit_s or 120
  local refused = {}
  for _, scale in ipairs(scale_list or M.SCALES) do
    if opts.progress then
      opts.progress(string.format("kopt: range probe: %s scaled %gx, on %s\n", label, scale, opts.describe(winner)))
    end
    local scales = scales_of(inputs, scale)
    local variants = { { reference = true, scales = scales, relative_only = true },
                       { scales = scales, relative_only = true, timed = true } }
    local out, err = opts.backend:check_variants(opts.job_for(winner), variants, limit_s)
    if not out then return not_run(tostring(err)) end
    if out[1].status == "ok" then
      local w = out[2] or { status = "no reply", log = "the worker ended before the winner's check" }
      -- then one element in 64 scaled, then one element alone, the rest
      -- as the spec draws them: a kernel that samples its input to pick an
      -- exact path for large values sees the whole array scaled at once
      local passes, how, ran, skipped = { scales }, "", { "all of them" }, {}
      for _, sp in ipairs(whole_only and {} or M.SPARSE) do
        if w.status ~= "ok" then break end
        local sparse = scales_of(inputs, { scale = scale, every = sp.every })
        local so, serr = opts.backend:check_variants(opts.job_for(winner),
          { { reference = true, scales = sparse, relative_only = true }, { scales = sparse, relative_only = true, timed = true } },
          limit_s)
        if so and so[1] and so[1].status == "ok" and so[2] then
          passes[#passes + 1] = sparse
          ran[#ran + 1] = sp.what
          if so[2].status ~= "ok" then w, how = so[2], " at " .. sp.what end
        else
          -- (said, not passed over: the summary names only passes that ran)
          skipped[#skipped + 1] = string.format("%s (%s)", sp.what, not so and tostring(serr)
            or (so[1] and so[1].status ~= "ok") and ("the reference: " .. tostring(so[1].status))
            or "no reply for the winner")
        end
      end
      local row = { scale = scale, inputs = names, status = w.status, log = first_line(w.log), winner = winner.key,
                    refused_scales = #refused > 0 and refused or nil, sparse = how ~= "" or nil,
                    sparse_not_run = #skipped > 0 and skipped or nil }
      -- (the integer pass keeps a failure of the float one on record)
      local prev = winner.result.range_probe
      if not prev or prev.status == "ok" then winner.result.range_probe = { scale = scale, status = w.status } end
      if w.status == "ok" then
        return { string.format("  range probe: the winner matches the reference on %s scaled %gx (%s)%s", label, scale,
          table.concat(ran, ", "), #skipped > 0 and ("; not run: " .. table.concat(skipped, ", ")) or "") }, row, passes
      end
      local lines = { string.format("  range probe: on %s scaled %gx%s the winner fails (%s: %s): it matches the " ..
        "reference only on the spec's input ranges (docs/TRUST.md, \"The range probe\")", label, scale, how,
        w.status, row.log) }
      if small then
        lines[#lines + 1] = "  range probe: the winner stays (inputs near 0 are said, not ruled on: check its " ..
                            "accuracy there if the kernel will see them)"
        return lines, row
      end
      if opts.mode ~= "strict" then
        lines[#lines + 1] = "  range probe: the winner stays (--range-probe strict hands the title to a config that passes)"
        return lines, row
      end
      row.tried = {}
      for i = 2, math.min(#opts.ranked, opts.max_tries or 4) do
        if opts.interrupted and opts.interrupted() then break end
        local rec = opts.ranked[i]
        local checks = {}
        for k, sc in ipairs(passes) do checks[k] = { scales = sc, relative_only = true, timed = true } end
        -- (and the passes of the family probed before: a config the float
        -- pass never checked must pass it too to take the title)
        for _, sc in ipairs(opts.prior_passes or {}) do
          checks[#checks + 1] = { scales = sc, relative_only = true, timed = true }
        end
        local o2, e2 = opts.backend:check_variants(opts.job_for(rec), checks, limit_s)
        local st = o2 and o2[1] and o2[1].status or ("not run: " .. tostring(e2))
        for k = 2, #checks do
          if st == "ok" and o2[k] and o2[k].status ~= "ok" then st = o2[k].status end
        end
        row.tried[#row.tried + 1] = { key = rec.key, status = st }
        if o2 and o2[1] then rec.result.range_probe = { scale = scale, status = st } end
        if st == "ok" then
          opts.make_best(rec)
          row.new_winner = rec.key
          lines[#lines + 1] = string.format("  the range probe changed the winner: %s passes", opts.describe(rec))
          return lines, row, passes
        end
      end
      lines[#lines + 1] = "  range probe: no config checked passes; the winner stays, flagged"
      return lines, row, passes
    end
    refused[#refused + 1] = scale
  end
  local lines, row = not_run(what == "" and
    "the reference itself does not pass on inputs scaled 10x to 1000x (its output overflows there)" or
    small and string.format("the reference itself does not pass on inputs scaled %gx", M.SMALL) or
    "the reference itself does not pass on integer inputs scaled 10x to 1000x (its output overflows there, " ..
    "or they are indices or sizes)")
  row.refused_scales = refused
  return lines, row
end

function M.run(opts)
  local winner = opts.ranked[1]
  local args = opts.args_for(winner)
  local floats, ints = M.scaled_inputs(args), M.scaled_inputs(args, true)
  if #floats == 0 and #ints == 0 then
    local why = "no input is drawn from a distribution (file, generated, fixed and copied inputs are the spec's own)"
    return not_run(why)
  end
  -- (an output left to the spec's own Lua check, compare=false, is not
  -- compared by check 1, and the probe does not run that check)
  local compared = false
  for _, a in ipairs(args) do
    if a.output and not (a.verify and a.verify.compare == false) then compared = true end
  end
  if not compared then
    local why = "every output is left to the spec's own check (verify.outputs.*.compare = false), which the probe does not run"
    return not_run(why)
  end
  -- floats, then integers on their own: an integer input can be an index,
  -- whose larger draws fail the reference too, and must not cost the float
  -- inputs their probe
  local lines, row, fpasses = {}, nil, nil
  if #floats > 0 then lines, row, fpasses = probe(opts, winner, args, floats, "") end
  if #floats > 0 and opts.small ~= false then
    -- (on the winner the larger scales left; said, never a change of winner)
    local sopts = setmetatable({ mode = "note" }, { __index = opts })
    local first = row and row.new_winner
    local swinner = winner
    for _, rec in ipairs(opts.ranked) do if rec.key == first then swinner = rec end end
    local slines, srow = probe(sopts, swinner, args, floats, " (small)", { M.SMALL }, true)
    for _, l in ipairs(slines) do lines[#lines + 1] = l end
    row.small = srow
  end
  if #ints > 0 then
    -- (on the winner the float pass left: a config it crowned in strict
    -- mode, with those it found wrong left out of the integer pass's tries)
    local iopts = setmetatable({ prior_passes = fpasses }, { __index = opts })
    if row and (row.new_winner or row.tried) then
      -- (the configs the float pass found wrong are not tried again: a
      -- winner that stayed, flagged, is still probed on integers)
      local failed = {}
      for _, t in ipairs(row.tried or {}) do if t.status ~= "ok" then failed[t.key] = true end end
      if row.new_winner then failed[winner.key] = true end
      local ranked = {}
      for _, rec in ipairs(opts.ranked) do
        if rec.key == row.new_winner then table.insert(ranked, 1, rec)
        elseif not failed[rec.key] or rec.key == winner.key and not row.new_winner then ranked[#ranked + 1] = rec end
      end
      iopts.ranked = ranked
    end
    local ilines, irow = probe(iopts, iopts.ranked[1], args, ints, " (integers)")
    for _, l in ipairs(ilines) do lines[#lines + 1] = l end
    if row then row.integers = irow else row = irow end
  end
  return lines, row
end

-- The probe at the end of a run (kopt.run): opts as kopt.run's
-- sanitize_opts gives them, the sanitizer's winner checked first; its lines
-- appended to `lines`, its row in the event log and trace.md. Returns the
-- row (results.json's metadata.range_probe), or nil when the probe failed.
function M.for_run(engine, spec, opts, mode, verbose, lines)
  opts.mode, opts.args_for = mode, function(rec) return spec:args(rec.config) end
  -- the winner first; never a config the sanitizer found errors in
  local ranked = {}
  for _, rec in ipairs(opts.ranked) do
    local blamed = false
    for _, rep in pairs(rec.result.sanitizer or {}) do blamed = blamed or rep.blamed end
    if rec.key == engine.best.key then
      table.insert(ranked, 1, rec)
    elseif not blamed then
      ranked[#ranked + 1] = rec
    end
  end
  opts.ranked = ranked
  if verbose then opts.progress = function(text) io.stderr:write(text) end end
  local ok, out, row = pcall(M.run, opts)
  if not ok and errors.is_interrupt(out) then
    ok, out, row = true, { "  range probe: interrupted; the winner stays" }, { note = "interrupted" }
  end
  if not ok then
    io.stderr:write("kopt: the range probe failed: ", tostring(out), "\n")
    return nil
  end
  for _, l in ipairs(out) do lines[#lines + 1] = l end
  if engine.rundir then
    local ev = { event = "range_probe", mode = mode }
    for field, v in pairs(row) do ev[field] = v end
    engine.rundir:event(ev)
    engine.rundir:trace("\n## Range probe\n\n```\n%s\n```", table.concat(out, "\n"))
  end
  return row
end

return M
