-- Tool-calling experts (kopt.tools, kopt.tools.builtin), offline: the tools
-- on the shipped matmul (the counts of docs/PTX.md), and the experts
-- strategy against tests/llm_server.py's tool scenarios on a stub backend
-- (vector_add, compiled to PTX with the real NVRTC): the model calls
-- overview(), metrics() and region(k) and cites their numbers; unknown tools
-- and malformed arguments are answered with an error and the loop goes on;
-- the loop is bounded by tool_rounds (a reply that calls tools past it has
-- failed, in the transcript too, kind "tools"); a server that rejects tools (400), one
-- that writes the call as text, and one that ignores tools all fall back to
-- the single-shot prompt with the overview inlined; the transcript records
-- every call and answer, the trace names them, and a replay of the
-- transcript repeats the run; the prompt tells of the tools offered alone
-- (none of the PTX tools on a recorded space), and metrics() on a recording
-- says it has no counters and why; without counters (a replay: DRY=1 of
-- tools/device_tools.sh), metrics() gives the symptoms the static facts
-- support, as the run's report does, and says they are static.
local T = require("testlib")
local json = require("kopt.json")
local engine_mod = require("kopt.engine")
local profiling = require("kopt.profiling")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local strategy_mod = require("kopt.strategy")
local tools = require("kopt.tools")
local builtin = require("kopt.tools.builtin")

local function space_of(spec)
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  return space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
end

-- 1. The tools themselves, on specs/matmul_f16.json at its defaults.
do
  local spec = spec_mod.load("specs/matmul_f16.json")
  local space = space_of(spec)
  local measured = { status = "ok", time_ms = 1.25, resources = { regs = 168, smem = 49152, spills = 0 },
                     metrics = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 31.5,
                                 ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 88.25 } }
  local ctx = { spec = spec, space = space, lookup = function() return nil end }
  local env = builtin.env(ctx, { config = space:default(), result = measured }, {})
  local ov, ok = tools.call("overview", "{}", env)
  T.check(ok, "overview failed: %s", ov)
  T.check(ov:find("#4 loop (trip unknown)", 1, true) and ov:find("mma 64, flops.tensor 8192", 1, true),
          "overview lacks the main loop's work:\n%s", ov)
  T.check(ov:find("Hot regions[^\n]*: #4,"), "the main loop is not the hottest region:\n%s", ov)
  local reg = tools.call("region", '{"id": 4}', env)
  T.check(reg:find("work per thread, one pass: ld.shared 16 (256 B), ldmatrix 16, cp.async 8 (128 B), mma 64", 1, true),
          "region 4:\n%s", reg)
  T.check(reg:find("bar.sync", 1, true) and reg:find("__syncthreads", 1, true), "region 4 shows no PTX or source")
  local sp = tools.call("source_for_ptx", '{"lines": "853-857"}', env)
  T.check(sp:find("<- source 240: __syncthreads()", 1, true), "source_for_ptx:\n%s", sp)
  local ps = tools.call("ptx_for_source", '{"lines": [240]}', env)
  T.check(ps:find("bar.sync", 1, true), "ptx_for_source:\n%s", ps)
  local m = tools.call("metrics", "", env)
  T.check(m:find("sm__throughput.avg.pct_of_peak_sustained_elapsed = 88.25", 1, true) and m:find("time 1.25 ms", 1, true),
          "metrics:\n%s", m)
  local miss = tools.call("metrics", '{"config": {"STAGES": 2}}', env)
  T.check(miss:find("STAGES=2", 1, true) and miss:find("not measured", 1, true), "metrics of another config:\n%s", miss)
  -- errors are answers, never raises
  local function err(name, args, want)
    local text, good = tools.call(name, args, env)
    T.check(not good and text:find("^error: ") and text:find(want, 1, true), "%s(%s): %s", name, args, text)
  end
  err("no_such", "{}", "unknown tool 'no_such'; the tools are overview, region")
  err("region", "{id: 4", "are not a JSON object")
  err("region", '{"id": "four"}', "$.id: expected integer")
  err("region", "{}", "missing 'id'")
  err("region", '{"id": 99}', "no region #99 in matmul; the regions are #1, #2, #3, #4, #5")
  err("region", "[1, 2]", "$: expected object")
  err("metrics", '{"config": {"STAGES": 7}}', "STAGES=7 is not one of the knob's values")
  err("source_for_ptx", '{"lines": "a-b"}', "lines: expected")
  -- a recorded space has no source: the PTX tools say so, the others work
  local renv = builtin.env({ space = space, lookup = function() return nil end }, { config = space:default() }, {})
  local none, good = tools.call("overview", "{}", renv)
  T.check(not good and none:find("no kernel source", 1, true), "overview on a recording: %s", none)
  local offered = table.concat(builtin.offered(renv), ",")
  T.check(not offered:find("overview", 1, true) and offered:find("metrics", 1, true), "offered on a recording: %s", offered)
  -- a recording's own columns are no counters: metrics() says there are
  -- none and why, and shows the columns under their own heading
  local recorded = { status = "ok", time_ms = 1.3725, metrics = { ["GFLOP/s"] = 5501, compile_time = 2701 } }
  local rctx = { space = space, lookup = function() return nil end,
                 profile = function() return nil, "the replay backend cannot profile" end }
  local rm = tools.call("metrics", "{}", builtin.env(rctx, { config = space:default(), result = recorded }, {}))
  T.check(rm:find("no hardware counters: the replay backend cannot profile", 1, true) and not rm:find("\ncounters:", 1, true)
          and rm:find("other measurements of the result (not hardware counters):\n  GFLOP/s = 5501", 1, true),
          "metrics on a recording:\n%s", rm)
  -- and the prompt tells of those alone: a model told of overview() would
  -- call it and be refused
  local prompt = require("kopt.expert_prompt")
  local function prompt_with(names)
    return prompt.user_prompt({ name = "matmul", problem = {}, knobs = {}, config = {}, symptoms = {}, history = {},
                                space = space, n = 1, tools = names })
  end
  local told = prompt_with(builtin.offered(renv))
  T.check(told:find("you may call metrics, history, compare.", 1, true) and told:find("compare(a, b):", 1, true)
          and not told:find("overview", 1, true) and not told:find("region", 1, true),
          "the prompt on a recording tells of tools it does not offer:\n%s", told)
  local all = prompt_with(builtin.offered(env))
  T.check(all:find("overview():", 1, true) and all:find("region(id):", 1, true), "the prompt with every tool:\n%s", all)
end

-- 2. A user's tool file (--opt tools=FILE): registered without recompiling.
local tool_file = T.tmpdir("tools") .. "/my_tools.lua"
T.write(tool_file, [[
local tools = require("kopt.tools")
tools.register("threads", { type = "object", properties = {} }, function(_, env)
  return "threads per block: " .. tostring(env.config.block_size_x)
end, "the thread-block size of the current best")
]])
do
  local added = assert(tools.load_file(tool_file))
  T.eq(table.concat(added, ","), "threads", "the user's file adds its tool")
  local bad = T.tmpdir("tools-bad") .. "/bad.lua"
  T.write(bad, "return { { name = 'x y', fn = function() end } }")
  local ok, why = tools.load_file(bad)
  T.check(not ok and why:find("a tool name is", 1, true), "a bad tool name: %s", tostring(why))
  T.check(pcall(tools.register, "t", {}, "not a function") == false, "register checks the handler")
end

local server, why = require("llm_test_server").start({})
if not server then
  print("skipped: " .. why)
  os.exit(77)
end

local spec = spec_mod.load("tests/data/specs/vector_add.json")

-- (static_only: times and resources alone, no counters and no profiling,
-- as a replay; 80 registers a thread hold the best, 768 threads a block,
-- to one block an SM: 38 % occupancy)
local function stub_backend(with_profile, static_only)
  local b = { name = "stub", slots = 4, clock = 0, profiled = 0 }
  function b:evaluate(jobs)
    local out = {}
    for i, job in ipairs(jobs) do
      self.clock = self.clock + 0.01
      local r = { status = "ok", time_ms = 1.0 + job.config.block_size_x / 1e4,
                  resources = { regs = static_only and 80 or 16 } }
      if not with_profile and not static_only then
        r.metrics = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 91.5,
                      ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 12.25 }
      end
      out[i] = r
    end
    return out
  end
  if with_profile then
    function b:profile()
      self.profiled = self.profiled + 1
      return { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 77.5 }
    end
  end
  function b:elapsed() return self.clock end
  function b:describe() return { backend = "stub" } end
  return b
end

local captured
local real_log = engine_mod.Engine.strategy_event
engine_mod.Engine.strategy_event = function(self, msg)
  if captured then captured[#captured + 1] = msg end
  return real_log(self, msg)
end

local S = require("strategies.experts")
local function run(scenario, extra, opts)
  opts = opts or {}
  local o = { { "edits", "on" }, { "iterations", "2" }, { "init", "1" }, { "llm_timeout", "10" },
              { "experts", "throughput" }, { "per_expert", "1" }, { "patience", "10" } }
  if scenario then o[#o + 1] = { "llm_base_url", server:base(scenario) } end
  for _, kv in ipairs(extra or {}) do o[#o + 1] = kv end
  local dir = T.tmpdir("tools-" .. (scenario or "replay"))
  local backend = stub_backend(opts.profile, opts.static_only)
  captured = {}
  local engine = engine_mod.run({
    strategy = S, strategy_name = "experts", options = strategy_mod.options(S, o), space = space_of(spec),
    spec = spec, backend = backend, budget = 12, seed = 1, quiet = true, out_dir = dir,
    -- (as `kopt experts` runs it: the profiler knows the launch and device)
    profiler = opts.static_only and profiling.new({ mode = "none", backend = backend, spec = spec, quiet = true }) or nil,
  })
  local log = table.concat(captured, "\n")
  captured = nil
  local recs = {}
  for line in io.lines(dir .. "/llm_transcript.jsonl") do recs[#recs + 1] = json.decode(line) end
  return engine, recs, log, dir, backend
end

local function of_kind(recs, kind)
  local out = {}
  for _, r in ipairs(recs) do if r.kind == kind then out[#out + 1] = r end end
  return out
end

local function analysis_of(rec)
  local v = rec.content and json.decode(rec.content)
  return type(v) == "table" and v.analysis or nil
end

-- 3. A tool-calling server: overview() and metrics(), then region(k), then a
-- proposal citing what they answered.
do
  local e, recs, log, dir = run("t_tools")
  T.check(#recs > 0, "no transcript")
  local calls = of_kind(recs, "tool")
  local names = {}
  for _, c in ipairs(calls) do names[#names + 1] = c.name end
  T.eq(table.concat(names, ",", 1, 3), "overview,metrics,region", "the first iteration's calls")
  T.check(calls[1].ok and calls[1].answer:find("Hot regions", 1, true), "overview answer: %s", calls[1].answer)
  T.check(calls[2].answer:find("dram__throughput.avg.pct_of_peak_sustained_elapsed = 91.5", 1, true),
          "metrics answer: %s", calls[2].answer)
  local work = calls[3].answer:match("(work per thread, one pass: [^\n]*)")
  T.check(work and work:find("ld.global", 1, true), "region answer: %s", calls[3].answer)
  -- the final reply cites the tool data
  local finals = {}
  for _, r in ipairs(of_kind(recs, "reply")) do if r.content then finals[#finals + 1] = r end end
  T.check(#finals >= 1, "no final reply")
  local a = analysis_of(finals[1]) or ""
  T.check(a:find(work, 1, true) and a:find("status ok, time", 1, true), "the analysis does not cite the tools: %s", a)
  -- the requests carry the tools and then the tool messages
  local reqs = of_kind(recs, "request")
  local offered = {}
  for _, t in ipairs(reqs[1].body.tools or {}) do offered[#offered + 1] = t["function"].name end
  T.check(table.concat(offered, ","):find("overview,region,source_for_ptx,ptx_for_source,metrics,history,compare", 1, true)
          and reqs[1].body.tool_choice == "auto", "the first request offers the tools: %s", table.concat(offered, ","))
  local last = reqs[3].body.messages
  T.eq(last[#last].role, "tool", "the third request ends with a tool answer")
  T.check(last[#last].tool_call_id and last[#last - 1].tool_calls, "tool answers carry their call ids")
  -- the trace names every call
  T.check(log:find("tool overview() by throughput: Kernel vector_add", 1, true)
          and log:find("tool region({\"id\": 2}) by throughput: region #2", 1, true), "trace:\n%s", log)
  T.check(e.evaluations >= 3, "the proposals were measured (%d evaluations)", e.evaluations)
  T.check(log:find("tool metrics() by throughput", 1, true), "the trace lacks the metrics call")

  -- replaying the transcript repeats the run without a server
  local e2, recs2 = run(nil, { { "llm_replay", dir .. "/llm_transcript.jsonl" } })
  T.eq(e2.evaluations, e.evaluations, "replay: evaluations")
  for i, rec in ipairs(e.records) do
    T.eq(e2.records[i] and e2.records[i].key, rec.key, "replay: evaluation " .. i)
  end
  T.eq(#of_kind(recs2, "tool"), #calls, "replay: tool calls")
end

-- 4. On-demand counters: the result has none, the backend profiles.
do
  local _, recs, _, _, backend = run("t_tools", nil, { profile = true })
  local m = of_kind(recs, "tool")[2]
  T.eq(m.name, "metrics", "second call")
  T.check(m.answer:find("counters measured now", 1, true) and m.answer:find("= 77.5", 1, true),
          "on-demand metrics: %s", m.answer)
  T.check(backend.profiled >= 1, "the backend was not asked to profile")
end

-- 4b. No counters and none to be had (a replay): metrics() gives the
-- symptoms of the static facts, and says where they come from.
do
  local _, recs = run("t_tools", nil, { static_only = true })
  local m = of_kind(recs, "tool")[2]
  T.eq(m.name, "metrics", "second call")
  T.check(m.answer:find("no hardware counters: ", 1, true)
          and m.answer:find("symptoms from the static facts alone (launch, resources, device; no counters):\n"
                            .. "  - low_occupancy (severity", 1, true)
          and m.answer:find("theoretical 38%, limited by registers (1 block/SM)", 1, true), "metrics without counters: %s", m.answer)
end

-- 5. Unknown tools and malformed arguments are answered with errors.
do
  local e, recs = run("t_badcalls")
  local calls = of_kind(recs, "tool")
  T.check(#calls >= 3, "three bad calls")
  T.check(not calls[1].ok and calls[1].answer:find("error: unknown tool 'no_such_tool'", 1, true), calls[1].answer)
  T.check(not calls[2].ok and calls[2].answer:find("not a JSON object", 1, true), calls[2].answer)
  T.check(not calls[3].ok and calls[3].answer:find("expected integer", 1, true), calls[3].answer)
  local finals = {}
  for _, r in ipairs(of_kind(recs, "reply")) do if r.content then finals[#finals + 1] = r end end
  T.check((analysis_of(finals[1]) or ""):find("error: unknown tool", 1, true), "the model saw the errors")
  T.check(e.evaluations >= 2, "the answer after the errors was used")
end

-- 6. The loop is bounded: a model that calls tools forever gets tool_rounds
-- rounds, then tool_choice "none", then its expert falls back.
do
  local e, recs, log = run("t_forever", { { "tool_rounds", "2" }, { "iterations", "1" } })
  local reqs = of_kind(recs, "request")
  T.eq(#reqs, 3, "requests with tool_rounds=2")
  T.eq(reqs[3].body.tool_choice, "none", "the last request forbids tool calls")
  T.eq(#of_kind(recs, "tool"), 2, "tool calls answered")
  T.check(log:find("fell back to heuristic: tools: the model still called tools after 2 rounds", 1, true),
          "log:\n%s", log)
  -- the turn that gave up counts as failed in the summary, and in the
  -- transcript: its reply is no success
  T.eq(e.ctx.llm_usage and e.ctx.llm_usage.failures, 1, "failed turns in the run's LLM usage")
  local last = of_kind(recs, "reply")[3]
  T.check(last.ok == false and last.error_kind == "tools" and last.tool_calls
          and last.err == "the model still called tools after 2 rounds",
          "the reply past the limit in the transcript: %s", json.encode(last))
  -- one round: said in the singular; a replay of the transcript fails alike
  local e1, recs1, log1, dir1 = run("t_forever", { { "tool_rounds", "1" }, { "iterations", "1" } })
  T.check(log1:find("tools: the model still called tools after 1 round", 1, true)
          and not log1:find("after 1 rounds", 1, true), "log:\n%s", log1)
  T.eq(e1.ctx.llm_usage.failures, 1, "failed turns with tool_rounds=1")
  local e2, recs2 = run(nil, { { "llm_replay", dir1 .. "/llm_transcript.jsonl" }, { "tool_rounds", "1" },
                               { "iterations", "1" } })
  T.eq(e2.ctx.llm_usage.failures, 1, "replay: failed turns")
  local replayed = of_kind(recs2, "reply")
  T.check(#replayed == #of_kind(recs1, "reply") and replayed[#replayed].error_kind == "tools"
          and replayed[#replayed].ok == false, "replay: the reply past the limit: %s", json.encode(replayed[#replayed]))
end

-- 7. A server that rejects tools (HTTP 400): the same question again,
-- single-shot with the overview inlined; tools stay off for the run.
do
  local _, recs, log = run("t_notools")
  local replies = of_kind(recs, "reply")
  T.check(replies[1].tools_rejected and replies[1].status == 400, "the 400 is marked")
  local notes = of_kind(recs, "note")
  T.check(#notes >= 1 and notes[1].msg:find("the server rejected tools", 1, true), "no note")
  local reqs = of_kind(recs, "request")
  T.check(reqs[2].body.tools == nil, "the second request has no tools")
  local user = reqs[2].body.messages[2].content
  T.check(user:find("Static analysis of the current best's compiled PTX", 1, true) and user:find("Hot regions", 1, true),
          "the overview is not inlined:\n%s", user)
  T.check((analysis_of(replies[2]) or ""):find("inlined overview: hot region #2", 1, true), "the reply cites it")
  for i = 3, #reqs do T.check(reqs[i].body.tools == nil, "request %d offers tools again", i) end
  T.check(log:find("tools off for this run", 1, true), "log:\n%s", log)
end

-- 8. A tool call written as text: detected, then the overview inlined.
do
  local _, recs = run("t_textcall")
  local notes = of_kind(recs, "note")
  T.check(#notes >= 1 and notes[1].msg:find("tool call as text", 1, true), "text call not detected")
  local reqs = of_kind(recs, "request")
  T.check(reqs[2].body.tools == nil and reqs[2].body.messages[2].content:find("Hot regions", 1, true),
          "no inline fallback after a text call")
end

-- 9. A server that ignores tools: its answers are kept; after two batches
-- without a call, later prompts carry the overview.
do
  local _, recs = run("ok", { { "iterations", "3" } })
  local reqs = of_kind(recs, "request")
  T.eq(#reqs, 3, "one request per iteration")
  T.check(reqs[1].body.tools and reqs[2].body.tools, "the first two offer tools")
  T.check(reqs[3].body.tools == nil and reqs[3].body.messages[2].content:find("Hot regions", 1, true),
          "the third has the overview inlined")
  T.check(of_kind(recs, "note")[1].msg:find("no tool was called in 2 batches", 1, true), "no note")
end

-- 10. tool_rounds=0: no tools offered, the plain prompt.
do
  local _, recs = run("t_tools", { { "tool_rounds", "0" } })
  for _, r in ipairs(of_kind(recs, "request")) do
    T.check(r.body.tools == nil, "tools offered with tool_rounds=0")
    T.check(not r.body.messages[2].content:find("Hot regions", 1, true), "overview inlined with tool_rounds=0")
  end
end

-- 11. The user's tool is offered beside the built-in ones.
do
  local _, recs = run("t_tools", { { "tools", tool_file }, { "iterations", "1" } })
  local offered = {}
  for _, t in ipairs(of_kind(recs, "request")[1].body.tools) do offered[#offered + 1] = t["function"].name end
  T.check(table.concat(offered, ","):find("threads", 1, true), "offered: %s", table.concat(offered, ","))
  T.eq(tools.call("threads", "{}", builtin.env({ space = space_of(spec) }, { config = { block_size_x = 256 } })),
       "threads per block: 256", "the user's tool answers")
end

-- 12. MCGS with LLM expert moves offers the same tools (its tool_rounds).
do
  local X = require("kopt.experts")
  local llm = require("kopt.llm")
  local moves = require("kopt.moves")
  local M = require("strategies.mcgs")
  local dir = T.tmpdir("tools-mcgs")
  local cfg = llm.config({ llm_base_url = server:base("t_tools") })
  cfg.transcript = dir .. "/llm_transcript.jsonl"
  local client = assert(llm.new(cfg))
  moves.register("llm_tools", X.generator("throughput", { client = client }))
  captured = {}
  local e = engine_mod.run({
    strategy = M, strategy_name = "mcgs", space = space_of(spec), spec = spec, backend = stub_backend(),
    options = strategy_mod.options(M, { { "moves", "rules,llm_tools" }, { "tool_rounds", "3" } }),
    budget = 20, seed = 1, quiet = true, out_dir = dir,
  })
  local log = table.concat(captured, "\n")
  captured = nil
  client:close()
  local recs = {}
  for line in io.lines(cfg.transcript) do recs[#recs + 1] = json.decode(line) end
  local names = {}
  for _, c in ipairs(of_kind(recs, "tool")) do names[c.name] = true end
  T.check(names.overview and names.region and names.metrics, "mcgs: the expert moves' tool calls")
  T.check(log:find("tool overview() by throughput", 1, true), "mcgs: the trace lacks the calls:\n%s", log)
  -- (the eight states of the space are all measured before the experts'
  -- knob proposals, which name measured states: nothing more to measure)
  T.check(e.evaluations == 8, "mcgs: %d evaluations", e.evaluations)
end

server:stop()
return T.done()
