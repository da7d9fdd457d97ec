-- Method labels, canonicalized. Proposals (experts, LLM replies, rule moves)
-- may name their method however they like ("Increase BLOCK_K to 64",
-- "tile-k up", "tile_k_up"); relabel maps each onto the canonical set O, the
-- one vocabulary transitions and priors are counted in.
--
-- O starts from SEED below: the experts' names (kopt.experts.METHODS) are the
-- canonical names, and the rule moves' names (kopt.moves.rules: tile_k_up,
-- warps_down, toggle_padding, ...) are aliases of them. Labels that match
-- nothing become new methods of O, and O persists across runs in a file
-- (M.path(): $KOPT_METHODS, else $XDG_CACHE_HOME/kopt/methods.json, else
-- ~/.cache/kopt/methods.json; KOPT_METHODS=off keeps it in memory only).
--
-- The offline mapping is deterministic (same O, same label, same answer):
--   1. a rule-move name (snake_case "<family>_up|_down|_next|_prev|_set",
--      "toggle_<family>") maps by its family and direction;
--   2. the label is normalized: camelCase split, lower case, separators to
--      spaces, phrases rewritten (PHRASES), numbers and STOP words dropped,
--      plurals and -ing/-ed stripped, words mapped through SYNONYMS;
--   3. an exact match of the normalized label with a method's name or alias;
--   4. else the best token overlap with a name or alias,
--      score = (jaccard + containment of the alias in the label) / 2,
--      0 when their directions (up/down) disagree; >= M.THRESHOLD wins
--      (ties: the earlier method of O);
--   5. else a new method named after the normalized label.
-- With an LLM client, M.map asks it once for the whole batch (it sees O and
-- the labels) and validates the answer; any failure falls back to offline.
local json = require("kopt.json")
local sys = require("kopt.sys")

local M = {}

M.THRESHOLD = 0.5
M.MAX_NEW = 200 -- cap on methods a file may add to the seed

-- The canonical seed: { name, aliases } in a fixed order (ties go to the
-- earlier). Aliases are free text, normalized like labels.
M.SEED = {
  { "tile_up", { "tile up", "bigger tile", "tile_m_up", "tile_n_up", "tile_k_up" } },
  { "tile_down", { "tile down", "smaller tile", "tile_m_down", "tile_n_down", "tile_k_down" } },
  { "more_threads", { "thread up", "block_up", "block_x_up", "block_y_up", "block_z_up" } },
  { "fewer_threads", { "thread down", "block_down", "block_x_down", "block_y_down", "block_z_down" } },
  { "more_warps", { "warp up", "warps_up" } },
  { "fewer_warps", { "warp down", "warps_down" } },
  { "deeper_pipeline", { "pipeline up", "stages_up", "more pipeline" } },
  { "shallower_pipeline", { "pipeline down", "stages_down" } },
  { "wider_vectors", { "vector up", "vector_up" } },
  { "narrower_vectors", { "vector down", "vector_down" } },
  { "more_unroll", { "unroll up", "unroll_up" } },
  { "less_unroll", { "unroll down", "unroll_down" } },
  { "toggle_feature", { "toggle", "switch on", "flip flag" } },
  { "tensor_core_align", { "align tensorcore", "tensorcore tile align", "align tile multiple" } },
  { "conservative", { "safe", "revert", "back off" } },
  { "rebalance", { "rebalance", "balance work", "redistribute work" } },
  { "vectorize_loads", { "vector load", "vector", "vector store", "wide load" } },
  { "coalesce_accesses", { "coalesce", "coalesce load", "contiguous load" } },
  { "shared_memory_tiling", { "smem tile", "stage smem", "cache smem", "smem" } },
  { "register_blocking", { "register tile", "register", "thread tile", "outer product" } },
  { "reduce_bank_conflicts", { "bank", "swizzle", "pad smem" } },
  { "double_buffering", { "doublebuffer", "ping pong" } },
  { "async_copy", { "async", "async load", "toggle_async", "async_up", "async_down" } },
  { "warp_shuffle_reduction", { "shuffle", "shuffle reduction", "warp reduction" } },
  { "loop_unrolling", { "unroll", "unroll loop" } },
  { "strength_reduction", { "strength", "multiply instead divide", "shift instead divide", "precompute index" } },
  { "fuse_loops", { "fuse", "fuse loop", "merge loop" } },
  { "use_tensor_cores", { "tensorcore" } },
  { "predication", { "predicate", "branchless", "divergence" } },
  { "launch_bounds", { "launchbounds", "maxrregcount", "limit register" } },
  -- rule moves the experts had no name for
  { "more_splits", { "split up", "split_up" } },
  { "fewer_splits", { "split down", "split_down" } },
  { "switch_choice", { "layout", "next choice", "previous choice" } },
  { "set_value", { "set value", "jump", "neighbour", "neighbor" } },
  { "step_up", { "step up" } },
  { "step_down", { "step down" } },
  -- what strategies call their samples (experts' init, explore, restarts)
  { "sample", { "random sample", "initial sample", "explore", "init", "restart", "random" } },
  { "other", { "move" } },
}

-- Where a search starts (the parent of its first moves): kept as they are,
-- never methods of O.
M.ROOTS = { start = true, root = true, ["?"] = true }

-- Rule-move families -> canonical method per direction (kopt.moves.rules).
local RULE_FAMILY = {
  tile = { "tile_up", "tile_down" }, block = { "more_threads", "fewer_threads" },
  warps = { "more_warps", "fewer_warps" }, stages = { "deeper_pipeline", "shallower_pipeline" },
  vector = { "wider_vectors", "narrower_vectors" }, unroll = { "more_unroll", "less_unroll" },
  split = { "more_splits", "fewer_splits" }, async = { "async_copy", "async_copy" },
  shmem = { "switch_choice", "switch_choice" }, cache = { "switch_choice", "switch_choice" },
  padding = { "switch_choice", "switch_choice" }, layout = { "switch_choice", "switch_choice" },
}

-- Phrases rewritten before tokenizing (Lua patterns over " lower text ").
M.PHRASES = {
  { " block ?size ?[xyz]? ", " thread " }, { " threads? per block ", " thread " },
  { " block ?dim ", " thread " }, { " threadblock ", " thread " },
  { " block[_ ]?[mnk] ", " tile " }, { " tile[_ ]?[mnk] ", " tile " }, { " b[mnk] ", " tile " },
  { " cp async ", " async " }, { " cp%.async ", " async " }, { " tma ", " async " },
  { " memcpy async ", " async " }, { " ldgsts ", " async " },
  { " bank conflicts? ", " bank " }, { " tensor cores? ", " tensorcore " },
  { " w?g?mma ", " tensorcore " }, { " hmma ", " tensorcore " },
  { " launch bounds ", " launchbounds " }, { " double buffer%a* ", " doublebuffer " },
  { " ping pong buffer%a* ", " doublebuffer " }, { " multi stage ", " pipeline " },
  { " warp shuffles? ", " shuffle " }, { " shfl %a+ ", " shuffle " }, { " shfl ", " shuffle " },
  { " split k ", " split " }, { " shared mem%a* ", " smem " }, { " shared ", " smem " },
  { " num stages ", " pipeline " }, { " strength reduc%a* ", " strength " },
  { " float[248] ", " vector " }, { " half2 ", " vector " }, { " int[24] ", " vector " },
  { " 128 ?bit ", " vector " }, { " ld global v[248] ", " vector " },
}

M.STOP = {}
for w in ([[a an the to of for via with by and or in on into from at per use using enable apply add try
  instead so that it its is be all each some kernel value size factor level count number num better
  improve optimize optimise bit avoid kill remove eliminate fix get make do each across inner outer our
  x y z m n k wise within sync]]):gmatch("%S+") do M.STOP[w] = true end

M.SYNONYMS = {
  increase = "up", raise = "up", bigger = "up", larger = "up", grow = "up", more = "up", higher = "up",
  doubl = "up", enlarge = "up", wider = "up", deeper = "up", up = "up", bump = "up", max = "up",
  decrease = "down", reduce = "down", smaller = "down", lower = "down", shrink = "down", fewer = "down",
  less = "down", halve = "down", shallower = "down", narrower = "down", cut = "down", down = "down",
  min = "down", drop = "down", double = "up",
  til = "tile", tile = "tile", tiling = "tile", blocking = "tile",
  thread = "thread", warp = "warp",
  stage = "pipeline", pipelin = "pipeline", pipeline = "pipeline", prefetch = "pipeline",
  vector = "vector", vectoriz = "vector", vectorize = "vector", vectorization = "vector", vec = "vector",
  wide = "vector", unroll = "unroll", unrolled = "unroll", pragma = "unroll",
  coalesc = "coalesce", coalesce = "coalesce", uncoalesc = "coalesce", uncoalesced = "coalesce",
  indic = "index", indice = "index", indices = "index", copi = "copy", copies = "copy", contiguou = "contiguous",
  smem = "smem", shmem = "smem", lds = "smem", staging = "stage",
  bank = "bank", swizzl = "swizzle", swizzle = "swizzle", pad = "pad", padd = "pad",
  fusion = "fuse", fus = "fuse", fuse = "fuse", merg = "merge", merge = "merge", jam = "fuse",
  predicat = "predicate", predicate = "predicate", guard = "predicate", branch = "divergence",
  divergent = "divergence", registers = "register", reg = "register", regs = "register",
  rf = "register", maxrregcount = "maxrregcount", async = "async", asynchronou = "async",
  shuffl = "shuffle", shuffle = "shuffle", shfl = "shuffle", tensorcore = "tensorcore",
  load = "load", read = "load", access = "load", fetch = "load", store = "store", write = "store",
  loop = "loop", loops = "loop", divid = "divide", division = "divide", div = "divide",
  multiplication = "multiply", mul = "multiply", shift = "shift", precomput = "precompute",
  toggl = "toggle", toggle = "toggle", flip = "toggle", enabl = "toggle", disabl = "toggle",
  layout = "layout", transpos = "layout", rasteriz = "layout",
}

local function stem(w)
  if #w > 4 then
    for _, suf in ipairs({ "ing", "ed", "es", "s" }) do
      -- (a word ending in "ss" is no plural: cross, pass, miss)
      if w:sub(-#suf) == suf and #w - #suf >= 3 and not (suf == "s" and w:sub(-2) == "ss") then
        local s = w:sub(1, -#suf - 1)
        if M.SYNONYMS[s] then return s end
        if suf == "s" then return s end
        if suf == "es" and M.SYNONYMS[w:sub(1, -2)] then return w:sub(1, -2) end
        return s
      end
    end
  elseif #w == 4 and w:sub(-1) == "s" and w:sub(-2) ~= "ss" then
    return w:sub(1, -2)
  end
  return w
end

-- The normalized tokens of a label, in order, without duplicates.
function M.tokens(label)
  local s = tostring(label or ""):gsub("(%l)(%u)", "%1 %2"):lower()
  s = " " .. s:gsub("[^%w%.]+", " "):gsub("%.(%D)", " %1"):gsub("%.$", "") .. " "
  for _, p in ipairs(M.PHRASES) do
    local prev
    repeat
      prev = s
      s = s:gsub(p[1], p[2])
    until s == prev
  end
  s = s:gsub("%.", " ")
  local out, seen = {}, {}
  for w in s:gmatch("%S+") do
    if not w:match("^%d+$") and not M.STOP[w] then
      local t = M.SYNONYMS[w] or M.SYNONYMS[stem(w)] or stem(w)
      if not M.STOP[t] and not seen[t] then
        seen[t] = true
        out[#out + 1] = t
      end
    end
  end
  return out
end

function M.normalize(label) return table.concat(M.tokens(label), " ") end

-- A rule-move name's canonical method, or nil when the label is no such name.
function M.rule_method(label)
  if type(label) ~= "string" or not label:match("^[a-z][a-z0-9_]*$") then return nil end
  local fam = label:match("^toggle_(.+)$")
  if fam then return fam == "async" and "async_copy" or "toggle_feature" end
  local stem_, dir = label:match("^(.-)_(%a+)$")
  if not stem_ or not (dir == "up" or dir == "down" or dir == "next" or dir == "prev" or dir == "set") then
    return nil
  end
  if dir == "set" then return "set_value" end
  local base = stem_:match("^(tile)") or stem_:match("^(block)") or stem_:gsub("_[xyz]$", "")
  local pair = RULE_FAMILY[base]
  if dir == "next" or dir == "prev" then return pair and pair[1] == "switch_choice" and pair[1] or "switch_choice" end
  if pair then return dir == "up" and pair[1] or pair[2] end
  return dir == "up" and "step_up" or "step_down"
end

---------------------------------------------------------------------------
-- The canonical set O

local Set = {}
Set.__index = Set

local function index_method(self, m)
  m.keys = {}
  local function key(text)
    local toks = M.tokens(text)
    if #toks == 0 then return end
    local norm = table.concat(toks, " ")
    if self.exact[norm] == nil then self.exact[norm] = m.name end
    m.keys[#m.keys + 1] = toks
  end
  key(m.name)
  for _, a in ipairs(m.aliases) do key(a) end
end

-- A set holding the seed; opts.path (false: none) where it persists.
function M.new(opts)
  opts = opts or {}
  local self = setmetatable({ methods = {}, by_name = {}, exact = {}, added = {} }, Set)
  for _, s in ipairs(M.SEED) do self:insert(s[1], s[2], true) end
  self.path = opts.path
  if self.path == nil then self.path = M.path() end
  if self.path then self:load() end
  return self
end

function Set:insert(name, aliases, seed)
  if self.by_name[name] then return self.by_name[name] end
  local m = { name = name, aliases = {}, seed = seed or nil, learned = not seed and {} or nil }
  for _, a in ipairs(aliases or {}) do
    m.aliases[#m.aliases + 1] = a
    if m.learned then m.learned[#m.learned + 1] = a end
  end
  self.methods[#self.methods + 1] = m
  self.by_name[name] = m
  index_method(self, m)
  return m
end

-- Adds `alias` to the method `name` (learned, so it persists); true when new.
function Set:add_alias(name, alias)
  local m = self.by_name[name]
  if not m or type(alias) ~= "string" then return false end
  for _, a in ipairs(m.aliases) do if a == alias then return false end end
  m.aliases[#m.aliases + 1] = alias
  m.learned = m.learned or {}
  m.learned[#m.learned + 1] = alias
  index_method(self, m)
  -- a taught alias overrides an earlier offline guess for the same words
  local norm = M.normalize(alias)
  if norm ~= "" then self.exact[norm] = name end
  return true
end

function Set:names()
  local out = {}
  for i, m in ipairs(self.methods) do out[i] = m.name end
  return out
end

-- Generic words count less in the overlap than the ones that name a
-- technique ("swizzle smem" is about the swizzle, not about smem).
M.WEAK = {}
for w in ("smem tile load store global loop up down register warp thread copy product switch"):gmatch("%S+") do
  M.WEAK[w] = 0.4
end

-- Weighted overlap of label tokens lt with alias tokens at. A label's
-- direction is its first up/down word ("smaller tiles for more CTAs").
local function score(lt, at)
  local function w(t) return M.WEAK[t] or 1 end
  local lset, lw, aw, inter = {}, 0, 0, 0
  local ldir, adir
  for _, t in ipairs(lt) do
    lset[t] = true
    lw = lw + w(t)
    if not ldir and (t == "up" or t == "down") then ldir = t end
  end
  for _, t in ipairs(at) do
    aw = aw + w(t)
    if lset[t] then inter = inter + w(t) end
    if not adir and (t == "up" or t == "down") then adir = t end
  end
  if inter == 0 or (ldir and adir and ldir ~= adir) then return 0 end
  return (inter / (lw + aw - inter) + inter / aw) / 2
end

-- A new method's name from its words: letters, digits and underscores, at
-- most 40 characters, starting with a letter (what load accepts). Words that
-- start with a digit ("2CTA cluster launch") get "m_" in front; "m" is a stop
-- word, so the name still normalizes to the label's words.
function M.method_name(words)
  local name = words:lower():gsub("[^%w_]", "")
  if not name:match("^%a") then name = "m_" .. name end
  return (name:sub(1, 40))
end

-- The canonical method of one label, offline; adds a new method to O when
-- nothing matches (and saves O). Returns name, how ("exact", "rule",
-- "overlap", "new", "empty") and the score of an overlap match.
function Set:canonical(label)
  if type(label) ~= "string" or not label:match("%S") then return "other", "empty" end
  if M.ROOTS[label] then return label, "root" end
  if self.by_name[label] then return label, "exact" end
  local rm = M.rule_method(label)
  if rm then return rm, "rule" end
  local toks = M.tokens(label)
  if #toks == 0 then return "other", "empty" end
  local norm = table.concat(toks, " ")
  if self.exact[norm] then return self.exact[norm], "exact" end
  local best, best_s = nil, 0
  for _, m in ipairs(self.methods) do
    for _, k in ipairs(m.keys) do
      local s = score(toks, k)
      if s > best_s then best, best_s = m.name, s end
    end
  end
  if best and best_s >= M.THRESHOLD then return best, "overlap", best_s end
  local name = M.method_name(table.concat(toks, "_", 1, math.min(#toks, 4)))
  if self.by_name[name] then return name, "exact" end
  self:insert(name, { label })
  self.added[#self.added + 1] = name
  self:save()
  return name, "new"
end

-- Maps a list of labels; returns { [label] = method } and the per-label
-- detail { label=, method=, how=, score= } in order.
function Set:relabel(labels)
  local map, detail = {}, {}
  for _, l in ipairs(labels) do
    local m, how, s = self:canonical(l)
    map[l] = m
    detail[#detail + 1] = { label = l, method = m, how = how, score = s }
  end
  return map, detail
end

---------------------------------------------------------------------------
-- Persistence: { "version": 1, "methods": [{ "name": ..., "aliases": [...] }] }
-- holds the methods beyond the seed, in the order they were added, and the
-- aliases a seed method learned (from the LLM path), under its name.

-- Off for a run given --no-db: O is then kept in memory only, like the
-- experience database, so nothing is read or written outside the run folder.
local persist = true
function M.set_persistent(on) persist = on and true or false end

-- Where O lives, following the CUBIN cache's choice (kopt.compile.cache_dir).
function M.path(getenv)
  if not persist then return false end
  getenv = getenv or os.getenv
  local p = getenv("KOPT_METHODS")
  if p then
    if p == "" or p == "off" or p == "none" then return false end
    return p
  end
  local xdg = getenv("XDG_CACHE_HOME")
  if xdg and xdg ~= "" then return xdg .. "/kopt/methods.json" end
  local home = getenv("HOME")
  if home and home ~= "" then return home .. "/.cache/kopt/methods.json" end
  return false
end

local NAME_PAT = "^[a-z][a-z0-9_]*$"

-- Reads the file's methods into O; a missing or malformed file adds nothing.
function Set:load()
  if not self.path then return end
  local v = json.read_file(self.path)
  if type(v) ~= "table" or type(v.methods) ~= "table" then return end
  local n = 0
  for _, m in ipairs(v.methods) do
    if n >= M.MAX_NEW then break end
    -- (a name that starts with a digit was written by an older build: it
    -- loads under the name this one gives the same words)
    local name = type(m) == "table" and type(m.name) == "string" and #m.name <= 40 and m.name
    if name and name:match("^%d[a-z0-9_]*$") then name = M.method_name(name) end
    if name and name:match(NAME_PAT) then
      local aliases = {}
      for _, a in ipairs(type(m.aliases) == "table" and m.aliases or {}) do
        if type(a) == "string" and #a <= 200 then aliases[#aliases + 1] = a end
      end
      if self.by_name[name] then
        for _, a in ipairs(aliases) do self:add_alias(name, a) end
      else
        self:insert(name, aliases)
      end
      n = n + 1
    end
  end
end

-- Writes the methods beyond the seed, merged with what another run may have
-- written meanwhile, atomically. A file that cannot be written is dropped
-- with a false return: O is a cache, never a reason to stop a search.
function Set:save()
  if not self.path then return true end
  self:load()
  local out = {}
  for _, m in ipairs(self.methods) do
    if m.learned and #m.learned > 0 then out[#out + 1] = { name = m.name, aliases = m.learned } end
  end
  local dir = self.path:match("^(.*)/[^/]*$")
  if dir and dir ~= "" then pcall(sys.mkdir_p, dir) end
  return (sys.write_atomic(self.path, json.pretty({ version = 1, methods = out }))) and true or false
end

---------------------------------------------------------------------------
-- The LLM path: one call that sees O and the new labels.

M.LLM_SCHEMA = {
  type = "object", additionalProperties = false, required = { "mapping" },
  properties = { mapping = { type = "array", items = {
    type = "object", additionalProperties = false, required = { "label", "method", "new" },
    properties = { label = { type = "string" }, method = { type = "string" }, new = { type = "boolean" } } } } },
}

function M.llm_request(set, labels)
  local lines = {}
  for _, m in ipairs(set.methods) do
    lines[#lines + 1] = string.format("- %s (also: %s)", m.name, table.concat(m.aliases, "; "))
  end
  return {
    tag = "relabel", temperature = 0,
    schema = { name = "relabel", schema = M.LLM_SCHEMA },
    messages = {
      { role = "system", content = "You canonicalize the names of GPU kernel optimization methods. Map each new " ..
        "label onto the existing method that means the same transformation; only when none does, give a new " ..
        "snake_case name and set new=true. Answer JSON: {\"mapping\": [{\"label\", \"method\", \"new\"}]}." },
      { role = "user", content = "Existing methods:\n" .. table.concat(lines, "\n") .. "\n\nNew labels:\n" ..
        json.encode(labels) },
    },
  }
end

-- Checks a reply's value: every label mapped once, onto a method of O or a
-- new snake_case name. Returns { [label] = {method=, new=} } or nil, why.
function M.check_llm(set, labels, value)
  if type(value) ~= "table" or type(value.mapping) ~= "table" then return nil, "no mapping" end
  local want, got = {}, {}
  for _, l in ipairs(labels) do want[l] = true end
  for _, e in ipairs(value.mapping) do
    if type(e) ~= "table" or type(e.label) ~= "string" or type(e.method) ~= "string" then
      return nil, "malformed entry"
    end
    if not want[e.label] then return nil, "unknown label " .. e.label end
    if got[e.label] then return nil, "label mapped twice: " .. e.label end
    if not set.by_name[e.method] and not (#e.method <= 40 and e.method:match(NAME_PAT)) then
      return nil, "bad method name " .. e.method
    end
    got[e.label] = { method = e.method, new = not set.by_name[e.method] }
  end
  for _, l in ipairs(labels) do if not got[l] then return nil, "label not mapped: " .. l end end
  return got
end

-- Maps labels with one LLM call when a client is given, else (or on any
-- failure) offline. Returns map, detail, and the reason the LLM answer was
-- not used (nil when it was, or when there was no client).
function Set:map(labels, client)
  if not client then
    local map, detail = self:relabel(labels)
    return map, detail
  end
  local todo, seen = {}, {}
  for _, l in ipairs(labels) do
    if type(l) == "string" and not self.by_name[l] and not M.rule_method(l) and not seen[l] then
      seen[l] = true
      todo[#todo + 1] = l
    end
  end
  if #todo == 0 then
    local map, detail = self:relabel(labels)
    return map, detail
  end
  local ok, replies = pcall(client.chat_many, client, { M.llm_request(self, todo) })
  local r = ok and type(replies) == "table" and replies[1] or nil
  local got, why
  if not r then why = "no reply"
  elseif not r.ok then why = tostring(r.err or r.kind or "failed")
  else got, why = M.check_llm(self, todo, r.value) end
  if not got then
    local map, detail = self:relabel(labels)
    return map, detail, why
  end
  local map, detail, added = {}, {}, false
  for _, l in ipairs(labels) do
    local g = got[l]
    if g then
      if g.new then
        self:insert(g.method, { l })
        self.added[#self.added + 1] = g.method
        added = true
      end
      -- the label becomes an alias: later runs map it offline the same way
      if not g.new and self:add_alias(g.method, l) then added = true end
      map[l] = g.method
      detail[#detail + 1] = { label = l, method = g.method, how = g.new and "llm_new" or "llm" }
    else
      local m, how, s = self:canonical(l)
      map[l] = m
      detail[#detail + 1] = { label = l, method = m, how = how, score = s }
    end
  end
  if added then self:save() end
  return map, detail
end

-- The process's O, loaded on first use from M.path().
local shared
function M.shared()
  if not shared then shared = M.new() end
  return shared
end

-- Shortcut: the canonical method of one label in the process's O.
function M.canonical(label) return (M.shared():canonical(label)) end

return M
