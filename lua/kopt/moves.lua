-- Move generators: who proposes the next states of a search.
--
-- A generator takes the strategy context and a state and returns proposed
-- moves. A state is
--     { config = {KNOB = value, ...}, key = <state key>, result = <result table or nil> }
-- and a move is
--     { changes = {KNOB = value, ...},   -- knobs to change (the rest is kept)
--       patch = nil,                      -- optional unified diff of the kernel source
--       method = "tile_m_up",             -- a name from a small vocabulary; statistics are per method
--       prior = 0.2,                      -- relative confidence (> 0); normalised per state
--       expert = nil }                    -- optional: who proposed it
-- A generator is either a function(ctx, state) -> moves, or a table
--     { name = "...", propose = function(ctx, state) -> moves, expensive = false }
-- `expensive` generators (an LLM expert, say) are called by MCGS only when
-- progressive widening lets a node grow, instead of once per expansion.
-- propose may return a second value, true when the move tables it returned
-- are shared between calls and never change (the rule moves): what
-- checking a one-knob move derives from its table is then kept with it.
--
-- The registry holds generators by name; `rules` (lua/kopt/moves/rules.lua)
-- is built in. Users add their own with moves.register(name, gen) or by
-- loading a Lua file that returns a generator: moves.load("my_moves.lua")
-- (strategies take `--opt moves=rules,my_moves.lua`).
local errors = require("kopt.errors")
local space_mod = require("kopt.space")
local strategy_mod = require("kopt.strategy")
local sys = require("kopt.sys")
local patch_mod = require("kopt.patch")

local next, tonumber = next, tonumber
local graph_mod = require("kopt.graph")
local one_knob_moves, new_lists, normalise = graph_mod.one_knob_moves, graph_mod.new_lists, graph_mod.normalise

local M = {}

local registry = {}

local function normalise_gen(name, gen)
  if type(gen) == "function" then gen = { name = name, propose = gen } end
  if type(gen) ~= "table" or type(gen.propose) ~= "function" then
    error(string.format("move generator '%s' must be a function or a table with propose(ctx, state)",
                        tostring(name)), 3)
  end
  gen.name = gen.name or name
  return gen
end

function M.register(name, gen)
  registry[name] = normalise_gen(name, gen)
  return registry[name]
end

-- Loads a generator from a Lua file (returning a function or a table).
-- Returns the generator, or nil and a message.
function M.load(path)
  -- (in a sandbox of its own, as a strategy file: a global it sets cannot
  -- replace kopt's, os.exit raises an error instead of ending kopt)
  local chunk, err = loadfile(path, "t", strategy_mod.env(path, path:match("^(.*)/[^/]*$") or ".", "move generator"))
  if not chunk then return nil, err end
  local ok, gen = pcall(chunk)
  if not ok then return nil, string.format("%s failed to load: %s", path, tostring(gen)) end
  local ok2, g = pcall(normalise_gen, path:match("([^/]+)%.lua$") or path, gen)
  if not ok2 then return nil, string.format("%s: %s", path, tostring(g):gsub("^.-: ", "")) end
  g.file = path  -- (a user's file: its proposals are checked, kopt.moves.checked)
  return g
end

-- A user generator's proposals, checked: a return that is not a list of
-- moves, a move that is not a table, a move with neither changes nor a
-- patch, changes that are not a table, a patch that is not a string are
-- dropped, with one note per generator naming its
-- file and the first fault; priors become finite floats in [1e-3, 1e6] (a
-- NaN or infinite prior used to turn every prior of the state into NaN);
-- methods become short one-line strings. The built-in generators' moves
-- are trusted as they are (the hot path).
local MAX_METHOD = 80
local function note_once(ctx, gen, kind, msg, consequence)
  gen.noted = gen.noted or {}
  if gen.noted[kind] then return end
  gen.noted[kind] = true
  ctx:log("move generator %s: %s", gen.file, msg)
  if not ctx.quiet_generators then
    io.stderr:write(string.format("kopt: move generator %s: %s (%s; noted once)\n", gen.file, msg, consequence))
  end
end

function M.checked(ctx, gen, moves)
  if moves == nil then return {} end
  if type(moves) ~= "table" then
    note_once(ctx, gen, "return", string.format("returned %s: expected a list of moves " ..
              "({ { changes = { KNOB = value }, ... }, ... })", type(moves)), "no moves from it then")
    return {}
  end
  local out = {}
  for i = 1, #moves do
    local mv, why = moves[i], nil
    if type(mv) ~= "table" then
      why = string.format("move %d is %s, expected a table", i, type(mv))
    elseif mv.changes == nil and mv.patch == nil then
      -- (not a move that changes nothing: a move without its changes, such
      -- as a whole config given as `config =`, which no move has)
      why = string.format("move %d has no changes (expected { changes = { KNOB = value }, ... }%s)", i,
                          mv.config ~= nil and ": config is no field of a move, give the knobs it changes" or "")
    elseif mv.changes ~= nil and type(mv.changes) ~= "table" then
      why = string.format("move %d: changes is %s, expected a table of KNOB = value", i, type(mv.changes))
    elseif mv.patch ~= nil and type(mv.patch) ~= "string" then
      why = string.format("move %d: patch is %s, expected a unified diff (a string)", i, type(mv.patch))
    end
    if why then
      note_once(ctx, gen, "shape", why, "such moves are dropped")
    else
      local prior = tonumber(mv.prior)
      if mv.prior ~= nil and (prior == nil or prior ~= prior) then
        note_once(ctx, gen, "prior", string.format("move %d: prior %s is not a number", i, tostring(mv.prior)),
                  "1 is used")
        prior = 1
      end
      prior = math.min(math.max((prior or 1) + 0.0, 1e-3), 1e6)
      local method = mv.method
      if method ~= nil and type(method) ~= "string" then method = type(method) end
      if type(method) == "string" and (#method > MAX_METHOD or method:find("[\r\n]")) then
        method = method:gsub("[\r\n]+", " "):sub(1, MAX_METHOD)
      end
      local c = {}
      for k, v in pairs(mv) do c[k] = v end
      c.prior, c.method = prior, method
      out[#out + 1] = c
    end
  end
  return out
end

-- Forgets the generators loaded from files, so the next run loads them
-- again as it loads its strategy file: a file that keeps state between
-- calls starts each run afresh (kopt compare's runs in one process, or
-- spread over jobs, make the same searches). kopt.strategy.load calls it.
function M.forget_files()
  for name, g in pairs(registry) do
    if g.file then registry[name] = nil end
  end
end

-- A generator by registry name or by file path (anything ending in .lua or
-- holding a '/'); a file is loaded once per run (M.forget_files). Returns
-- the generator or nil + msg.
function M.get(name)
  if registry[name] then return registry[name] end
  if name:find("/", 1, true) or name:match("%.lua$") then
    local g, err = M.load(name)
    if not g then return nil, err end
    registry[name] = g
    return g
  end
  local ok, mod = pcall(require, "kopt.moves." .. name)
  if ok then return M.register(name, mod) end
  local names, seen = {}, {}
  for k in pairs(registry) do names[#names + 1], seen[k] = k, true end
  -- (the built-in generators too, loaded or not)
  for _, f in ipairs(package.builtin and package.builtin.list and package.builtin.list("lua/kopt/moves/") or {}) do
    local n = f:match("([%w_]+)%.lua$")
    if n and not seen[n] then names[#names + 1], seen[n] = n, true end
  end
  table.sort(names)
  return nil, string.format("unknown move generator '%s' (known: %s; or a path to a .lua file)", name,
                            #names > 0 and table.concat(names, ", ") or "rules")
end

-- Whether a word of a --opt moves= list names a generator: a registered or
-- built-in one, or a Lua file that exists.
local function generator_word(word)
  if registry[word] then return true end
  if word:find("/", 1, true) or word:match("%.lua$") then
    local f = io.open(word, "r")
    if f then f:close() end
    return f ~= nil
  end
  return word:match("^[%a_][%w_]*$") ~= nil and (pcall(require, "kopt.moves." .. word))
end

-- The generators one comma-separated item names: a variant of kopt compare
-- cannot hold a comma ("mcgs@moves=rules experts"), so an item is split at
-- spaces when each of its words names a generator; otherwise it is one name
-- or path (a path may hold a space: "my dir/moves.lua").
local function item_names(item)
  if not item:find("%s") then return { item } end
  local f = io.open(item, "r")
  if f then
    f:close()
    return { item }
  end
  local words = {}
  for word in item:gmatch("%S+") do
    if not generator_word(word) then return { item } end
    words[#words + 1] = word
  end
  return words
end

-- Generators from a comma-separated list ("rules,examples/my_moves.lua",
-- "rules experts"). Raises a usage error naming the bad entry.
function M.resolve(list)
  if type(list) ~= "string" then
    error("kopt.moves.resolve: expected a comma-separated string of generator names (such as ctx.options.moves), got " ..
          type(list), 2)
  end
  local out = {}
  -- (spaces around an item go)
  for item in list:gmatch("[^,]+") do
    item = item:match("^%s*(.-)%s*$")
    for _, name in ipairs(item ~= "" and item_names(item) or {}) do
      local g, err = M.get(name)
      if not g then errors.usage("%s", err) end
      if type(g.check) == "function" then g.check() end
      out[#out + 1] = g
    end
  end
  if #out == 0 then
    errors.usage("no move generator given (an empty list: --opt moves=rules, say, or a generator file's path)")
  end
  return out
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
M.copy = copy

-- Per-space tables that make checking a proposal cheap: the formatted value
-- and the action id of every allowed (knob, value), a copier that builds a
-- config table in one allocation, and whether validity needs more than
-- allowed values (constraints). Built on first use; a space's knobs never
-- change.
local fast_of = setmetatable({}, { __mode = "k" })
local function fast(space)
  local f = fast_of[space]
  if f then return f end
  -- derived: what graph.one_knob_moves derived from each shared move table
  -- (kept as long as the table lives)
  f = { fmt = {}, act = {}, code = {}, codes = 0, n = #space.knobs, plain_keys = true,
        derived = setmetatable({}, { __mode = "k" }) }
  local fields = {}
  local stride = 1
  for _, k in ipairs(space.knobs) do stride = math.max(stride, #k.values) end
  for i, k in ipairs(space.knobs) do
    local fm, ac, co, first = {}, {}, {}, {}
    for j, v in ipairs(k.values) do
      fm[v] = space_mod.format_value(v)
      ac[v] = k.name .. "=" .. fm[v]
      -- one code per (knob, formatted value): values that format alike
      -- lead to the same key
      first[fm[v]] = first[fm[v]] or j
      co[v] = (i - 1) * stride + first[fm[v]]
      -- a ',' inside a value would let two one-knob changes share a key
      if fm[v]:find(",", 1, true) then f.plain_keys = false end
    end
    f.fmt[i], f.act[i], f.code[i] = fm, ac, co
    f.codes = i * stride
    fields[i] = string.format("[%q] = c[%q]", k.name, k.name)
  end
  -- a table constructor sizes the table once; copying key by key into {}
  -- rehashes it at 1, 2, 4 and 8 entries
  f.shape = assert(load("local c = ...; return {" .. table.concat(fields, ", ") .. "}", "=config copy", "t", {}))
  f.unconstrained = not space.members and #(space.constraints or {}) == 0
  fast_of[space] = f
  return f
end

-- Whether a config holds nothing but knobs (the usual case: its copy is
-- then the copier's alone), remembered for the last config asked about, as
-- the moves of one state are materialised one after another.
local plain_config, plain = nil, false
local function only_knobs(space, config)
  if config ~= plain_config then
    plain_config, plain = config, true
    for k in pairs(config) do
      if not space.index[k] then plain = false break end
    end
  end
  return plain
end

-- A copy of config with changes applied (no checks): a new table.
local function changed_config(space, config, changes)
  local c = fast(space).shape(config)
  if not only_knobs(space, config) then
    for k, v in pairs(config) do
      if c[k] == nil then c[k] = v end
    end
  end
  for k, v in pairs(changes or {}) do c[k] = v end
  return c
end

M.changed_config = changed_config

-- The config a move leads to and its key, or nil when a change names an
-- unknown knob or a value the knob does not allow, or the result breaks a
-- constraint.
-- `parts` (optional) are the formatted values of `config` in knob order, so
-- the key of a one-knob change costs one format instead of one per knob.
-- `base_valid`: config is known valid, so in a space without constraints
-- the changed config (allowed values only) is valid too, unchecked.
function M.apply(space, config, move, parts, base_valid)
  local f, index = fast(space), space.index
  local fmt = f.fmt
  local changes = move.changes or {}
  local changed
  for k, v in pairs(changes) do
    local ix = index[k]
    if not ix or ix.pos[v] == nil then return nil end
    if parts then
      changed = changed or {}
      changed[ix.i] = fmt[ix.i][v]
    end
  end
  local c = changed_config(space, config, changes)
  local key
  if parts then
    local p = {}
    for i = 1, #parts do p[i] = changed and changed[i] or parts[i] end
    key = table.concat(p, ",")
  else
    key = space:key(c)
  end
  if space.members then
    -- a recorded space: membership is the whole check (as in is_valid)
    if not space.members[key] then return nil end
  elseif not (base_valid and f.unconstrained) and not space:is_valid(c) then
    return nil
  end
  return c, key
end

-- A canonical action id for a move: its changes in knob order, plus a
-- short hash of the patch. Two moves with the same id lead to the same state.
function M.action_id(space, move)
  local k1, v1 = next(move.changes or {})
  if k1 ~= nil and next(move.changes, k1) == nil and not move.patch then
    return k1 .. "=" .. space_mod.format_value(v1)  -- one change: the common case
  end
  local parts, act = {}, fast(space).act
  for i, k in ipairs(space.knobs) do
    local v = move.changes and move.changes[k.name]
    if v ~= nil then parts[#parts + 1] = act[i][v] or (k.name .. "=" .. space_mod.format_value(v)) end
  end
  local id = table.concat(parts, ",")
  if move.patch then id = id .. "#" .. sys.sha256(move.patch):sub(1, 12) end
  return id
end

-- The config a move of `collect` leads to (a new table each call).
function M.config_of(space, state, m)
  return m.config or changed_config(space, state.config, m.changes)
end

-- The key of a state one knob away is left[i] .. value .. right[i].
local function sides(parts)
  local n = #parts
  local left, right = { "" }, {}
  for i = 2, n do left[i] = left[i - 1] .. parts[i - 1] .. "," end
  right[n] = ""
  for i = n - 1, 1, -1 do right[i] = "," .. parts[i + 1] .. right[i + 1] end
  return left, right
end

-- At the first move that is not a one-knob change without a patch, every
-- key becomes a string, the keyless ones collected so far included: their
-- keys from the state's sides around each value. Returns the sides.
local function keys_to_strings(parts, out, by_key, n_out)
  local left, right = sides(parts)
  local keys, knob_of, value_of = out.key, out.knob, out.value
  for j = 1, n_out do
    local kj = left[knob_of[j]] .. value_of[j] .. right[knob_of[j]]
    keys[j], by_key[kj], knob_of[j], value_of[j] = kj, j, nil, nil
  end
  return left, right
end

-- The key of move j of collect_lists' lists (a string whether or not the
-- lists hold it).
function M.key_of(lists, j)
  local key = lists.key[j]
  if key then return key end
  local parts, i = lists.parts, lists.knob[j]
  local p = {}
  for k = 1, #parts do p[k] = k == i and lists.value[j] or parts[k] end
  return table.concat(p, ",")
end

-- Calls every generator on a state, drops moves that are invalid or lead
-- back to the state, and merges moves that lead to the same state (keeping
-- the method with the larger prior, summing priors). Returns the moves as
-- parallel lists, one entry per move:
--   { n = <number of moves>, key = {}, action = {}, method = {}, prior = {},
--     changes = {}, generator = {},                  -- every move has these
--     config = {}, expert = {}, patch = {}, chain = {}, repair = {},  -- with holes
--     label = {},                                    -- (a model's own name)
--     knob = {}, value = {}, parts = {...} }
-- (chain: an LLM edit's conversation, for its repair turn) in a
-- deterministic order (generator order, then proposal order), with priors
-- normalised to sum to 1. `config[j]` is set only where checking the move
-- needed it. Lists instead of a table per move: MCGS registers 50 moves per
-- state and measures few, and a table per move costs more in allocation and
-- in the collector's passes over a large heap than the rest of the check.
-- A one-knob change of a valid state in an unconstrained space has no
-- key[j] while no other kind of move came before it: knob[j] is the knob's
-- position and value[j] the formatted value, and the key is `parts` (the
-- state's formatted values) joined by ',' with part knob[j] replaced by
-- value[j] (M.key_of builds it; g:add_children builds it in C): no Lua
-- string per move, which was the largest cost left in an expansion. Such
-- moves are merged by knob and value; the first move of another kind turns
-- every key into a string, so all are merged by key from then on.
-- The lists every move has a value in (with, by how its key is kept, key
-- or knob and value), made with room for every proposal; and collect's own.
local LISTS_LAZY = { "action", "method", "prior", "changes", "generator", "knob", "value" }
local LISTS_KEYED = { "key", "action", "method", "prior", "changes", "generator" }
local SCRATCH, BY_CODE = { "best" }, { "by_code" }

-- A patched state's key suffix: the hash of its whole source, as the
-- engine keys an evaluation (so a node's key is its evaluation's, and the
-- origin.parent a result names is a state measured or in variants/); the
-- patch's own hash when it does not apply.
local function source_hash(ctx, patch)
  local spec_src = ctx.spec and ctx.spec.kernel and ctx.spec.kernel.source
  local source = spec_src and patch_mod.apply(spec_src, patch)
  return sys.sha256(source or patch):sub(1, 16)
end

-- (a strategy may pass a bare function as a generator, as SEARCH.md says:
-- wrapped once, named by its position)
local wrapped = setmetatable({}, { __mode = "k" })
local function as_generators(generators)
  local out
  for i, g in ipairs(generators) do
    if type(g) == "function" then
      out = out or table.move(generators, 1, #generators, 1, {})
      wrapped[g] = wrapped[g] or normalise_gen("generator " .. i, g)
      out[i] = wrapped[g]
    end
  end
  return out or generators
end

local function generator_error(err)
  if errors.is_interrupt(err) then return err end
  return errors.with_user_line(err)
end

function M.collect_lists(ctx, state, generators)
  generators = as_generators(generators)
  local space = ctx.space
  local f = fast(space)
  -- the state's formatted values (an allowed value's from the per-space table)
  local parts, fmt, knobs, config = {}, f.fmt, space.knobs, state.config
  for i = 1, #knobs do
    local v = config[knobs[i].name]
    parts[i] = fmt[i][v] or space_mod.format_value(v)
  end
  -- one-knob changes of a valid state are valid when the value is allowed
  -- (and, with constraints, when they hold: checked on the copy)
  local base_ok = not space.members and space:is_valid(state.config)
  local act, code_of, index, members = f.act, f.code, space.index, space.members
  local state_key = state.key
  -- (a state with a code edit: its children keep the edit, and their keys
  -- carry its source hash, so none takes the lazy path)
  local state_patch = type(state.patch) == "string" and state.patch or nil
  local lazy = base_ok and f.unconstrained and f.plain_keys and state_patch == nil
  -- whether the state's key is its parts' (not a state with a patch): a
  -- one-knob change to the same value leads back to it
  local plain_state = lazy and state_key == table.concat(parts, ",")
  local left, right
  if not lazy then left, right = sides(parts) end
  -- the state's measured result, as the generators are promised (kopt's
  -- strategies pass the state's config and key)
  if state.result == nil and state_key and ctx.result_of then state.result = ctx:result_of(state_key) end
  -- the proposals first, so that the lists are made with room for them all
  local proposals, shared, total = {}, {}, 0
  for gi, gen in ipairs(generators) do
    -- (a user's generator gets its own copy of the state's config: one that
    -- edited it in place used to change the graph's record of the state)
    local arg = state
    if gen.file then
      arg = {}
      for k, v in pairs(state) do arg[k] = v end
      arg.config = {}
      for k, v in pairs(state.config) do arg.config[k] = v end
    end
    -- (an error names the user's file and line, as the engine names a
    -- strategy's; a signal raised in the generator stops the run)
    local ok, moves, unchanging = xpcall(gen.propose, generator_error, ctx, arg)
    if not ok then
      if errors.is_interrupt(moves) then error(moves, 0) end
      local label = gen.file and gen.file ~= gen.name and (gen.name .. " (" .. gen.file .. ")") or gen.name
      ctx:log("move generator %s failed: %s", label, tostring(moves))
      -- (the first failure of each generator on stderr too: the search goes
      -- on without its moves, which a user should not learn from trace.md)
      gen.failures = (gen.failures or 0) + 1
      if gen.failures == 1 and not ctx.quiet_generators then
        io.stderr:write(string.format("kopt: move generator %s failed (the search goes on without its moves; " ..
                                      "later failures only in trace.md): %s\n", label,
                                      (tostring(moves):match("^[^\n]*"))))
      end
      moves = {}
    end
    if gen.file then moves = M.checked(ctx, gen, moves) end
    moves = moves or {}
    proposals[gi], shared[gi] = moves, unchanging == true
    if type(moves) == "table" then total = total + #moves end
  end
  local out = new_lists(total, lazy and LISTS_LAZY or LISTS_KEYED,
                        { n = 0, parts = parts, config = {}, expert = {}, patch = {}, chain = {}, repair = {},
                          label = {} })
  out.key, out.knob, out.value = out.key or {}, out.knob or {}, out.value or {}
  local keys, actions, methods, priors, changes_of, gens = out.key, out.action, out.method, out.prior, out.changes,
    out.generator
  local configs, experts, patches, chains, repairs = out.config, out.expert, out.patch, out.chain, out.repair
  local labels = out.label  -- (a model's own name for its move, when it is not the method's)
  local knob_of, value_of = out.knob, out.value
  local best = new_lists(total, SCRATCH).best  -- best[j]: the largest single prior merged into move j
  -- (codes are 1..f.codes: room for them all unless the space is large)
  local by_key, by_code = {}, new_lists(f.codes <= 1024 and f.codes or 0, BY_CODE).by_code
  local n_out = 0
  for gi, gen in ipairs(generators) do
    local moves = proposals[gi]
    local first = 1
    if lazy and type(moves) == "table" then
      -- the same loop in C for as long as the moves are one-knob changes
      n_out, first = one_knob_moves(out, moves, #moves, gen.name, n_out, f, index, plain_state, by_code, best,
                                    shared[gi] and f.derived or nil)
    end
    for mi = first, #moves do
      local mv = moves[mi]
      if mv == nil then break end  -- where ipairs would stop
      local changes = mv.changes or {}
      local k1, v1 = next(changes)
      local key, cfg, action, code, i
      if k1 ~= nil and next(changes, k1) == nil then
        local ix = index[k1]
        if ix and ix.pos[v1] ~= nil then
          i = ix.i
          action = act[i][v1]
          if lazy and mv.patch == nil then
            -- a key without a string: kept unless it is the state's own
            if not (plain_state and fmt[i][v1] == parts[i]) then code = code_of[i][v1] end
          else
            if lazy then lazy, left, right = false, keys_to_strings(parts, out, by_key, n_out) end
            key = left[i] .. fmt[i][v1] .. right[i]
            if members then
              if not members[key] then key = nil end
            elseif not (base_ok and f.unconstrained) then
              cfg = changed_config(space, state.config, changes)
              if not space:is_valid(cfg) then key, cfg = nil, nil end
            end
          end
        end
      elseif lazy and plain_state and mv.patch == nil then
        -- several changes, keys still lazy: a move that changes one knob in
        -- effect is that knob's move (its key, code and merges), one that
        -- changes two or more has a string key that only such moves can
        -- share, so the one-knob moves keep their lazy keys
        local n_eff, all_allowed = 0, true
        for k, v in pairs(changes) do
          local ix = index[k]
          if not ix or ix.pos[v] == nil then all_allowed = false break end
          if fmt[ix.i][v] ~= parts[ix.i] then n_eff, i, v1 = n_eff + 1, ix.i, v end
        end
        if all_allowed and n_eff == 1 then
          code = code_of[i][v1]
        elseif all_allowed and n_eff > 1 then
          cfg, key = M.apply(space, state.config, mv, parts, base_ok)
        end
      else
        if lazy then lazy, left, right = false, keys_to_strings(parts, out, by_key, n_out) end
        cfg, key = M.apply(space, state.config, mv, parts, base_ok)
      end
      -- (a move without an edit of its own, from an edited state, keeps
      -- that state's edit: a rule move tunes the edited kernel's knobs)
      local patch = mv.patch or state_patch
      if key and patch then
        key = key .. "#" .. source_hash(ctx, patch)
        action = nil
      end
      if (key and key ~= state_key) or code then
        local prior = tonumber(mv.prior) or 1
        if prior <= 0 then prior = 1e-3 end
        local j
        if code then j = by_code[code] else j = by_key[key] end
        if j then
          if prior > best[j] then
            methods[j], experts[j], best[j], labels[j] = mv.method or "move", mv.expert, prior, mv.label
          end
          priors[j] = priors[j] + prior
        else
          j = n_out + 1
          n_out = j
          actions[j], methods[j] = action or M.action_id(space, mv), mv.method or "move"
          priors[j], changes_of[j], gens[j] = prior, changes, gen.name
          if code then
            knob_of[j], value_of[j], by_code[code] = i, fmt[i][v1], j
          else
            keys[j], by_key[key] = key, j
          end
          if cfg then configs[j] = cfg end
          if mv.expert ~= nil then experts[j] = mv.expert end
          if mv.label ~= nil then labels[j] = mv.label end
          if patch ~= nil then patches[j] = patch end
          if mv.chain ~= nil then chains[j] = mv.chain end
          if mv.repair ~= nil then repairs[j] = mv.repair end
          best[j] = prior
        end
      end
    end
  end
  normalise(priors, n_out)  -- priors[j] / the sum of priors[1..n_out], summed in order
  out.n = n_out
  return out
end

-- As collect_lists, as a list of tables, one per move:
--   { key=, changes=, action=, method=, expert=, patch=, prior=, generator=,
--     chain=, repair=, config= }
-- M.config_of gives the config of any of them.
function M.collect(ctx, state, generators)
  local l = M.collect_lists(ctx, state, generators)
  local out = {}
  local left, right  -- (the keys of one-knob moves, built once per move as collect_lists did)
  for j = 1, l.n do
    local key = l.key[j]
    if not key then
      if not left then left, right = sides(l.parts) end
      key = left[l.knob[j]] .. l.value[j] .. right[l.knob[j]]
    end
    out[j] = { key = key, changes = l.changes[j], action = l.action[j], method = l.method[j],
               prior = l.prior[j], generator = l.generator[j], config = l.config[j], expert = l.expert[j],
               patch = l.patch[j], chain = l.chain[j], repair = l.repair[j], label = l.label[j] }
  end
  return out
end

-- As collect, with the config of every move filled in:
--   { config=, key=, action=, method=, expert=, patch=, prior=, generator=,
--     chain=, repair= }
function M.propose(ctx, state, generators)
  if type(state) ~= "table" or type(state.config) ~= "table" then
    error(string.format("moves.propose(ctx, state, generators): state must be { config = {...}, key = ... }, got %s",
                        type(state) == "table" and "a table with no config (a bare config?)" or type(state)), 2)
  end
  local out = M.collect(ctx, state, generators)
  for _, m in ipairs(out) do m.config = M.config_of(ctx.space, state, m) end
  return out
end

return M
