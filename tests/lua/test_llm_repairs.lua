-- The repair loop, offline: the experts strategy with LLM experts served by
-- tests/llm_server.py, on a stub backend that plays the GPU. The stub
-- compiles every source with the real NVRTC (so compile errors and their logs
-- are real), calls a source with "a[i] - b[i]" wrong (with the verifier's
-- figures), and times "__fadd_rn" sources at half the original's time. A
-- failed edit goes back to its expert in the same conversation; the fixed
-- edit is measured and crowned; a chain that never converges stops after
-- `repairs` turns; a repair turn after an edit that did not apply says it
-- was not tried (not that it was); a repair that reproduces a measured
-- source is not measured again; artifacts are written per source variant.
local T = require("testlib")
local json = require("kopt.json")
local compile = require("kopt.compile")
local patch = require("kopt.patch")
local engine_mod = require("kopt.engine")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local strategy_mod = require("kopt.strategy")

local server, why = require("llm_test_server").start({})
if not server then
  print("skipped: " .. why)
  os.exit(77)
end

local spec = spec_mod.load("tests/data/specs/vector_add.json")
local function new_space()
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  return space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
end

local function stub_backend()
  local b = { name = "stub", slots = 4, clock = 0, compiles = 0, measured = {} }
  function b:evaluate(jobs)
    local out = {}
    for i, job in ipairs(jobs) do
      self.clock = self.clock + 0.01
      self.measured[job.key] = (self.measured[job.key] or 0) + 1
      local src = job.source
      local res = compile.compile(compile.job_for(spec, job.config, "sm_80", src), { cache = false })
      self.compiles = self.compiles + 1
      if not res.ok then
        out[i] = { status = "compile_error", log = res.log }
      elseif src:find("a[i] - b[i]", 1, true) then
        out[i] = { status = "wrong", err = { rel_l2 = 1.41, max_abs = 3.9, nonfinite = 0, unwritten = 0 },
                   log = "output 'c': 100000 of 100000 elements differ; first mismatch at index 0: got -0.53, want 1.21" }
      else
        local t = 1.0 + job.config.block_size_x / 1e5
        if src:find("__fadd_rn", 1, true) then t = t / 2 end
        out[i] = { status = "ok", time_ms = t }
      end
    end
    return out
  end
  function b:elapsed() return self.clock end
  function b:describe() return { backend = "stub" } end
  return b
end

local S = require("strategies.experts")

-- One run of the experts strategy against a scenario; returns the engine,
-- its strategy log, the backend and the run folder.
local function run(scenario, extra, dir)
  local opts = { { "edits", "on" }, { "iterations", "2" }, { "init", "1" }, { "llm_base_url", server:base(scenario) },
                 { "llm_timeout", "10" }, { "experts", "throughput" }, { "per_expert", "1" } }
  for _, kv in ipairs(extra or {}) do opts[#opts + 1] = kv end
  local options = strategy_mod.options(S, opts)
  local backend = stub_backend()
  dir = dir or T.tmpdir("repairs-" .. scenario)
  -- Compiled code (an NVRTC compile, and nvcc for the PTX) only where it is
  -- checked: it costs seconds.
  local artifacts = require("kopt.artifacts").new({ dir = dir, spec = spec, mode = "best",
                                                    compile = scenario == "r_compile", arch = "sm_80" })
  local engine = engine_mod.run({
    strategy = S, strategy_name = "experts", options = options, space = new_space(), spec = spec,
    backend = backend, budget = 20, seed = 1, quiet = true, out_dir = dir,
    on_eval = function(e, rec) artifacts:record(e, rec) end,
  })
  artifacts:finish(engine)
  return engine, backend, dir
end

-- Strategy messages: the engine keeps them only in the run folder, so the
-- runs here capture them through a wrapped ctx.log.
local captured
local real_log = engine_mod.Engine.strategy_event
engine_mod.Engine.strategy_event = function(self, msg)
  if captured then captured[#captured + 1] = msg end
  return real_log(self, msg)
end
local function run_logged(scenario, extra)
  captured = {}
  local e, b, d = run(scenario, extra)
  local l = captured
  captured = nil
  return e, b, d, table.concat(l, "\n")
end

local function count_repairs(engine)
  local n, best_repair = 0, nil
  for _, rec in ipairs(engine.records) do
    if rec.origin and rec.origin.repair then n = n + 1 end
  end
  local best = engine.ctx.best
  if best and best.candidate.origin then best_repair = best.candidate.origin.repair end
  return n, best_repair
end

-- 1. A compile error, fixed on the repair turn: the fixed edit is the best.
do
  local e, b, d, log = run_logged("r_compile")
  local n, best_repair = count_repairs(e)
  T.check(log:find("repair 1 of throughput/strength_reduction: a fixed edit", 1, true),
          "r_compile: no repair turn in the log:\n%s", log)
  T.check(n >= 1, "r_compile: no repaired candidate was measured")
  T.eq(best_repair, 1, "r_compile: the best came from repair 1")
  T.check(e.ctx.best.source:find("__fadd_rn", 1, true), "r_compile: the best is not the fast edit")
  local failed = 0
  for _, rec in ipairs(e.records) do
    if rec.result.status == "compile_error" then
      failed = failed + 1
      T.check(rec.result.log:find("undefined_symbol", 1, true), "r_compile: NVRTC's log names the identifier")
    end
  end
  T.check(failed >= 1, "r_compile: the broken edit was not compiled")
  -- The repair turn carried the compiler's message, in the same conversation.
  local tr = T.slurp(d .. "/llm_transcript.jsonl")
  local saw = false
  for line in tr:gmatch("[^\n]+") do
    local rec = json.decode(line)
    if rec.kind == "request" and rec.tag == "throughput#repair" then
      local msgs = rec.body.messages
      T.eq(msgs[#msgs - 1].role, "assistant", "r_compile: the repair turn follows the model's own answer")
      local last = msgs[#msgs].content
      if last:find("did not compile", 1, true) and last:find("undefined_symbol", 1, true) then saw = true end
    end
  end
  T.check(saw, "r_compile: no repair request in the transcript carries NVRTC's log")
  -- Artifacts: one folder per source variant, each with its source and results.
  local variants = 0
  for name in io.popen("ls " .. d .. "/variants"):lines() do
    variants = variants + 1
    local vd = d .. "/variants/" .. name
    T.check(T.exists(vd .. "/vector_add.cu") and T.exists(vd .. "/results.jsonl") and T.exists(vd .. "/origin.json"),
            "artifacts of %s incomplete", name)
  end
  T.check(variants >= 3, "r_compile: %d variant folders (original, broken, fixed)", variants)
  T.check(T.exists(d .. "/best/vector_add.cu.diff"), "best/ holds the diff against the original")
  -- Compiled code of the best: CUBIN always, PTX when the toolkit has nvcc.
  local bdir = d .. "/variants/" .. require("kopt.sys").sha256(e.ctx.best.source):sub(1, 16)
  local key = tostring(e.ctx.best.config.block_size_x)
  T.check(T.exists(bdir .. "/" .. key .. ".cubin"), "artifacts: no CUBIN of the best in %s", bdir)
  local home = os.getenv("CUDA_HOME") or "/usr/local/cuda"
  if T.exists(home .. "/bin/nvcc") then
    T.check(T.slurp(bdir .. "/" .. key .. ".ptx"):find(".entry vector_add", 1, true),
            "artifacts: no PTX of the best: %s", T.slurp(bdir .. "/" .. key .. ".ptx.log"))
  end
  local _ = b
end

-- 2. A wrong result, fixed on the repair turn; the feedback names the
-- verifier's figures.
do
  local e, _, d, log = run_logged("r_wrong")
  local _, best_repair = count_repairs(e)
  T.eq(best_repair, 1, "r_wrong: the best came from repair 1")
  local tr = T.slurp(d .. "/llm_transcript.jsonl")
  T.check(tr:find("output is wrong", 1, true) and tr:find("rel_l2 1.41", 1, true) and tr:find("first mismatch at index 0", 1, true),
          "r_wrong: the repair turn names the error and the first bad index")
  T.check(log:find("new best", 1, true), "r_wrong: no new best")
end

-- 3. A repair that never converges stops after `repairs` turns.
do
  local e, _, _, log = run_logged("r_never", { { "repairs", "2" } })
  local per_chain = {}
  for _, rec in ipairs(e.records) do
    local o = rec.origin or {}
    if o.repair then per_chain[o.iteration] = math.max(per_chain[o.iteration] or 0, o.repair) end
  end
  for it, n in pairs(per_chain) do T.check(n <= 2, "r_never: iteration %d went to repair %d", it, n) end
  T.check(log:find("ends after 2 attempts", 1, true), "r_never: the chain's end is not logged:\n%s", log)
  local e0 = run_logged("r_never", { { "repairs", "0" } })
  T.eq(count_repairs(e0), 0, "r_never with repairs=0: repaired candidates")
end

-- 3b. A repair whose edit does not apply: the next repair turn says it was
-- not tried, and why, never that it was tried.
do
  local _, _, d = run_logged("r_noapply", { { "repairs", "2" }, { "iterations", "1" } })
  local said = {}
  for line in T.slurp(d .. "/llm_transcript.jsonl"):gmatch("[^\n]+") do
    local rec = json.decode(line)
    if rec.kind == "request" and rec.tag == "throughput#repair" then
      local msgs = rec.body.messages
      said[#said + 1] = msgs[#msgs].content
    end
  end
  T.eq(#said, 2, "r_noapply: repair turns")
  T.check(said[1] and said[1]:find("^Your edit %(strength_reduction%): it did not compile%."),
          "r_noapply: the first repair turn: %s", tostring(said[1]))
  T.check(said[2] and said[2]:find("^Your edit %(strength_reduction%): it was not tried: [^\n]*does not apply")
          and not said[2]:find("was tried.", 1, true), "r_noapply: the second repair turn: %s", tostring(said[2]))
end

-- 4. A repair that answers a source already measured: asked, not measured again.
do
  local e, b, _, log = run_logged("r_same")
  for key, n in pairs(b.measured) do T.eq(n, 1, "r_same: times " .. key .. " was measured") end
  T.check(log:find("already proposed", 1, true), "r_same: the repeated edit is not named:\n%s", log)
  local _ = e
end

-- 5. Edits compose: once the fast edit is the best, a knob change and a
-- second edit start from the edited source; best/ has the whole difference.
do
  local e, _, d = run_logged("r_compose", { { "per_expert", "2" }, { "iterations", "3" } })
  local knob_on_edit, edit_on_edit = false, false
  local first_fast
  for _, rec in ipairs(e.records) do
    local src = e:source_of(rec.candidate) or ""
    if src:find("__fadd_rn", 1, true) then
      first_fast = first_fast or rec
      if rec.config.block_size_x ~= first_fast.config.block_size_x then knob_on_edit = true end
      if src:find("// composed", 1, true) then edit_on_edit = true end
    end
  end
  T.check(knob_on_edit, "r_compose: no knob change was measured on the edited source")
  T.check(edit_on_edit, "r_compose: no edit of the edited source was measured")
  local diff = T.slurp(d .. "/best/vector_add.cu.diff")
  T.check(diff:find("__fadd_rn", 1, true), "r_compose: best/ diff against the original lacks the edit:\n%s", diff)
end

-- 6. The budget bounds repairs: with 2 evaluations nothing past them is asked.
do
  local e = run_logged("r_never", { { "repairs", "5" } })
  T.check(e.evaluations <= 20, "budget: %d evaluations", e.evaluations)
end

-- 7. Experts as a move generator (MCGS, --opt moves=rules,experts): an edit
-- becomes the child's whole patch against the spec's kernel; from an edited
-- state, a knob move keeps the state's patch and an edit edits it again.
do
  local X = require("kopt.experts")
  local llm = require("kopt.llm")
  local client = assert(llm.new(llm.config({ llm_base_url = server:base("r_compose") })))
  local gen = X.generator("throughput", { client = client })
  local ctx = { spec = spec, space = new_space(), rng = require("kopt.rng").new(1), options = {},
                backend_name = "stub", log = function() end }
  local moves = gen.propose(ctx, { config = { block_size_x = 256 } })
  T.check(#moves == 1 and moves[1].patch and moves[1].patch:find("__fadd_rn", 1, true),
          "generator: the edit is not a patch move")
  local edited = { config = { block_size_x = 256 }, patch = moves[1].patch }
  local knob, again = false, false
  for _, mv in ipairs(gen.propose(ctx, edited)) do
    if next(mv.changes) and mv.patch == edited.patch then knob = true end
    if mv.patch and mv.patch:find("// composed", 1, true) and mv.patch:find("__fadd_rn", 1, true) then again = true end
  end
  T.check(knob, "generator: a knob move from an edited state lost its patch")
  T.check(again, "generator: no edit of the edited state")
  local offline = X.generator("throughput", { client = client })
  ctx.backend_name = "replay"
  for _, mv in ipairs(offline.propose(ctx, { config = { block_size_x = 256 } })) do
    T.check(mv.patch == nil, "generator under replay: edits must be off")
  end
end

-- 8. The GPU demonstration's scripted replies (tools/device_edits.sh on
-- examples/edits/row_sum.json), checked offline: every format applies, the
-- first turn of each flow compiles or not as it should, the fixed turn does.
do
  local X = require("kopt.experts")
  local llm = require("kopt.llm")
  local rs = spec_mod.load("examples/edits/row_sum.json")
  local scope = { device = rs.device }
  for k, v in pairs(rs.problem) do scope[k] = v end
  local rspace = space_mod.new({ knobs = rs.knobs, constraints = rs.constraints, scope = scope })
  local ctx = { spec = rs, space = rspace, rng = require("kopt.rng").new(1), options = {}, backend_name = "cuda" }
  local view = X.view(ctx, { config = rspace:default() }, { n = 1, edits = true })
  local expert = X.load("throughput")
  for _, fmt in ipairs({ "diff", "nohdr", "fenced", "crlf", "sr", "source" }) do
    for _, flow in ipairs({ "ok", "compile", "wrong" }) do
      local sc = "g_" .. fmt .. "_" .. flow
      local client = assert(llm.new(llm.config({ llm_base_url = server:base(sc) })))
      local msgs = expert.prompt(view)
      local turns = { msgs }
      local r1 = client:chat_many({ { tag = "t", messages = msgs, schema = X.schema(view) } })[1]
      local fix = {}
      for _, m in ipairs(msgs) do fix[#fix + 1] = m end
      fix[#fix + 1] = { role = "assistant", content = r1.content or "" }
      fix[#fix + 1] = { role = "user", content = "It did not work." }
      turns[2] = fix
      for turn, m in ipairs(turns) do
        local r = turn == 1 and r1 or client:chat_many({ { tag = "t", messages = m, schema = X.schema(view) } })[1]
        local moves = r.ok and X.parse(r.value, view, "t") or {}
        local new, err = nil, "no proposal"
        if moves[1] then
          new, err = patch.apply_edit(rs.kernel.source, moves[1].edit or moves[1].patch, { entry = "row_sum" })
        end
        T.check(new, "%s turn %d: %s", sc, turn, tostring(err or r.err))
        if new then
          local res = compile.compile(compile.job_for(rs, { BLOCK = 256 }, "sm_80", new), { cache = false })
          local want = not (turn == 1 and flow == "compile")
          T.eq(res.ok, want, sc .. " turn " .. turn .. " compiles")
          T.eq(new:find("__shfl_down_sync", 1, true) ~= nil, not (turn == 1 and flow == "wrong"),
               sc .. " turn " .. turn .. " reduces across lanes")
        end
      end
    end
  end
end

-- 9. MCGS with expert moves, repairs included: a broken edit is a failed
-- node whose expert gets a repair turn; the fix is measured as a new move of
-- the same parent and crowned. On a small space the experts are asked once
-- every knob state is measured, so the edit is still found; an edited state's
-- children edit again.
do
  local X = require("kopt.experts")
  local llm = require("kopt.llm")
  local moves = require("kopt.moves")
  local M = require("strategies.mcgs")
  local function mcgs_run(scenario, budget, extra, space)
    local client = assert(llm.new(llm.config({ llm_base_url = server:base(scenario) })))
    moves.register("llm_" .. scenario, X.generator("throughput", { client = client }))
    local opts = { { "moves", "rules,llm_" .. scenario } }
    for _, kv in ipairs(extra or {}) do opts[#opts + 1] = kv end
    captured = {}
    local dir = T.tmpdir("mcgs-" .. scenario)
    local engine = engine_mod.run({
      strategy = M, strategy_name = "mcgs", options = strategy_mod.options(M, opts), space = space or new_space(),
      spec = spec, backend = stub_backend(), budget = budget, seed = 1, quiet = true, out_dir = dir,
    })
    local log = table.concat(captured, "\n")
    captured = nil
    return engine, log
  end
  local e, log = mcgs_run("r_compile", 40)
  local broken, fixed = 0, 0
  for _, rec in ipairs(e.records) do
    local o = rec.candidate.origin or {}
    if rec.result.status == "compile_error" and o.expert == "throughput" then broken = broken + 1 end
    if o.repair == 1 and rec.result.status == "ok" then fixed = fixed + 1 end
  end
  T.check(broken >= 1, "mcgs r_compile: the broken edit was not measured as a node")
  T.check(fixed >= 1, "mcgs r_compile: no repaired edit measured:\n%s", log)
  T.check(log:find("repair 1 of throughput/strength_reduction: a fixed edit", 1, true),
          "mcgs r_compile: no repair turn in the log:\n%s", log)
  T.check(e.ctx.best and e:source_of(e.ctx.best.candidate):find("__fadd_rn", 1, true),
          "mcgs r_compile: the best is not the fast edit")
  T.check(e.evaluations > 15, "mcgs r_compile: the run stopped after %d evaluations (the 15 knob states)", e.evaluations)
  -- one repair turn per broken source: the same broken edit failing in
  -- other states reuses the fix (where the fixed state was measured
  -- already, as a rule move's child of an earlier fix keeps the edit, the
  -- reuse is said so)
  local asked = select(2, log:gsub("a fixed edit", ""))
  local reused = select(2, log:gsub("the fix of the same broken source, reused", ""))
  local seen = select(2, log:gsub("the fix is a state already measured", ""))
  T.eq(asked, 1, "mcgs r_compile: repair turns asked for one broken source")
  T.check(broken == asked + reused + seen, "mcgs r_compile: %d broken states, %d repairs asked, %d reused, %d measured",
          broken, asked, reused, seen)
  -- the fixed edit's knobs are tuned: rule moves from it keep the edit
  local tuned = 0
  for _, rec in ipairs(e.records) do
    local o = rec.candidate.origin or {}
    if rec.result.status == "ok" and not o.repair and o.expert == nil and tostring(o.parent or ""):find("#", 1, true)
       and rec.key:find("#", 1, true) then
      tuned = tuned + 1
    end
  end
  T.check(tuned >= 1, "mcgs r_compile: no rule move from the fixed edit kept it")

  -- a perturbed restart from an edited best keeps the edit (it restarted
  -- from the best's knobs on the original kernel); a second knob, which
  -- the stub's times ignore, gives the restarts room
  local knobs = { { name = "unused", values = { 1, 2, 3, 4, 5, 6 } } }
  for _, k in ipairs(spec.knobs) do knobs[#knobs + 1] = k end
  local wide = space_mod.new({ knobs = knobs, constraints = spec.constraints, scope = new_space().scope })
  local ep = mcgs_run("r_compile", 90, { { "patience", "2" }, { "p_perturb", "1" } }, wide)
  local perturbed, kept, best_t, best_key = 0, 0, math.huge, ""
  for _, rec in ipairs(ep.records) do
    local o = rec.candidate.origin or {}
    if o.method == "perturb" and best_key:find("#", 1, true) then
      perturbed = perturbed + 1
      if rec.key:find("#", 1, true) then kept = kept + 1 end
    end
    local t = rec.result.time_ms
    if rec.result.status == "ok" and t < best_t then best_t, best_key = t, rec.key end
  end
  T.check(perturbed >= 1, "mcgs r_compile: no perturbed restart from the edited best with patience=2")
  T.eq(kept, perturbed, "mcgs r_compile: perturbed restarts from the edited best that kept the edit")

  local e2, log2 = mcgs_run("r_never", 40, { { "repairs", "2" } })
  local most = 0
  for _, rec in ipairs(e2.records) do most = math.max(most, (rec.candidate.origin or {}).repair or 0) end
  T.check(most <= 2, "mcgs r_never: repair %d measured with repairs=2", most)
  T.check(log2:find("ends after 2 attempts", 1, true), "mcgs r_never: the chain's end is not logged:\n%s", log2)

  local e3 = mcgs_run("r_compose", 40)
  local edit_on_edit, knob_on_edit = false, false
  for _, rec in ipairs(e3.records) do
    local src = e3:source_of(rec.candidate) or ""
    if src:find("// composed", 1, true) and src:find("__fadd_rn", 1, true) then edit_on_edit = true end
    if src:find("__fadd_rn", 1, true) and (rec.candidate.origin or {}).method ~= "strength_reduction"
       and not src:find("// composed", 1, true) then knob_on_edit = true end
  end
  T.check(edit_on_edit, "mcgs r_compose: no edit of an edited state was measured")
  T.check(knob_on_edit, "mcgs r_compose: no knob move from an edited state was measured")
end

-- the rules strategy: a state reached by an edit keeps the edit in its
-- rule moves' children (they were the original kernel's configs)
do
  local moves = require("kopt.moves")
  local R = require("strategies.rules")
  local fast = (T.slurp("tests/data/specs/vector_add.cu"):gsub("a%[i%] %+ b%[i%]", "__fadd_rn(a[i], b[i])"))
  local edit = patch.diff(spec.kernel.source, fast)
  moves.register("one_edit", { name = "one_edit", propose = function(_, state)
    if state.patch then return {} end
    return { { changes = {}, patch = edit, method = "strength_reduction", prior = 10 } }
  end })
  local engine = engine_mod.run({
    strategy = R, strategy_name = "rules", options = strategy_mod.options(R, { { "moves", "rules,one_edit" } }),
    space = new_space(), spec = spec, backend = stub_backend(), budget = 24, seed = 1, quiet = true,
  })
  local kept, plain_children = 0, 0
  for _, rec in ipairs(engine.records) do
    local parent = rec.candidate.origin and rec.candidate.origin.parent
    if parent and parent:find("#", 1, true) then
      if rec.key:find("#", 1, true) then kept = kept + 1 else plain_children = plain_children + 1 end
    end
  end
  T.check(kept >= 1 and plain_children == 0, "rules: children of the edited state keep the edit (%d kept, %d dropped)",
          kept, plain_children)
end

server:stop()
return T.done()
