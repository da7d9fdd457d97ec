-- The range probe's parts that need no GPU (kopt.range_probe): which inputs
-- it scales, the request that asks the worker for them, and its
-- decisions over scripted worker replies: the largest scale at which the
-- reference passes, a winner wrong there noted (note) or replaced by the
-- next config that passes (strict), and the cases where it cannot say.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local probe = require("kopt.range_probe")
local spec_mod = require("kopt.spec")

-- modes
T.eq(probe.parse_mode("note"), "note", "note")
T.eq(probe.parse_mode("strict"), "strict", "strict")
T.eq(probe.parse_mode("off"), "off", "off")
local m, why = probe.parse_mode("loud")
T.check(m == nil and why:find("expected off, note or strict", 1, true), "bad mode refused: " .. tostring(why))

-- which inputs: float arrays and constants drawn from a named distribution,
-- never outputs, fixed, file, generated or copied ones; the integer ones
-- drawn by kopt in a pass of their own
local args = {
  { name = "x", kind = "array", type = "f32", init = { dist = "uniform01" }, count = 8 },
  { name = "w", kind = "constant", type = "f16", init = { dist = "normal" }, count = 8 },
  { name = "idx", kind = "array", type = "i32", init = { dist = "uniform" }, count = 8 },
  { name = "c", kind = "array", type = "f32", init = { dist = "constant", value = 2, fixed = true }, count = 8 },
  { name = "f", kind = "array", type = "f32", init = { dist = "file" }, count = 8 },
  { name = "g", kind = "array", type = "f64", init = { dist = "generate" }, count = 8 },
  { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8 },
  { name = "n", kind = "scalar", type = "i32", value = 8 },
  { name = "u", kind = "array", type = "bf16", init = { dist = "uniform" }, count = 8 },
}
T.eq(table.concat(probe.scaled_inputs(args), ","), "1,2,9", "x, w and u are scaled, nothing else")
T.eq(table.concat(probe.scaled_inputs(args, true), ","), "3", "idx is the integer pass's")

-- the cheat spec of tests/cheats: its input x is the one scaled
local cheat = spec_mod.load("tests/cheats/fastmath_range.json")
local cargs = cheat:args({ CHEAT = 1 })
T.eq(table.concat(probe.scaled_inputs(cargs), ","), "1", "fastmath_range: x")

-- the request asks the worker to draw the input times the scale; the
-- worker's field list accepts it (the draws themselves: check_numerics,
-- test_fill_scaled)
local be = cuda._offline(cheat, { seed = 1 })
local req = assert(be:request(0, { CHEAT = 1 }, "CUBIN", "cheat"))
T.eq(req["a1.init"], "uniform01", "drawn from the spec's distribution")
T.eq(req["a1.scale"], nil, "at scale 1 in a plain request")
cuda.with_scales(req, { [1] = 1000 })
T.eq(req["a1.init"], "uniform01", "still its own distribution")
T.eq(req["a1.scale"], 1000.0, "times 1000")
T.eq(math.type(req["a1.scale"]), "float", "sent as a number field")
T.check(pcall(be.check_request, be, req), "the worker's field list accepts the request")

-- the probe compares by relative tolerances only: an absolute bound set for
-- the spec's magnitudes is dropped, the relative ones stay
local saved_tol = cheat.tolerance
cheat.tolerance = { rel_l2 = 1e-4, max_abs = 0.5 }
local treq = assert(be:request(0, { CHEAT = 1 }, "CUBIN", "cheat"))
cheat.tolerance = saved_tol
T.eq(treq.tol_max_abs, 0.5, "the spec's absolute bound is in a plain request")
treq["a2.tol_max_abs"], treq["a2.tol_rel_l2"] = 2.0, 1e-3
cuda.relative_only(treq)
T.eq(treq.tol_max_abs, nil, "relative_only: the request's absolute bound dropped")
T.eq(treq["a2.tol_max_abs"], nil, "relative_only: an output's absolute bound dropped")
T.eq(treq.tol_rel_l2, 1e-4, "relative_only: the relative L2 tolerance kept")
T.eq(treq["a2.tol_rel_l2"], 1e-3, "relative_only: an output's relative tolerance kept")
T.check(pcall(be.check_request, be, treq), "the worker's field list accepts the relative-only request")

-- decisions over scripted replies. A fake backend answers check_variants
-- from a script: reply(scale, variant, rec) -> status.
local function run_with(reply, mode, ranked_n, small)
  local ranked, calls, made = {}, {}, nil
  for i = 1, ranked_n or 3 do ranked[i] = { key = "k" .. i, config = { CHEAT = i }, result = { status = "ok" } } end
  local fake = {}
  function fake.check_variants(_, job, variants)
    local out = {}
    for i, v in ipairs(variants) do
      -- (x is the one input scaled; the sparse passes scale some elements
      -- of it, { scale =, every = })
      local scale = v.scales[1]
      if type(scale) == "table" then scale = scale.scale end
      T.eq(next(v.scales, 1), nil, "only x is scaled")
      -- (a candidate's check is timed, every timed launch compared: a kernel
      -- exact only on a module's first launch is seen; the reference is not)
      T.eq(v.timed == true, not v.reference, "timed: the candidate's checks, not the reference's")
      calls[#calls + 1] = { rec = job.rec, reference = v.reference, relative_only = v.relative_only }
      out[i] = { status = reply(scale, v.reference, job.rec), log = "rel L2 0.3 > 1e-05\nmore" }
    end
    return out
  end
  local lines, row = probe.run({
    backend = fake, ranked = ranked, mode = mode, max_tries = 3, small = small or false,
    job_for = function(rec) return { rec = rec.key } end,
    args_for = function() return cargs end,
    describe = function(rec) return "config " .. rec.key end,
    make_best = function(rec) made = rec.key end,
  })
  return table.concat(lines, "\n"), row, made, calls
end

-- the reference passes at 1000, the winner too
local text, row, made = run_with(function() return "ok" end, "note")
T.check(text:find("matches the reference on x scaled 1000x", 1, true), "%s", text)
T.eq(row.scale, 1000, "scale 1000")
T.eq(made, nil, "no change")

-- the reference overflows at 1000 and 100: the probe steps down to 10
text, row = run_with(function(v, ref) if ref and v > 10 then return "wrong" end return "ok" end, "note")
T.check(text:find("scaled 10x", 1, true), "%s", text)
T.eq(row.scale, 10, "the largest scale the reference passes")
T.eq(table.concat(row.refused_scales, ","), "1000,100", "the scales refused")

-- the winner is wrong where the reference passes: noted, it stays
local cheat_reply = function(_, ref, rec) if ref or rec ~= "k1" then return "ok" end return "wrong" end
text, row, made = run_with(cheat_reply, "note")
T.check(text:find("the winner fails (wrong: rel L2 0.3 > 1e-05)", 1, true), "%s", text)
T.check(text:find("the winner stays", 1, true), "note mode keeps it")
T.eq(made, nil, "note: no change")
T.eq(row.status, "wrong", "the row")

-- strict: the next config that passes wins
local calls
text, row, made, calls = run_with(cheat_reply, "strict")
T.eq(made, "k2", "strict: the next config")
T.eq(row.new_winner, "k2", "the row names it")
T.check(text:find("the range probe changed the winner", 1, true), "%s", text)
T.eq(#calls, 3, "reference, winner, next config")
local all_relative = true
for _, c in ipairs(calls) do all_relative = all_relative and c.relative_only == true end
T.check(all_relative, "every probe check (reference, winner, next config) asks for relative tolerances only")

-- strict, and nothing checked passes: the winner stays, flagged
text, row, made = run_with(function(_, ref) return ref and "ok" or "wrong" end, "strict")
T.eq(made, nil, "no config passes: no change")
T.check(text:find("no config checked passes", 1, true), "%s", text)
T.eq(#row.tried, 2, "max_tries 3: the winner and two more")

-- the reference never passes: nothing said about the winner
text, row = run_with(function() return "wrong" end, "note")
T.check(text:find("range probe not run: the reference itself does not pass", 1, true), "%s", text)
T.eq(row.scale, nil, "no scale")

-- inputs scaled down: a kernel exact near 1 and wrong near 0 (expm1 as
-- __expf(x) - 1, 3.5x faster on an H200 and right on every other check) is
-- said after the larger scales, in note and strict mode alike, and the
-- winner stays; the sparse passes are not run there
do
  local near_zero = function(scale, ref, rec) if ref or rec ~= "k1" or scale >= 1 then return "ok" end return "wrong" end
  local stext, srow, smade, scalls = run_with(near_zero, "strict", 3, true)
  T.check(stext:find("matches the reference on x scaled 1000x", 1, true), "%s", stext)
  T.check(stext:find("on x scaled 0.001x the winner fails (wrong", 1, true), "%s", stext)
  T.check(stext:find("inputs near 0 are said, not ruled on", 1, true), "%s", stext)
  T.eq(smade, nil, "strict: a failure near 0 changes no winner")
  T.eq(srow.small and srow.small.status, "wrong", "the row's small pass")
  T.eq(#scalls, 6 + 2, "the larger scales' 6 checks, then the reference and the winner at 0.001x")
  -- the reference itself failing near 0: nothing said of the winner
  stext = run_with(function(scale, ref) if scale < 1 and ref then return "wrong" end return "ok" end, "note", 3, true)
  T.check(stext:find("range probe not run: the reference itself does not pass on inputs scaled 0.001x", 1, true),
          "%s", stext)
end

-- integer inputs: a pass of their own after the float ones. A kernel that
-- narrowed its integers to 8 bits (red-team int8_dp4a: 2.7x faster, right
-- on every check) fails there; the float pass's result stands beside it,
-- and an integer input the reference cannot take larger (an index) costs
-- the float inputs nothing.
do
  local mixed = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 8 },
                  { name = "A", kind = "array", type = "i32", init = { dist = "uniform" }, count = 8 },
                  { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8 } }
  local function with(reply)
    local winner = { key = "w", config = {}, result = {} }
    local fake = { check_variants = function(_, _, variants)
      local out = {}
      for i, v in ipairs(variants) do out[i] = { status = reply(v.scales[1] and "float" or "int", v.reference), log = "x" } end
      return out
    end }
    local l, r = probe.run({ backend = fake, ranked = { winner }, args_for = function() return mixed end,
                             job_for = function() return {} end, describe = function() return "w" end })
    return table.concat(l, "\n"), r, winner
  end
  local text2, row2, w2 = with(function(kind, ref) return (ref or kind == "float") and "ok" or "wrong" end)
  T.check(text2:find("matches the reference on x scaled 1000x", 1, true)
          and text2:find("on A (integers) scaled 1000x the winner fails", 1, true), "%s", text2)
  T.eq(row2.status, "ok", "the float pass's row")
  T.eq(row2.integers and row2.integers.status, "wrong", "the integer pass's row, beside it")
  T.eq(w2.result.range_probe.status, "wrong", "the winner's result keeps the failure")
  local text3, row3 = with(function(kind, ref) return (kind == "int" and ref) and "crash" or "ok" end)
  T.check(text3:find("matches the reference on x scaled 1000x", 1, true)
          and text3:find("integer inputs scaled 10x to 1000x (its output overflows there, or they are indices", 1, true),
          "%s", text3)
  T.eq(row3.status, "ok", "an index-like integer input leaves the float pass's row alone")
end

-- an input of 4 GB is probed like any other: the worker draws it
do
  local big = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 2 ^ 30 },
                { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 2 ^ 30 } }
  local asked = {}
  local fake = { check_variants = function(_, _, variants)
    asked[#asked + 1] = variants[1].scales[1]
    return { { status = "ok" }, { status = "ok" } }
  end }
  local l2 = probe.run({ backend = fake, ranked = { { key = "a", config = {}, result = {} } },
                         args_for = function() return big end, job_for = function() return {} end,
                         describe = function() return "a" end })
  T.eq(asked[1], 1000, "a 4 GB input is scaled in the worker")
  T.check(type(asked[2]) == "table" and asked[2].scale == 1000 and asked[2].every == 64,
          "then one element in 64 of it")
  T.check(type(asked[3]) == "table" and asked[3].scale == 1000 and asked[3].every == -1, "then one element alone")
  T.check(l2[1]:find("matches the reference on x scaled 1000x", 1, true), l2[1])
end

-- nothing the worker compares: the probe would pass whatever the kernel does
do
  local own = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 8 },
                { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8,
                  verify = { compare = false } } }
  local l3 = probe.run({ ranked = { { key = "a", config = {}, result = {} } }, args_for = function() return own end })
  T.check(l3[1]:find("every output is left to the spec's own check", 1, true), l3[1])
end

-- no input to scale
local lines = probe.run({ ranked = { { key = "a", config = {}, result = {} } },
  args_for = function() return { { name = "n", kind = "scalar", type = "i32" } } end })
T.check(lines[1]:find("no input is drawn from a distribution", 1, true), lines[1])

-- at the end of a run: the sanitizer's winner is checked first, the lines
-- join the summary's, the row goes to the event log and trace.md
do
  local events, traces = {}, {}
  local engine = { best = { key = "k2" },
                   rundir = { event = function(_, ev) events[#events + 1] = ev end,
                              trace = function(_, fmt, ...) traces[#traces + 1] = string.format(fmt, ...) end } }
  local checked = {}
  local fake = { check_variants = function(_, job, variants)
    local out = {}
    for i, v in ipairs(variants) do
      if not v.reference then checked[#checked + 1] = job.rec end
      out[i] = { status = "ok" }
    end
    return out
  end }
  local opts = { backend = fake, ranked = { { key = "k1", config = {}, result = {} }, { key = "k2", config = {}, result = {} },
                                            { key = "k3", config = {}, result = { sanitizer = { racecheck = { blamed = true } } } } },
                 job_for = function(rec) return { rec = rec.key } end,
                 describe = function(rec) return rec.key end, make_best = function() end }
  local summary = { "  finalists: ..." }
  local frow = probe.for_run(engine, cheat, opts, "note", false, summary)
  T.eq(checked[1], "k2", "the current winner is probed, not the fastest before the sanitizer")
  T.eq(#opts.ranked, 2, "a config with sanitizer errors of its own is never a fallback")
  T.eq(opts.ranked[2].key, "k1", "the others keep their order")
  T.eq(#summary, 3, "the probe's lines join the summary (the larger scales, then the small one)")
  T.check(summary[3]:find("scaled 0.001x", 1, true), "the small pass's line: %s", tostring(summary[3]))
  T.check(summary[2]:find("matches the reference", 1, true), summary[2])
  T.eq(events[1].event, "range_probe", "event")
  T.eq(events[1].mode, "note", "its mode")
  T.eq(events[1].scale, 1000, "its scale")
  T.eq(frow.winner, "k2", "the row")
  T.check(traces[1]:find("## Range probe", 1, true), "trace.md section")
end

-- the summary's rank table marks a config that failed the probe
do
  local finish = require("kopt.finish")
  local recs = {
    { key = "a", n = 2, config = { CHEAT = 1 }, result = { status = "ok", time_ms = 0.17, range_probe = { scale = 1000, status = "wrong" } } },
    { key = "b", n = 1, config = { CHEAT = 0 }, result = { status = "ok", time_ms = 0.43, range_probe = { scale = 1000, status = "ok" } } },
  }
  local engine = { strategy_name = "exhaustive", evaluations = 2, records = recs, stop_reason = "strategy finished",
                   backend = { name = "cuda" }, best = recs[2], cache = {}, ctx = {},
                   clock = function() return 1 end,
                   space = { default = function() return nil end, key = function() return "" end,
                             describe = function(_, c) return "CHEAT=" .. c.CHEAT end } }
  local summary_text = finish.summary(engine, { problem = "p", backend_label = "cuda" })
  T.check(summary_text:find("CHEAT=1  (fails at 1000x inputs)", 1, true), "%s", summary_text)
  T.check(not summary_text:find("CHEAT=0  (", 1, true), "the config that passed is not marked")
end

-- in a suite: the problem's row keeps the probe's finding, suite.md says
-- it in the "correct" column and the notes, the summary names the problem
do
  local suite = require("kopt.suite")
  local report = require("kopt.suite_report")
  local suite_cmd = require("kopt.commands.suite")
  local base = { eager = 1.0, compile = 0.5 }
  local flagged = suite.row({ name = "sinf", time_ms = 0.5, range_probe = { scale = 1000, status = "wrong",
                                                                           log = "check 1: relative L2 6e-05" } }, base)
  local replaced = suite.row({ name = "swapped", time_ms = 0.9, range_probe = { scale = 100, status = "wrong",
                                                                               new_winner = "k2" } }, base)
  local passed = suite.row({ name = "relu", time_ms = 0.4, range_probe = { scale = 1000, status = "ok" } }, base)
  local unprobed = suite.row({ name = "argmax", time_ms = 0.4, range_probe = { note = "no float input" } }, base)
  T.check(suite.probe_flagged(flagged), "a winner wrong at scale and kept is flagged")
  T.check(not suite.probe_flagged(replaced), "a winner replaced under strict is not")
  T.check(not suite.probe_flagged(passed) and not suite.probe_flagged(unprobed), "passed or not run: not flagged")
  T.check(flagged.correct, "still correct on the spec's own inputs")
  local rows = { flagged, replaced, passed, unprobed }
  local doc = { strategy = "mcgs", budget = 10, backend = "cuda", rows = rows, fast_p = suite.fast_p(rows) }
  local md = report.markdown(doc)
  T.check(md:find("| sinf | yes, on the spec's inputs only |", 1, true), "%s", md)
  T.check(md:find("| relu | yes |", 1, true), "%s", md)
  T.check(md:find("- sinf: range probe: the winner fails on inputs scaled 1000x (wrong: check 1: relative L2 6e-05)",
                  1, true), "%s", md)
  T.check(md:find("- swapped: range probe: the fastest config failed on inputs scaled 100x", 1, true), "%s", md)
  T.check(not md:find("- relu: range probe", 1, true) and not md:find("- argmax: range probe", 1, true),
          "no note for a winner that passed or was not probed")
  local stext = suite_cmd.summary_text(doc, "/tmp/s")
  T.check(stext:find("range probe: 1 winner(s) wrong on larger inputs: sinf", 1, true), "%s", stext)
end


-- A winner that samples its input to pick an exact path for large values:
-- right with the whole array scaled, wrong with one element in 64 scaled.
do
  local sargs = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 4096 },
                 { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 4096 } }
  local function run_sparse(sparse_status, ranked, mode)
    local seen = {}
    local fake = { check_variants = function(_, job, variants)
      local out = {}
      for i, v in ipairs(variants) do
        local sparse = type(v.scales[1]) == "table" and v.scales[1].every or nil
        seen[#seen + 1] = { job = job, sparse = sparse, reference = v.reference }
        out[i] = { status = (v.reference or not sparse) and "ok" or sparse_status(job, sparse), log = "check 1: off" }
      end
      return out
    end }
    local l, r = probe.run({ backend = fake, ranked = ranked, mode = mode, make_best = function(rec) ranked.best = rec end,
                               args_for = function() return sargs end, job_for = function(rec) return rec.key end,
                               describe = function(rec) return rec.key end })
    return table.concat(l, "\n"), r, seen
  end
  local w = { key = "dodge", config = {}, result = {} }
  local stext, srow = run_sparse(function() return "wrong" end, { w }, "note")
  T.check(stext:find("scaled 1000x at one element in 64 the winner fails", 1, true), "%s", stext)
  -- a kernel that samples more: right with one in 64 scaled, wrong with one alone
  local w1 = { key = "dense", config = {}, result = {} }
  local t1, r1 = run_sparse(function(_, sparse) return sparse == -1 and "wrong" or "ok" end, { w1 }, "note")
  T.check(t1:find("scaled 1000x at one element alone the winner fails", 1, true), "%s", t1)
  T.eq(r1.status, "wrong", "the single-element pass decides")
  T.eq(srow.status, "wrong", "the sparse pass decides")
  T.eq(srow.sparse, true, "the row says which pass failed")
  T.eq(w.result.range_probe.status, "wrong", "the winner's result keeps it")
  -- strict: the next config must pass both passes to take the title
  local a, b, c = { key = "a", config = {}, result = {} }, { key = "b", config = {}, result = {} },
    { key = "c", config = {}, result = {} }
  local ranked = { a, b, c }
  local text2, row2 = run_sparse(function(job) return job == "c" and "ok" or "wrong" end, ranked, "strict")
  T.eq(row2.new_winner, "c", "strict: the first config that passes both passes wins (%s)", text2)
  T.eq(b.result.range_probe.status, "wrong", "b passed the whole-array pass only")
  local text3 = run_sparse(function() return "ok" end, { { key = "h", config = {}, result = {} } }, "note")
  T.check(text3:find("matches the reference on x scaled 1000x (all of them, one element in 64, one element alone)", 1, true),
          "%s", text3)
end

T.done()-- strict mode with a float and an integer input: the float pass hands the
-- title to k2, and the integer pass probes k2 (it probed the demoted k1,
-- and k2, wrong on integers, won unprobed)
do
  local args2 = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 8 },
                  { name = "A", kind = "array", type = "i32", init = { dist = "uniform" }, count = 8 },
                  { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8 } }
  local ranked = {}
  for i = 1, 4 do ranked[i] = { key = "k" .. i, config = {}, result = { status = "ok" } } end
  local best, probed = "k1", {}
  local fake = { check_variants = function(_, job, variants)
    local out = {}
    for i, v in ipairs(variants) do
      local kind = v.scales[1] and "float" or "int"
      if not v.reference then probed[#probed + 1] = kind .. ":" .. job.rec end
      local st = "ok"
      if not v.reference and kind == "float" and (job.rec == "k1" or job.rec == "k3") then st = "wrong" end
      if not v.reference and kind == "int" and job.rec == "k2" then st = "wrong" end
      out[i] = { status = st, log = "rel L2 0.3 > 1e-05" }
    end
    return out
  end }
  probe.run({ backend = fake, ranked = ranked, mode = "strict", max_tries = 4,
    job_for = function(rec) return { rec = rec.key } end, args_for = function() return args2 end,
    describe = function(rec) return rec.key end, make_best = function(rec) best = rec.key end })
  -- (k3 passes integers and fails floats: the integer pass's tries run the
  -- float passes too)
  T.eq(best, "k4", "strict, floats then integers: the config that passes both wins")
  T.check(table.concat(probed, " "):find("int:k2", 1, true) and not table.concat(probed, " "):find("int:k1", 1, true),
          "the integer pass probes the float pass's winner: %s", table.concat(probed, " "))
end

-- sparse passes that could not run are named, not claimed
do
  local args3 = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 8 },
                  { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8 } }
  for _, how in ipairs({ "nil", "refcrash", "noreply" }) do
    local n = 0
    local fake = { check_variants = function()
      n = n + 1
      if n == 1 then return { { status = "ok" }, { status = "ok" } } end
      if how == "nil" then return nil, "the worker did not start" end
      if how == "refcrash" then return { { status = "crash", log = "CUDA_ERROR_LAUNCH_FAILED" } } end
      return { { status = "ok" } }
    end }
    local said = probe.run({ backend = fake, ranked = { { key = "a", config = {}, result = {} } },
      args_for = function() return args3 end, job_for = function() return {} end, describe = function() return "a" end })
    local said_text = table.concat(said, " | ")
    T.check(not said_text:find("one element in 64, one", 1, true) and said_text:find("not run: one element in 64", 1, true),
            "sparse passes not run (%s): %s", how, said_text)
  end
end

-- strict, every config wrong on floats and the winner also on integers:
-- the integer pass crowns none of those the float pass found wrong
do
  local args4 = { { name = "x", kind = "array", type = "f32", init = { dist = "normal" }, count = 8 },
                  { name = "A", kind = "array", type = "i32", init = { dist = "uniform" }, count = 8 },
                  { name = "y", kind = "array", type = "f32", output = true, init = { dist = "zeros" }, count = 8 } }
  local ranked = {}
  for i = 1, 4 do ranked[i] = { key = "k" .. i, config = {}, result = { status = "ok" } } end
  local best = "k1"
  local fake = { check_variants = function(_, job, variants)
    local out = {}
    for i, v in ipairs(variants) do
      local kind = v.scales[1] and "float" or "int"
      local st = "ok"
      if not v.reference and kind == "float" then st = "wrong" end
      if not v.reference and kind == "int" and job.rec == "k1" then st = "wrong" end
      out[i] = { status = st, log = "rel L2 0.3 > 1e-05" }
    end
    return out
  end }
  probe.run({ backend = fake, ranked = ranked, mode = "strict", max_tries = 4,
    job_for = function(rec) return { rec = rec.key } end, args_for = function() return args4 end,
    describe = function(rec) return rec.key end, make_best = function(rec) best = rec.key end })
  T.eq(best, "k1", "no config wrong on floats takes the title in the integer pass")
  T.eq(ranked[2].result.range_probe and ranked[2].result.range_probe.status, "wrong", "k2's float failure stays on record")
end

return T.done()
