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
--    "source_hash": "<16 hex>", "device": "NVIDIA H200"}
-- speedup = parent time / child time (absent when either failed).
-- from/to are the labels as the strategy wrote them; from_method/to_method
-- their canonical methods (kopt.relabel's O), the names statistics count.
-- The kernel is keyed by the spec's name and the hash of its source, never by
-- the run folder's name (lines written before had only "kernel", sometimes
-- the folder's name: `kopt regraph` reads both).
local errors = require("kopt.errors")
local json = require("kopt.json")
local relabel = require("kopt.relabel")
local sys = require("kopt.sys")

local M = {}

local Log = {}
Log.__index = Log

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
  local user = os.getenv("KOPT_EXPERIENCE")
  if user and user ~= "" then
    local dir = user:match("^(.*)/[^/]*$")
    if dir then pcall(sys.mkdir_p, dir) end
    paths[#paths + 1] = user
  end
  self.paths = paths
  local spec = ctx.spec
  local src = spec and spec.kernel and spec.kernel.source
  self.kernel = (spec and spec.name) or "?"
  self.source_hash = type(src) == "string" and sys.sha256(src):sub(1, 16) or nil
  self.device = spec and type(spec.device) == "table" and spec.device.name or nil
  return self
end

-- Appends one transition. Results answered from the engine's cache (a
-- resumed run replaying its log) are skipped: they were written the first time.
function Log:add(t, result)
  if result and result.cached then return end
  if #self.paths == 0 then return end
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
    if f == nil then
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
function M.load_priors(path, opts)
  opts = opts or {}
  local stats, err = json.read_file(path)
  if not stats then return nil, err end
  if type(stats) ~= "table" or type(stats.methods) ~= "table" then
    return nil, path .. ": not a kopt regraph statistics file (no 'methods')"
  end
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

return M
