-- Parallel experts: every iteration, each expert (an LLM persona with its own
-- bias, or its heuristic when no LLM is configured) looks at the current best,
-- the recent measurements and their symptoms, and proposes new configurations
-- and, with edits on, kernel edits. All experts are asked at once (one
-- parallel HTTP batch); their proposals are validated (knob values,
-- constraints, kernel-only edits), deduplicated against each other and
-- everything measured, and evaluated as one batch. An LLM edit that does not
-- apply, compile or verify goes back to its expert as a follow-up turn of the
-- same conversation, with the reason, for up to `repairs` fixed attempts.
-- A new best must beat the old by more than the measurement noise and at
-- least min_gain. The search stops after `iterations` iterations, when
-- `patience` iterations in a row bring no new best, or when every
-- configuration has been measured; the trace says which.
local experience = require("kopt.experience")
local X = require("kopt.experts")
local llm = require("kopt.llm")
local patch_mod = require("kopt.patch")
local sys = require("kopt.sys")

local S = {
  name = "experts",
  description = "parallel LLM experts (heuristic experts offline) proposing configs and kernel edits",
  options = {
    experts = { default = X.DEFAULT,
                help = "experts, comma-separated: names (kopt/experts/<name>.lua) or .lua files" },
    iterations = { default = 30, min = 1, max = 1000000, help = "maximum number of iterations (one batch of proposals each)" },
    patience = { default = 4, min = 1, max = 1000000, help = "stop after this many iterations in a row without a new best" },
    per_expert = { default = 2, min = 1, max = 1000, help = "proposals taken from each expert per iteration" },
    init = { default = 4, min = 1, max = 100000, help = "configurations measured before the first iteration (default config + random)" },
    min_gain = { default = 0.02, help = "a new best must be faster by this fraction (and by more than the noise)" },
    edits = { default = "auto", choices = { "auto", "on", "off" },
              help = "kernel edits (unified diffs): auto = on with a spec and a GPU backend, off under replay; " ..
                     "on = whenever there is a spec; off = none" },
    llm = { default = "auto", choices = { "auto", "off" },
            help = "auto: the LLM endpoint when one is configured (options or env); off: heuristics" },
    llm_base_url = { default = "",
                     help = "OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (env KOPT_LLM_BASE_URL)" },
    llm_model = { default = "", help = "model name (env KOPT_LLM_MODEL)" },
    llm_key_env = { default = "",
                    help = "environment variable holding the API key (default KOPT_LLM_API_KEY, then OPENAI_API_KEY)" },
    llm_timeout = { default = 120, gt = 0, help = "seconds per LLM request attempt" },
    llm_mode = { default = "json_schema", choices = { "json_schema", "json_object", "none" },
                 help = "structured output to ask for first (falls back when the server rejects it)" },
    llm_replay = { default = "", help = "answer from a recorded llm_transcript.jsonl instead of the network" },
    llm_max_tokens = { default = 0, min = 0,
                       help = "stop asking the LLM once the run has used this many tokens (0: no limit)" },
    llm_deadline = { default = 600, gt = 0, help = "seconds one batch of LLM requests may take, retries included" },
    relabel = { default = "offline", choices = { "offline", "llm" },
                help = "how new method labels join the canonical set: offline matching, or one LLM call per " ..
                       "iteration that sees the set (kopt.relabel; offline on any failure)" },
    edit_format = { default = "diff", choices = { "diff", "search_replace", "source" },
                    help = "the edit format the prompt asks for (any of the three is accepted); an expert's own " ..
                      "edit_format wins" },
    tool_rounds = { default = 4, min = 0, help = "rounds of tool calls (overview, region, metrics, ...) an LLM expert may " ..
                      "make before it answers (0: none; servers without tools get the overview in the prompt)" },
    tools = { default = "", help = "a .lua file registering more tools for the LLM experts (kopt.tools.register)" },
    repairs = { default = 2, min = 0, help = "follow-up turns in which an expert may fix its edit after it failed to apply, " ..
                  "compile or verify (0: none)" },
  },
}

local function fitness(r)
  local t = r and (r.cost or r.time_ms)  -- (cost: the spec's objective as a time; kopt.engine)
  if r and r.status == "ok" and type(t) == "number" then return t end
  return math.huge
end

-- Relative measurement noise of a result: its own estimate, else p90 spread.
local function noise(r)
  if type(r.noise) == "number" then return r.noise end
  if type(r.p90_ms) == "number" and type(r.time_ms) == "number" and r.time_ms > 0 then
    return math.max(0, (r.p90_ms - r.time_ms) / r.time_ms)
  end
  return 0
end

-- A resumed run asks the same questions again: kopt.llm answers them from
-- its own transcript first, so it proposes what it proposed before.
local function make_client(ctx, o) return llm.for_run(ctx, o, "experts") end

function S.init(ctx)
  local o = ctx.options
  local st = {
    experts = X.resolve(o.experts),
    history = {},       -- {config=, key=, result=, origin=} in evaluation order
    asked = {},         -- state keys proposed in this run
    asked_code = {},    -- and edited ones by their code alone (code_key)
    queue = {},         -- candidates not yet handed out
    outstanding = 0,    -- handed out, not yet told
    iter = 0, stall = 0, improved = false, done = nil,
    best = nil,         -- { config=, key=, result=, source=, patch= } (noise-aware)
    stats = {},         -- expert -> {proposed=, valid=, measured=, improved=}
    repairs = {},       -- pending repairs: {chain=, feedback=, failed_source=}
    expert_by_name = {},
    method_of = {},     -- state key -> the method that produced it (transitions)
    scans = {},         -- source -> Space:scanner of the configs not asked yet (false: none)
  }
  for _, e in ipairs(st.experts) do st.expert_by_name[e.name] = e end
  for _, e in ipairs(st.experts) do st.stats[e.name] = { proposed = 0, valid = 0, measured = 0, improved = 0 } end
  if o.edits == "auto" then
    st.edits = ctx.spec ~= nil and ctx.backend_name ~= "replay"
  else
    st.edits = o.edits == "on" and ctx.spec ~= nil
  end
  local client, why = make_client(ctx, o)
  st.client = client
  local names = {}
  for i, e in ipairs(st.experts) do names[i] = e.name end
  ctx:log("experts %s via %s; edits %s", table.concat(names, ","),
          client and ("LLM " .. client:describe()) or ("heuristics (" .. why .. ")"), st.edits and "on" or "off")
  -- every evaluation is a transition from the method that made its base
  -- state to its own (kopt.experience; `kopt regraph` reads them)
  st.exp = experience.open(ctx, S.name)
  if o.tools ~= "" then X.tool_options(ctx, { config = {} }) end  -- a bad tools file fails now
  ctx.experts_state = st
end

local function spec_source(ctx) return ctx.spec and ctx.spec.kernel and ctx.spec.kernel.source end

-- An edited candidate's key by its code alone (patch.code_digest): one
-- edit re-indented is not measured twice.
local function code_key(ctx, config, source) return ctx.space:key(config) .. "#" .. patch_mod.code_digest(source) end

-- Marks a candidate asked for, by its key and by its code.
local function mark_asked(ctx, st, key, cand, source)
  st.asked[key] = true
  if cand.patch and source then st.asked_code[code_key(ctx, cand.config, source)] = true end
end

-- A candidate key the engine would give (config key + source hash).
local function cand_key(ctx, config, source)
  local key = ctx.space:key(config)
  local base = spec_source(ctx)
  if source and base and source ~= base then key = key .. "#" .. sys.sha256(source):sub(1, 16) end
  return key
end

-- Shared memory the launch asks for against what the GPU allows (constraints
-- usually say this already; specs without one get the check anyway).
local function smem_ok(ctx, config)
  local spec = ctx.spec
  local dev = spec and spec.device
  if not (spec and spec.launch_exprs and type(dev) == "table" and type(dev.max_smem_optin) == "number") then
    return true
  end
  local ok, l = pcall(spec.launch, spec, config)
  if ok and type(l) == "table" and type(l.smem) == "number" and l.smem > dev.max_smem_optin then
    return false, string.format("needs %d bytes of shared memory, the GPU allows %d", l.smem, dev.max_smem_optin)
  end
  return true
end

-- Applies a move's edit to `base`, then re-checks what the edit added
-- against the device-code-only rules. Returns the new source or nil, why.
local function apply_move_edit(ctx, mv, base)
  local names = {}
  for i, k in ipairs(ctx.space.knobs) do names[i] = k.name end
  local edit = mv.edit or mv.patch
  local entry = ctx.spec and ctx.spec.kernel and ctx.spec.kernel.entry
  local new, aerr, note = patch_mod.apply_edit(base, edit, { entry = entry })
  if not new then return nil, "edit does not apply: " .. tostring(aerr) end
  if note then ctx:log("%s", note) end
  if new == base then return nil, "the edit changes nothing" end
  if patch_mod.same_code(base, new) then return nil, "the edit changes only comments or white space" end
  if patch_mod.only_knob_defaults(base, new, X.defined_knobs(ctx)) then
    return nil, "the edit changes only knob defaults inside their #ifndef guards, which the knobs' defines always " ..
                "override: propose the knob's value in \"changes\" instead"
  end
  local allowed, perr = patch_mod.check_kernel_only(patch_mod.diff(base, new), { knobs = names, base = base, new = new })
  if not allowed then return nil, "edit rejected: " .. perr end
  return new
end

-- Turns a move into a candidate, or nil and why. `base` (default: the
-- current best) is the state the move starts from: {config=, source=}.
local function candidate_of(ctx, st, mv, iter, base)
  base = base or st.best
  local config = {}
  for k, v in pairs(base.config) do config[k] = v end
  for k, v in pairs(mv.changes or {}) do
    local ix = ctx.space.index[k]
    if not ix or ix.pos[v] == nil then return nil, string.format("%s=%s is not allowed", tostring(k), tostring(v)) end
    config[k] = v
  end
  local ok, why = ctx.space:is_valid(config)
  if ok then ok, why = smem_ok(ctx, config) end
  if not ok then return nil, why end
  local source = base.source or spec_source(ctx)
  if mv.edit or mv.patch then
    if not st.edits then return nil, "code edits are off" end
    local new, err = apply_move_edit(ctx, mv, source)
    if not new then return nil, err, nil, nil, true end
    source = new
  end
  -- The candidate carries its whole source, and its difference from the
  -- spec's kernel as `patch` (events.jsonl, best/), so edits compose: an
  -- edit of an edited best is one candidate like any other.
  local cand_patch = source ~= spec_source(ctx) and patch_mod.diff(spec_source(ctx), source) or nil
  if cand_patch == "" then cand_patch = nil end
  local key = cand_key(ctx, config, source)
  if st.asked[key] then return nil, "already proposed" end
  if cand_patch and st.asked_code[code_key(ctx, config, source)] then
    return nil, "already proposed (the same code but for white space or comments)"
  end
  if not cand_patch and ctx:lookup(config) then return nil, "already measured" end
  return { config = config, patch = cand_patch, source = cand_patch and source or nil,
           origin = { expert = mv.expert, method = mv.method, label = mv.label, iteration = iter, reason = mv.reason },
           _from = base.key and st.method_of[base.key] or "start", _base_ms = base.result and base.result.time_ms },
    nil, key, source
end

---------------------------------------------------------------------------
-- Repairs: a failed LLM edit goes back to its expert in the same
-- conversation.

local trim_log, feedback_of = X.trim_log, X.feedback_of
S.trim_log, S.feedback_of = trim_log, feedback_of

-- The chain of a move that came from an LLM reply: the conversation so far.
local function chain_of(answer, mv, base)
  if answer.source ~= "llm" or not answer.messages or not answer.content then return nil end
  if not (mv.edit or mv.patch) then return nil end
  return { expert = answer.expert, messages = answer.messages, content = answer.content, attempt = 0,
           base = { config = base.config, source = base.source }, method = mv.method }
end

local function queue_repair(st, chain, feedback, failed_source)
  if not chain then return end
  -- One pending repair per chain: the first failure reported wins.
  for _, p in ipairs(st.repairs) do if p.chain == chain then return end end
  st.repairs[#st.repairs + 1] = { chain = chain, feedback = feedback, failed_source = failed_source }
end

local function usage_lines(ctx, st)
  if not st.client then return end
  local tags = {}
  for i, e in ipairs(st.experts) do tags[i] = e.name end
  llm.record_usage(ctx, st.client, tags)
end

-- The client, unless the token budget is spent (then nil, once logged).
local function live_client(ctx, st)
  local c = st.client
  if not c then return nil end
  local cap = tonumber(ctx.options.llm_max_tokens) or 0
  if cap > 0 and c.usage.total_tokens >= cap then
    if not st.spent_logged then
      st.spent_logged = true
      ctx:log("LLM token budget spent (%d of %d tokens): heuristics from now on", c.usage.total_tokens, cap)
    end
    return nil
  end
  return c
end

local function ask_llm(ctx, st, what, n, fn)
  local deadline = tonumber(ctx.options.llm_deadline) or 600
  if ctx.status then ctx:status("asking %d LLM %s (up to %d s)", n, what, deadline) end
  local t0 = sys.now()
  local out = fn(deadline)
  if ctx.status then ctx:status(nil) end
  usage_lines(ctx, st)
  return out, sys.now() - t0
end

-- Sends every pending repair at once; queues the fixed candidates.
local function start_repairs(ctx, st)
  local pending = st.repairs
  st.repairs = {}
  local client = live_client(ctx, st)
  local budget_left = (ctx.budget or math.huge) - (ctx.evaluations or 0)
  if not client or budget_left <= 0 then
    for _, p in ipairs(pending) do
      ctx:log("repair of %s/%s not asked: %s", p.chain.expert, tostring(p.chain.method),
              client and "the budget is spent" or "no LLM")
    end
    return
  end
  local reqs, chains = {}, {}
  for _, p in ipairs(pending) do
    local ch = p.chain
    if #reqs < budget_left then
      local msgs = X.repair_messages(ch, p.feedback)
      ch.attempt = ch.attempt + 1
      ch.messages = msgs
      reqs[#reqs + 1] = { tag = ch.expert .. "#repair", messages = msgs, schema = st.schema,
                          temperature = st.expert_by_name[ch.expert].temperature }
      chains[#chains + 1] = p
    end
  end
  local replies, dt = ask_llm(ctx, st, "repairs", #reqs, function(deadline)
    return client:chat_many(reqs, { deadline_s = deadline })
  end)
  local got = {}
  for i, p in ipairs(chains) do
    local ch, r = p.chain, replies[i]
    local notes, fixed = {}, false
    if not r.ok then
      notes[1] = string.format("reply failed: %s: %s", tostring(r.kind), tostring(r.err))
    else
      ch.content = r.content
      local e = st.expert_by_name[ch.expert]
      local moves, rejected = e.parse(r.value, st.view, r.content)
      moves = moves or {}
      for _, rj in ipairs(rejected or {}) do notes[#notes + 1] = string.format("proposal %d rejected: %s", rj.index, rj.why) end
      -- the proposals in order until one gives a candidate: a second
      -- proposal may hold the fix when the first does not apply
      local taken, first_why = false, nil
      for _, mv in ipairs(moves) do
        if not taken then
          mv.expert = ch.expert
          local cand, why, key, source, apply_failed
          if mv.edit or mv.patch then
            cand, why, key, source, apply_failed = candidate_of(ctx, st, mv, st.iter, ch.base)
          else
            why = "the proposal has no edit (a repair fixes the edit)"
          end
          if not cand and apply_failed and p.failed_source then
            -- A diff against the model's own broken version.
            local c2, why2, key2, source2 = candidate_of(ctx, st, mv, st.iter,
                                                        { config = ch.base.config, source = p.failed_source })
            if c2 then cand, why, key, source = c2, why2, key2, source2 end
          end
          if cand then
            cand.origin.repair = ch.attempt
            cand.origin.method = ch.method or cand.origin.method
            cand._source, cand._key, cand._chain = source, key, ch
            mark_asked(ctx, st, key, cand, source)
            st.queue[#st.queue + 1] = cand
            got[#got + 1] = string.format("%s/%s", ch.expert, tostring(cand.origin.method))
            taken = true
          else
            notes[#notes + 1] = why
            first_why = first_why or why
          end
        end
      end
      if not taken and first_why and ch.attempt < (tonumber(ctx.options.repairs) or 0) then
        queue_repair(st, ch, "It was not tried: " .. first_why .. ".", p.failed_source)
      end
      if #moves == 0 and #notes == 0 then notes[1] = "no proposal in the reply" end
      fixed = taken
    end
    local said = table.concat(notes, "; ")
    if fixed then said = "a fixed edit" .. (said ~= "" and (" (proposals before it: " .. said .. ")") or "") end
    ctx:log("repair %d of %s/%s: %s", ch.attempt, ch.expert, tostring(ch.method), said)
  end
  ctx:log("repairs: %d asked in %.2f s; %d candidates", #reqs, dt, #got)
end

local function finish_iteration(ctx, st)
  if st.finished_iter == st.iter then return end
  st.finished_iter = st.iter
  if st.improved then st.stall = 0 else st.stall = st.stall + 1 end
  if st.client then
    local u = st.client.usage
    ctx:log("iteration %d done; LLM: %d requests, %d failed, %d tokens", st.iter, u.requests, u.failures,
            u.total_tokens)
  end
end

-- A config not proposed yet with `source` (nor measured), for when random
-- samples keep finding proposed ones: the space is scanned once per source
-- (Space:scanner), in key order. Nil and why when none is left, or the space
-- is too large to list.
local function next_unasked(ctx, st, source)
  local tag = source or ""
  if st.scans[tag] == nil then st.scans[tag] = ctx.space:scanner() or false end
  local scan = st.scans[tag]
  if not scan then return nil, "random samples find nothing new in a space too large to list" end
  local c = scan(function(config) return not st.asked[cand_key(ctx, config, source)] and not ctx:lookup(config) end)
  if not c then return nil, "every configuration has been measured" end
  return c
end

local function start_iteration(ctx, st)
  local o = ctx.options
  if st.iter >= o.iterations then return false, string.format("reached %d iterations", o.iterations) end
  if st.stall >= o.patience then
    return false, string.format("no expert improved the best for %d iterations", st.stall)
  end
  st.iter = st.iter + 1
  st.improved = false
  local state = { config = st.best.config, key = st.best.key, result = st.best.result, patch = st.best.patch }
  local view = X.view(ctx, state, { history = st.history, n = o.per_expert, edits = st.edits, source = st.best.source,
                                    edit_format = o.edit_format })
  st.view = view
  st.schema = X.schema(view)
  local client = live_client(ctx, st)
  local answers, dt = ask_llm(ctx, st, "experts", client and #st.experts or 0, function(deadline)
    local tl = client and X.tool_options(ctx, state, { source = st.best.source, history = st.history })
    return X.ask_all(st.experts, view, ctx.rng, client, { deadline_s = deadline, relabel = o.relabel, tools = tl })
  end)
  local got, summary = 0, {}
  local max_repairs = tonumber(o.repairs) or 0
  for _, a in ipairs(answers) do
    local stats = st.stats[a.expert]
    local taken = 0
    local notes = {}
    if a.err then notes[#notes + 1] = "fell back to heuristic: " .. a.err end
    for _, r in ipairs(a.rejected or {}) do
      notes[#notes + 1] = string.format("proposal %d rejected: %s", r.index, r.why)
    end
    for _, r in ipairs(a.notes or {}) do
      notes[#notes + 1] = string.format("proposal %d: %s", r.index, r.note)
    end
    for _, mv in ipairs(a.moves or {}) do
      if taken >= o.per_expert then break end
      stats.proposed = stats.proposed + 1
      local chain = max_repairs > 0 and chain_of(a, mv, st.best) or nil
      local cand, why, key, source, apply_failed = candidate_of(ctx, st, mv, st.iter)
      if cand then
        stats.valid = stats.valid + 1
        mark_asked(ctx, st, key, cand, source)
        cand._source, cand._key, cand._chain = source, key, chain
        st.queue[#st.queue + 1] = cand
        taken = taken + 1
      elseif a.source == "llm" then
        notes[#notes + 1] = string.format("%s: %s", mv.method, why)
        if apply_failed then queue_repair(st, chain, "It was not tried: " .. why .. ".") end
      end
    end
    got = got + taken
    summary[#summary + 1] = string.format("%s(%s):%d", a.expert, a.source, taken)
    if #notes > 0 then ctx:log("iteration %d, %s: %s", st.iter, a.expert, table.concat(notes, "; ")) end
  end
  -- Nothing new from anyone: explore around the best (unmeasured neighbours),
  -- else anywhere (random samples), so the iteration still learns something.
  if got == 0 and #st.repairs == 0 then
    local want = math.max(1, o.per_expert * #st.experts)
    local function take(c, method)
      local key = cand_key(ctx, c, st.best.source)
      if st.asked[key] or ctx:lookup(c) then return end
      st.asked[key] = true
      st.queue[#st.queue + 1] = { config = c, patch = st.best.patch, source = st.best.patch and st.best.source or nil,
                                  _source = st.best.source, _key = key,
                                  _from = st.method_of[st.best.key] or "start", _base_ms = st.best.result.time_ms,
                                  origin = { expert = "explore", method = method, iteration = st.iter } }
      got = got + 1
    end
    local nbs = ctx.space:neighbours(st.best.config, "hamming")
    ctx.rng:shuffle(nbs)
    for _, c in ipairs(nbs) do
      if got >= want then break end
      take(c, "neighbour")
    end
    for _ = 1, want * 20 do
      if got >= want then break end
      local c = ctx.space:sample(ctx.rng)
      if c then take(c, "sample") end
    end
    -- samples keep finding asked configs near the end of a small space:
    -- the rest is listed (the search stops when the space is used up)
    while got < want do
      local c, why = next_unasked(ctx, st, st.best.source)
      if not c then
        if got == 0 then return false, "no expert has anything new to propose, and " .. why end
        break
      end
      take(c, "unmeasured")
    end
  end
  ctx:log("iteration %d: %s in %.2f s; %d candidates", st.iter, table.concat(summary, " "), dt, #st.queue)
  return true
end

local function start_init(ctx, st)
  st.init_done = true
  local configs = {}
  local d = ctx.space:default()
  if d then configs[#configs + 1] = d end
  for _ = 1, ctx.options.init * 4 do
    if #configs >= math.max(1, ctx.options.init) then break end
    local c = ctx.space:sample(ctx.rng)
    if c then configs[#configs + 1] = c end
  end
  local function take(c, method)
    local key = cand_key(ctx, c, spec_source(ctx))
    if not st.asked[key] then
      st.asked[key] = true
      st.queue[#st.queue + 1] = { config = c, _source = spec_source(ctx), _key = key,
                                  origin = { expert = "init", method = method, iteration = 0 } }
    end
  end
  for _, c in ipairs(configs) do take(c, "sample") end
  -- draws asked before (a round after one whose every config failed, or a
  -- small space) are made up with the configs not asked yet, listed, so
  -- each round measures `init` new ones while the space has them
  while #st.queue < math.max(1, ctx.options.init) do
    local c, why = next_unasked(ctx, st, spec_source(ctx))
    if not c then
      if #st.queue == 0 then return why end
      break
    end
    take(c, "unmeasured")
  end
end

-- Ends the search, saying why in the trace.
local function stop(ctx, st, why)
  st.done = why
  ctx:log("stopping: %s", why)
  return {}
end

function S.ask(ctx, n)
  local st = ctx.experts_state
  if st.done then return {} end
  if #st.queue == 0 and st.outstanding == 0 then
    local why
    if not st.init_done then
      why = start_init(ctx, st)
    elseif not st.best then
      -- Every sample so far failed: sample more, for up to `iterations` rounds.
      if st.iter >= ctx.options.iterations then
        return stop(ctx, st, string.format("no configuration ran in %d iterations", ctx.options.iterations))
      end
      st.iter = st.iter + 1
      st.init_done = false
      why = start_init(ctx, st)
    else
      -- Pending repairs first (they finish the iteration), then the next
      -- iteration; an iteration whose proposals and repairs all failed
      -- before measuring anything is over, and the next one starts.
      while #st.queue == 0 do
        if #st.repairs > 0 then
          start_repairs(ctx, st)
        else
          if st.iter > 0 then finish_iteration(ctx, st) end
          local ok, ended = start_iteration(ctx, st)
          if not ok then return stop(ctx, st, ended) end
        end
      end
    end
    if #st.queue == 0 then return stop(ctx, st, why or "nothing to measure") end
  end
  local out = {}
  while #out < n and #st.queue > 0 do
    out[#out + 1] = table.remove(st.queue, 1)
  end
  st.outstanding = st.outstanding + #out
  st.handed = st.handed or {}
  for _, c in ipairs(out) do st.handed[#st.handed + 1] = c end
  return out
end

local function better(st, r, min_gain)
  if fitness(r) == math.huge then return false end
  if not st.best then return true end
  local old = st.best.result
  local need = math.max(min_gain, noise(old) + noise(r))
  return fitness(r) < fitness(old) * (1 - need)
end

local REPAIRABLE = X.REPAIRABLE

function S.tell(ctx, results)
  local st = ctx.experts_state
  local max_repairs = tonumber(ctx.options.repairs) or 0
  for _, r in ipairs(results) do
    local cand = table.remove(st.handed, 1)
    st.outstanding = st.outstanding - 1
    if cand then
      st.history[#st.history + 1] = { config = cand.config, key = r.key, result = r, origin = cand.origin }
      local origin = cand.origin or {}
      local speedup = r.status == "ok" and cand._base_ms and r.time_ms and r.time_ms > 0 and cand._base_ms / r.time_ms
      st.exp:add({ from = cand._from or "start", to = origin.method or "other", label = origin.label,
                   status = r.status, speedup = speedup or nil, n = #st.history }, r)
      if r.key then st.method_of[r.key] = origin.method end
      local stats = cand.origin and st.stats[cand.origin.expert]
      if stats then stats.measured = stats.measured + 1 end
      local ch = cand._chain
      if ch and REPAIRABLE[r.status] and ch.attempt < max_repairs then
        queue_repair(st, ch, feedback_of(r), cand._source)
      elseif ch and REPAIRABLE[r.status] and max_repairs > 0 then
        ctx:log("repair chain of %s/%s ends after %d attempts: %s", ch.expert, tostring(ch.method), ch.attempt,
                tostring(r.status))
      end
      if better(st, r, ctx.options.min_gain) then
        local old = st.best and st.best.result.time_ms
        st.best = { config = cand.config, key = r.key, result = r, source = cand._source, patch = cand.patch }
        if stats then stats.improved = stats.improved + 1 end
        if cand.origin and cand.origin.iteration and cand.origin.iteration > 0 then st.improved = true end
        ctx:log("new best %.5g ms%s from %s/%s%s", r.time_ms,
                old and string.format(" (%.1f%% faster)", 100 * (1 - r.time_ms / old)) or "",
                tostring(cand.origin and cand.origin.expert), tostring(cand.origin and cand.origin.method),
                cand.origin and cand.origin.repair and string.format(" (repair %d)", cand.origin.repair) or "")
      end
    end
  end
end

return S
