-- Honest kernels for the verifier (tests/honest/): every config of every
-- case is an honest kernel computing what its reference computes, so every
-- one should come back `ok` and not charged check 2's time. A line per
-- config: case, config, status, time, check 2's time and whether it was
-- charged, and the log (first 200 characters) for anything not ok or
-- charged; then the range probe on one config of three cases, and a
-- summary. Run from the repository root:
--
--   KOPT_SOURCE_DIR=$PWD KOPT_LUA_DEV=$PWD LUA_PATH="tests/lua/?.lua;;" \
--     ./build-rel/kopt script tests/honest/run.lua
--
-- Environment: HONEST_CASES=a,b (only these cases), HONEST_REPEAT=N (evaluate
-- every config N times, for the cases whose outcome depends on which input
-- word each timed launch's nudge hits; default 1), HONEST_PROBE=0 (skip the
-- range probe). Without a GPU it checks the specs load and their spaces
-- enumerate, says why it stops, and returns 0.
local cuda = require("kopt.backends.cuda")
local spec_mod = require("kopt.spec")
local run_mod = require("kopt.run")

local DIR = "tests/honest"
-- { case (spec file name), what it stresses }
local CASES = {
  { "atomic_rowsum", "f32 atomics: results differ run to run in the last bits; outputs start at zero (copy:)" },
  { "hist_u8", "exact u32 histogram from integer atomics, in/out from zeros, generated u8 frame (no nudges)" },
  { "rowsort", "exact f32 sort with ties (control): a nudge shows in one output word on every launch" },
  { "rowsort_inplace", "the same sort in place: exact in/out buffer copied from a nudged input before each launch" },
  { "prune24", "exact f32 + u8 selection with ties: a nudge shows on about half the timed launches" },
  { "quant_threshold", "exact one-word i32 count and argmax that a nudge on a threshold or a tied max moves" },
  { "quant_threshold_tol", "the same with a max_abs on the count and a Lua check for the argmax (should pass)" },
  { "scan_pipe", "three-kernel pipeline with scratch, f32 scan with a long carry chain (default tolerance)" },
  { "stencil3d_region", "3-D stencil, interior region output (boundary left poisoned)" },
  { "stencil3d_inout", "3-D stencil, in/out output copied from the nudged input, boundary passed through" },
  { "relu_pool_exact", "tolerance-0 float outputs computed exactly (ReLU, max pool) + u8 argmax with ties" },
  { "rmsnorm_bf16", "bf16 in/out (nudge = 2^-7 relative on a bf16 element), f32 side output" },
  { "gemm_f16_wmma", "f16 output from tensor cores (WMMA), default f16 tolerance" },
  { "nbody_f64", "f64 accumulation, ~5 ms per launch, reordered sums (SPLIT 2) at 1e-12" },
  { "tiny_softmax_pipe", "tiny run time (microseconds), three-kernel pipeline: check 2 launched from the host" },
  { "mandelbrot_mc", "data-dependent run time: check 2's inputs are honestly 50x slower; declared queue state" },
  { "mandelbrot_axis", "the same on the real axis: one input a constant, so check 3 redraws the other alone" },
  { "dequant_int4", "write-dominated exact f16 output, declared bytes just over 2x L2 (speed-of-light floor)" },
  { "upload_race", "three 1 MiB inputs only read: each fresh set's upload must land before its hash and first launch" },
}
-- the range probe, on one config each (the first ok one if that is not ok)
local PROBE = {
  atomic_rowsum = { BLOCK = 256, SPLIT = 32, VEC = 4 },
  gemm_f16_wmma = { BM = 128, BN = 128 },
  nbody_f64 = { BLOCK = 256, SPLIT = 2 },
}

local only = {}
for name in (os.getenv("HONEST_CASES") or ""):gmatch("[^,%s]+") do only[name] = true end
local function wanted(name) return next(only) == nil or only[name] end
local repeat_n = math.max(1, math.tointeger(tonumber(os.getenv("HONEST_REPEAT") or "1")) or 1)
local do_probe = os.getenv("HONEST_PROBE") ~= "0"

local function oneline(s, n)
  return (tostring(s or ""):gsub("%s+", " ")):sub(1, n or 200)
end
local function fmt_ms(v) return v and string.format("%.4f", v) or "-" end

-- Offline first: every spec loads and its space enumerates (this runs
-- without a GPU too, on the H100 model kopt assumes there).
local loaded, bad = {}, 0
for _, c in ipairs(CASES) do
  if wanted(c[1]) then
    local ok, spec = pcall(spec_mod.load, DIR .. "/" .. c[1] .. ".json")
    local n, err = 0, nil
    if ok then
      local ok2, space = pcall(run_mod.build_space, spec)
      if ok2 then
        local ok3, all = pcall(space.enumerate, space)
        if ok3 then n = #all else err = all end
      else
        err = space
      end
    else
      err = spec
    end
    if err then
      bad = bad + 1
      print(string.format("spec %-20s ERROR %s", c[1], oneline(err, 300)))
    else
      loaded[#loaded + 1] = c
      print(string.format("spec %-20s %d configs  (%s)", c[1], n, c[2]))
    end
  end
end

local ok, why = cuda.available()
if not ok then
  print("no GPU: " .. tostring(why) .. " (specs checked offline: " .. #loaded .. " loaded, " .. bad .. " failed)")
  return 0
end

local probe = require("kopt.range_probe")
local rows, nonok, charged, total = {}, 0, 0, 0
local probe_lines = {}

for _, c in ipairs(loaded) do
  local name = c[1]
  local spec = spec_mod.load(DIR .. "/" .. name .. ".json")
  local opened, be = pcall(cuda.open, spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  if not opened then
    print(string.format("%-20s OPEN FAILED: %s", name, oneline(be, 300)))
    nonok = nonok + 1
    goto continue
  end
  local space = run_mod.build_space(spec) -- (after open: spec.device is the GPU)
  local all = space:enumerate()
  local jobs = {}
  for i, cfg in ipairs(all) do
    for r = 1, repeat_n do
      jobs[#jobs + 1] = { key = string.format("%d.%d", i, r), config = cfg }
    end
  end
  local t0 = os.time()
  local okc, res = pcall(be.evaluate, be, jobs)
  if not okc then
    print(string.format("%-20s EVALUATE FAILED: %s", name, oneline(res, 300)))
    nonok = nonok + #jobs
    total = total + #jobs
    res = {}
  end
  for i, r in ipairs(res) do
    total = total + 1
    local cfg = space:describe(jobs[i].config) .. (repeat_n > 1 and (" #" .. jobs[i].key:match("%.(%d+)$")) or "")
    local line = string.format("%-20s %-34s %-8s time_ms %-9s check2_ms %-9s charged %-5s samples %-3s err %s/%s",
                               name, cfg, tostring(r.status), fmt_ms(r.time_ms), fmt_ms(r.check2_ms),
                               tostring(r.charged_check2 or false), tostring(r.samples or "-"),
                               r.err and string.format("%.2g", r.err.rel_l2) or "-",
                               r.err2 and string.format("%.2g", r.err2.rel_l2) or "-")
    if r.status ~= "ok" then
      nonok = nonok + 1
      line = line .. "\n    log: " .. oneline(r.log, 200)
    elseif r.charged_check2 then
      charged = charged + 1
      line = line .. "\n    log: " .. oneline(r.log, 200)
    end
    print(line)
    rows[#rows + 1] = { name = name, config = jobs[i].config, result = r, key = jobs[i].key }
  end
  print(string.format("%-20s done in %d s", name, os.time() - t0))

  -- the range probe on one config (note mode: it only reports)
  local want = PROBE[name]
  if do_probe and want and #res > 0 then
    local pick
    for i, r in ipairs(res) do
      local cfg = jobs[i].config
      local match = true
      for k, v in pairs(want) do if cfg[k] ~= v then match = false end end
      if r.status == "ok" and match then pick = i break end
    end
    if not pick then
      for i, r in ipairs(res) do if r.status == "ok" then pick = i break end end
    end
    if pick then
      local rec = { key = jobs[pick].key, config = jobs[pick].config, result = res[pick] }
      local okp, lines, row = pcall(probe.run, {
        backend = be, ranked = { rec }, mode = "note", max_tries = 1,
        job_for = function(x) return { config = x.config } end,
        args_for = function(x) return spec:args(x.config) end,
        describe = function(x) return space:describe(x.config) end,
        make_best = function() end,
      })
      local head = string.format("range probe %-20s %-30s", name, space:describe(rec.config))
      local first = #probe_lines + 1
      if not okp then
        probe_lines[#probe_lines + 1] = head .. " ERROR " .. oneline(lines, 300)
      else
        row = row or {}
        probe_lines[#probe_lines + 1] = string.format("%s status %s scale %s%s", head, tostring(row.status),
                                                      tostring(row.scale), row.note and (" note: " .. row.note) or "")
        for _, l in ipairs(lines or {}) do probe_lines[#probe_lines + 1] = "    " .. oneline(l, 300) end
        if row.status and row.status ~= "ok" then nonok = nonok + 1 end
      end
      for k = first, #probe_lines do print(probe_lines[k]) end
    else
      probe_lines[#probe_lines + 1] = string.format("range probe %-20s not run: no ok config", name)
    end
  end
  be:close()
  ::continue::
end

print("")
print("== range probe")
for _, l in ipairs(probe_lines) do print(l) end
print("")
print("== summary")
local by_case = {}
for _, r in ipairs(rows) do
  local b = by_case[r.name] or { n = 0, bad = 0, charged = 0, statuses = {} }
  by_case[r.name] = b
  b.n = b.n + 1
  if r.result.status ~= "ok" then
    b.bad = b.bad + 1
    b.statuses[r.result.status] = (b.statuses[r.result.status] or 0) + 1
  end
  if r.result.charged_check2 then b.charged = b.charged + 1 end
end
for _, c in ipairs(loaded) do
  local b = by_case[c[1]]
  if b then
    local st = {}
    for k, v in pairs(b.statuses) do st[#st + 1] = k .. "=" .. v end
    table.sort(st)
    print(string.format("%-20s %2d evaluations, %2d not ok %s, %2d charged check 2", c[1], b.n, b.bad,
                        #st > 0 and ("(" .. table.concat(st, ", ") .. ")") or "", b.charged))
  end
end
print(string.format("TOTAL: %d evaluations, %d not ok (incl. range probe failures), %d charged check 2's time", total,
                    nonok, charged))
-- (tests/lua/test_gpu_honest.lua: every one ok and none charged)
return (nonok == 0 and charged == 0) and 0 or 1
