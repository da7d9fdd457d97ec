-- Parallel experts: every iteration, each expert (an LLM persona with its own
-- bias, or its heuristic when no LLM is configured) looks at the current best,
-- the recent measurements and their symptoms, and proposes new configurations
-- and, with edits on, kernel edits. All experts are asked at once (one
-- parallel HTTP batch); their proposals are validated (knob values,
-- constraints, kernel-only edits), deduplicated against each other and
-- everything measured, and evaluated as one batch. A new best must beat the
-- old by more than the measurement noise and at least min_gain. The search
-- stops after `iterations` iterations, or when `patience` iterations in a row
-- bring no new best.
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
    iterations = { default = 30, help = "maximum number of iterations (one batch of proposals each)" },
    patience = { default = 4, help = "stop after this many iterations in a row without a new best" },
    per_expert = { default = 2, help = "proposals taken from each expert per iteration" },
    init = { default = 4, help = "configurations measured before the first iteration (default config + random)" },
    min_gain = { default = 0.02, help = "a new best must be faster by this fraction (and by more than the noise)" },
    edits = { default = "auto", choices = { "auto", "on", "off" },
              help = "kernel edits (unified diffs): auto = on with a spec and a GPU backend, off under replay" },
    llm = { default = "auto", choices = { "auto", "off" },
            help = "auto: the LLM endpoint when one is configured (options or env); off: heuristics" },
    llm_base_url = { default = "",
                     help = "OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (env KOPT_LLM_BASE_URL)" },
    llm_model = { default = "", help = "model name (env KOPT_LLM_MODEL)" },
    llm_key_env = { default = "",
                    help = "environment variable holding the API key (default KOPT_LLM_API_KEY, then OPENAI_API_KEY)" },
    llm_timeout = { default = 120, help = "seconds per LLM request attempt" },
    llm_mode = { default = "json_schema", choices = { "json_schema", "json_object", "none" },
                 help = "structured output to ask for first (falls back when the server rejects it)" },
    llm_replay = { default = "", help = "answer from a recorded llm_transcript.jsonl instead of the network" },
  },
}

local function fitness(r)
  if r and r.status == "ok" and type(r.time_ms) == "number" then return r.time_ms end
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

local function make_client(ctx, o)
  if o.llm == "off" then return nil, "llm=off" end
  local options = { llm_base_url = o.llm_base_url, llm_model = o.llm_model, llm_timeout = o.llm_timeout,
                    llm_mode = o.llm_mode, llm_replay = o.llm_replay }
  local cfg = llm.config(options)
  if o.llm_key_env ~= "" then cfg.api_key = os.getenv(o.llm_key_env) end
  if not cfg.base_url and not cfg.replay then return nil, "no LLM endpoint configured" end
  if ctx.run_dir then
    sys.mkdir_p(ctx.run_dir)
    cfg.transcript = ctx.run_dir .. "/llm_transcript.jsonl"
    -- A resumed run asks the same questions again: answer them from its own
    -- transcript first, so it proposes what it proposed before.
    if not cfg.replay and sys.stat(cfg.transcript) then cfg.prefix = cfg.transcript end
  end
  local client, err = llm.new(cfg)
  if not client then require("kopt.errors").usage("experts: %s", err) end
  return client
end

function S.init(ctx)
  local o = ctx.options
  local st = {
    experts = X.resolve(o.experts),
    history = {},       -- {config=, key=, result=, origin=} in evaluation order
    asked = {},         -- state keys proposed in this run
    queue = {},         -- candidates not yet handed out
    outstanding = 0,    -- handed out, not yet told
    iter = 0, stall = 0, improved = false, done = nil,
    best = nil,         -- { config=, key=, result=, source=, patch= } (noise-aware)
    stats = {},         -- expert -> {proposed=, valid=, measured=, improved=}
  }
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
  ctx.experts_state = st
end

local function spec_source(ctx) return ctx.spec and ctx.spec.kernel and ctx.spec.kernel.source end

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

-- Turns a move from `expert` into a candidate, or nil and why.
local function candidate_of(ctx, st, mv, iter)
  local base = st.best and st.best.config
  local config = {}
  for k, v in pairs(base) do config[k] = v end
  for k, v in pairs(mv.changes or {}) do
    local ix = ctx.space.index[k]
    if not ix or ix.pos[v] == nil then return nil, string.format("%s=%s is not allowed", tostring(k), tostring(v)) end
    config[k] = v
  end
  local ok, why = ctx.space:is_valid(config)
  if ok then ok, why = smem_ok(ctx, config) end
  if not ok then return nil, why end
  local source, cand_patch = st.best.source, st.best.patch
  if mv.patch then
    if not st.edits then return nil, "code edits are off" end
    local names = {}
    for i, k in ipairs(ctx.space.knobs) do names[i] = k.name end
    local allowed, perr = patch_mod.check_kernel_only(mv.patch, { knobs = names })
    if not allowed then return nil, "edit rejected: " .. perr end
    local new, aerr = patch_mod.apply(st.best.source or spec_source(ctx), mv.patch)
    if not new then return nil, "edit does not apply: " .. aerr end
    source = new
    -- The engine materialises spec source + patch, so the candidate carries
    -- the whole edit relative to the spec's kernel.
    cand_patch = patch_mod.diff(spec_source(ctx), new)
    if cand_patch == "" then cand_patch = nil end
  end
  local key = cand_key(ctx, config, source)
  if st.asked[key] then return nil, "already proposed" end
  if not cand_patch and ctx:lookup(config) then return nil, "already measured" end
  return { config = config, patch = cand_patch,
           origin = { expert = mv.expert, method = mv.method, iteration = iter, reason = mv.reason } }, nil, key, source
end

local function start_iteration(ctx, st)
  local o = ctx.options
  if st.iter >= o.iterations then return false, string.format("reached %d iterations", o.iterations) end
  if st.stall >= o.patience then
    return false, string.format("no expert improved the best for %d iterations", st.stall)
  end
  st.iter = st.iter + 1
  st.improved = false
  local state = { config = st.best.config, key = st.best.key, result = st.best.result }
  local view = X.view(ctx, state, { history = st.history, n = o.per_expert, edits = st.edits, source = st.best.source })
  local t0 = sys.now()
  local answers = X.ask_all(st.experts, view, ctx.rng, st.client)
  local dt = sys.now() - t0
  local got, summary = 0, {}
  for _, a in ipairs(answers) do
    local stats = st.stats[a.expert]
    local taken = 0
    local notes = {}
    if a.err then notes[#notes + 1] = "fell back to heuristic: " .. a.err end
    for _, r in ipairs(a.rejected or {}) do
      notes[#notes + 1] = string.format("proposal %d rejected: %s", r.index, r.why)
    end
    for _, mv in ipairs(a.moves or {}) do
      if taken >= o.per_expert then break end
      stats.proposed = stats.proposed + 1
      local cand, why, key, source = candidate_of(ctx, st, mv, st.iter)
      if cand then
        stats.valid = stats.valid + 1
        st.asked[key] = true
        cand._source, cand._key = source, key
        st.queue[#st.queue + 1] = cand
        taken = taken + 1
      elseif a.source == "llm" then
        notes[#notes + 1] = string.format("%s: %s", mv.method, why)
      end
    end
    got = got + taken
    summary[#summary + 1] = string.format("%s(%s):%d", a.expert, a.source, taken)
    if #notes > 0 then ctx:log("iteration %d, %s: %s", st.iter, a.expert, table.concat(notes, "; ")) end
  end
  -- Nothing new from anyone: explore around the best (unmeasured neighbours),
  -- else anywhere (random samples), so the iteration still learns something.
  if got == 0 then
    local want = math.max(1, o.per_expert * #st.experts)
    local function take(c, method)
      local key = cand_key(ctx, c, st.best.source)
      if st.asked[key] or ctx:lookup(c) then return end
      st.asked[key] = true
      st.queue[#st.queue + 1] = { config = c, patch = st.best.patch, _source = st.best.source, _key = key,
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
    if got == 0 then return false, "no expert has anything new to propose" end
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
  for _, c in ipairs(configs) do
    local key = cand_key(ctx, c, spec_source(ctx))
    if not st.asked[key] then
      st.asked[key] = true
      st.queue[#st.queue + 1] = { config = c, _source = spec_source(ctx), _key = key,
                                  origin = { expert = "init", method = "sample", iteration = 0 } }
    end
  end
end

function S.ask(ctx, n)
  local st = ctx.experts_state
  if st.done then return {} end
  if #st.queue == 0 and st.outstanding == 0 then
    if not st.init_done then
      start_init(ctx, st)
    elseif not st.best then
      -- Every initial sample failed: sample more.
      if st.iter >= ctx.options.iterations then st.done = "no configuration ran" return {} end
      st.iter = st.iter + 1
      st.init_done = false
      start_init(ctx, st)
    else
      local ok, why = start_iteration(ctx, st)
      if not ok then
        st.done = why
        ctx:log("stopping: %s", why)
        return {}
      end
    end
    if #st.queue == 0 then st.done = "nothing to measure" return {} end
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
  return r.time_ms < old.time_ms * (1 - need)
end

function S.tell(ctx, results)
  local st = ctx.experts_state
  for i, r in ipairs(results) do
    local cand = table.remove(st.handed, 1)
    st.outstanding = st.outstanding - 1
    if cand then
      st.history[#st.history + 1] = { config = cand.config, key = r.key, result = r, origin = cand.origin }
      local stats = cand.origin and st.stats[cand.origin.expert]
      if stats then stats.measured = stats.measured + 1 end
      if better(st, r, ctx.options.min_gain) then
        local old = st.best and st.best.result.time_ms
        st.best = { config = cand.config, key = r.key, result = r, source = cand._source, patch = cand.patch }
        if stats then stats.improved = stats.improved + 1 end
        if cand.origin and cand.origin.iteration and cand.origin.iteration > 0 then st.improved = true end
        ctx:log("new best %.5g ms%s from %s/%s", r.time_ms,
                old and string.format(" (%.1f%% faster)", 100 * (1 - r.time_ms / old)) or "",
                tostring(cand.origin and cand.origin.expert), tostring(cand.origin and cand.origin.method))
      end
    end
    local _ = i
  end
  if st.outstanding == 0 and #st.queue == 0 and st.iter > 0 and st.best then
    if st.improved then st.stall = 0 else st.stall = st.stall + 1 end
    if st.client then
      local u = st.client.usage
      ctx:log("iteration %d done; LLM: %d requests, %d failed, %d tokens", st.iter, u.requests, u.failures,
              u.total_tokens)
    end
  end
end

return S
