-- Red-team cheats, fourth round (tests/cheats): for each spec, evaluate the
-- honest config (CHEAT=0) and each cheat config (CHEAT=1, plus variants) in
-- a fresh cuda backend, as tests/lua/test_gpu_cheats.lua does, and print
-- one line per cheat config (status, time, speedup, whether it was charged
-- check 2's time, check 2's own launch time, samples and noise). Each case
-- runs in a pcall: one failure does not stop the rest. Some cases add a
-- step (the `extra` field):
--   sequential: honest, then each cheat config, then honest again, one
--     evaluate() each, in one worker (heap_xeval: a cache that outlives
--     the module pays off from the second evaluation on);
--   probe: the range probe (kopt.range_probe, note mode) on each cheat
--     config that is ok.
-- Every case also prints the spec warnings of the trivial-output probe.
-- Run from the kopt repository root on the GPU machine:
--   KOPT_SOURCE_DIR=$PWD kopt script docs/results/gpu_tests/h200_session22/redteam4/run.lua
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
  { "region_partial", "region output (KT stencil interior): FRAC % of rows on timed k%4 != 3 (never compared per launch)",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "sort_exact", "f32 output held to tolerance 0 (row sort): FRAC % of rows sorted on timed k%4 != 3",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "luacheck_skip", "compare=false output with a Lua check: FRAC % (CHEAT=2: none) on every timed launch, last included",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "mask_zeros", "exact i32 mask (~6 % ones): zeros on timed k%4 != 3 (1/8 of words may differ; 20 us slack)" },
  { "tail_exact_tf32", "GEMM: FFMA on every batch tail (k%4 == 3), 1xTF32 on the rest: 76 % worse, under 9 in 10" },
  { "replay_paced", "const_replay's cache, replay paced to PACE % of its compute time - 4 us (under 3x + 20 us)",
    { { PACE_PCT = 40 }, { PACE_PCT = 48 } }, { PACE_PCT = 40 } },
  { "heap_xeval", "content-keyed result cache in the device heap: evaluation 2+ replays check 1, timing and check 2",
    { {}, { UNROLL = 4 }, { UNROLL = 1 } }, { UNROLL = 1 }, { sequential = true } },
  { "probe_dodge_dense", "__sinf unless 1024 (4096) sampled inputs include |x| >= 2: the sparse probe pass is seen",
    { {}, { SAMPLES = 4096 } }, { SAMPLES = 1024 }, { probe = true } },
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
  local s = ""
  if type(r.samples) == "number" then s = string.format(" [%d samples, noise %.3g", r.samples, r.noise or -1) end
  if s ~= "" then
    s = s .. string.format(", check2 %s ms, charged %s, timer %s]",
                           type(r.check2_ms) == "number" and string.format("%.5f", r.check2_ms) or "-",
                           tostring(r.charged_check2 or false), tostring(r.timer))
  end
  return s
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
    local variants = c[3] or { {} }
    for k = 2, #res do
      local cheat = res[k]
      local cfg = config_of(c, 1, variants[k - 1])
      if cheat and cheat.status == "ok" then
        local rec = { key = "cheat" .. (k - 1), config = cfg, result = cheat }
        local okp, plines, row = pcall(probe.run, {
          backend = be, ranked = { rec }, mode = "note", max_tries = 1,
          job_for = function(r) return { config = r.config } end,
          args_for = function(r) return spec:args(r.config) end,
          describe = function(r) return "cheat" .. knobs_str(r.config) end,
          make_best = function() end,
        })
        if not okp then
          lines[#lines + 1] = "  range probe" .. knobs_str(cfg) .. ": ERROR " .. one_line(plines, 200)
        else
          lines[#lines + 1] = string.format("  range probe on the cheat%s: scale %s, status %s, sparse %s %s", knobs_str(cfg),
            tostring(row and row.scale), tostring(row and row.status), tostring(row and row.sparse),
            one_line(row and row.log, 120))
          for _, l in ipairs(plines or {}) do lines[#lines + 1] = "    | " .. one_line(l, 160) end
        end
      else
        lines[#lines + 1] = "  range probe" .. knobs_str(cfg) .. ": not run (the cheat is not ok)"
      end
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

local T0 = (os and os.time) and os.time() or nil
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
    else
      print(string.format("%-30s   honest:%s %s", c[1], samples_str(h), one_line(h.log, 120)))
    end
    if after then
      print(string.format("%-30s   honest again, after the cheat: %s %s %s", c[1], tostring(after.status), fmt_time(after),
                          one_line(after.log, 160)))
    end
    for _, l in ipairs(lines or {}) do print(l) end
  end
end
print(string.format("summary: %d cheat configs passed (ok), %d caught (not ok), %d cases errored (%.1f s)",
                    passed, caught, errors, T0 and (os.time() - T0) or -1))
return 0
