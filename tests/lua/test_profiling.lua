-- kopt.profiling: whom --profile selects, what happens to the counters, that
-- a backend that cannot profile switches profiling off once, not per
-- candidate, and that a recording's time alone is not taken for counters.
-- Uses a fake engine and backend (no GPU).
local profiling = require("kopt.profiling")

local failures = 0
local function check(cond, fmt, ...)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
end

check(profiling.parse("top-k").n == profiling.DEFAULT_K, "top-k")
check(profiling.parse("top-5").kind == "top" and profiling.parse("top-5").n == 5, "top-5")
check(profiling.parse("every-4").kind == "every" and profiling.parse("every-4").n == 4, "every-4")
check(profiling.parse(nil).kind == "none" and profiling.parse("none").kind == "none", "none")
check(profiling.parse("sometimes") == nil, "bad mode rejected")
local spec_mod = require("kopt.spec")
check(spec_mod.is_matrix("wmma::mma_sync(acc, a, b, acc);") and not spec_mod.is_matrix("x[i] = y[i];"), "is_matrix")

-- A backend whose "counters" say memory-bound, with a time per config.
local function fake_backend(fail_with)
  local b = { name = "fake", calls = 0, profiled = {} }
  function b.profile(_, job)
    b.calls = b.calls + 1
    if fail_with then return nil, fail_with end
    b.profiled[#b.profiled + 1] = job.config.x
    return { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 80 + job.config.x % 10,
             ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 30 }
  end
  return b
end

local function fake_engine()
  local e = { records = {}, quiet = true, ctx = {} }
  function e.add(_, x, t)
    local rec = { key = "k" .. x, config = { x = x }, result = { status = t and "ok" or "wrong", time_ms = t } }
    e.records[#e.records + 1] = rec
    if t and (not e.best or t < e.best.result.time_ms) then
      e.best = { key = rec.key, config = rec.config, result = rec.result }
      e.ctx.best = e.best
    end
    return rec
  end
  return e
end

-- top-2 over three rounds: the profiled set is always within the running top 2.
do
  local be, e = fake_backend(), fake_engine()
  local p = profiling.new({ mode = "top-2", backend = be })
  p:after_round(e, { e:add(1, 5.0), e:add(2, 4.0), e:add(3, 6.0) })
  check(be.calls == 2, "round 1: the two fastest profiled, got %d calls", be.calls)
  p:after_round(e, { e:add(4, 7.0), e:add(5, nil) })
  check(be.calls == 2, "round 2: nothing new in the top 2, got %d calls", be.calls)
  p:after_round(e, { e:add(6, 1.0) })
  check(be.calls == 3 and be.profiled[3] == 6, "round 3: the new best profiled")
  check(e.records[6].result.symptoms and e.records[6].result.symptoms[1].name == "memory_bound",
        "symptoms stored in the result")
  check(e.records[3].result.symptoms == nil, "an unselected result has no counters and no symptoms")
  local facts = p:finish(e)
  check(be.calls == 3 and facts.profiling == nil, "finish: best already profiled")
end

-- every-2: every second valid result.
do
  local be, e = fake_backend(), fake_engine()
  local p = profiling.new({ mode = "every-2", backend = be })
  p:after_round(e, { e:add(1, 5.0), e:add(2, nil), e:add(3, 6.0), e:add(4, 3.0), e:add(5, 2.0) })
  check(be.calls == 2 and be.profiled[1] == 3 and be.profiled[2] == 5, "every-2 picks the 2nd and 4th valid")
end

-- Unavailable: one attempt, one reason, then no more calls.
do
  local be, e = fake_backend("profiling unavailable: cannot load CUPTI"), fake_engine()
  local p = profiling.new({ mode = "every-1", backend = be, quiet = true })
  p:after_round(e, { e:add(1, 5.0), e:add(2, 4.0) })
  p:after_round(e, { e:add(3, 3.0) })
  check(be.calls == 1, "profiling tried once, got %d calls", be.calls)
  local facts = p:finish(e)
  check(facts.profiling and facts.profiling:find("cannot load CUPTI"), "the reason reaches the report facts")
end

-- A backend without profile(): off from the start, with the reason.
do
  local p = profiling.new({ mode = "top-k", backend = { name = "replay" }, quiet = true })
  check(p.off and p.off:find("replay"), "replay cannot profile")
end

-- Recorded counters (replay) are diagnosed whatever the mode.
do
  local e = fake_engine()
  local p = profiling.new({ mode = "none", backend = { name = "replay" } })
  local rec = e:add(1, 2.0)
  rec.result.metrics = { ["smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"] = 97,
                         ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 20 }
  p:after_round(e, { rec })
  check(rec.result.symptoms and rec.result.symptoms[1].name == "compute_bound"
        and rec.result.symptoms[1].detail == "xu", "recorded counters diagnosed")
end

-- A recording whose only column is the time (tests/data/*.t4.json) has no
-- counters: nothing is said to be profiled, no profile event is written, and
-- ctx:profile gives the reason instead of the time as counters.
do
  local e = fake_engine()
  e.cache = {}
  function e.job_for(_, cand) return { key = "k" .. cand.config.x, config = cand.config, candidate = cand } end
  local events, traced = {}, {}
  e.rundir = { event = function(_, ev) events[#events + 1] = ev end,
               trace = function(_, fmt, ...) traced[#traced + 1] = string.format(fmt, ...) end }
  local p = profiling.new({ mode = "top-k", backend = { name = "replay" }, quiet = true })
  local rec = e:add(1, 2.0)
  rec.result.metrics = { time = 2.0 }
  e.cache["k1"] = rec.result
  p:after_round(e, { rec })
  p:finish(e)
  check(#events == 0 and #traced == 0, "time alone is no counters: %d events, %d trace lines", #events, #traced)
  check(rec.result.symptoms == nil, "time alone: no symptoms stored")
  local m, why = p:profile(e, { config = { x = 1 } })
  check(m == nil and why and why:find("replay"), "ctx:profile of a time-only record: %s", tostring(why))
end

-- ctx:profile through the profiler: recorded counters are diagnosed, a
-- candidate without them is profiled by the backend.
do
  local be, e = fake_backend(), fake_engine()
  e.cache = {}
  function e.job_for(_, cand) return { key = "k" .. cand.config.x, config = cand.config, candidate = cand } end
  local p = profiling.new({ mode = "none", backend = be, quiet = true })
  local m, syms = p:profile(e, { config = { x = 7 } })
  check(m and be.calls == 1 and syms and syms[1].name == "memory_bound", "ctx:profile of an unmeasured candidate")
  local rec = e:add(8, 1.0)
  rec.result.metrics = { ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 90 }
  e.cache["k8"] = rec.result
  local _, s2 = p:profile(e, { config = { x = 8 } })
  check(be.calls == 1 and s2 and s2[1].name == "compute_bound", "recorded counters answer ctx:profile")
end

-- Facts from a real spec (its launch table shadows the launch method) and
-- counters measured on an H200 (docs/results/cupti_h200, kopt's CUPTI).
do
  local spec = require("kopt.spec").load("specs/softmax.json", { device = {
    name = "NVIDIA H200", cc_major = 9, cc_minor = 0, arch = "sm_90", sm_count = 132, max_smem_optin = 232448,
    max_smem_block = 49152, max_regs_block = 65536, max_threads_block = 1024, max_threads_sm = 2048,
    max_regs_sm = 65536, max_smem_sm = 233472, max_blocks_sm = 32, l2_bytes = 62914560, mem_bytes = 1.5e11,
    clock_khz = 1980000, mem_clock_khz = 3201000, mem_bus_width = 6016 } })
  local f = assert(io.open("docs/results/cupti_h200/kopt_softmax.json", "rb"))
  local measured = require("cjson").decode(f:read("l"))
  f:close()
  local p = profiling.new({ mode = "none", backend = { name = "cuda" }, spec = spec, quiet = true })
  local cfg = measured.config
  local r = { status = "ok", time_ms = measured.time_ms, resources = measured.resources, metrics = measured.metrics }
  local facts = p:facts(cfg, r)
  check(facts.threads == 512 and facts.blocks == 8192, "launch geometry from the spec: %s threads, %s blocks",
        tostring(facts.threads), tostring(facts.blocks))
  check(facts.smem == 128 and facts.work and facts.work.bytes == 4 * 2 * 8192 * 8192, "smem and work")
  p:annotate(cfg, r)
  check(r.symptoms[1].name == "memory_bound", "softmax on the H200: memory-bound, got %s", r.symptoms[1].name)
  local rep = require("kopt.report").analyse({ config = cfg, result = r }, p:finish({ best = { config = cfg,
    result = r } }))
  check(rep.memory_frac and rep.memory_frac > 0.7 and rep.memory_frac < 0.85, "softmax at %.2f of DRAM peak",
        rep.memory_frac or -1)
end

if failures > 0 then
  io.stderr:write(failures, " check(s) failed\n")
  return 1
end
print("test_profiling: ok")
return 0
