-- Evaluates the cheats of /tmp/h7-cheats on a GPU, as tests/lua/test_gpu_cheats.lua's
-- evaluate() does: one fresh cuda backend per case, CHEAT=0 (honest) and each CHEAT=1
-- variant in it. Run from the kopt repository root:
--   KOPT_LUA_DEV=$PWD LUA_PATH="tests/lua/?.lua;;" ./build-rel/kopt script /tmp/h7-cheats/run.lua
-- A cheat is CAUGHT when it is not ok, or it is charged a time >= 0.9x the honest one.
-- probe_spin is also put through the range probe (as test_gpu_range_probe does).
local cuda = require("kopt.backends.cuda")
local spec_mod = require("kopt.spec")
local ok, why = cuda.available()
if not ok then
  print("no GPU: " .. tostring(why))
  return 77
end
local DIR = os.getenv("H7_DIR") or "/tmp/h7-cheats"
-- { case, what, variants (knobs of each cheat config), base knobs (all configs) }
local CASES = {
  { "short_sampling", "TF32 on non-tail timed launches, first tail spins 400 ms: n = 4, less_exact skipped",
    { { SPIN_MS = 400, PACE_PCT = 55 }, { SPIN_MS = 0, PACE_PCT = 55 } }, { SPIN_MS = 400, PACE_PCT = 55 } },
  { "probe_spin", "__sinf but the module's first launch and the tails; first tail spins (range probe dodge)",
    { { SPIN_MS = 400 }, { SPIN_MS = 0 } }, { SPIN_MS = 400 } },
  { "int_reltol_skip", "i32 output under a spec-wide rel_l2: no per-launch comparison, 55 % computed on non-tails",
    { { PCT = 55 }, { PCT = 20 } }, { PCT = 55 } },
  { "cheap_check2", "replay paced to 30 % of compute; check 2 honestly cheap on normal inputs: check 3 never runs",
    { { PACE_PCT = 30 }, { PACE_PCT = 10 } }, { PACE_PCT = 30 } },
}

local function knobs(c)
  local t = {}
  for k, v in pairs(c) do t[#t + 1] = k .. "=" .. tostring(v) end
  table.sort(t)
  return table.concat(t, " ")
end

local function evaluate(name, variants, base)
  local spec = spec_mod.load(DIR .. "/" .. name .. "/" .. name .. ".json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local function config(cheat, v)
    local c = { CHEAT = cheat }
    for kk, vv in pairs(base or {}) do c[kk] = vv end
    for kk, vv in pairs(v or {}) do c[kk] = vv end
    return c
  end
  local jobs = { { key = "honest", config = config(0) } }
  for k, v in ipairs(variants or { {} }) do jobs[#jobs + 1] = { key = "cheat" .. k, config = config(1, v) } end
  local res = be:evaluate(jobs)
  return res, jobs, be, spec
end

local function short(r)
  return (tostring(r.log or ""):gsub("\n", " "):sub(1, 140))
end

local rc = 0
for _, c in ipairs(CASES) do
  local okc, err = pcall(function()
    local res, jobs, be, spec = evaluate(c[1], c[3], c[4])
    local h = res[1]
    print(string.format("%-16s honest %-8s %.4f ms%s", c[1], tostring(h.status), h.time_ms or -1,
                        h.charged_check2 and " (charged!)" or ""))
    for k = 2, #res do
      local r = res[k]
      local t, ht = r.time_ms or -1, h.time_ms or -1
      local caught = r.status ~= "ok" or (ht > 0 and t >= 0.9 * ht)
      print(string.format("  %-30s cheat %-8s %.4f ms (%.2fx) charged=%s  %s  [%s]", knobs(jobs[k].config),
                          tostring(r.status), t, (t > 0 and ht > 0) and ht / t or 0, tostring(r.charged_check2 or false),
                          caught and "CAUGHT" or "NOT CAUGHT", short(r)))
    end
    if c[1] == "probe_spin" then
      local probe = require("kopt.range_probe")
      for k = 1, #res do
        if res[k].status == "ok" then
          local lines, row = probe.run({
            backend = be, ranked = { { key = jobs[k].key, config = jobs[k].config, result = res[k] } },
            mode = "note", max_tries = 1,
            job_for = function(r) return { config = r.config } end,
            args_for = function(r) return spec:args(r.config) end,
            describe = function(r) return knobs(r.config) end,
            make_best = function() end,
          })
          print(string.format("  range probe %-26s %s (scale %s)%s", knobs(jobs[k].config), tostring(row and row.status),
                              tostring(row and row.scale), k > 1 and ((row and row.status == "ok") and "  NOT CAUGHT by the probe" or "  caught by the probe") or ""))
          for _, l in ipairs(lines or {}) do print("    " .. l) end
        end
      end
    end
    be:close()
  end)
  if not okc then
    print(c[1] .. ": error: " .. tostring(err))
    rc = 1
  end
end
return rc
