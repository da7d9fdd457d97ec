-- Synthesis, offline: strategies/synthesize.lua on a spec with no kernel
-- (examples/synth/row_softmax.json), its writer served by tests/llm_server.py,
-- on a stub backend that plays the GPU. The stub compiles every source with
-- the real NVRTC (for the candidate's own entry: compile errors and their
-- logs are real), calls a row softmax without its normalisation wrong (with
-- the verifier's figures and message), times the reference at 10 ms and any
-- other kernel at 1 ms less a little per warp. Checked:
--  1. s_flow: a compile error, then a wrong result, then a correct kernel;
--     each attempt's hint goes back to the writer in the same conversation
--     (NVRTC's log, the verifier's figures); the correct kernel is tuned
--     over its declared knobs and a tuned config wins; trace.md shows it all;
--     an attempt's origin names the model that wrote it;
--  2. s_never: no attempt is correct, the run says so and the reference
--     stands; keyerr: the LLM goes off, and stderr says the templates
--     write the kernels (synthesize has no experts);
--  3. s_prose: a reply in prose with knobs as an object and a fenced source;
--  4. templates (no LLM): the pipeline runs offline, a template wins;
--  5. the reply parser and the checks on their own (a knob's default must
--     be one of its values);
--  6. through the real binary: a spec without a kernel loads (kopt compile
--     checks it), one without kernel and reference is refused in one
--     sentence, and `kopt synthesize --help` lists the options.
local T = require("testlib")
local compile = require("kopt.compile")
local engine_mod = require("kopt.engine")
local json = require("kopt.json")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local strategy_mod = require("kopt.strategy")
local synth = require("kopt.synth")
local templates = require("kopt.synth_templates")

local SPEC = "examples/synth/row_softmax.json"
local spec = spec_mod.load(SPEC)

local function new_space(sp)
  sp = sp or spec
  local scope = { device = sp.device }
  for k, v in pairs(sp.problem) do scope[k] = v end
  return space_mod.new({ knobs = sp.knobs, constraints = sp.constraints, scope = scope })
end

local function stub_backend(sp)
  local spec = sp or spec  -- luacheck: ignore 431 (the spec it compiles for)
  local b = { name = "stub", slots = 4, clock = 0, compiles = 0, measured = {}, launches = {} }
  function b:evaluate(jobs)
    local out = {}
    for i, job in ipairs(jobs) do
      self.clock = self.clock + 0.01
      self.measured[job.key] = (self.measured[job.key] or 0) + 1
      local src = job.source
      local cjob = compile.job_for(spec, job.config, "sm_80", src)
      cjob.entry = job.candidate.entry or cjob.entry
      cjob.name = job.candidate.name or cjob.name
      local res = compile.compile(cjob, { cache = false })
      self.compiles = self.compiles + 1
      self.launches[#self.launches + 1] = job.candidate.launch or "spec"
      if not res.ok then
        out[i] = { status = "compile_error", log = res.log }
      elseif src:find("yr[c] = __expf(xr[c] - m);", 1, true) then
        out[i] = { status = "wrong", err = { rel_l2 = 0.998, max_abs = 812.4, nonfinite = 0, unwritten = 0 },
                   log = "check 1, output 'y': relative L2 error 0.998 above tolerance 1e-05 (max abs 812 at index 0: " ..
                     "got 1.93, want 0.00024)" }
      elseif src == spec.kernel.source or src:find("KOPT_TEST_SLOW", 1, true) then
        out[i] = { status = "ok", time_ms = src:find("KOPT_TEST_SLOW", 1, true) and 20.0 or 10.0 }
      else
        local warps = tonumber(src:match("WARPS=(%d+)") or "4")
        out[i] = { status = "ok", time_ms = 1.0 - warps / 100, resources = { regs = 32, smem = 0, occupancy = 0.75 } }
      end
    end
    return out
  end
  function b:elapsed() return self.clock end
  function b:describe() return { backend = "stub" } end
  return b
end

local S = require("strategies.synthesize")

-- Strategy messages, captured through the engine (they also go to trace.md).
local captured
local real_log = engine_mod.Engine.strategy_event
engine_mod.Engine.strategy_event = function(self, msg)
  if captured then captured[#captured + 1] = msg end
  return real_log(self, msg)
end

-- One run; `resume_dir`: continue the run recorded there (as --resume does);
-- `sp`: another spec.
local function run(opts, budget, resume_dir, sp)
  local options = strategy_mod.options(S, opts)
  local backend = stub_backend(sp)
  local dir = resume_dir or T.tmpdir("synth")
  local rundir_mod = require("kopt.rundir")
  local events = resume_dir and rundir_mod.read_events(dir .. "/events.jsonl") or nil
  local rd
  captured = {}
  local engine = engine_mod.run({
    strategy = S, strategy_name = "synthesize", options = options, space = new_space(sp), spec = sp or spec,
    backend = backend, budget = budget or 40, seed = 1, quiet = true, out_dir = dir, resume_events = events,
    run_dir_opener = function()
      rd = rundir_mod.open(dir, resume_dir ~= nil)
      return rd
    end,
  })
  if rd then rd:close() end
  local log = table.concat(captured, "\n")
  captured = nil
  return engine, backend, dir, log
end

local function statuses(engine)
  local out = {}
  for _, rec in ipairs(engine.records) do
    if rec.origin and rec.origin.attempt and rec.origin.expert ~= "tune" then out[#out + 1] = rec.result.status end
  end
  return table.concat(out, ",")
end

local server, why = require("llm_test_server").start({})

if server then
  -- 1. compile error -> wrong -> correct -> tuned
  do
    local e, _, dir, log = run({ { "llm_base_url", server:base("s_flow") }, { "llm_timeout", "20" },
                                 { "attempts", "4" }, { "improve", "0" }, { "llm_model", "m-flow" } })
    T.eq(e.stop_reason, "strategy finished", "s_flow: stop reason")
    T.eq(statuses(e), "compile_error,wrong,ok", "s_flow: the attempts' statuses")
    -- (the model that wrote an attempt is on its origin, for the experience
    -- database's llm_attempts; the tuning of an attempt names none)
    for _, rec in ipairs(e.records) do
      local o = rec.origin or {}
      if o.attempt then
        T.eq(o.model, o.expert == "llm" and "m-flow" or nil, "s_flow: the model of " .. tostring(o.expert))
      end
    end
    T.eq(e.records[1].origin.method, "reference", "s_flow: the reference is measured first")
    T.check(log:find("attempt 1 (llm/synthesis): compile_error", 1, true), "s_flow: attempt 1 in the log:\n%s", log)
    T.check(log:find("hint for attempt 2: It did not compile. NVRTC says:", 1, true), "s_flow: the compile hint")
    T.check(log:find("hint for attempt 3: It compiled and ran, but its output is wrong", 1, true),
            "s_flow: the wrong-result hint")
    T.check(log:find("at index 0: got 1.93, want 0.00024", 1, true), "s_flow: the hint names where the error is")
    T.check(log:find("what attempt 3 hears (no attempt follows): It is correct: 0.96 ms. The reference takes 10 ms: " ..
                     "10.42x faster", 1, true), "s_flow: the performance hint:\n%s", log)
    T.check(log:find("tuning attempt 3's kernel with exhaustive over 12 configs", 1, true), "s_flow: tuning starts")
    -- the tuning measured every other config of the declared knobs, each as
    -- a source with its #defines set, launched with its own geometry
    local tuned = 0
    for _, rec in ipairs(e.records) do
      if rec.origin and rec.origin.expert == "tune" then
        tuned = tuned + 1
        T.check(rec.candidate.source:find("#define WARPS " .. rec.origin.knobs:match("WARPS=(%d+)"), 1, true),
                "s_flow: the tuned source sets its WARPS define")
        T.eq(rec.candidate.launch.block[1], 32 * tonumber(rec.origin.knobs:match("WARPS=(%d+)")),
             "s_flow: the tuned launch follows the knob")
      end
    end
    T.eq(tuned, 11, "s_flow: tuning measured the 11 other configs")
    local best = e.ctx.best
    T.check(best and best.candidate.origin.knobs:find("WARPS=8", 1, true), "s_flow: a tuned config wins (WARPS=8)")
    T.check(best and best.result.time_ms < 1, "s_flow: the winner is faster than the reference")
    -- every turn after the first carries the previous attempt's hint, in one conversation
    local tr = T.slurp(dir .. "/llm_transcript.jsonl")
    local turns, saw_log, saw_wrong = 0, false, false
    for line in tr:gmatch("[^\n]+") do
      local rec = json.decode(line)
      if rec.kind == "request" then
        turns = turns + 1
        local msgs = rec.body.messages
        local last = msgs[#msgs].content
        -- NVRTC's message names the writer's kernel and its own line
        if last:find("It did not compile", 1, true) and last:find("synth_row_softmax_synth.cu(9): error: expected a \";\"", 1, true) then
          saw_log = true
        end
        if last:find("rel_l2 0.998", 1, true) and msgs[#msgs - 1].role == "assistant" then saw_wrong = true end
      end
    end
    T.eq(turns, 3, "s_flow: three LLM turns")
    T.check(saw_log, "s_flow: the second turn carries NVRTC's log")
    T.check(saw_wrong, "s_flow: the third turn carries the verifier's figures after the model's own answer")
    -- the winner's kernel as a spec of its own: it loads, and its knobs
    -- arrive as -D defines over the guarded #defines
    local dspec = spec_mod.load(dir .. "/synthesized/spec.json")
    T.eq(#dspec.knobs, 2, "derived spec: its knobs")
    local cjob = compile.job_for(dspec, { WARPS = 8, UNROLL = 1 }, "sm_80")
    local cres = compile.compile(cjob, { cache = false })
    T.check(cres.ok, "derived spec: compiles with -D defines:\n%s", tostring(cres.log))
    T.check(dspec.kernel.source:find("#ifndef WARPS\n#define WARPS 4\n#endif", 1, true), "derived spec: guarded defines")
    local trace = T.slurp(dir .. "/trace.md")
    T.check(trace:find("hint for attempt 2", 1, true) and trace:find("tune: new best", 1, true),
            "s_flow: trace.md shows the hints and the tuning")
    T.check(table.concat(e.ctx.summary_lines, "\n"):find("synthesis: 3 attempts: 1 compile_error, 2 wrong, 3 ok", 1, true),
            "s_flow: the summary lists the attempts: %s", table.concat(e.ctx.summary_lines, "\n"))
  end

  -- 1a. killed after 7 evaluations and resumed: the writer is answered from
  -- the run's transcript, nothing recorded is measured again, and the run
  -- ends where an uninterrupted one does
  do
    local base = server:base("s_flow")
    local opts = { { "llm_base_url", base }, { "attempts", "4" }, { "improve", "0" } }
    local whole = run(opts, 40)
    local e1, _, dir = run(opts, 7)
    T.eq(e1.evaluations, 7, "resume: the first part")
    local e2, b2 = run(opts, 40, dir)
    local measured = 0
    for _ in pairs(b2.measured) do measured = measured + 1 end
    T.eq(measured, #whole.records - 7, "resume: only what was not recorded is measured")
    T.eq(e2.evaluations, #whole.records, "resume: as many evaluations as the uninterrupted run")
    T.eq(e2.ctx.best and e2.ctx.best.key, whole.ctx.best and whole.ctx.best.key, "resume: the same winner")
    local tr = T.slurp(dir .. "/llm_transcript.jsonl")
    local requests = 0
    for line in tr:gmatch("[^\n]+") do
      if json.decode(line).kind == "request" then requests = requests + 1 end
    end
    T.eq(requests, 3, "resume: the writer was not asked again")
  end

  -- 1b. improve: a fourth attempt is told the performance and its kernel is measured
  do
    local e, _, _, log = run({ { "llm_base_url", server:base("s_flow") }, { "attempts", "5" }, { "improve", "1" },
                               { "tune", "none" } })
    T.eq(statuses(e), "compile_error,wrong,ok,ok", "improve: four attempts")
    T.check(log:find("attempt 4 (llm/synthesis): kernel", 1, true), "improve: attempt 4 ran")
    T.check(log:find("the writer's plan: float4 loads", 1, true), "improve: attempt 4 is the writer's faster plan")
    T.check(log:find("no tuning: tune=none", 1, true), "improve: tune=none skips tuning")
  end

  -- 2. never correct: the reference stands
  do
    local e, _, _, log = run({ { "llm_base_url", server:base("s_never") }, { "attempts", "3" } })
    T.eq(statuses(e), "compile_error,compile_error,compile_error", "s_never: three failed attempts")
    T.check(log:find("no attempt was correct after 3: the reference stands (10 ms)", 1, true),
            "s_never: the run says so:\n%s", log)
    T.eq(e.ctx.best and e.ctx.best.candidate.origin.method, "reference", "s_never: the reference is the best")
    T.check(table.concat(e.ctx.summary_lines, "\n"):find("no attempt was correct: the reference stands", 1, true),
            "s_never: the summary says so")
    T.check(log:find("undefined_step_1", 1, true), "s_never: each hint carries that attempt's compiler log")
  end

  -- 3. lenient reading
  do
    local e, _, _, log = run({ { "llm_base_url", server:base("s_prose") }, { "attempts", "1" } })
    T.eq(statuses(e), "ok", "s_prose: the kernel in prose is read")
    T.check(log:find("entry taken from the source: synth_row_softmax_synth", 1, true), "s_prose: the entry comes from the source")
  end
  -- 4. several fenced blocks in the source: the one the reply meant
  do
    local e, _, _, log = run({ { "llm_base_url", server:base("s_quoteref") }, { "attempts", "1" }, { "improve", "0" } })
    T.eq(statuses(e), "ok", "s_quoteref: the kernel is measured")
    T.check(log:find("entry taken from the source: synth_row_softmax_synth", 1, true),
            "s_quoteref: the kernel's block is taken, not the reference quoted after it:\n%s", log)
    for _, rec in ipairs(e.records) do
      T.check(rec.origin.method == "reference" or rec.candidate.entry ~= "row_softmax_ref",
              "s_quoteref: the reference's code measured as the writer's kernel")
    end
    local e2, _, _, log2 = run({ { "llm_base_url", server:base("s_named") }, { "attempts", "1" }, { "improve", "0" } })
    T.eq(statuses(e2), "ok", "s_named: the named entry's block is measured:\n" .. log2)
  end

  -- 5. a reply refused for its size is not sent back whole
  do
    local e, _, dir, log = run({ { "llm_base_url", server:base("s_big") }, { "attempts", "2" }, { "improve", "0" } })
    T.check(log:find("more than 204800", 1, true), "s_big: the first reply is refused for its size:\n%s", log)
    T.eq(statuses(e), "ok", "s_big: the second attempt is measured")
    local biggest = 0
    for line in T.slurp(dir .. "/llm_transcript.jsonl"):gmatch("[^\n]+") do
      local rec = json.decode(line)
      if rec.kind == "request" then
        for _, m in ipairs(rec.body.messages) do biggest = math.max(biggest, #(m.content or "")) end
      end
    end
    T.check(biggest > 0 and biggest < 100 * 1024, "s_big: the largest message sent is %d bytes", biggest)
  end

  -- 6. an attempt slower than the reference is not called the winner
  do
    local e = run({ { "llm_base_url", server:base("s_slow") }, { "attempts", "1" }, { "improve", "0" } })
    local summary = table.concat(e.ctx.summary_lines, "\n")
    T.check(summary:find("best written kernel: attempt 1", 1, true) and
            summary:find("the reference stays the fastest", 1, true) and not summary:find("winner:", 1, true),
            "s_slow: the summary:\n%s", summary)
  end

  -- 7. a knob declared in the source, not a #define
  do
    local _, _, _, log = run({ { "llm_base_url", server:base("s_constexpr") }, { "attempts", "1" } })
    T.check(log:find("knob WARPS: the source declares it (`int WARPS =`)", 1, true),
            "s_constexpr: the refusal names the declaration:\n%s", log)
  end

  -- 8. the writer's endpoint refuses the key: the LLM goes off, and the
  -- line on stderr says the templates write the kernels (there are no
  -- experts to fall back on)
  do
    local real, said = io.stderr, {}
    io.stderr = { write = function(_, ...) for _, t in ipairs({ ... }) do said[#said + 1] = t end end } -- luacheck: ignore 122
    local ok, err = pcall(run, { { "llm_base_url", server:base("keyerr") }, { "attempts", "2" }, { "improve", "0" } })
    io.stderr = real -- luacheck: ignore 122
    assert(ok, err)
    said = table.concat(said)
    T.check(said:find("the LLM is off for the rest of the run (the templates write the kernels)", 1, true) and
            not said:find("experts", 1, true), "keyerr: what synthesize does instead:\n%s", said)
  end
  server:stop()
else
  print("LLM scenarios skipped: " .. why)
end

-- 4. offline: templates chosen by the problem's shape
do
  local e, _, _, log = run({ { "llm", "off" }, { "attempts", "3" }, { "improve", "1" } })
  -- softmax verifies, so log-softmax (another function) is not tried; the
  -- coarsened reference is the improvement attempt
  T.eq(statuses(e), "ok,ok", "templates: softmax, then the coarsened reference")
  T.check(log:find("attempt 2 (template/coarsen)", 1, true), "templates: coarsen second:\n%s", log)
  T.check(log:find("templates (llm=off)", 1, true), "templates: the writer is said")
  T.check(log:find("attempt 1 (template/row_softmax:softmax)", 1, true), "templates: row_softmax first:\n%s", log)
  T.check(e.ctx.best and e.ctx.best.candidate.origin.expert == "tune", "templates: a tuned template config wins")
end

-- 4b. a spec with a kernel of its own: that kernel, at its first config, is
-- the baseline, and the written kernels compile at that config too (its
-- knobs arrive as -D defines they ignore)
do
  local own = spec_mod.load("specs/softmax.json")
  local e, _, _, log = run({ { "llm", "off" }, { "attempts", "1" }, { "tune", "none" } }, 10, nil, own)
  T.eq(e.records[1].origin.method, "spec_kernel", "own kernel: measured first")
  T.check(log:find("the spec's kernel: ok 10 ms", 1, true), "own kernel: the baseline is named:\n%s", log)
  T.eq(statuses(e), "ok", "own kernel: the template compiles and runs beside the spec's knobs")
  T.check(log:find("The spec's kernel takes 10 ms", 1, true), "own kernel: the hint compares with it")
end

-- 5. parsing and checks
do
  local names = {}
  for _, K in ipairs(templates.candidates(spec)) do names[#names + 1] = K.origin.method end
  T.eq(table.concat(names, ","), "row_softmax:softmax,row_softmax:log_softmax,coarsen", "templates for row softmax")
  local gelu = spec_mod.load("examples/synth/gelu.json")
  names = {}
  for _, K in ipairs(templates.candidates(gelu)) do names[#names + 1] = K.origin.method end
  T.eq(table.concat(names, ","), "coarsen", "templates for gelu")
  -- a row mean and a matmul, written here: their templates by shape
  local tdir = T.tmpdir("synth-shapes")
  T.write(tdir .. "/mean_ref.cu", 'extern "C" __global__ void mean_ref(float *y, const float *x, int rows, int cols)\n' ..
    "{ int r = blockIdx.x * blockDim.x + threadIdx.x; if (r >= rows) return; float s = 0.0f;\n" ..
    "  for (int c = 0; c < cols; ++c) s += x[(size_t)r * cols + c]; y[r] = s / cols; }\n")
  T.write(tdir .. "/mean.json", json.encode({ name = "mean", problem = { rows = 256, cols = 1024 },
    args = { { name = "y", type = "f32", shape = { "rows" }, output = true },
             { name = "x", type = "f32", shape = { "rows", "cols" } },
             { name = "rows", type = "i32", value = "rows" }, { name = "cols", type = "i32", value = "cols" } },
    reference = { source = "mean_ref.cu", entry = "mean_ref", launch = { grid = { "cdiv(rows, 64)" }, block = { 64 } } } }))
  T.write(tdir .. "/mm_ref.cu", 'extern "C" __global__ void mm_ref(const float *b, float *c, const float *a, int M, int N, int K)\n' ..
    "{ int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x; if (j >= N) return; float s = 0.0f;\n" ..
    "  for (int k = 0; k < K; ++k) s += a[i * K + k] * b[k * N + j]; c[i * N + j] = s; }\n")
  T.write(tdir .. "/mm.json", json.encode({ name = "mm", problem = { M = 128, N = 256, K = 64 },
    args = { { name = "b", type = "f32", shape = { "K", "N" } }, { name = "c", type = "f32", shape = { "M", "N" }, output = true },
             { name = "a", type = "f32", shape = { "M", "K" } }, { name = "M", type = "i32", value = "M" },
             { name = "N", type = "i32", value = "N" }, { name = "K", type = "i32", value = "K" } },
    reference = { source = "mm_ref.cu", entry = "mm_ref", launch = { grid = { "cdiv(N, 64)", "M" }, block = { 64 } } } }))
  local mean, mm = spec_mod.load(tdir .. "/mean.json"), spec_mod.load(tdir .. "/mm.json")
  names = {}
  for _, K in ipairs(templates.candidates(mean)) do names[#names + 1] = K.origin.method end
  T.eq(table.concat(names, ","), "row_reduce:mean,row_reduce:sum,row_reduce:max,coarsen", "templates for a row mean")
  names = {}
  local mmK
  for _, K in ipairs(templates.candidates(mm)) do names[#names + 1] = K.origin.method mmK = mmK or K end
  T.eq(table.concat(names, ","), "matmul_tiled", "templates for a matmul (a 2-D reference launch is not coarsened)")
  T.check(mmK and mmK.source:find("#define KOPT_IN0 a\n#define KOPT_IN1 b", 1, true), "matmul: A and B found by their shapes")
  -- every template compiles for these problems at its default config
  for _, sp in ipairs({ spec, gelu, mean, mm }) do
    for _, K in ipairs(templates.candidates(sp)) do
      local ok, err = synth.check(K, sp)
      T.check(ok, "template %s on %s: %s", K.origin.method, sp.name, tostring(err))
      if ok then
        local src = synth.materialize(K, K.default, sp)
        local cjob = compile.job_for(sp, {}, "sm_80", src)
        cjob.entry = K.entry
        local res = compile.compile(cjob, { cache = false })
        T.check(res.ok, "template %s on %s does not compile:\n%s", K.origin.method, sp.name, tostring(res.log))
      end
    end
  end

  -- a knob whose default is not among its values is refused, with why
  do
    local KD = synth.parse({ source = "#define WARPS 4\nextern \"C\" __global__ void k(float *y, const float *x, " ..
                                      "int rows, int cols) { }", entry = "k",
                             knobs = { { name = "WARPS", values = { 1, 2, 8 }, default = 4 } },
                             launch = { grid = { "cdiv(rows, WARPS)" }, block = { "WARPS * 32" } } })
    local okd, errd = synth.check(KD, spec)
    T.check(not okd and tostring(errd):find("knob WARPS: the default 4 is not one of its values (1, 2, 8)", 1, true),
            "a default outside the values: %s", tostring(errd))
    KD.knobs[1].default = json.null
    T.check(synth.check(KD, spec), "a null default is no default")
  end
  local K, notes = synth.parse({ kernel = { code = "```cuda\nextern \"C\" __global__ void k(float *y, const float *x, " ..
                                                   "int rows, int cols) { }\n```",
                                            knobs = { B = { "64", 128 } }, launch = { grid = "cdiv(rows, B)", block = "B" } } })
  T.check(K ~= nil, "parse: a nested, fenced, stringly reply is read")
  T.eq(K and K.entry, "k", "parse: the entry from the source")
  T.eq(K and K.knobs[1].values[1], 64, "parse: '64' is 64")
  T.check(notes and #notes == 1, "parse: one note")
  local ok, err = synth.check(K, spec)
  T.check(ok, "check: %s", tostring(err))
  -- a kernel the worker could not launch with the spec's arguments: a
  -- parameter more, one less, a size_t for an i32, a value for a pointer
  for _, sig in ipairs({ { "float *y, const float *x, int rows, int cols, int extra", "takes 5 parameters" },
                         { "float *y, const float *x, int rows", "takes 3 parameters" },
                         { "float *y, const float *x, size_t rows, size_t cols", "'rows' is a scalar i32 (an integer of 4 bytes), not size_t" },
                         { "float *y, float x, int rows, int cols", "'x' is an array, passed as a pointer" },
                         { "float *y, const float *x, float rows, int cols", "'rows' is a scalar i32 (an integer of 4 bytes), not float" } }) do
    local Kb = synth.parse({ source = "extern \"C\" __global__ void k(" .. sig[1] .. ") { }",
                             launch = { grid = { 1 }, block = { 32 } } })
    local okb, errb = synth.check(Kb, spec)
    T.check(not okb and tostring(errb):find(sig[2], 1, true), "check refuses k(%s): %s", sig[1], tostring(errb))
  end
  local src, l = synth.materialize(K, { B = 128 }, spec)
  T.check(src and src:find("#define B 128", 1, true), "materialize: a missing #define is added")
  T.eq(l and l.grid[1], 32, "materialize: the launch at the config")
  -- knobs as an object of objects: {"WARPS": {"values": [...], "default": 4}}
  local K2 = synth.parse({ source = "extern \"C\" __global__ void k(float *y) { }",
                           knobs = { WARPS = { values = { 2, 4, 8 }, default = 4 } }, launch = { grid = { 1 }, block = { 32 } } })
  T.check(K2 and #K2.knobs == 1 and #K2.knobs[1].values == 3 and K2.knobs[1].default == 4,
          "parse: knobs as an object of {values, default}")
  local _, why1 = synth.parse({ launch = { grid = { 1 }, block = { 1 } } })
  T.check(why1 and why1:find("no kernel source", 1, true), "parse: no source")
  local bad = synth.parse({ source = "#include <stdio.h>\nextern \"C\" __global__ void k(float *y) { }",
                            launch = { grid = { 1 }, block = { 1 } } })
  local _, why2 = synth.check(bad, spec)
  T.check(why2 and why2:find("refused", 1, true), "check: host headers are refused: %s", tostring(why2))
  local hosty = synth.parse({ source = "extern \"C\" __global__ void k(float *y) { }\nint main() { return 0; }",
                              launch = { grid = { 1 }, block = { 1 } } })
  local _, why3 = synth.check(hosty, spec)
  T.check(why3 and why3:find("main", 1, true), "check: a main() is refused: %s", tostring(why3))
  local unknown = synth.parse({ source = "extern \"C\" __global__ void k(float *y, const float *x, int rows, int cols) { }",
                                launch = { grid = { "cdiv(rows, TILE)" }, block = { 32 } } })
  local _, why4 = synth.check(unknown, spec)
  T.check(why4 and why4:find("'TILE' is not a knob", 1, true), "check: a launch reading an unknown name: %s", tostring(why4))
end

-- 6. through the binary
do
  local dir = T.tmpdir("synth-cli")
  T.write(dir .. "/ref.cu", 'extern "C" __global__ void r(float *y, int n) { int i = threadIdx.x; if (i < n) y[i] = 1.0f; }\n')
  T.write(dir .. "/nokernel.json", json.encode({ name = "x", problem = { n = 32 },
    args = { { name = "y", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } },
    reference = { source = "ref.cu", entry = "r", launch = { grid = { 1 }, block = { 32 } } } }))
  local code, out, err = T.run("compile " .. dir .. "/nokernel.json")
  T.eq(code, 0, "a spec without a kernel loads: " .. tostring(err) .. tostring(out))
  T.write(dir .. "/neither.json", json.encode({ name = "x", problem = { n = 32 },
    args = { { name = "y", type = "f32", shape = { "n" }, output = true } } }))
  code, out, err = T.run("compile " .. dir .. "/neither.json")
  T.eq(code, 2, "no kernel, no reference: exit code " .. tostring(out))
  T.check(err:find("kernel: missing (expected an object; a spec without a kernel needs a 'reference'", 1, true),
          "no kernel, no reference: %s", err)
  T.one_sentence(err, "no kernel, no reference")
  -- under replay (no GPU here: the spec's recording) nothing written can be
  -- measured: the spec's kernel is measured, and the run says why no more
  code, out, err = T.run("synthesize specs/softmax.json --backend replay:tests/data/softmax_h200.t4.json --out " ..
                         dir .. "/replay --opt llm=off")
  T.eq(code, 0, "replay: exit code " .. tostring(err) .. tostring(out))
  local evals = T.events(dir .. "/replay")
  T.eq(#evals, 1, "replay: only the spec's kernel is measured")
  T.check(T.slurp(dir .. "/replay/trace.md"):find("no attempts: the replay backend", 1, true), "replay: the trace says why")
  code, out = T.run("synthesize --help")
  T.eq(code, 0, "synthesize --help")
  T.check(out:find("attempts", 1, true) and out:find("tune", 1, true), "synthesize --help lists its options")
end

return T.done()
