-- The suite's arithmetic, apart from running anything: which specs a folder
-- holds, the baselines file that matches a GPU, performance targets and the
-- stop condition they give the engine, each problem's row of the report
-- (speedups, fraction of the speed of light) and fast_p. Pure functions over
-- plain tables, except the file reads named as such. kopt.commands.suite runs
-- the problems; kopt.suite_report writes what this computes.
local errors = require("kopt.errors")
local json = require("kopt.json")
local report = require("kopt.report")
local sys = require("kopt.sys")

local M = {}

-- The p of fast_p, as in KernelBench: the fraction of problems that are
-- correct and more than p times faster than the baseline (fast_0: correct).
M.P = { 0, 1, 1.5, 2 }
M.BASES = { "eager", "compile" }
M.BASE_LABEL = { eager = "PyTorch eager", compile = "torch.compile" }

-- A file name that is not a spec in a suite folder.
function M.is_baselines_file(name) return name:match("^baselines_.*%.json$") ~= nil end

-- The spec files of the paths (folders: every *.json in them but the
-- baselines files; files: themselves), sorted by name within a folder.
function M.spec_files(paths)
  local files = {}
  for _, p in ipairs(paths) do
    local st = sys.stat(p)
    if not st then errors.usage("suite: %s: no such file or folder", p) end
    if st == "dir" then
      local names = assert(sys.list_dir(p))
      table.sort(names)
      local before = #files
      for _, n in ipairs(names) do
        if n:match("%.json$") and not M.is_baselines_file(n) then files[#files + 1] = p:gsub("/+$", "") .. "/" .. n end
      end
      if #files == before then errors.usage("suite: %s holds no spec (*.json)", p) end
    else
      files[#files + 1] = p
    end
  end
  return files
end

-- "NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3": how tools/suite_baselines.py
-- names baselines_<gpu>.json.
function M.gpu_slug(name)
  return (tostring(name):lower():gsub("[^%w]+", "_"):gsub("^_+", ""):gsub("_+$", ""))
end

-- Reads a baselines file: { gpu =, device = {...}, problems = { name = { eager_ms, compile_ms, ... } } }.
function M.read_baselines(path)
  local doc, err = json.read_file(path)
  if not doc then errors.usage("suite: --baselines: %s", err) end
  if type(doc) ~= "table" or type(doc.problems) ~= "table" then
    errors.usage("suite: %s: expected an object with 'problems' (written by tools/suite_baselines.py)", path)
  end
  for name, p in pairs(doc.problems) do
    if type(p) ~= "table" then errors.usage("suite: %s: problems.%s: expected an object", path, tostring(name)) end
    for _, b in ipairs(M.BASES) do
      local v = p[b .. "_ms"]
      if v ~= nil and v ~= json.null and (type(v) ~= "number" or v <= 0 or v ~= v or v == math.huge) then
        errors.usage("suite: %s: problems.%s.%s_ms: expected a positive, finite number of milliseconds", path, name, b)
      end
    end
  end
  doc.file = path
  return doc
end

-- The baselines file for the GPU named `gpu` in the folders `dirs`:
-- baselines_<slug>.json, else any baselines_*.json whose "gpu" is that name.
-- Returns the path or nil.
function M.find_baselines(dirs, gpu)
  if not gpu then return nil end
  for _, d in ipairs(dirs) do
    local exact = d .. "/baselines_" .. M.gpu_slug(gpu) .. ".json"
    if sys.stat(exact) then return exact end
  end
  for _, d in ipairs(dirs) do
    local names = sys.list_dir(d) or {}
    table.sort(names)
    for _, n in ipairs(names) do
      if M.is_baselines_file(n) then
        local doc = json.read_file(d .. "/" .. n)
        if type(doc) == "table" and doc.gpu == gpu then return d .. "/" .. n end
      end
    end
  end
  return nil
end

-- "2x-eager", "1.5x-compile", "90%-sol" -> a target table; raises on
-- anything else.
function M.parse_target(text)
  local p, base = text:match("^(%d+%.?%d*)x%-([%w.]+)$")
  if p then
    if base == "torch.compile" then base = "compile" end
    if base ~= "eager" and base ~= "compile" then
      errors.usage("suite: --target: unknown baseline '%s' in '%s' (eager or compile)", base, text)
    end
    p = tonumber(p)
    if p <= 0 then errors.usage("suite: --target: the speedup must be positive, got '%s'", text) end
    return { kind = "speedup", base = base, p = p, text = text }
  end
  local pct = text:match("^(%d+%.?%d*)%%%-sol$")
  if pct then
    pct = tonumber(pct)
    if pct <= 0 or pct > 100 then errors.usage("suite: --target: a fraction of the speed of light is in (0, 100]%%, got '%s'", text) end
    return { kind = "sol", frac = pct / 100, text = text }
  end
  errors.usage("suite: --target: expected Nx-eager, Nx-compile or N%%-sol (e.g. 2x-eager, 90%%-sol), got '%s'", text)
end

-- The peak precision of a problem for its speed of light: tensor cores when
-- an input is f16 or bf16, the f32 pipes otherwise.
function M.precision(spec)
  for _, a in ipairs(spec.arg_specs or {}) do
    if not a.output and (a.type == "f16" or a.type == "bf16") then return "tensor" end
  end
  return "fp32"
end

-- Milliseconds at the speed of light for `work` ({flops, bytes}) on
-- `device` (clocks, memory clock and bus width), or nil: the slower of the
-- work at peak compute and the bytes at peak bandwidth (kopt.report's
-- peaks, without the verifier's generous margins).
function M.sol_ms(work, device, precision)
  if not device or not work then return nil end
  local peaks = report.peaks(device, precision)
  local t = math.max(work.flops and peaks.flops and work.flops / peaks.flops or 0,
                     work.bytes and peaks.bytes_per_s and work.bytes / peaks.bytes_per_s or 0)
  return t > 0 and t * 1e3 or nil
end

-- Whether time_ms meets the target for a problem with baseline times
-- base = { eager =, compile = } and speed-of-light time sol_ms.
function M.meets(target, time_ms, base, sol_ms)
  if not target or type(time_ms) ~= "number" or time_ms <= 0 then return false end
  if target.kind == "speedup" then
    local b = base and base[target.base]
    return b ~= nil and b / time_ms >= target.p
  end
  return sol_ms ~= nil and sol_ms / time_ms >= target.frac
end

-- The engine's stop condition for one problem: stop once the best result
-- meets the target. work_of(config) gives the spec's work at a config.
function M.stop_when(target, base, work_of, device, precision)
  if not target then return nil end
  return function(engine)
    local best = engine.best
    if not best then return nil end
    local sol = target.kind == "sol" and M.sol_ms(work_of(best.config), device, precision) or nil
    if M.meets(target, best.result.time_ms, base, sol) then return "target reached (" .. target.text .. ")" end
    return nil
  end
end

-- One problem's row of the report. p: { name, time_ms (nil: no correct
-- result), work, precision, status, ... }; base: { eager =, compile = }.
function M.row(p, base, device, target)
  local r = {}
  for k, v in pairs(p) do r[k] = v end
  r.correct = type(p.time_ms) == "number" and p.time_ms > 0
  r.eager_ms, r.compile_ms = base and base.eager, base and base.compile
  if r.correct then
    for _, b in ipairs(M.BASES) do
      local t = base and base[b]
      if t then r["speedup_" .. b] = t / p.time_ms end
    end
    r.sol_ms = M.sol_ms(p.work, device, p.precision)
    if r.sol_ms then r.sol_frac = r.sol_ms / p.time_ms end
    if target then r.target_met = M.meets(target, p.time_ms, base, r.sol_ms) end
  end
  r.work = nil
  return r
end

-- True when the range probe found the row's winner wrong on larger inputs
-- and it stayed the winner (--range-probe note: the spec's distributions
-- are the contract, so the row is still correct, and the report says so).
function M.probe_flagged(r)
  local function flagged(pr) return pr ~= nil and pr.status ~= nil and pr.status ~= "ok" and pr.new_winner == nil end
  local pr = r.range_probe
  return flagged(pr) or (pr ~= nil and flagged(pr.integers))
end

-- fast_p over rows, per baseline: among the n problems that have a time for
-- that baseline, the fraction correct with speedup > p. Returns
-- { eager = { n =, ["0"] =, ["1"] =, ["1.5"] =, ["2"] = }, compile = {...} }
-- (a fraction is nil when n is 0).
function M.fast_p(rows)
  local out = {}
  for _, b in ipairs(M.BASES) do
    local n, counts = 0, {}
    for _, r in ipairs(rows) do
      if r[b .. "_ms"] then
        n = n + 1
        for _, p in ipairs(M.P) do
          local key = M.p_key(p)
          local s = r["speedup_" .. b]
          if r.correct and s and s > p then counts[key] = (counts[key] or 0) + 1 end
        end
      end
    end
    local f = { n = n }
    for _, p in ipairs(M.P) do
      local key = M.p_key(p)
      f[key] = n > 0 and (counts[key] or 0) / n or nil
    end
    out[b] = f
  end
  return out
end

function M.p_key(p) return (string.format("%g", p)) end

return M
