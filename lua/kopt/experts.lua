-- Experts: biased proposers of the next configurations (and kernel edits).
-- An expert is a Lua module, one file each (lua/kopt/experts/<name>.lua, or
-- any file on package.path as kopt.experts.<name>, or a path to a .lua file):
--
--   local E = { name = "memory", summary = "one line", temperature = 0.4 }
--   function E.prompt(view) return messages end      -- chat messages for the LLM
--   function E.parse(value, view) return moves end   -- the LLM's JSON -> moves
--   function E.heuristic(view, rng) return moves end -- offline fallback, best first
--   return E
--
-- A move is the move-generator shape of kopt.moves:
--   { changes = {KNOB = value}, patch = <unified diff vs view.source>|nil,
--     method = "<any label: kopt.relabel maps it>", prior = p, reason = "...", expert = name }
-- The helpers below build the common prompt, the JSON schema, and parse the
-- common answer, so an expert file only says what it believes.
local errors = require("kopt.errors")
local prompt = require("kopt.expert_prompt")
local json = require("kopt.json")
local patch_mod = require("kopt.patch")
local reply_changes = require("kopt.reply_changes")
local reply_edit = require("kopt.reply_edit")
local relabel = require("kopt.relabel")
local rules = require("kopt.moves.rules")
local symptoms = require("kopt.symptoms")
local tools = require("kopt.tools")
local tool_env = require("kopt.tools.builtin")

local M = {}

local cut = prompt.cut
M.cut = cut



-- The method vocabulary and the common prompt: kopt.expert_prompt.
M.CONFIG_METHODS, M.EDIT_METHODS, M.METHODS = prompt.CONFIG_METHODS, prompt.EDIT_METHODS, prompt.METHODS
local is_method = {}
for _, m in ipairs(M.METHODS) do is_method[m] = true end

M.DEFAULT = "throughput,memory,robustness"
-- (the experts kopt ships, for the message that names an unknown one)
M.BUILTIN = { "throughput", "memory", "robustness" }
M.null = json.null

---------------------------------------------------------------------------
-- Loading

local loaded = {}

-- An expert by name (kopt.experts.<name>) or by path (*.lua). Returns the
-- module, or nil and a message.
function M.load(name)
  if loaded[name] then return loaded[name] end
  local mod
  if name:find("/", 1, true) or name:match("%.lua$") then
    local chunk, err = loadfile(name, "t")
    if not chunk then return nil, err end
    local ok, m = pcall(chunk)
    if not ok then return nil, string.format("expert %s failed to load: %s", name, tostring(m)) end
    mod = m
  else
    if not name:match("^[%w_]+$") then return nil, string.format("bad expert name '%s'", name) end
    local ok, m = pcall(require, "kopt.experts." .. name)
    if not ok then
      -- (require's first line ends in a colon before its list of paths:
      -- the reason alone when the module is simply not there)
      local why = tostring(m):match("^[^\n]*")
      if why:find("module 'kopt.experts." .. name .. "' not found", 1, true) then
        local known = {}
        for _, k in ipairs(M.BUILTIN or {}) do known[#known + 1] = k end
        return nil, string.format("unknown expert '%s' (not a built-in expert%s, and not a .lua file)", name,
                                  #known > 0 and (": " .. table.concat(known, ", ")) or "")
      end
      return nil, string.format("expert '%s' failed to load: %s", name, why)
    end
    mod = m
  end
  if type(mod) ~= "table" or type(mod.heuristic) ~= "function" then
    return nil, string.format("expert '%s' must return a table with heuristic(view, rng)", name)
  end
  mod.name = mod.name or name:match("([%w_]+)%.lua$") or name
  mod.prompt = mod.prompt or function(view) return M.messages(mod, view) end
  mod.parse = mod.parse or function(value, view, text) return M.parse(value, view, mod.name, text) end
  loaded[name] = mod
  return mod
end

-- Experts from a comma-separated list. Raises a usage error on a bad name.
function M.resolve(list)
  local out = {}
  for name in tostring(list):gmatch("[^,%s]+") do
    local e, err = M.load(name)
    if not e then errors.usage("%s", err) end
    out[#out + 1] = e
  end
  if #out == 0 then errors.usage("--opt experts: no expert named") end
  return out
end

---------------------------------------------------------------------------
-- The view: everything an expert sees, built once per iteration.

local config_text = prompt.config_text
M.config_text = config_text

-- Short symptom list of one result: kopt.symptoms when it has counters, plus
-- what resources and status say on their own.
function M.symptoms_of(result)
  local out = {}
  if type(result) ~= "table" then return out end
  local r = result.resources or {}
  if type(r.spills) == "number" and r.spills > 0 then
    out[#out + 1] = { name = "register_spills", summary = string.format("register spills: %d bytes", r.spills) }
  end
  if type(r.occupancy) == "number" and r.occupancy < 0.25 then
    out[#out + 1] = { name = "low_occupancy", summary = string.format("low occupancy: %.0f%%", 100 * r.occupancy) }
  end
  if type(r.regs) == "number" and r.regs >= 128 then
    out[#out + 1] = { name = "high_registers", summary = string.format("%d registers per thread", r.regs) }
  end
  if type(result.metrics) == "table" and next(result.metrics) then
    local ok, list = pcall(symptoms.diagnose, result)
    if ok and type(list) == "table" then
      for _, s in ipairs(list) do out[#out + 1] = { name = s.name, summary = s.summary } end
    end
  end
  if type(result.symptoms) == "table" then
    for _, s in ipairs(result.symptoms) do
      if type(s) == "table" and s.name then out[#out + 1] = { name = s.name, summary = s.summary or s.name } end
    end
  end
  return out
end

function M.has_symptom(view, name)
  for _, s in ipairs(view.symptoms or {}) do if s.name == name then return true end end
  return false
end

-- The view's knob list: its own list and entries (an expert may sort or
-- change them), with the families classified once per space (MCGS asks the
-- heuristics about thousands of states; the classification is string
-- matching per knob).
local families_of_space = setmetatable({}, { __mode = "k" })
local function view_knobs(space)
  local families = families_of_space[space]
  if not families then
    families = {}
    for i, k in ipairs(space.knobs) do families[i] = (rules.classify(k)) end
    families_of_space[space] = families
  end
  local knobs = {}
  for i, k in ipairs(space.knobs) do
    knobs[i] = { name = k.name, values = k.values, tags = k.tags, family = families[i] }
  end
  return knobs
end

-- opts: history (list of {config=, result=, origin=}), n (proposals wanted),
-- edits (bool), source (current best source, when edits are on).
function M.view(ctx, state, opts)
  opts = opts or {}
  local space = ctx.space
  local knobs = view_knobs(space)
  local spec = ctx.spec
  local v = {
    space = space, knobs = knobs, config = state.config, result = state.result, key = state.key,
    history = opts.history or {}, n = opts.n or 2, edits = opts.edits and spec ~= nil,
    name = spec and spec.name or "recorded space", problem = spec and spec.problem or {},
    entry = spec and spec.kernel and spec.kernel.entry, source = opts.source, edit_format = opts.edit_format,
    constraints = spec and spec.constraints, device = spec and spec.device,
    recorded_device = spec and spec.recorded_device,
    symptoms = M.symptoms_of(state.result), measured = opts.measured or function() return false end,
  }
  if not v.source and spec and spec.kernel then v.source = spec.kernel.source end
  -- (MCGS asks about states that are not the best: the prompt says which)
  local best = ctx.best
  v.is_best = not (best and best.key and state.key and best.key ~= state.key)
  return v
end

---------------------------------------------------------------------------
-- Prompt and schema

M.SOURCE_CAP, M.EDIT_FORMATS, M.SYSTEM = prompt.SOURCE_CAP, prompt.EDIT_FORMATS, prompt.SYSTEM
M.user_prompt, M.edit_format_shown, M.messages = prompt.user_prompt, prompt.edit_format_shown, prompt.messages

-- The response schema (strict, for the server) and a looser local one: a
-- reply with one bad value loses that proposal, not the whole reply.
function M.schema(view)
  local knob_props, required = {}, {}
  for i, k in ipairs(view.knobs) do
    knob_props[k.name] = { anyOf = { { enum = k.values }, { type = "null" } } }
    required[i] = k.name
  end
  local function proposal(changes, method)
    return { type = "object", additionalProperties = false, required = { "method", "changes", "reason", "patch" },
             properties = { method = method,
                            changes = { type = "object", additionalProperties = false, required = required,
                                        properties = changes },
                            reason = { type = "string" }, patch = { type = { "string", "null" } } } }
  end
  local function doc(changes, method, max)
    return { type = "object", additionalProperties = false, required = { "analysis", "proposals" },
             properties = { analysis = { type = "string" },
                            proposals = { type = "array", maxItems = max, items = proposal(changes, method) } } }
  end
  -- Locally only the reply's shape is checked; each proposal is read on its
  -- own by M.parse (missing knobs keep their value, unknown keys are noted).
  return { name = "kopt_proposals",
           schema = doc(knob_props, { type = "string" }),
           local_schema = { type = { "object", "array" } }, accept = M.has_proposals, gather = M.gather_proposals }
end

---------------------------------------------------------------------------
-- Parsing and validation

-- Converts a value from a reply to the knob's own type: "128" -> 128 when
-- the knob's values are numbers; returns nil when not allowed.
function M.coerce(knob, v)
  if v == nil or v == json.null then return nil end
  -- (true / false for a switch of 0 and 1, or of "true" and "false")
  if type(v) == "boolean" then
    for _, x in ipairs(knob.values) do
      if x == (v and 1 or 0) or x == tostring(v) then return x end
    end
  end
  for _, x in ipairs(knob.values) do
    if x == v then return x end
    if type(x) == "number" and tonumber(v) == x then return x end
    if type(x) == "string" and tostring(v) == x then return x end
  end
  return nil, string.format("%s=%s is not an allowed value", knob.name, type(v) == "table" and json.encode(v) or tostring(v))
end

-- Keys of a proposal that kopt reads (aliases included); any other key is
-- ignored and noted.
local PROPOSAL_KEYS = {
  method = true, changes = true, config = true, configuration = true, knobs = true, parameters = true,
  params = true, reason = true, rationale = true, explanation = true, patch = true, diff = true, edit = true,
  edits = true, search = true, replace = true, source = true, kernel = true, kernel_source = true,
  find = true, old_str = true, new_str = true, original = true, updated = true,
}
local CHANGE_KEYS = { "changes", "config", "configuration", "knobs", "parameters", "params" }

-- The list of proposals in a reply: {proposals=[...]}, a bare list, a single
-- proposal, or {proposal={...}}.
local ONE_PROPOSAL_KEYS = { "changes", "patch", "diff", "config", "method", "edit", "source" }
local proposals_of

-- The reply's answer under a wrapper object: {"response": {...}}, the
-- schema's own name {"kopt_proposals": {...}}, a schema echoed back
-- {"type": "object", "properties": {...}}; a key "Proposals" in another
-- case. Nil when there is none.
local function wrapped_proposals(value, depth)
  for k, v in pairs(value) do
    if type(k) == "string" and k:lower() == "proposals" and k ~= "proposals" then
      return proposals_of({ proposals = v }, depth)
    end
  end
  if depth >= 2 then return nil end
  local found
  for _, v in pairs(value) do
    if type(v) == "table" and #v == 0 then
      local inner = proposals_of(v, depth + 1)
      if inner then
        if found then return nil end  -- (two candidates: no guess)
        found = inner
      end
    end
  end
  return found
end

function proposals_of(value, depth)
  depth = depth or 0
  if type(value) ~= "table" then return nil end
  local p = value.proposals
  if type(p) == "string" then p = json.decode(p) end  -- (a list sent as a JSON string)
  if type(p) == "table" and #p > 0 then
    -- (a list of proposals each sent as a JSON string)
    local decoded = {}
    for i, x in ipairs(p) do
      decoded[i] = type(x) == "string" and x:find("^%s*{") and json.decode(x) or x
    end
    p = decoded
  end
  if type(p) == "table" then
    if next(p) ~= nil and #p == 0 then
      -- (the list under a key of its own: {"items": [...]})
      for _, k in ipairs({ "items", "list", "proposals", "values" }) do
        if type(p[k]) == "table" and #p[k] > 0 then return p[k] end
      end
      for _, k in ipairs(ONE_PROPOSAL_KEYS) do
        if p[k] ~= nil then return { p } end   -- one proposal, not in a list
      end
      -- proposals keyed by a label ({"p1": {...}, "p2": {...}}), in key order
      local keys = {}
      for k, v in pairs(p) do
        if type(v) ~= "table" then return { p } end
        keys[#keys + 1] = tostring(k)
      end
      table.sort(keys)
      local list = {}
      for i, k in ipairs(keys) do list[i] = p[k] end
      return list
    end
    return p
  end
  if #value > 0 then return value end
  if type(value.proposal) == "table" then return { value.proposal } end
  for _, k in ipairs({ "changes", "patch", "diff", "config" }) do
    if value[k] ~= nil then return { value } end
  end
  return wrapped_proposals(value, depth)
end
M.proposals_of = function(value) return proposals_of(value) end

-- Whether a JSON value from a reply reads as an answer, and how complete
-- one: 2 for a proposals list (the whole answer), 1 for one proposal on
-- its own (a "changes" or "config" object), false otherwise.
-- llm.extract_json takes the last of the most complete ones: a model that
-- corrects itself puts the answer last, while a one-knob recap or an echo
-- of the current best after the answer is no answer.
function M.has_proposals(value)
  local props = proposals_of(value)
  if type(props) ~= "table" or type(props[1]) ~= "table" then return false end
  local whole = type(value.proposals) == "table" or #value > 0
  return whole and 2 or 1
end

-- Answers of one proposal each (a fence or a line per proposal, as some
-- models write them): one list of them all, in order.
function M.gather_proposals(values, rank)
  if rank ~= 1 then return nil end
  local list, seen = {}, {}
  for _, v in ipairs(values) do
    -- (a fenced object is also met as a bare one: once)
    for _, p in ipairs(proposals_of(v) or {}) do
      local key = json.encode(p)
      if not seen[key] then seen[key] = true list[#list + 1] = p end
    end
  end
  return { proposals = list }
end

local function str(v) return type(v) == "string" and v:find("%S") and v or nil end

local edit_of = reply_edit.edit_of
M.edit_of = edit_of

-- The moves in a reply: {analysis=, proposals={...}} (or the shapes of
-- proposals_of). Knobs left out or null keep their value; an unknown knob or
-- key is ignored and noted; a value outside the knob's set loses that
-- proposal only. Returns moves, rejections ({index=, why=}) and notes
-- ({index=, note=}).
function M.parse(value, view, expert_name, reply_text)
  local moves, rejected, notes = {}, {}, {}
  local props = proposals_of(value)
  if type(props) ~= "table" then return moves, { { index = 0, why = "no proposals list" } }, notes end
  if next(props) == nil then return moves, { { index = 0, why = "an empty proposals list (nothing proposed)" } }, notes end
  if type(props[1]) ~= "table" then
    return moves, { { index = 0, why = "no proposals list (a list, but not of proposal objects)" } }, notes
  end
  local by_name = {}
  for _, k in ipairs(view.knobs) do by_name[k.name] = k end
  local edits = {}  -- (each proposal's edit, for one that names another's)
  for i, p in ipairs(props) do
    local changes, why, ignored = {}, nil, {}
    if type(p) ~= "table" then why = "not an object" p = {} end
    -- ("Method", "Changes": the proposal's own keys in another case)
    local lowered
    for k, v in pairs(p) do
      local lk = type(k) == "string" and k:lower()
      if lk and lk ~= k and PROPOSAL_KEYS[lk] and p[lk] == nil and not by_name[k] then
        lowered = lowered or {}
        lowered[lk], lowered[k] = v, json.null
      end
    end
    if lowered then
      local q = {}
      for k, v in pairs(p) do q[k] = v end
      for k, v in pairs(lowered) do q[k] = v ~= json.null and v or nil end
      p = q
    end
    local given = reply_changes.given(p, CHANGE_KEYS, by_name)
    for name, v in pairs(p) do
      local kname = not PROPOSAL_KEYS[name] and reply_changes.knob_name(name, by_name)
      if kname and by_name[kname] then given[kname] = v
      elseif not PROPOSAL_KEYS[name] then ignored[#ignored + 1] = "key '" .. tostring(name) .. "'" end
    end
    local names = {}
    for name in pairs(given) do names[#names + 1] = tostring(name) end
    table.sort(names)
    for _, name in ipairs(names) do
      local v = given[name]
      local k = by_name[name]
      if not k then ignored[#ignored + 1] = "knob '" .. name .. "'"
      elseif v ~= json.null then
        local c, err = M.coerce(k, v)
        if c == nil then why = why or err else changes[name] = c end
      end
    end
    local edit, edit_why = edit_of(p)
    if edit and edit.ref then
      -- ("Same patch as proposal 1."): that proposal's edit, when it had one
      local n = edit.ref == "previous" and i - 1 or edit.ref
      local earlier = math.type(n) == "integer" and n >= 1 and n < i
      local src = earlier and edits[n]
      if not earlier then src = nil end
      if src then
        edit = src
        notes[#notes + 1] = { index = i, note = string.format("the edit is proposal %d's, as the reply says", n) }
      elseif src == false then
        edit = nil  -- (the same as a proposal without an edit: none)
      elseif math.type(n) == "integer" and n >= i and n <= #props then
        edit, edit_why = nil, string.format("its edit refers to proposal %d, which comes after it (kopt reads the " ..
          "proposals in order: write the edit in the first one that uses it)", n)
      else
        edit, edit_why = nil, string.format("its edit refers to %s, which has no edit kopt read",
          edit.ref == "previous" and "the proposal before it" or ("proposal " .. tostring(edit.ref)))
      end
    end
    edits[i] = edit or (not edit_why and false) or nil
    if reply_edit.points_elsewhere(edit) then
      -- (a diff first: one that touches the signature holds __global__ too)
      local diff = reply_edit.diff_beside(reply_text)
      local beside = not diff and reply_edit.kernel_beside(reply_text)
      if diff then
        edit = { text = diff }
        notes[#notes + 1] = { index = i, note = "the edit is the diff the reply wrote beside its JSON" }
      elseif beside then
        edit = { kind = "source", text = beside }
        notes[#notes + 1] = { index = i, note = "the edit is the kernel the reply wrote beside its JSON" }
      end
    end
    if edit_why then why = why or edit_why end
    if edit and not view.edits then why = why or "code edits are off" end
    if not why and next(changes) == nil and not edit then why = "changes nothing" end
    if #ignored > 0 then
      table.sort(ignored)
      notes[#notes + 1] = { index = i, note = "ignored unknown " .. table.concat(ignored, ", ") }
    end
    if why then
      rejected[#rejected + 1] = { index = i, why = why }
    else
      local label = type(p.method) == "string" and cut(p.method, 200) or nil
      local method = label and (is_method[label] and label or relabel.canonical(label)) or "other"
      local reason = str(p.reason) or str(p.rationale) or str(p.explanation)
      moves[#moves + 1] = { changes = changes, edit = edit, patch = edit and edit.text or nil, method = method,
                            label = label ~= method and label or nil, expert = expert_name, reason = reason and cut(reason, 300) or nil, prior = 1 / i }
    end
  end
  return moves, rejected, notes
end

---------------------------------------------------------------------------
-- Helpers for heuristics (kopt.expert_helpers): pos, step, knobs_in,
-- combine, finish, as X.pos and so on.
local helpers = require("kopt.expert_helpers")
M.pos, M.step, M.knobs_in, M.combine, M.finish = helpers.pos, helpers.step, helpers.knobs_in, helpers.combine,
  helpers.finish

-- Feedback for a failed edit and the repair turn (kopt.repair).
local repair = require("kopt.repair")
M.trim_log, M.feedback_of = repair.trim_log, repair.feedback_of
M.REPAIRABLE, M.repair_messages = repair.REPAIRABLE, repair.repair_messages

-- A note for the log, the first three times it is said and then at 10,
-- 100, ... times (numbers in it do not make it another: a missing reply
-- "#412" is the same note as "#411"), so a server that fails every turn
-- fills no log.
local function note_once(ctx, text)
  if not ctx.log then return end
  ctx.expert_notes = ctx.expert_notes or {}
  local key = text:gsub("%d+", "#")
  local n = (ctx.expert_notes[key] or 0) + 1
  ctx.expert_notes[key] = n
  if n <= 3 then
    ctx:log("%s", text)
  elseif tostring(n):match("^10+$") then
    ctx:log("%s (said %d times)", text, n)
  end
end

-- The knobs kopt defines ahead of the source (not those of "define": false).
local function defined_knobs(ctx)
  local out = {}
  for _, k in ipairs(ctx.spec and ctx.spec.knobs or ctx.space.knobs) do
    if k.define ~= false then out[#out + 1] = k.name end
  end
  return out
end
M.defined_knobs = defined_knobs

-- Applies an edit move to the first base source it fits (bases: a list,
-- nils skipped) and sets mv.patch to the whole difference from the spec's
-- kernel, after the device-code-only check. Returns true, or false and why.
local function take_edit(ctx, mv, spec_src, bases, entry)
  local names = {}
  for i, k in ipairs(ctx.space.knobs) do names[i] = k.name end
  local err
  for i = 1, 2 do
    local base = bases[i]
    if base then
      local new, aerr, note = patch_mod.apply_edit(base, mv.edit or mv.patch, { entry = entry })
      if new and note then note_once(ctx, note) end  -- (on failure the third value is the edit's kind)
      if new and patch_mod.only_knob_defaults(base, new, defined_knobs(ctx)) then
        mv.edit = nil
        return false, "the edit changes only knob defaults inside their #ifndef guards, which the knobs' defines " ..
                      "always override: propose the knob's value in \"changes\" instead"
      end
      if new and not patch_mod.same_code(base, new) then
        local allowed, perr = patch_mod.check_kernel_only(patch_mod.diff(base, new), { knobs = names, base = base, new = new })
        if not allowed then mv.edit = nil return false, "edit rejected: " .. perr end
        mv.patch, mv.edit = patch_mod.diff(spec_src, new), nil
        return true
      end
      err = err or (new and (new == base and "the edit changes nothing" or "the edit changes only comments or " ..
        "white space") or ("edit does not apply: " .. tostring(aerr)))
    end
  end
  mv.edit = nil
  return false, err
end

-- A generator that asks the named experts (heuristics, or the LLM when
-- `client` is given or the context has one) about a state; opts.offline:
-- the heuristics only, whatever client the context holds. expensive = true:
-- MCGS calls it only when a node may grow.
function M.generator(list, opts)
  opts = opts or {}
  local experts = M.resolve(list or M.DEFAULT)
  local by_name = {}
  for _, e in ipairs(experts) do by_name[e.name] = e end
  local gen = { name = "experts", expensive = true }
  function gen.propose(ctx, state)
    -- Edits are on where a candidate's code can be measured (a spec and a
    -- GPU backend), as in the experts strategy. A state carries its code as
    -- `patch`, the whole difference from the spec's kernel: an edit is
    -- applied to the state's source and becomes the child's whole patch, and
    -- a knob move keeps the state's patch, so children of an edit may edit
    -- again.
    local spec_src = ctx.spec and ctx.spec.kernel and ctx.spec.kernel.source
    local edits = spec_src ~= nil and opts.edits ~= false and ctx.backend_name ~= "replay"
    local source = spec_src
    if edits and state.patch then source = patch_mod.apply(spec_src, state.patch) end
    if not source then edits = false end
    local view = M.view(ctx, state, { n = opts.n or 3, history = opts.history, edits = edits, source = source })
    local moves = {}
    local client = not opts.offline and (opts.client or ctx.llm) or nil
    local answers = M.ask_all(experts, view, ctx.rng, client,
                              { tools = client and M.tool_options(ctx, state, { source = source, history = opts.history,
                                                                               rounds = opts.tool_rounds }) })
    for _, a in ipairs(answers) do
      -- what the expert's reply lost, as the experts strategy says it
      if a.err then note_once(ctx, string.format("expert %s fell back to its heuristic: %s", a.expert, a.err)) end
      for _, r in ipairs(a.rejected or {}) do
        if r.index > 0 then
          note_once(ctx, string.format("expert %s: proposal %d rejected: %s", a.expert, r.index, r.why))
        end
      end
      for _, mv in ipairs(a.moves) do
        local is_edit = mv.edit or mv.patch
        local ok, err = true
        if is_edit then
          ok, err = take_edit(ctx, mv, spec_src, { source }, view.entry)
          if not ok then note_once(ctx, string.format("expert move %s/%s dropped: %s", a.expert, mv.method, err)) end
          -- an LLM edit keeps its conversation, for a repair turn if it fails
          if ok and a.source == "llm" and a.messages and a.content then
            mv.chain = { expert = a.expert, messages = a.messages, content = a.content, attempt = 0,
                         method = mv.method, source = source, view = view }
          end
        else
          mv.patch = state.patch
        end
        if ok then moves[#moves + 1] = mv end
      end
    end
    return moves
  end

  -- A repair turn: the chain's expert hears what happened to its edit
  -- (feedback) and may answer with a fixed one, applied to the source it was
  -- shown (or, failing that, to its own broken version). Returns the fixed
  -- moves (each with the chain, its attempt counted) and a note for the log.
  function gen.repair(ctx, chain, feedback, failed_patch)
    local client = not opts.offline and (opts.client or ctx.llm) or nil
    if not client then return {}, "no LLM" end
    local spec_src = ctx.spec.kernel.source
    local failed_source = failed_patch and patch_mod.apply(spec_src, failed_patch)
    local e = by_name[chain.expert]
    local msgs = M.repair_messages(chain, feedback)
    chain.attempt, chain.messages = chain.attempt + 1, msgs
    local r = client:chat_many({ { tag = chain.expert .. "#repair", messages = msgs, schema = M.schema(chain.view),
                                   temperature = e.temperature } })[1]
    if not r.ok then return {}, string.format("reply failed: %s: %s", tostring(r.kind), tostring(r.err)) end
    chain.content = r.content
    local moves, rejected = e.parse(r.value, chain.view, r.content)
    moves = moves or {}
    local notes = {}
    for _, rj in ipairs(rejected or {}) do notes[#notes + 1] = string.format("proposal %d rejected: %s", rj.index, rj.why) end
    for _, mv in ipairs(moves) do
      if mv.edit or mv.patch then
        local ok, err = take_edit(ctx, mv, spec_src, { chain.source, failed_source }, chain.view.entry)
        if ok then
          mv.expert, mv.method, mv.chain, mv.repair = chain.expert, chain.method or mv.method, chain, chain.attempt
          return { mv }, "a fixed edit"
        end
        notes[#notes + 1] = err
      end
    end
    if #notes == 0 then notes[1] = "no edit in the reply" end
    return {}, table.concat(notes, "; ")
  end
  return gen
end

-- The tool loop's settings for a question about `state` (kopt.tools):
-- rounds from opts.rounds, else the strategy's `tool_rounds` option, else
-- kopt.tools.DEFAULT_ROUNDS; the strategy's `tools` option (a .lua file of
-- extra tools) is loaded once; tool calls go to the strategy's log (trace.md).
-- opts: source (the state's kernel source), history, cache.
local tool_files = {}
function M.tool_options(ctx, state, opts)
  opts = opts or {}
  local o = ctx.options or {}
  local file = o.tools
  if type(file) == "string" and file ~= "" and not tool_files[file] then
    local added, err = tools.load_file(file)
    if not added then errors.usage("--opt tools: %s", err) end
    tool_files[file] = true
  end
  ctx.tool_cache = ctx.tool_cache or {}
  local rounds = tonumber(opts.rounds or o.tool_rounds) or tools.DEFAULT_ROUNDS
  return {
    rounds = rounds,
    env = tool_env.env(ctx, state, { source = opts.source, history = opts.history, cache = ctx.tool_cache }),
    on_tool = function(req, call, answer, ok)
      if not ctx.log then return end
      local args = call["function"].arguments
      args = (args == "" or args == "{}") and "" or cut(args:gsub("%s+", " "), 80)
      ctx:log("tool %s(%s) by %s: %s", call["function"].name, args, tostring(req.tag),
              ok and (cut(answer:match("^[^\n]*"), 120) .. string.format(" [%d chars]", #answer))
                 or cut(answer, 160))
    end,
    note = function(msg) if ctx.log then ctx:log("%s", msg) end end,
  }
end

-- Asks every expert about one view: one parallel LLM batch when a client is
-- given, the heuristics otherwise and for any expert whose reply failed.
-- Returns { {expert=, moves=, source="llm"|"heuristic", err=, rejected=}, ... }.
-- opts.deadline_s: the LLM batch's overall deadline. opts.relabel = "llm":
-- the replies' method labels O does not know yet go to the LLM in one more
-- call (kopt.relabel), which teaches O before the proposals are parsed.
function M.ask_all(experts, view, rng, client, opts)
  local out = {}
  if client then
    local reqs = {}
    local schema = M.schema(view)
    local tl = opts and opts.tools
    local replies
    if tl and tl.rounds > 0 then
      -- tool calls (kopt.tools): each expert may look at the kernel first;
      -- a server without tools gets the overview in the prompt instead
      local offered = tool_env.offered(tl.env)
      local tview = setmetatable({ tools = not client.tools_off and offered or nil }, { __index = view })
      local inline_view
      local function inline()
        if not inline_view then
          local text = tl.env.spec and tool_env.overview_text(tl.env)
          inline_view = setmetatable({ tool_overview = text or nil }, { __index = view })
        end
        return inline_view
      end
      for i, e in ipairs(experts) do
        reqs[i] = { tag = e.name, messages = e.prompt(client.tools_off and inline() or tview), schema = schema,
                    temperature = e.temperature, env = tl.env,
                    inline = function() return e.prompt(inline()) end }
      end
      replies = tools.converse(client, reqs, { rounds = tl.rounds, names = offered, on_tool = tl.on_tool,
                                               note = tl.note, deadline_s = opts.deadline_s })
      for i, r in ipairs(replies) do if r.messages then reqs[i].messages = r.messages end end
    else
      for i, e in ipairs(experts) do
        reqs[i] = { tag = e.name, messages = e.prompt(view), schema = schema, temperature = e.temperature }
      end
      replies = client:chat_many(reqs, opts)
    end
    if opts and opts.relabel == "llm" then
      local labels = {}
      for _, r in ipairs(replies) do
        local props = r.ok and proposals_of(r.value)
        for _, p in ipairs(type(props) == "table" and props or {}) do
          if type(p) == "table" and type(p.method) == "string" then labels[#labels + 1] = cut(p.method, 200) end
        end
      end
      if #labels > 0 then relabel.shared():map(labels, client) end
    end
    for i, e in ipairs(experts) do
      local r = replies[i]
      if r.ok then
        local moves, rejected, notes = e.parse(r.value, view, r.content)
        -- (a custom expert's parse may return its moves alone)
        moves, rejected, notes = moves or {}, rejected or {}, notes or {}
        out[i] = { expert = e.name, moves = M.finish(moves, e.name), source = "llm", rejected = rejected,
                   notes = notes, analysis = type(r.value) == "table" and r.value.analysis or nil,
                   messages = reqs[i].messages, content = r.content, usage = r.usage,
                   tool_calls = r.tool_calls_made }
        -- a reply that is not a list of proposals ("see [1]", an object of
        -- other keys) is a failed reply: the heuristic answers this turn
        local whole = rejected[1] and rejected[1].index == 0 and rejected[1].why
        if #moves == 0 and whole then
          out[i].source, out[i].err = "heuristic", "parse: " .. whole
          -- (counted with the client's failures: the summary's "failed")
          if client and client.usage then client.usage.unusable = (client.usage.unusable or 0) + 1 end
        end
      else
        out[i] = { expert = e.name, source = "heuristic",
                   err = string.format("%s: %s", tostring(r.kind), tostring(r.err)) }
      end
    end
  end
  for i, e in ipairs(experts) do
    if not out[i] or out[i].source == "heuristic" then
      local ok, moves = pcall(e.heuristic, view, rng)
      out[i] = out[i] or { expert = e.name, source = "heuristic" }
      if ok then
        local kept, rejected = helpers.check_moves(moves, view)
        out[i].moves = M.finish(kept, e.name)
        if #rejected > 0 then out[i].rejected = rejected end
      else
        out[i].moves = {}
        out[i].err = (out[i].err and (out[i].err .. "; ") or "") .. "heuristic failed: " .. tostring(moves)
      end
    end
  end
  return out
end

return M
