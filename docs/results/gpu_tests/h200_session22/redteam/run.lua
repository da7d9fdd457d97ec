-- Red-team cheats, third round (tests/cheats): for each spec, evaluate the
-- honest config (CHEAT=0) and each cheat config (CHEAT=1, plus variants) in
-- a fresh cuda backend, as tests/lua/test_gpu_cheats.lua does, and print
-- one line per cheat config. Each case runs in a pcall: one failure does
-- not stop the rest. Some cases add a step (the `extra` field):
--   sequential: honest, then each cheat, then honest again, one evaluate()
--     each, in one worker (a cheat that harms the next evaluation);
--   sanitize: the listed configs under compute-sanitizer (kopt.sanitize,
--     check 1 only, as a run's winner is checked);
--   probe: the range probe (kopt.range_probe, note mode) on the cheat.
-- Every case also prints the spec warnings of the trivial-output probe.
-- Run from the kopt repository root on the GPU machine:
--   KOPT_SOURCE_DIR=$PWD kopt script docs/results/gpu_tests/h200_session22/redteam/run.lua
-- QA_DIR overrides the folder of the specs (default tests/cheats).
local cuda = require("kopt.backends.cuda")
local spec_mod = require("kopt.spec")

local ok, why = cuda.available()
if not ok then
  print("skipped: " .. tostring(why))
  return 77
end

local DIR = os.getenv("QA_DIR") or "tests/cheats"
-- { spec file (no .json), what it tries, cheat variants (knobs added to CHEAT=1), base knobs for all, extra }
local CASES = {
  { "int_batch_skip", "i32 output: no per-launch timed comparison; skips timed samples but the 4th of each batch",
    { {}, { CHEAT = 2 } } },
  { "inout_batch_skip", "in/out (copy:) output: the same skip; the buffer keeps its copy of the input",
    { {}, { CHEAT = 2 } } },
  { "delta_gemm", "always-right GEMM memo in the device heap: redoes only rows/cols the nudge changed" },
  { "const_replay", "whole-output replay from __constant__ keyed on pointer + 32 masked samples (nudge-blind)" },
  { "inout_nearcopy", "in-place y += 1e-6 g(y) replaced by a 1-ulp flip: not stale, in tolerance, no probe warning" },
  { "oob_read", "float4 over-reads past each row / the buffer end, masked; memcheck on the cheat",
    nil, nil, { sanitize = { tools = { "memcheck" }, configs = { { CHEAT = 1 } } } } },
  { "sabotage_next", "flips set A's x (address from its check 1) during timing: the next evaluation is blamed",
    nil, nil, { sequential = true } },
  { "sanitizer_dodge", "benign_race that keeps its barrier when shared loads are slow (instrumented)",
    { {}, { DODGE = 0 } }, { DODGE = 1 },
    { sanitize = { tools = { "racecheck" }, configs = { { CHEAT = 1, DODGE = 1 }, { CHEAT = 1, DODGE = 0 } } } } },
  { "probe_dodge", "__sinf unless 32 sampled inputs are large: the range probe's scaled inputs get sinf",
    nil, nil, { probe = true } },
  { "cap_last", "GEMM: 1xTF32 on timed samples 0..98 (noisy on purpose, so sampling runs to 100), FFMA on #99",
    { { SPIN_US = 20 }, { SPIN_US = 40 } }, { CAP = 100, SPIN_US = 20 } },
}

local function one_line(s, n)
  s = tostring(s or ""):gsub("[\r\n]+", " ")
  return s:sub(1, n)
end

local function fmt_time(r)
  return type(r.time_ms) == "number" and string.format("%.5f ms", r.time_ms) or "-"
end

local function knobs_str(v)
  local t = {}
  for k, x in pairs(v or {}) do t[#t + 1] = k .. "=" .. tostring(x) end
  table.sort(t)
  return #t > 0 and ("," .. table.concat(t, ",")) or ""
end

local function config_of(c, cheat, v)
  local cfg = { CHEAT = cheat }
  for k, x in pairs(c[4] or {}) do cfg[k] = x end
  for k, x in pairs(v or {}) do cfg[k] = x end
  return cfg
end

local function samples_str(r)
  if type(r.samples) ~= "number" then return "" end
  return string.format(" [%d samples, noise %.3g]", r.samples, r.noise or -1)
end

-- The extra steps of a case, on the open backend; returns lines to print.
local function extra_steps(c, spec, be, res)
  local x, lines = c[5] or {}, {}
  if x.sanitize then
    local sanitize = require("kopt.sanitize")
    local exe, nwhy = sanitize.find()
    if not exe then
      lines[#lines + 1] = "  sanitize: skipped: " .. tostring(nwhy)
    else
      for _, cfg0 in ipairs(x.sanitize.configs) do
        local cfg = {}
        for k, v in pairs(c[4] or {}) do cfg[k] = v end
        for k, v in pairs(cfg0) do cfg[k] = v end
        local okc, verdict, clean = pcall(sanitize.check, be, { config = cfg }, spec:entry(cfg), x.sanitize.tools, exe, 300)
        if not okc then
          lines[#lines + 1] = "  sanitize" .. knobs_str(cfg) .. ": ERROR " .. one_line(verdict, 200)
        else
          for _, tool in ipairs(x.sanitize.tools) do
            local rep = verdict[tool] or {}
            lines[#lines + 1] = string.format("  sanitize%s %s: errors %s, blamed %s, clean %s, %.1f s %s", knobs_str(cfg),
              tool, tostring(rep.errors), tostring(rep.blamed), tostring(clean), rep.seconds or -1, one_line(rep.note, 100))
            local n = 0
            for line in (rep.text or ""):gmatch("[^\n]+") do
              n = n + 1
              if n <= 4 then lines[#lines + 1] = "    | " .. one_line(line, 160) end
            end
          end
        end
      end
    end
  end
  if x.probe then
    local probe = require("kopt.range_probe")
    local cheat = res[2]
    if cheat and cheat.status == "ok" then
      local rec = { key = "cheat", config = config_of(c, 1), result = cheat }
      local okp, plines, row = pcall(probe.run, {
        backend = be, ranked = { rec }, mode = "note", max_tries = 1,
        job_for = function(r) return { config = r.config } end,
        args_for = function(r) return spec:args(r.config) end,
        describe = function(r) return "CHEAT=" .. tostring(r.config.CHEAT) end,
        make_best = function() end,
      })
      if not okp then
        lines[#lines + 1] = "  range probe: ERROR " .. one_line(plines, 200)
      else
        lines[#lines + 1] = string.format("  range probe on the cheat: scale %s, status %s %s", tostring(row and row.scale),
          tostring(row and row.status), one_line(row and row.log, 120))
        for _, l in ipairs(plines or {}) do lines[#lines + 1] = "    | " .. one_line(l, 160) end
      end
    else
      lines[#lines + 1] = "  range probe: not run (the cheat is not ok)"
    end
  end
  local w = be.spec_warnings
  lines[#lines + 1] = "  spec warnings (trivial outputs): " .. (w and #w > 0 and one_line(table.concat(w, " | "), 300) or "none")
  return lines
end

local function run_case(c)
  local spec = spec_mod.load(DIR .. "/" .. c[1] .. ".json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local variants = c[3] or { {} }
  local jobs = { { key = "honest", config = config_of(c, 0) } }
  for k, v in ipairs(variants) do
    jobs[#jobs + 1] = { key = "cheat" .. k, config = config_of(c, 1, v) }
  end
  local okr, res, after, lines = pcall(function()
    local r, a
    if c[5] and c[5].sequential then
      -- one job per evaluate(), in this order, then the honest job again
      r = {}
      for i, j in ipairs(jobs) do r[i] = be:evaluate({ j })[1] end
      a = be:evaluate({ { key = "honest_after", config = config_of(c, 0) } })[1]
    else
      r = be:evaluate(jobs)
    end
    return r, a, extra_steps(c, spec, be, r)
  end)
  pcall(function() be:close() end)
  if not okr then error(res, 0) end
  return res, variants, after, lines
end

print(string.format("%-30s %-22s %-22s %-8s %s", "case", "honest", "cheat", "speedup", "cheat log (160 chars)"))
local passed, caught, errors = 0, 0, 0
for _, c in ipairs(CASES) do
  local okc, res, variants, after, lines = pcall(run_case, c)
  if not okc then
    errors = errors + 1
    print(string.format("%-30s ERROR %s", c[1], one_line(res, 300)))
  else
    local h = res[1] or {}
    for k = 2, #res do
      local r = res[k]
      local speed = (type(r.time_ms) == "number" and type(h.time_ms) == "number" and r.time_ms > 0)
                      and string.format("%.2fx", h.time_ms / r.time_ms) or "-"
      local name = c[1] .. knobs_str(variants[k - 1])
      print(string.format("%-30s %-22s %-22s %-8s %s%s", name,
                          tostring(h.status) .. " " .. fmt_time(h),
                          tostring(r.status) .. " " .. fmt_time(r), speed, one_line(r.log, 160), samples_str(r)))
      if r.status == "ok" then passed = passed + 1 else caught = caught + 1 end
    end
    if h.status ~= "ok" then
      print(string.format("%-30s   (honest not ok: %s)", c[1], one_line(h.log, 160)))
    end
    if after then
      print(string.format("%-30s   honest again, after the cheat: %s %s %s", c[1], tostring(after.status), fmt_time(after),
                          one_line(after.log, 160)))
    end
    for _, l in ipairs(lines or {}) do print(l) end
  end
end
print(string.format("summary: %d cheat configs passed (ok), %d caught (not ok), %d cases errored",
                    passed, caught, errors))
return 0
