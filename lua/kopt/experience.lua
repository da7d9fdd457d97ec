-- Experience across runs: every evaluated transition of a move-based search
-- (from the method that produced the parent state to the method of the move,
-- with the speedup it gave) is appended to <run_dir>/transitions.jsonl, and,
-- when the environment variable KOPT_EXPERIENCE names a file, to that file
-- too (a user-level dataset such as ~/.cache/kopt/experience.jsonl).
-- `kopt regraph` aggregates such files into method-transition statistics;
-- load_priors() turns those into prior multipliers for MCGS and rules.
--
-- A transition line:
--   {"kernel": "...", "from": "tile_m_up", "to": "warps_down", "status": "ok",
--    "speedup": 1.07, "reward": 0.31, "strategy": "mcgs", "n": 42}
-- speedup = parent time / child time (absent when either failed).
local errors = require("kopt.errors")
local json = require("kopt.json")
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
  self.kernel = (ctx.spec and ctx.spec.name) or (ctx.run_dir and ctx.run_dir:match("([^/]+)/*$")) or "?"
  return self
end

-- Appends one transition. Results answered from the engine's cache (a
-- resumed run replaying its log) are skipped: they were written the first time.
function Log:add(t, result)
  if result and result.cached then return end
  if #self.paths == 0 then return end
  t.kernel = t.kernel or self.kernel
  t.strategy = t.strategy or self.strategy
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
-- or nil + message. Statistics with few samples are shrunk towards 1.
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
    return mult(stats.methods[to]) or 1
  end
end

return M
