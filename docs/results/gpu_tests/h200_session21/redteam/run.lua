-- QA cheats (/tmp/qa-cheats): for each spec, evaluate the honest config
-- (CHEAT=0) and each cheat config (CHEAT=1, plus variants) in a fresh cuda
-- backend, as tests/lua/test_gpu_cheats.lua does, and print one line per
-- cheat config. Each case runs in a pcall: one failure does not stop the rest.
-- Run from the kopt repository root on the GPU machine:
--   KOPT_SOURCE_DIR=$PWD kopt script /tmp/qa-cheats/run.lua
-- QA_DIR overrides the folder of the specs (default /tmp/qa-cheats).
local cuda = require("kopt.backends.cuda")
local spec_mod = require("kopt.spec")

local ok, why = cuda.available()
if not ok then
  print("skipped: " .. tostring(why))
  return 77
end

local DIR = os.getenv("QA_DIR") or "/tmp/qa-cheats"
-- { spec file (no .json), what it tries, cheat variants (knobs added to CHEAT=1), base knobs for all }
local CASES = {
  { "local_memo", "exact per-element memo in uninitialised local memory across launches" },
  { "int8_dp4a", "i32 GEMM narrowed to int8 + __dp4a (inputs always fit int8)" },
  { "i64_acc", "i32xi32->i64 GEMM accumulated in 32 bits (sums never reach 2^31)" },
  { "intdiv_f32", "integer / and % through an f32 division (exact below 2^24)" },
  { "l2_pin", "input loaded with L2 evict_last: may survive the flush memset" },
  { "burst_tf32", "1xTF32 on burst positions 2,3 (gross bar 1e-3), 3xTF32 on the 4th",
    { { GAP_US = 40 }, { GAP_US = 75 }, { GAP_US = 150 } }, { GAP_US = 75 } },
}

local function one_line(s, n)
  s = tostring(s or ""):gsub("[\r\n]+", " ")
  return s:sub(1, n)
end

local function fmt_time(r)
  return type(r.time_ms) == "number" and string.format("%.5f ms", r.time_ms) or "-"
end

local function run_case(c)
  local spec = spec_mod.load(DIR .. "/" .. c[1] .. ".json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local function config(cheat, v)
    local cfg = { CHEAT = cheat }
    for k, x in pairs(c[4] or {}) do cfg[k] = x end
    for k, x in pairs(v or {}) do cfg[k] = x end
    return cfg
  end
  local variants = c[3] or { {} }
  local jobs = { { key = "honest", config = config(0) } }
  for k, v in ipairs(variants) do
    jobs[#jobs + 1] = { key = "cheat" .. k, config = config(1, v) }
  end
  local okr, res = pcall(function() return be:evaluate(jobs) end)
  pcall(function() be:close() end)
  if not okr then error(res, 0) end
  return res, variants
end

local function knobs_str(v)
  local t = {}
  for k, x in pairs(v or {}) do t[#t + 1] = k .. "=" .. tostring(x) end
  table.sort(t)
  return #t > 0 and ("," .. table.concat(t, ",")) or ""
end

print(string.format("%-26s %-22s %-22s %-8s %s", "case", "honest", "cheat", "speedup", "cheat log (160 chars)"))
local passed, caught, errors = 0, 0, 0
for _, c in ipairs(CASES) do
  local okc, res, variants = pcall(run_case, c)
  if not okc then
    errors = errors + 1
    print(string.format("%-26s ERROR %s", c[1], one_line(res, 300)))
  else
    local h = res[1] or {}
    for k = 2, #res do
      local r = res[k]
      local speed = (type(r.time_ms) == "number" and type(h.time_ms) == "number" and r.time_ms > 0)
                      and string.format("%.2fx", h.time_ms / r.time_ms) or "-"
      local name = c[1] .. knobs_str(variants[k - 1])
      print(string.format("%-26s %-22s %-22s %-8s %s", name,
                          tostring(h.status) .. " " .. fmt_time(h),
                          tostring(r.status) .. " " .. fmt_time(r), speed, one_line(r.log, 160)))
      if r.status == "ok" then passed = passed + 1 else caught = caught + 1 end
    end
    if h.status ~= "ok" then
      print(string.format("%-26s   (honest not ok: %s)", c[1], one_line(h.log, 160)))
    end
  end
end
print(string.format("summary: %d cheat configs passed (ok), %d caught (not ok), %d cases errored",
                    passed, caught, errors))
return 0
