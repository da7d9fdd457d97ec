-- Experience across runs: every evaluated transition of a search (mcgs, rules,
-- experts) (from the method that produced the parent state to the method of
-- the candidate, with the speedup it gave) is appended to
-- <run_dir>/transitions.jsonl, and,
-- when the environment variable KOPT_EXPERIENCE names a file, to that file
-- too (a user-level dataset such as ~/.cache/kopt/experience.jsonl).
-- `kopt regraph` aggregates such files into method-transition statistics;
-- load_priors() turns those into prior multipliers for MCGS and rules.
--
-- A transition line:
--   {"kernel": "...", "from": "tile_m_up", "to": "warps_down", "status": "ok",
--    "speedup": 1.07, "reward": 0.31, "strategy": "mcgs", "n": 42,
--    "from_method": "tile_up", "to_method": "fewer_warps", "ok": true,
--    "source_hash": "<16 hex>", "device": "NVIDIA H200", "key": "<state key>"}
-- speedup = parent time / child time (absent when either failed).
-- from/to are the labels as the strategy wrote them; from_method/to_method
-- their canonical methods (kopt.relabel's O), the names statistics count.
-- The kernel is keyed by the spec's name and the hash of its source, never by
-- the run folder's name (lines written before had only "kernel", sometimes
-- the folder's name: `kopt regraph` reads both). "run" is the run's id (its
-- start event's run_id, kept across resumes): what a resume finds of its
-- own run in each file.
local errors = require("kopt.errors")
local json = require("kopt.json")
local relabel = require("kopt.relabel")
local sys = require("kopt.sys")

local M = {}

local Log = {}
Log.__index = Log

-- --no-db: nothing outside the run folder, so the user's dataset
-- ($KOPT_EXPERIENCE) is neither written nor learned from.
local shared = true
function M.set_persistent(on) shared = on and true or false end

-- Opens the dataset writers for a run; without a run directory and without
-- KOPT_EXPERIENCE it returns a writer that drops everything.
function M.open(ctx, strategy)
  local self = setmetatable({ files = {}, strategy = strategy }, Log)
  local paths = {}
  if ctx.run_dir then
    local ok = pcall(sys.mkdir_p, ctx.run_dir)
    if ok then
      paths[#paths + 1] = ctx.run_dir .. "/transitions.jsonl"
      self.in_run_dir = true
    end
  end
  local user = shared and os.getenv("KOPT_EXPERIENCE")
  if user and user ~= "" then
    local dir = user:match("^(.*)/[^/]*$")
    if dir then pcall(sys.mkdir_p, dir) end
    paths[#paths + 1] = user
  end
  self.paths = paths
  -- A resumed run replays its evaluations from its log, and the transitions
  -- of those were written the first time, but for one whose evaluation was
  -- on record when a kill came before its transition: what each file holds
  -- of this run is read back (self:written_to, when a replayed one comes),
  -- so that one is written now, and a run folder's file deleted since is
  -- written again without a second copy in the user's dataset.
  self.run_id, self.resumed = ctx.run_id, ctx.resumed
  self.written = {}
  local spec = ctx.spec
  local src = spec and spec.kernel and spec.kernel.source
  self.kernel = (spec and spec.name) or "?"
  self.source_hash = type(src) == "string" and sys.sha256(src):sub(1, 16) or nil
  self.device = spec and (spec.recorded_device or type(spec.device) == "table" and spec.device.name) or nil
  return self
end

-- The state keys of a transitions file's lines, as a set; nil when a line
-- has none (an older file) or the file cannot be read. With run_id, only
-- the lines of that run (a dataset many runs append to).
function M.written_keys(path, run_id)
  local kind = sys.stat(path)
  if kind and kind ~= "file" then errors.usage("cannot read %s: it is a %s, not a file", path, kind == "dir" and "directory" or "special file") end
  local f = io.open(path, "r")
  if not f then return {} end
  local keys = {}
  for line in f:lines() do
    -- (the id's text first: most lines of a dataset are other runs')
    local t = (not run_id or line:find(run_id, 1, true)) and json.decode(line)
    if type(t) == "table" and (not run_id or t.run == run_id) then
      if type(t.key) ~= "string" then f:close() return nil end
      keys[t.key] = true
    end
  end
  f:close()
  return keys
end

-- The keys of this run's transitions that the i-th file holds (read once),
-- or false when every replayed transition is to be taken as written there:
-- a file from before lines had keys, and the user's dataset of a run begun
-- before runs had ids, whose run folder's file is lost (its lines cannot be
-- told from other runs').
function Log:written_to(i)
  local w = self.written[i]
  if w == nil then
    local path = self.paths[i]
    if i == 1 and self.in_run_dir then
      w = M.written_keys(path) or false
    elseif self.run_id then
      w = M.written_keys(path, self.run_id) or false
    else
      w = self.in_run_dir and self:written_to(1) or false
      if w and sys.stat(self.paths[1]) == nil then w = false end
    end
    self.written[i] = w
  end
  return w
end

-- Appends one transition. Results answered from the engine's cache are
-- skipped: written when they were measured, except a resumed run's
-- evaluation whose transition a kill left unwritten (self.written). One
-- the experience database served is an evaluation of this run: its run
-- folder's file has its line, as a cold run's has (a warm run visits the
-- same states); the dataset has it from the run that measured it, and
-- counts each measurement once.
function Log:add(t, result)
  -- the files this transition is written to: all of them, but for one
  -- answered from the cache: only those that miss it
  local to = nil
  if result and result.cached then
    -- (a resumed evaluation the first run wrote no line for)
    local replayed = result.resumed and result.key
    to = {}
    for i in ipairs(self.paths) do
      local own = i == 1 and self.in_run_dir
      if result.served and not result.resumed then
        to[i] = own or nil
      elseif not result.served or own then
        local w = replayed and self:written_to(i)
        if w and not w[result.key] then to[i] = true end
      end
    end
    if next(to) == nil then
      -- the labels are still named, in the order the first run named them:
      -- a new label joins the method set, and what later labels map to
      -- depends on which came first (a resumed run wrote "region" where
      -- the uninterrupted one wrote "region_sweep")
      relabel.canonical(t.from)
      relabel.canonical(t.to)
      return
    end
  end
  if #self.paths == 0 then return end
  t.key = t.key or (result and result.key)
  for i in ipairs(self.paths) do
    local w = self.written[i]
    if w and t.key and (not to or to[i]) then w[t.key] = true end
  end
  t.run = t.run or self.run_id
  t.kernel = t.kernel or self.kernel
  t.source_hash = t.source_hash or self.source_hash
  t.device = t.device or self.device
  t.strategy = t.strategy or self.strategy
  t.ok = t.status == "ok"
  t.from_method = t.from_method or relabel.canonical(t.from)
  t.to_method = t.to_method or relabel.canonical(t.to)
  local line = json.encode(t) .. "\n"
  for i, p in ipairs(self.paths) do
    local f = self.files[p]
    local ok, err = true, nil
    if to and not to[i] then
      f = false  -- (this file has it)
    elseif f == nil then
      f, err = sys.open_log(p, "a")
      self.files[p] = f or false
      ok = f ~= nil
    end
    if f then ok, err = f:write(line) end
    -- the run folder's file is checked like every file there (a failed write
    -- stops the run); a user-level dataset that cannot be written is dropped
    if not ok and i == 1 and self.in_run_dir then errors.write_failed(p, err) end
    if not ok and f then
      f:close()
      self.files[p] = false
    end
  end
end

function Log:close()
  for _, f in pairs(self.files) do if f then f:close() end end
  self.files = {}
end

-- Statistics written by `kopt regraph`:
--   { version = 1, methods = { [to] = {count=, ok=, success=, mean_reward=, mean_log_speedup=} },
--     transitions = { [from] = { [to] = {...same fields...} } } }
-- load_priors(path) -> a function(from_method, to_method) -> multiplier (>0),
-- or nil + message. Statistics with few samples are shrunk towards 1. A
-- label the file has no statistics for gets those of its canonical method.
-- One method's statistics: nil when sound, else what is wrong (a count that
-- is a string crashed the run ten evaluations in; a negative one gave an
-- infinite multiplier).
local function bad_stats(s)
  if type(s) ~= "table" then return "expected an object of statistics" end
  for _, f in ipairs({ "count", "ok", "success", "mean_reward", "mean_log_speedup" }) do
    local v = s[f]
    if v ~= nil and (type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge) then
      return string.format("%s: expected a finite number, got %s", f, type(v) == "string" and ("'" .. v .. "'") or
                           (type(v) == "userdata" and "null") or tostring(v))
    end
  end
  if s.count ~= nil and s.count < 0 then return "count: expected a number of at least 0, got " .. s.count end
  if s.success ~= nil and (s.success < 0 or s.success > 1) then
    return "success: expected a fraction from 0 to 1, got " .. s.success
  end
end

function M.load_priors(path, opts)
  local stats, err = json.read_file(path)
  if not stats then return nil, err end
  if type(stats) ~= "table" or type(stats.methods) ~= "table" then
    return nil, path .. ": not a kopt regraph statistics file (no 'methods')"
  end
  local function check(tbl, where)
    for name, s in pairs(tbl) do
      local why = bad_stats(s)
      if why then return string.format("%s: %s.%s: %s", path, where, tostring(name), why) end
    end
  end
  local function check_part(part, at)
    if type(part.methods) == "table" then
      local why = check(part.methods, at .. "methods")
      if why then return why end
    end
    for from, tr in pairs(type(part.transitions) == "table" and part.transitions or {}) do
      if type(tr) ~= "table" then return string.format("%s: %stransitions.%s: expected an object", path, at, tostring(from)) end
      local why = check(tr, at .. "transitions." .. tostring(from))
      if why then return why end
    end
  end
  local why = check_part(stats, "") or (type(stats.canonical) == "table" and check_part(stats.canonical, "canonical."))
  if why then return nil, why end
  return M.priors_from(stats, opts)
end

-- The prior multiplier of statistics already read (load_priors' function).
function M.priors_from(stats, opts)
  opts = opts or {}
  local kappa = opts.kappa or 2.0
  local shrink = opts.shrink or 5
  local function mult(s)
    if type(s) ~= "table" or not s.count or s.count == 0 then return nil end
    local raw = (s.success or 0) * math.exp(kappa * math.max(-1, math.min(1, s.mean_log_speedup or 0)))
    raw = math.max(0.05, math.min(5, raw + 0.05))
    return (s.count * raw + shrink) / (s.count + shrink)
  end
  return function(from, to)
    local tr = stats.transitions and from and stats.transitions[from]
    local m = tr and mult(tr[to])
    if m then return m end
    m = mult(stats.methods[to])
    if m then return m end
    -- a label this file never saw: its canonical method's statistics
    local c = stats.canonical
    if type(c) ~= "table" or type(c.methods) ~= "table" then return 1 end
    local cto = relabel.canonical(to)
    local ctr = type(c.transitions) == "table" and from and c.transitions[relabel.canonical(from)]
    return (ctr and mult(ctr[cto])) or mult(c.methods[cto]) or 1
  end
end

---------------------------------------------------------------------------
-- Aggregation (`kopt regraph`, and MCGS's ReGraph at the start of a run)

local function new_stats() return { count = 0, ok = 0, reward_sum = 0, ls_sum = 0, ls_n = 0, up = 0, kernels = {} } end

-- (a reward or a speedup past a million is no measurement: summed, such
-- values overflowed to inf, written as null, and the priors file that
-- `kopt regraph` wrote was refused by its own loader)
local function sane(v) return type(v) == "number" and v == v and math.abs(v) <= 1e6 end

local function add(s, t)
  s.count = s.count + 1
  if t.status == "ok" then s.ok = s.ok + 1 end
  if sane(t.reward) then s.reward_sum = s.reward_sum + t.reward end
  if t.status == "ok" and sane(t.speedup) and t.speedup > 0 then
    s.ls_sum = s.ls_sum + math.log(t.speedup)
    s.ls_n = s.ls_n + 1
    if t.speedup > 1 then s.up = s.up + 1 end
  end
  if t.kernel ~= nil then s.kernels[tostring(t.kernel) .. "#" .. tostring(t.source_hash or "")] = true end
end

local function finish(s)
  local n = 0
  for _ in pairs(s.kernels) do n = n + 1 end
  return { count = s.count, ok = s.ok, success = s.count > 0 and s.ok / s.count or 0,
           mean_reward = s.count > 0 and s.reward_sum / s.count or 0,
           mean_log_speedup = s.ls_n > 0 and s.ls_sum / s.ls_n or 0,
           improved = s.ls_n > 0 and s.up / s.ls_n or 0, kernels = n }
end

local function tally(methods, trans, from, to, t)
  methods[to] = methods[to] or new_stats()
  add(methods[to], t)
  trans[from] = trans[from] or {}
  trans[from][to] = trans[from][to] or new_stats()
  add(trans[from][to], t)
end

local Agg = {}
Agg.__index = Agg

-- An aggregation in progress: add files with :read(path), then :result().
function M.aggregator()
  return setmetatable({ methods = {}, trans = {}, cmethods = {}, ctrans = {}, total = 0, sources = {} }, Agg)
end

-- Reads one transitions file (or a run directory's transitions.jsonl).
-- Returns the number of transitions read, or nil and why when the file
-- cannot be opened. A partial last line (a run killed mid-write) is skipped,
-- and so are the lines of the run skip_run (a resumed run's own).
function Agg:read(path, skip_run)
  local kind = sys.stat(path)
  if kind == "dir" then path, kind = path .. "/transitions.jsonl", sys.stat(path .. "/transitions.jsonl") end
  if kind == nil then return nil, path .. ": no such file" end
  local f = io.open(path, "r")
  if not f then return nil, path .. ": cannot be read" end
  local canon = {}
  local function c(label)
    local m = canon[label]
    if not m then m = relabel.canonical(label) canon[label] = m end
    return m
  end
  local n, lines, bad = 0, 0, 0
  for line in f:lines() do
    if line:match("%S") then
      lines = lines + 1
      local t = json.decode(line)
      -- (not a transition: a line that decodes to something else, or text
      -- that is no JSON object; a torn line of a killed run starts one)
      if (t ~= nil and (type(t) ~= "table" or type(t.to) ~= "string")) or (t == nil and not line:match("^%s*{")) then
        bad = bad + 1
      end
      if type(t) == "table" and type(t.to) == "string" and not (skip_run and t.run == skip_run) then
        local from = type(t.from) == "string" and t.from or "?"
        tally(self.methods, self.trans, from, t.to, t)
        local cfrom = type(t.from_method) == "string" and t.from_method or c(from)
        local cto = type(t.to_method) == "string" and t.to_method or c(t.to)
        tally(self.cmethods, self.ctrans, cfrom, cto, t)
        n = n + 1
      end
    end
  end
  f:close()
  -- (a file of something else: not one line a transition; one torn last
  -- line of a killed run is no reason)
  if n == 0 and bad > 0 then
    return nil, string.format("%s: not a transitions file (%d line%s, none a transition: {\"from\", \"to\", ...})", path,
                              lines, lines == 1 and "" or "s")
  end
  self.total = self.total + n
  self.sources[#self.sources + 1] = path
  return n
end

-- The statistics `kopt regraph` writes (see commands/regraph.lua).
function Agg:result()
  local function finished(ms, tr)
    local out_m, out_t = {}, {}
    for m, s in pairs(ms) do out_m[m] = finish(s) end
    for from, row in pairs(tr) do
      out_t[from] = {}
      for to, s in pairs(row) do out_t[from][to] = finish(s) end
    end
    return out_m, out_t
  end
  local res = { version = 1, sources = self.sources, transitions_read = self.total, canonical = {} }
  res.methods, res.transitions = finished(self.methods, self.trans)
  res.canonical.methods, res.canonical.transitions = finished(self.cmethods, self.ctrans)
  return res
end

-- ReGraph online: the transition graph a search uses. `stats` is what
-- aggregation gives (or a `kopt regraph` file). Returns
--   mult(from, to)     the prior multiplier of a move (priors_from)
--   followers(from)    the canonical methods that followed `from`'s
--                      canonical method and gave a speedup at least once
--                      (a set), or nil when the graph knows nothing of it
--   canonical(label)   the label's canonical method (cached)
function M.online(stats, opts)
  local canon = {}
  local function c(label)
    local m = canon[label]
    if not m then m = relabel.canonical(label) canon[label] = m end
    return m
  end
  local rows = type(stats.canonical) == "table" and stats.canonical.transitions or {}
  local follow = {}
  local function followers(from)
    local cf = c(from or "root")
    local set = follow[cf]
    if set == nil then
      set = false
      local row = rows[cf]
      if type(row) == "table" then
        for to, s in pairs(row) do
          if type(s) == "table" and (s.ok or 0) > 0 and (s.improved or 0) > 0 then
            set = set or {}
            set[to] = true
          end
        end
      end
      follow[cf] = set
    end
    return set or nil
  end
  return { mult = M.priors_from(stats, opts), followers = followers, canonical = c,
           transitions = stats.transitions_read or 0 }
end

-- The transitions a run learns from when nothing names them: the user's
-- dataset ($KOPT_EXPERIENCE, which every run of mcgs, rules and experts
-- appends to). A list of paths (empty when there is none).
function M.default_sources()
  local user = shared and os.getenv("KOPT_EXPERIENCE")
  if user and user ~= "" and sys.stat(user) == "file" then return { user } end
  return {}
end

-- The ReGraph of a search run (MCGS's `regraph` option): "auto" learns from
-- default_sources(), anything else names a transitions file, a run
-- directory or a `kopt regraph` statistics file. The statistics are kept in
-- <run dir>/regraph.json, and a resumed run reads them back from there, so
-- it searches with the graph it started with (its own transitions have
-- joined the dataset since). A resumed run whose regraph.json is lost or
-- unreadable builds it again without its own transitions (those of other
-- runs since join it), and says so. Returns M.online(...) and a line for
-- the log, or nil and that line when there is nothing to learn from;
-- raises a usage error for a named source that cannot be read.
function M.regraph_for_run(ctx, spec_value)
  local saved = ctx.run_dir and (ctx.run_dir .. "/regraph.json")
  local stats, from, lost
  if saved and sys.stat(saved) == "file" then
    stats = json.read_file(saved)
    from = saved
    if type(stats) ~= "table" or type(stats.methods) ~= "table" then
      stats, lost = nil, ctx.resumed and "cannot be read" or nil
    end
  elseif saved and ctx.resumed then
    lost = "is missing"
  end
  if type(stats) ~= "table" then
    if spec_value ~= "auto" and spec_value:match("%.json$") and sys.stat(spec_value) == "file" then
      stats = json.read_file(spec_value)
      if type(stats) ~= "table" or type(stats.methods) ~= "table" then
        errors.usage("--opt regraph: %s: not a kopt regraph statistics file (no 'methods')", spec_value)
      end
    else
      local agg = M.aggregator()
      local sources = spec_value == "auto" and M.default_sources() or { spec_value }
      for _, p in ipairs(sources) do
        local n, err = agg:read(p, ctx.resumed and ctx.run_id or nil)
        if not n and spec_value ~= "auto" then errors.usage("--opt regraph: %s", err) end
      end
      stats = agg:result()
    end
    from = #(stats.sources or {}) > 0 and table.concat(stats.sources, ", ") or spec_value
    if lost then
      io.stderr:write(string.format("kopt: note: %s %s; the transition graph this resumed run began with is built " ..
                                    "again from %s%s, and may differ from it\n", saved, lost, from,
                                    ctx.run_id and " without this run's own transitions" or ""))
    end
    if saved then
      pcall(sys.mkdir_p, ctx.run_dir)
      json.write_file(saved, json.encode(stats) .. "\n", true)
    end
  end
  local n = tonumber(stats.transitions_read) or 0
  if n == 0 then return nil, string.format("regraph: no transitions to learn from (%s)", from) end
  return M.online(stats), string.format("regraph: %d transitions from %s", n, from)
end

return M
