-- Synthesis: a kernel written from the spec's reference, then tuned.
--
--   1. the reference is measured as the first candidate (the baseline, and
--      the fallback when no attempt is correct);
--   2. attempts: an LLM writes a complete kernel with its tuning knobs
--      (#defines and their allowed values), its launch and constraints
--      (kopt.synth's reply format); without an LLM, or when a reply fails,
--      a known-good template chosen by the problem's shape
--      (kopt.synth_templates). Each kernel is checked (device code only,
--      well-formed knobs and launch), materialized at its default config and
--      evaluated like any candidate: NVRTC, the full verifier, timing. What
--      happened goes back as the hint of the next attempt, in the same
--      conversation: the trimmed NVRTC log, the verifier's figures (which
--      output, error size, first bad index), or the time against the
--      reference and the speed of light with the limiter. Up to `attempts`
--      attempts; after the first correct kernel, `improve` more;
--   3. the fastest correct kernel is tuned over its declared knobs by the
--      `tune` strategy (exhaustive, random, anneal, mcgs, ...), run inside
--      this one on a space built from those knobs: its candidates become
--      sources with the knob values written into their #defines.
-- The best correct result wins (the engine's best); if no attempt is
-- correct, the run says so and the reference stands.
local errors = require("kopt.errors")
local json = require("kopt.json")
local llm = require("kopt.llm")
local rng_mod = require("kopt.rng")
local strategy_mod = require("kopt.strategy")
local synth = require("kopt.synth")
local sys = require("kopt.sys")
local templates = require("kopt.synth_templates")

local S = {
  name = "synthesize",
  description = "writes a kernel from the spec's reference (LLM, or templates offline), then tunes its knobs",
  options = {
    attempts = { default = 4, min = 1, max = 1000, help = "most synthesis attempts (LLM replies or templates), failed ones included" },
    improve = { default = 1, min = 0, max = 1000, help = "attempts after the first correct kernel, told its performance (within attempts)" },
    tune = { default = "exhaustive", help = "strategy that tunes the best kernel's knobs (a built-in name or a " ..
               ".lua file; none: no tuning)" },
    tune_budget = { default = 0, min = 0, help = "evaluations for tuning (0: what the budget leaves)" },
    templates = { default = "auto", choices = { "auto", "off", "only" },
                  help = "known-good templates: auto = without an LLM or when a reply fails; off = none (LLM only); " ..
                         "only = no LLM" },
    temperature = { default = 0.2, min = 0, max = 2, help = "the writer's sampling temperature" },
    llm = { default = "auto", choices = { "auto", "off" },
            help = "auto: the LLM endpoint when one is configured (options or env); off: templates only" },
    llm_base_url = { default = "", help = "OpenAI-compatible base URL (env KOPT_LLM_BASE_URL)" },
    llm_model = { default = "", help = "model name (env KOPT_LLM_MODEL)" },
    llm_key_env = { default = "", help = "environment variable holding the API key" },
    llm_timeout = { default = 300, gt = 0, help = "seconds per LLM request attempt" },
    llm_mode = { default = "json_schema", choices = { "json_schema", "json_object", "none" },
                 help = "structured output to ask for first (falls back when the server rejects it)" },
    llm_replay = { default = "", help = "answer from a recorded llm_transcript.jsonl instead of the network" },
    llm_deadline = { default = 900, gt = 0, help = "seconds one LLM request may take, retries included" },
  },
}

local TAG = "synthesize"

local function ms(t) return type(t) == "number" and string.format("%.4g ms", t) or "-" end

local function summarize(ctx, st)
  local lines = {}
  local parts = {}
  for _, a in ipairs(st.attempts) do
    parts[#parts + 1] = string.format("%d %s%s", a.n, a.status, a.source == "template" and " (template)" or "")
  end
  lines[1] = string.format("  synthesis: %d attempt%s%s%s", #st.attempts, #st.attempts == 1 and "" or "s",
                           #parts > 0 and ": " or "", table.concat(parts, ", "))
  local ref = st.reference
  if st.base then
    local b = st.best_tuned or st.base
    -- (the engine's best counts the reference too: an attempt slower than
    -- it is the best written kernel, not the winner)
    local slower = ref and ref.time_ms and b.result.time_ms and b.result.time_ms > ref.time_ms
    lines[#lines + 1] = string.format("  %s: attempt %d (%s), %s, %s%s%s", slower and "best written kernel" or "winner",
                                      st.base.n, st.base.method,
                                      synth.describe(st.base.K, b.config), ms(b.result.time_ms),
                                      ref and ref.time_ms and string.format(", %.2fx " .. st.baseline .. " (%s)",
                                                                            ref.time_ms / b.result.time_ms, ms(ref.time_ms)) or "",
                                      slower and ("; " .. st.baseline .. " stays the fastest") or "")
    if st.tuned then
      lines[#lines + 1] = string.format("  tuning: %s over %d knob%s, %d evaluations", st.tune_name, #st.base.K.knobs,
                                        #st.base.K.knobs == 1 and "" or "s", st.tuned)
    end
  elseif st.why_none then
    lines[#lines + 1] = string.format("  no attempts: %s; %s stands (%s)", st.why_none, st.baseline,
                                      ms(ref and ref.time_ms))
  else
    lines[#lines + 1] = string.format("  no attempt was correct: %s stands (%s)", st.baseline, ms(ref and ref.time_ms))
  end
  ctx.summary_lines = lines
  if st.client then llm.record_usage(ctx, st.client) end
end

function S.init(ctx)
  local o = ctx.options
  if not ctx.spec or not ctx.spec.reference then
    errors.usage("synthesize needs a SPEC with a reference kernel")
  end
  local st = { phase = "reference", attempts = {}, n = 0, templates = nil, next_template = 1 }
  -- A spec with a kernel of its own: that kernel (at its default config) is
  -- the baseline and the fallback, and every written kernel is compiled at
  -- that config too (its knobs arrive as -D defines the new source ignores).
  st.config = ctx.space:first() or {}
  st.baseline = ctx.spec.synthesis and "the reference" or "the spec's kernel"
  if o.templates ~= "only" then
    st.client, st.why = llm.for_run(ctx, o, S.name, o.templates == "off" and "no kernel is written from then on"
                                                     or "the templates write the kernels")
  end
  if o.templates ~= "off" then st.templates = templates.candidates(ctx.spec) end
  st.entry = synth.entry_for(ctx.spec)
  st.messages = synth.messages(ctx.spec, { entry = st.entry })
  local names = {}
  for _, K in ipairs(st.templates or {}) do names[#names + 1] = K.origin.method end
  ctx:log("synthesize %s: writer %s; %d attempts at most; templates: %s; then tune with %s", ctx.spec.name,
          st.client and ("LLM " .. st.client:describe()) or ("templates (" .. tostring(st.why or "templates=only") .. ")"),
          o.attempts, #names > 0 and table.concat(names, ", ") or "none apply", o.tune)
  ctx.synth_state = st
end

---------------------------------------------------------------------------
-- Attempts

-- The next template as an attempt's kernel, or nil when none is left.
local function next_template(st)
  local K = st.templates and st.templates[st.next_template]
  if K then st.next_template = st.next_template + 1 end
  return K
end

-- One attempt's kernel: from the LLM (the conversation so far), else a
-- template. Returns K, source ("llm" | "template"), or nil and why.
local function write_kernel(ctx, st)
  if st.client then
    ctx:status("attempt %d: asking the LLM for a kernel", st.n)
    local r = st.client:chat_many({ { tag = TAG, messages = st.messages, schema = synth.schema(),
                                      temperature = ctx.options.temperature } },
                                  { deadline_s = ctx.options.llm_deadline })[1]
    ctx:status(nil)
    if r.ok then
      st.last_content = r.content
      local ref = ctx.spec.reference
      local K, notes = synth.parse(r.value, r.content, { prefer = st.entry, avoid = ref and ref.entry })
      if not K then return nil, "llm", notes end
      for _, n in ipairs(notes) do ctx:log("attempt %d: %s", st.n, n) end
      if K.analysis then ctx:log("attempt %d: the writer's plan: %s", st.n, synth.oneline(K.analysis)) end
      K.origin = { expert = "llm", method = "synthesis" }
      return K, "llm"
    end
    st.last_content = r.content
    local why = string.format("the LLM reply failed (%s: %s)", tostring(r.kind), tostring(r.err))
    local K = next_template(st)
    if K then
      ctx:log("attempt %d: %s; a template instead", st.n, why)
      return K, "template"
    end
    return nil, "llm", why
  end
  local K = next_template(st)
  if K then return K, "template" end
  return nil, "template", "no template left for this problem"
end

-- What the writer hears after an attempt (an LLM conversation goes on).
local function tell_writer(st, hint)
  if not st.client or not st.last_content then return end
  local msgs = st.messages
  -- (a reply refused for its size is not sent back whole: every later
  -- request would carry it again)
  local content = st.last_content
  if #content > synth.SOURCE_CAP then
    content = content:sub(1, 2000) .. string.format("\n[... %d more bytes of this reply left out: it was too long]",
                                                    #content - 2000)
  end
  msgs[#msgs + 1] = { role = "assistant", content = content }
  msgs[#msgs + 1] = { role = "user", content = synth.followup(st.n, hint) }
  st.last_content = nil
end

local attempts_left

local function record_attempt(ctx, st, a, hint)
  st.attempts[#st.attempts + 1] = a
  ctx:log("attempt %d (%s%s): %s%s", a.n, a.source, a.method and ("/" .. a.method) or "", a.status,
          a.time_ms and (" " .. ms(a.time_ms)) or "")
  if not hint then return end
  hint = tostring(hint):gsub("\n", "\n    ")
  local follows = attempts_left(ctx, st) and (st.client or (st.templates and st.templates[st.next_template]))
  if follows then
    ctx:log("hint for attempt %d: %s", a.n + 1, hint)
  else
    ctx:log("what attempt %d hears (no attempt follows): %s", a.n, hint)
  end
end

function attempts_left(ctx, st)
  local o = ctx.options
  if st.n >= o.attempts then return false end
  if st.base and st.improved_tries >= o.improve then return false end
  return true
end

-- The next attempt's candidate, or nil when the attempts are over. Attempts
-- whose kernel cannot run (no reply, a refused source, a bad launch) are
-- recorded here, with their hint, and the next one is asked at once.
local function next_attempt(ctx, st)
  while attempts_left(ctx, st) do
    -- without an LLM, the attempts end with the templates
    if not st.client and not (st.templates and st.templates[st.next_template]) then break end
    st.n = st.n + 1
    if st.base then st.improved_tries = st.improved_tries + 1 end
    local K, source, why = write_kernel(ctx, st)
    local cand
    if K then
      local ok, err = synth.check(K, ctx.spec)
      if ok then
        local src, launch = synth.materialize(K, K.default, ctx.spec)
        if src then
          cand = { config = st.config, source = src, entry = K.entry, name = K.entry .. ".cu", launch = launch,
                   origin = { expert = source, method = K.origin.method, attempt = st.n,
                              model = source == "llm" and st.client.cfg.model or nil,
                              knobs = synth.describe(K, K.default) } }
        else
          why = "its default config cannot launch: " .. tostring(launch)
        end
      else
        why = err
      end
    end
    if cand then
      ctx:log("attempt %d (%s/%s): kernel %s, knobs %s, %d config%s; launch grid (%d, %d, %d) block (%d, %d, %d)",
              st.n, source, K.origin.method, K.entry, synth.describe(K, K.default), K.space:size(),
              K.space:size() == 1 and "" or "s", cand.launch.grid[1], cand.launch.grid[2], cand.launch.grid[3],
              cand.launch.block[1], cand.launch.block[2], cand.launch.block[3])
      st.pending = { K = K, source = source, n = st.n, config = K.default, launch = cand.launch }
      return cand
    end
    local hint = "It could not be run: " .. tostring(why) .. "."
    record_attempt(ctx, st, { n = st.n, source = source, status = "rejected", method = K and K.origin.method }, hint)
    tell_writer(st, hint)
  end
  return nil
end

local function took_attempt(ctx, st, r)
  local p = st.pending
  st.pending = nil
  local status = r.status
  local hint = synth.hint(r, { spec = ctx.spec, reference = st.reference, baseline = st.baseline, launch = p.launch })
  -- (a repeat in this run; not a result a resumed run reads from its log,
  -- which the uninterrupted run measured, nor one an earlier run measured)
  if r.cached and not r.resumed and not r.served then
    hint = "This is the same kernel as an earlier attempt (" .. tostring(status) .. "). " .. hint
  end
  if status == "ok" and p.source == "template" and st.templates then
    -- the template's other ops compute other functions: not worth an
    -- attempt (all of them come after this one)
    local keep = {}
    for i, K in ipairs(st.templates) do
      if i < st.next_template or K.origin.template ~= p.K.origin.template then keep[#keep + 1] = K end
    end
    st.templates = keep
  end
  local faster = status == "ok" and type(r.time_ms) == "number" and (not st.base or r.time_ms < st.base.result.time_ms)
  if faster then
    st.base = { K = p.K, n = p.n, method = p.source .. "/" .. p.K.origin.method, config = p.config, result = r }
  end
  record_attempt(ctx, st, { n = p.n, source = p.source, status = status, time_ms = r.time_ms,
                            method = p.K.origin.method }, hint)
  tell_writer(st, hint)
  if faster then
    ctx:log("attempt %d is the fastest correct kernel so far: %s%s", p.n, ms(r.time_ms),
            st.reference and st.reference.time_ms and
              string.format(" (%.2fx %s)", st.reference.time_ms / r.time_ms, st.baseline) or "")
  end
end

---------------------------------------------------------------------------
-- Tuning: the chosen strategy on the winner's knobs

-- A strategy's view of the tuning: a ctx over the kernel's own space. Its
-- lookups answer from what tuning measured (and the attempt's default).
local function tuning_ctx(ctx, st, budget)
  local K = st.base.K
  local t = { spec = nil, space = K.space, rng = rng_mod.new(ctx.seed or 1), seed = ctx.seed, budget = budget,
              evaluations = 0, best = nil, backend_name = ctx.backend_name, options = st.tune_options,
              _cache = {} }
  function t.lookup(_, config)
    local r = t._cache[K.space:key(config)]
    if not r then return nil end
    local c = {}
    for k, v in pairs(r) do c[k] = v end
    return c
  end
  function t.key(_, config) return K.space:key(config) end
  function t.log(_, fmt, ...)
    local msg = select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt)
    ctx:log("tune: %s", msg)
  end
  function t.status(_, ...) return ctx:status(...) end
  function t.profile() return nil, "profiling is not offered while tuning a synthesized kernel" end
  local key = K.space:key(st.base.config)
  t._cache[key] = st.base.result
  t.best = { key = key, config = st.base.config, result = st.base.result }
  return t
end

-- The winning kernel as a spec of its own, in the run folder: any strategy
-- can tune it again later.
local function write_derived(ctx, st)
  if not ctx.run_dir then return end
  local dir = ctx.run_dir .. "/synthesized"
  local spec, src = synth.derived_spec(st.base.K, ctx.spec)
  sys.mkdir_p(dir)
  json.write_file(dir .. "/kernel.cu", src, true)
  json.write_file(dir .. "/spec.json", spec)
  ctx:log("attempt %d's kernel as a spec of its own: %s/spec.json", st.base.n, dir)
end

local function start_tuning(ctx, st)
  local o = ctx.options
  write_derived(ctx, st)
  st.phase = "tune"
  if o.tune == "none" or #st.base.K.knobs == 0 or st.base.K.space:size() <= 1 then
    ctx:log("no tuning: %s", o.tune == "none" and "tune=none" or "the kernel declares a single config")
    st.phase = "done"
    return false
  end
  local left = ctx.budget - ctx.evaluations
  local budget = o.tune_budget > 0 and math.min(o.tune_budget, left) or left
  if budget <= 0 then
    ctx:log("no tuning: the budget is spent")
    st.phase = "done"
    return false
  end
  local sub, label = strategy_mod.load(o.tune)
  st.tune, st.tune_name = sub, sub.name or label
  st.tune_options = strategy_mod.options(sub, {})
  st.tctx = tuning_ctx(ctx, st, budget)
  st.tuned = 0
  ctx:log("tuning attempt %d's kernel with %s over %d configs (%s), %d evaluations at most", st.base.n, st.tune_name,
          st.base.K.space:size(), (function()
            local parts = {}
            for i, k in ipairs(st.base.K.knobs) do
              local vs = {}
              for j, v in ipairs(k.values) do vs[j] = tostring(v) end
              parts[i] = k.name .. "=" .. table.concat(vs, "|")
            end
            return table.concat(parts, " ")
          end)(), budget)
  if sub.init then sub.init(st.tctx) end
  return true
end

-- "exhaustive", "anneal:neighbour": the tuner and its own label of the move.
local function tune_method(st, c)
  local m = c.origin and c.origin.method
  if m == nil or m == st.tune_name then return st.tune_name end
  return st.tune_name .. ":" .. tostring(m)
end

-- The tuning strategy's next candidates, as this run's candidates; configs
-- that cannot launch are answered here (free, invalid), so the engine sees
-- only what can run. Returns the list (empty: tuning is over).
local function tuning_ask(ctx, st, n)
  local t, K = st.tctx, st.base.K
  for _ = 1, 1000 do
    if t.evaluations >= t.budget then return {} end
    local cands = st.tune.ask(t, math.min(n, t.budget - t.evaluations)) or {}
    if #cands == 0 then return {} end
    local out, results, all_answered = {}, {}, true
    st.tpending = {}
    for i, c in ipairs(cands) do
      local key = K.space:key(c.config)
      local ok, why = K.space:is_valid(c.config)
      local src, launch
      if ok then src, launch = synth.materialize(K, c.config, ctx.spec) end
      if not ok or not src then
        results[i] = { status = "invalid", free = true, log = why or launch, key = key }
      elseif t._cache[key] then
        results[i] = t:lookup(c.config)
        results[i].cached, results[i].key = true, key
      else
        all_answered = false
        out[#out + 1] = { config = st.config, source = src, entry = K.entry, name = K.entry .. ".cu", launch = launch,
                          origin = { expert = "tune", method = tune_method(st, c),
                                     attempt = st.base.n, knobs = synth.describe(K, c.config) } }
        st.tpending[#st.tpending + 1] = { i = i, key = key, config = c.config }
      end
    end
    if not all_answered then
      st.tresults = results
      st.tcount = #cands
      return out
    end
    if st.tune.tell then st.tune.tell(t, results) end
  end
  return {}
end

local function tuning_tell(ctx, st, results)
  local t = st.tctx
  local merged = st.tresults
  for j, p in ipairs(st.tpending) do
    local r = {}
    for k, v in pairs(results[j] or { status = "crash" }) do r[k] = v end
    r.key = p.key
    merged[p.i] = r
    if not r.free then
      t._cache[p.key] = r
      if not results[j].cached or results[j].resumed or results[j].served then
        t.evaluations, st.tuned = t.evaluations + 1, st.tuned + 1
      end
      if r.status == "ok" and type(r.time_ms) == "number" and (not t.best or r.time_ms < t.best.result.time_ms) then
        t.best = { key = p.key, config = p.config, result = r }
        st.best_tuned = t.best
        ctx:log("tune: new best %s at %s", ms(r.time_ms), synth.describe(st.base.K, p.config))
      end
    end
  end
  for i = 1, st.tcount do merged[i] = merged[i] or { status = "invalid", free = true } end
  st.tpending, st.tresults = nil, nil
  if st.tune.tell then st.tune.tell(t, merged) end
end

---------------------------------------------------------------------------

function S.ask(ctx, n)
  local st = ctx.synth_state
  if st.phase == "reference" then
    return { { config = st.config, origin = { expert = "reference",
                                              method = ctx.spec.synthesis and "reference" or "spec_kernel" } } }
  end
  if st.phase == "attempts" then
    local cand = next_attempt(ctx, st)
    if cand then return { cand } end
    if not st.base then
      ctx:log("no attempt was correct after %d: %s stands (%s)", #st.attempts, st.baseline,
              ms(st.reference and st.reference.time_ms))
      st.phase = "done"
    elseif not start_tuning(ctx, st) then
      st.phase = "done"
    end
  end
  if st.phase == "tune" then
    local out = tuning_ask(ctx, st, n)
    if #out > 0 then return out end
    ctx:log("tuning ends after %d evaluations; best %s at %s", st.tuned,
            ms((st.best_tuned or st.base).result.time_ms), synth.describe(st.base.K, (st.best_tuned or st.base).config))
    st.phase = "done"
  end
  summarize(ctx, st)
  return {}
end

function S.tell(ctx, results)
  local st = ctx.synth_state
  if st.phase == "reference" then
    st.reference = results[1]
    ctx:log("%s: %s%s", st.baseline, tostring(results[1].status), results[1].time_ms and (" " .. ms(results[1].time_ms)) or "")
    st.phase, st.improved_tries = "attempts", 0
    if ctx.backend_name == "replay" then
      -- a recording answers for the spec's own kernel, whatever the source
      st.why_none = "the replay backend answers from recorded measurements and cannot measure a written kernel"
      ctx:log("no attempts: %s", st.why_none)
      st.phase = "done"
    end
  elseif st.phase == "attempts" then
    took_attempt(ctx, st, results[1])
  elseif st.phase == "tune" then
    tuning_tell(ctx, st, results)
  end
  summarize(ctx, st)
end

return S
