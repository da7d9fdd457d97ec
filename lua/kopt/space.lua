-- The search space: knobs with allowed values, minus the configs that break a
-- constraint. Two kinds share one interface:
--   space.new{knobs=, constraints=, scope=}  constraints checked as soon as the
--                                            knobs they read are fixed
--   space.listed{knobs=, configs=}           an explicit set (a recorded space)
-- Interface: knobs, key(c), describe(c), is_valid(c), sample(rng), enumerate(),
-- size(), size_raw(), neighbours(c, "adjacent"|"hamming"), default().
local bounds = require("kopt.space_bounds")
local expr = require("kopt.expr")
local json = require("kopt.json")

local M = {}
local Space = {}
Space.__index = Space

-- Enumeration is refused above this many raw points; sampling never enumerates
-- above it.
M.ENUMERATE_LIMIT = 5e7
-- Space:sample lists a rarely valid space when a walk of at most
-- SAMPLE_BOUNDED_STEPS steps (knob values tried and constraint bounds
-- evaluated, each a step: about a second; 26 flags summing to 2 take a few
-- thousand) finds at most SAMPLE_LIST_LIMIT configs.
M.SAMPLE_BOUNDED_STEPS = 2e5
M.SAMPLE_LIST_LIMIT = 1e5

-- An integral float is the integer it equals (128.0 is 128: Lua tables
-- already treat them as one key, and knob values from JSON are normalised),
-- so a strategy's `x / 2` finds the same state as `x // 2`.
local function format_value(v)
  if math.type(v) == "float" then
    local i = math.tointeger(v)
    if i then return tostring(i) end
    return string.format("%.17g", v)
  end
  if type(v) == "string" and v:find("[,\\]") then
    -- keys join values with ',': a value holding one is escaped, so "a,b"
    -- then "c" and "a" then "b,c" stay two configs
    return (v:gsub("[,\\]", "\\%0"))
  end
  return tostring(v)
end

local function init_common(self, knobs)
  self.knobs = knobs
  self.index = {}
  -- by knob position, for the loops run per config (key, is_valid): the
  -- names, the allowed values' positions and their formatted values
  self.names, self.positions, self.formatted = {}, {}, {}
  -- (the raw product in floats: 16 knobs of 16 values is 2^64, which an
  -- integer product wraps to 0, and every "small enough to enumerate" test
  -- then passed; an integer again where it is exact)
  local raw = 1.0
  for i, k in ipairs(knobs) do
    raw = raw * #k.values
    local pos, fmt = {}, {}
    for j, v in ipairs(k.values) do pos[v], fmt[v] = j, format_value(v) end
    self.index[k.name] = { i = i, pos = pos }
    self.names[i], self.formatted[i] = k.name, fmt
  end
  self.raw = raw <= 2 ^ 53 and math.tointeger(raw) or raw
  -- (index's, which a later knob of the same name would have replaced)
  for i, name in ipairs(self.names) do self.positions[i] = self.index[name].pos end
end

-- knobs: { {name=, values=}, ... }; constraints: compiled expressions
-- (kopt.expr) or strings; scope: table of other names (problem sizes, device).
-- on_error(err, config): called when a constraint raises as is_valid checks
-- config; it raises (a spec's error, in one sentence) or returns what
-- is_valid returns. By default the error propagates as it is.
function M.new(opts)
  local self = setmetatable({}, Space)
  init_common(self, opts.knobs)
  self.on_error = opts.on_error
  local base = {}
  for k, v in pairs(expr.helpers) do base[k] = v end
  for k, v in pairs(opts.scope or {}) do base[k] = v end
  self.values = setmetatable({}, { __index = base })
  -- Each constraint is checked at the depth of the last knob it reads.
  self.checks_at = {}
  for d = 0, #self.knobs do self.checks_at[d] = {} end
  self.constraints = {}
  for i, c in ipairs(opts.constraints or {}) do
    if type(c) == "string" then c = assert(expr.compile(c, string.format("constraints[%d]", i))) end
    local depth = 0
    for _, n in ipairs(c.names) do
      local ix = self.index[n]
      if ix and ix.i > depth then depth = ix.i end
    end
    local check = { expr = c, fn = c:bind(self.values) }
    self.constraints[#self.constraints + 1] = check
    table.insert(self.checks_at[depth], check)
  end
  return self
end

function M.listed(opts)
  local self = setmetatable({}, Space)
  init_common(self, opts.knobs)
  self.list = {}
  self.members = {}
  for _, c in ipairs(opts.configs) do
    local k = self:key(c)
    if not self.members[k] then
      self.members[k] = true
      self.list[#self.list + 1] = c
    end
  end
  return self
end

function Space:key(config)
  if type(config) ~= "table" then error("key(config): expected a config table, got " .. type(config), 2) end
  local parts, names, formatted = {}, self.names, self.formatted
  for i = 1, #names do
    local v = config[names[i]]
    parts[i] = formatted[i][v] or format_value(v)
  end
  return table.concat(parts, ",")
end

-- A value as describe() shows it: as tostring gives it, unless that
-- names another number (tostring keeps 14 digits: 0.1 and
-- 0.10000000000000002 would read as one value).
local function shown(v)
  local s = tostring(v)
  if math.type(v) ~= "float" or tonumber(s) == v or v ~= v then return s end
  for digits = 15, 16 do
    local exact = string.format("%." .. digits .. "g", v)
    if tonumber(exact) == v then return exact end
  end
  return string.format("%.17g", v)
end

-- "NAME=value NAME=value ..." in knob order, for summaries, traces and
-- reports (the values as tostring gives them where that is exact; key() is
-- the canonical form).
function Space:describe(config)
  if type(config) ~= "table" then error("space:describe(config): expected a config table, got " .. type(config), 2) end
  local parts = {}
  for i, k in ipairs(self.knobs) do parts[i] = k.name .. "=" .. shown(config[k.name]) end
  return table.concat(parts, " ")
end

function Space:size_raw() return self.raw end

-- A constraint that gave neither true nor false (a number, a string, nil:
-- "BS <= 512 or BS % 64" is a number past 512, which Lua takes as true):
-- a spec error, raised wherever the value is met, not only on the
-- configurations checked before the run.
local function not_boolean(check, res)
  error(string.format("%s: expression '%s' gave %s (%s), expected true or false", check.expr.label or "constraint",
                      check.expr.text, tostring(res), type(res) == "number" and "a number" or
                        type(res) == "string" and "a string" or type(res)), 0)
end

-- Returns true, or false and the reason. A constraint that raises (a number
-- used as a condition, a division by zero) is a spec error wherever it is
-- met, as in walk(), not an invalid config: its error propagates (through
-- on_error), so a run over a space too large to walk whole stops on it
-- rather than dropping the configs it is met on.
function Space:is_valid(config)
  if type(config) ~= "table" then return false, "not a table" end
  local names, positions = self.names, self.positions
  for i = 1, #names do
    local name = names[i]
    local v = config[name]
    if v == nil then return false, "missing knob " .. name end
    if not positions[i][v] then
      return false, string.format("%s=%s is not an allowed value", name, tostring(v))
    end
  end
  if self.members then
    if self.members[self:key(config)] then return true end
    return false, "not in the recorded space"
  end
  local values, constraints = self.values, self.constraints
  for i = 1, #names do values[names[i]] = config[names[i]] end
  for ci = 1, #constraints do
    local check = constraints[ci]
    local ok, res = pcall(check.fn)
    if ok and res ~= true and res ~= false then ok, res = pcall(not_boolean, check, res) end
    if not ok then
      if self.on_error then return self.on_error(res, config) end
      error(res, 0)
    end
    if res == false then return false, string.format("constraint '%s' does not hold", check.expr.text) end
  end
  return true
end

-- For each depth d, the constraints not yet decided once knobs 1..d are
-- fixed that kopt.space_bounds can follow, and a lookup of names at that
-- depth: a fixed knob's value, an open knob's range, a size.
local function bounds_at(self)
  local index, knobs, values = self.index, self.knobs, self.values
  local hull = {}
  for i, k in ipairs(knobs) do
    local lo, hi, kind = nil, nil, nil
    for _, v in ipairs(k.values) do
      local tv = type(v)
      if kind == nil then kind = tv elseif kind ~= tv then kind = "mixed" end
      if tv == "number" and v == v then
        lo = (lo == nil or v < lo) and v or lo
        hi = (hi == nil or v > hi) and v or hi
      end
    end
    hull[i] = kind == "number" and { lo, hi } or kind == "boolean" and { false, true } or nil
  end
  local depth = 0
  local function lookup(name)
    local ix = index[name]
    if ix then
      if ix.i <= depth then return values[name] end
      local h = hull[ix.i]
      if h then return h[1], h[2] end
      return nil
    end
    local v = values[name]
    if type(v) == "number" or type(v) == "boolean" then return v end
    return nil
  end
  -- (a constraint is looked at again only where a knob it reads is fixed:
  -- elsewhere its bounds are those that let the walk come here)
  local pending = {}
  for d = 0, #knobs do pending[d] = {} end
  for dd = 1, #knobs do
    for _, check in ipairs(self.checks_at[dd]) do
      check.can_hold = check.can_hold == nil and (bounds.compile(check.expr) or false) or check.can_hold
      if check.can_hold then
        for _, name in ipairs(check.expr.names) do
          local ix = index[name]
          if ix and ix.i < dd then table.insert(pending[ix.i], check) end
        end
      end
    end
  end
  return pending, lookup, function(d) depth = d end
end

-- Depth-first walk over knob values, calling visit(config) on each valid
-- config; a constraint prunes its subtree as soon as its knobs are fixed
-- (with `bounded`, also as soon as its value over the open knobs' ranges
-- is certainly false: kopt.space_bounds, for constraints that read many
-- knobs). Constraint errors propagate (the caller turns them into user
-- errors). max_steps: stop after trying this many knob values (a walk of a
-- huge space whose constraints prune nothing would not end); returns true
-- when it stopped for that reason.
function Space:walk(visit, max_steps, bounded)
  if self.list then
    -- a recorded space: its configs, in the recording's order
    for _, c in ipairs(self.list) do
      local x = {}
      for k, v in pairs(c) do x[k] = v end
      if visit(x) == false then return end
    end
    return
  end
  local knobs, values, checks_at = self.knobs, self.values, self.checks_at
  local n = #knobs
  for _, check in ipairs(checks_at[0]) do
    local res = check.fn()
    if res ~= true then
      if res ~= false then not_boolean(check, res) end
      return
    end
  end
  local pending, lookup, set_depth
  if bounded then pending, lookup, set_depth = bounds_at(self) end
  local stop, steps, cut = false, 0, false
  local function rec(d)
    if d > n then
      local c = {}
      for i = 1, n do local name = knobs[i].name c[name] = values[name] end
      if visit(c) == false then stop = true end
      return
    end
    local name, checks = knobs[d].name, checks_at[d]
    for _, v in ipairs(knobs[d].values) do
      steps = steps + 1
      if max_steps and steps > max_steps then stop, cut = true, true return end
      values[name] = v
      local ok = true
      for i = 1, #checks do
        local res = checks[i].fn()
        if res ~= true then
          if res ~= false then not_boolean(checks[i], res) end
          ok = false
          break
        end
      end
      if ok and pending and #pending[d] > 0 then
        set_depth(d)
        local open = pending[d]
        -- (each bound costs what many plain steps do, and counts as one)
        steps = steps + #open
        for i = 1, #open do
          if not open[i].can_hold(lookup) then ok = false break end
        end
      end
      if ok then rec(d + 1) end
      if stop then return end
    end
  end
  rec(1)
  return cut
end

local function copy_config(c)
  local out = {}
  for k, v in pairs(c) do out[k] = v end
  return out
end

-- Every valid config, in walk order: a fresh list of fresh tables, so a
-- strategy may pop from it or edit a config without changing the space.
function Space:enumerate()
  local list = self.list or self.list_cache
  if not list then
    if self.raw > M.ENUMERATE_LIMIT then
      error(string.format("the space has %.3g raw points: too many to enumerate (limit %.3g)",
                          self.raw, M.ENUMERATE_LIMIT), 0)
    end
    list = {}
    self:walk(function(c) list[#list + 1] = c end)
    self.list_cache = list
  end
  local out = {}
  for i, c in ipairs(list) do out[i] = copy_config(c) end
  return out
end

-- JSON of a config with the knobs in space order (Lua's table order varies
-- between processes; a snapshot must not). Each knob's '"NAME":value' is
-- encoded once per value (MCGS encodes every measured state).
function Space:json(config)
  local names, frags = self.json_names, self.json_frags
  if not names then
    names, frags = {}, {}
    for i, k in ipairs(self.knobs) do names[i], frags[i] = json.encode(k.name) .. ":", {} end
    self.json_names, self.json_frags = names, frags
  end
  local parts, knobs = {}, self.knobs
  for i = 1, #knobs do
    local k = knobs[i]
    local v = config[k.name]
    local f = frags[i][v]
    if not f then
      f = names[i] .. json.encode(v)
      if v ~= nil and v == v then frags[i][v] = f end  -- (nil and NaN cannot be keys)
    end
    parts[i] = f
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- A scan of the space in key order (deterministic, whatever order a
-- recording lists it in), for the configs a search still lacks once random
-- samples keep finding measured ones: returns next(free) -> the next config
-- for which free(config, key) is true, or nil when none is left. Nil when
-- the space is too large to list (more than max raw points, 10^6 by
-- default; a recorded space is a list, so it always has a scanner).
function Space:scanner(max)
  if not self.list and self.raw > (max or 1e6) then return nil end
  local list = self:enumerate()
  local keys = {}
  for _, c in ipairs(list) do keys[c] = self:key(c) end
  table.sort(list, function(a, b) return keys[a] < keys[b] end)
  local at = 1
  return function(free)
    while at <= #list do
      local c = list[at]
      at = at + 1
      if free(c, keys[c]) then return c end
    end
    return nil
  end
end

function Space:size()
  if self.list then return #self.list end
  if not self.list_cache then self:enumerate() end
  return #self.list_cache
end

local function random_raw(self, rng)
  local c = {}
  for _, k in ipairs(self.knobs) do c[k.name] = k.values[rng:random(1, #k.values)] end
  return c
end

-- A uniformly random valid config, or nil when the space is empty. Rejection
-- sampling over the raw space; when that accepts too rarely and the space is
-- small enough, the valid set is enumerated once and sampled directly.
function Space:sample(rng)
  if type(rng) ~= "table" or not rng.random then
    error("space:sample(rng): expected a generator such as ctx.rng, got " .. type(rng), 2)
  end
  local list = self.list or self.list_cache
  -- (a copy: the list is the space's own, and a strategy may edit its sample)
  if list then return #list > 0 and copy_config(list[rng:random(1, #list)]) or nil end
  local tries = 0
  while tries < 2000 do
    tries = tries + 1
    local c = random_raw(self, rng)
    if self:is_valid(c) then return c end
  end
  if self.raw <= 2e6 then
    self:enumerate()
    return self:sample(rng)
  end
  -- A large raw space whose valid configs are rare (products of knobs held
  -- to a value: BX * BY == 256 over eight knobs of 128 values leaves 420 of
  -- 1.7e7; 26 flags whose sum is 2, 325 of 6.7e7) but few: the walk, pruned
  -- by the constraints and by their bounds over the knobs still open, lists
  -- them in milliseconds, where each rejected sample cost a second and a nil
  -- ended the strategies that read it as an exhausted space. Tried once.
  if not self.walk_tried then
    self.walk_tried = true
    local found, over = {}, false
    local cut = self:walk(function(c)
      found[#found + 1] = c
      if #found > M.SAMPLE_LIST_LIMIT then over = true return false end
    end, M.SAMPLE_BOUNDED_STEPS, true)
    if not cut and not over then
      self.list_cache = found
      return self:sample(rng)
    end
  end
  for _ = 1, 200000 do
    local c = random_raw(self, rng)
    if self:is_valid(c) then return c end
  end
  return nil
end

-- Valid configs that differ from `config` in one knob: by one step in that
-- knob's value list ("adjacent", the default) or by any other value ("hamming").
-- opts (hamming): hold = a knob name left as it is; span = N with rng: a knob
-- of more than 2N+1 values offers only its N nearest values and N random
-- ones, so the cost grows with the number of knobs, not their lengths.
function Space:neighbours(config, mode, opts)
  if mode ~= nil and mode ~= "adjacent" and mode ~= "hamming" then
    error(string.format("space:neighbours: mode must be \"adjacent\" (the default) or \"hamming\", got %s",
                        type(mode) == "string" and ("'" .. mode .. "'") or tostring(mode)), 2)
  end
  local out = {}
  local hold, span = opts and opts.hold, opts and opts.span
  if span ~= nil and not (math.type(span) == "integer" and span >= 1) then
    error("space:neighbours: opts.span must be a whole number >= 1, got " .. tostring(span), 2)
  end
  if span and not (type(opts.rng) == "table" and opts.rng.random) then
    error("space:neighbours: opts.span needs opts.rng (such as ctx.rng) to draw the far values", 2)
  end
  if type(config) ~= "table" then
    error("space:neighbours: expected a config (a table of knob values), got " .. type(config), 2)
  end
  for _, k in ipairs(self.knobs) do
    if config[k.name] == nil then
      error(string.format("space:neighbours: the config has no value for knob '%s'%s", k.name,
                          type(config.config) == "table" and " (a result was passed: its .config is the config)" or ""), 2)
    end
    local pos = self.index[k.name].pos[config[k.name]]
    local candidates = {}
    if k.name == hold then
      candidates = {}  -- (held: none of its values)
    elseif mode == "hamming" and span and pos and #k.values > 2 * span + 1 then
      local seen = { [pos] = true }
      local function add(j) if not seen[j] then seen[j] = true candidates[#candidates + 1] = j end end
      for j = math.max(1, pos - span // 2), math.min(#k.values, pos + span // 2) do add(j) end
      for _ = 1, span do add(opts.rng:random(1, #k.values)) end
    elseif mode == "hamming" then
      for j = 1, #k.values do if j ~= pos then candidates[#candidates + 1] = j end end
    else
      if pos and pos > 1 then candidates[#candidates + 1] = pos - 1 end
      if pos and pos < #k.values then candidates[#candidates + 1] = pos + 1 end
    end
    for _, j in ipairs(candidates) do
      local c = {}
      for name, v in pairs(config) do c[name] = v end
      c[k.name] = k.values[j]
      if self:is_valid(c) then out[#out + 1] = c end
    end
  end
  return out
end

-- The knobs' declared defaults when they form a valid config, else nil.
function Space:default()
  local c = {}
  for _, k in ipairs(self.knobs) do
    if k.default == nil then return nil end
    c[k.name] = k.default
  end
  return self:is_valid(c) and c or nil
end

-- The default config, else the first valid one in walk order; nil when no
-- config satisfies the constraints.
function Space:first()
  local c = self:default()
  if not c then self:walk(function(x) c = x return false end) end
  return c
end

-- base changed by text, "K=V,K=V" (commas or spaces): each K a knob, each V
-- one of its values (numbers compared as numbers). Returns the valid config,
-- or nil and the reason.
function Space:with(base, text)
  if type(base) ~= "table" then error("space:with(config, text): expected a config table, got " .. type(base), 2) end
  if type(text) ~= "string" then
    error("space:with(config, text): expected a text such as \"BLOCK=128 UNROLL=4\", got " .. type(text), 2)
  end
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  -- Items start at "NAME=" (at the start, or after a comma or a space), so
  -- a value may hold spaces ("DTYPE=long long") or be empty ("QUAL="); a
  -- value runs to the next item.
  local starts = {}
  local pos = 1
  while true do
    local a, b, name = text:find("([%a_][%w_]*)=", pos)
    if not a then break end
    local before = a == 1 and "" or text:sub(a - 1, a - 1)
    if before == "" or before:match("[,%s]") then
      starts[#starts + 1] = { at = a, name = name, value_at = b + 1 }
    end
    pos = b + 1
  end
  local items = {}
  for j, st in ipairs(starts) do
    local stop = starts[j + 1] and starts[j + 1].at - 1 or #text
    items[j] = { st.name, (text:sub(st.value_at, stop):gsub("^%s+", ""):gsub("[,%s]+$", "")) }
  end
  local stray = text:sub(1, starts[1] and starts[1].at - 1 or #text):gsub("[,%s]", "")
  if stray ~= "" then
    local name = stray:match("^([%w_]+)=")
    if name then return nil, string.format("%s is not a knob", name) end
    return nil, string.format("expected K=V pairs, got '%s'", stray)
  end
  local given = {}
  for _, item in ipairs(items) do
    local name, value = item[1], item[2]
    local knob = self.index[name] and self.knobs[self.index[name].i]
    if not knob then return nil, string.format("%s is not a knob", name) end
    if given[name] then return nil, string.format("%s is given twice (%s and %s)", name, given[name], value) end
    given[name] = value
    local found
    for _, v in ipairs(knob.values) do
      if tostring(v) == value or (type(v) == "number" and tonumber(value) == v) then found = v break end
    end
    if found == nil then
      local vs = {}
      for j, v in ipairs(knob.values) do vs[j] = tostring(v) end
      return nil, string.format("%s=%s is not one of the knob's values (%s)", name, value, table.concat(vs, ", "))
    end
    c[name] = found
  end
  local ok, why = self:is_valid(c)
  if not ok then return nil, why end
  return c
end

M.format_value = format_value
return M
