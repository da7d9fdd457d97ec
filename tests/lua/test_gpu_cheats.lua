-- Cheating kernels beyond the planted faults (tests/cheats/): each case is a
-- spec with a CHEAT knob, 0 the honest kernel and 1 the cheat, evaluated by
-- the cuda backend in one fresh worker. Most cheats tell a timed launch from
-- a checked one (state in the padding between variables, in __constant__
-- memory written through a generic pointer, on the device heap, in a
-- variable with a 1000-character name; a cold-L2 probe; the gap since the
-- previous launch) and skip work only when timed: the comparison of the last
-- timed output must catch them. The honest kernel must be ok in every case.
-- Cheats kopt does not catch (docs/TRUST.md, "What kopt still cannot see")
-- are listed as known, not failed, so a change that starts catching one
-- shows here. Needs a GPU: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end

local DIR = "tests/cheats"
-- { case, what it does, knobs of each cheat config, knobs of all configs }
local CAUGHT = {
  { "longname_global", "state in a __device__ variable with a 138-character name" },
  { "global_padding", "state in the padding between two checked module variables" },
  { "const_write", "state in a __constant__ array written through a generic pointer" },
  { "heap_state", "state in device-heap chunks (malloc/free)" },
  { "guard_gap", "state in the unarmed band in front of the reference's buffer" },
  { "l2_probe", "a cold L2 means a timed launch", { { L2_THRESH = 100 }, { L2_THRESH = 150 }, { L2_THRESH = 250 } },
    { L2_THRESH = 150 } },
  { "timer_burst", "a launch right after the previous one is timed",
    { { WINDOW_NS = 50000 }, { WINDOW_NS = 100000 }, { WINDOW_NS = 200000 } }, { WINDOW_NS = 100000 } },
  { "fastmath_range_wide", "__sinf on |x| in 1e3..1e5 (wrong there)" },
  { "ref_peek", "reads y from where the reference's copy would be" },
  { "cdp_launch", "a device-side child launch past the timing window" },
  { "tail_drop", "bf16: 200 tail elements written as 0, inside rel-L2 1e-2 (the element bound)" },
  { "const_init", "a constant input ('ones') is sampled, never read (check 2 varies it)" },
  { "int_tail", "u8 output: the last 3 elements never written (exact integer comparison)" },
  { "batch_tail", "skips timed launches but the last of each batch of 4 (every timed launch compared)", { {}, { CHEAT = 2 } } },
  { "arange_float", "a float 'arange' input is sampled, never read (check 2 moves a few of its elements)" },
  { "u64_lowbits", "a u64 output rounded through a double (low bits lost above 2^53; compared exactly)" },
  { "gen_draw", "a generated permutation recognised as the seed's draw, never read (check 2 reads another draw)" },
  { "int_batch_skip", "an i32 output computed on the last timed launch of each batch of 4 only (exact outputs compared on every timed launch)",
    { {}, { CHEAT = 2 } } },
  { "inout_batch_skip", "the same with an in/out buffer (each launch restarts it from its input)", { {}, { CHEAT = 2 } } },
  { "cap_last", "TF32 on every timed launch but the last (sampling kept noisy to run to its cap): the last exact",
    { { SPIN_US = 20 }, { SPIN_US = 40 } }, { CAP = 100, SPIN_US = 20 } },
  { "sort_exact", "an f32 output of tolerance 0 (a row sort): a third of the rows sorted on all but each batch's tail",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "mask_zeros", "an exact i32 mask (6 % ones) written as zeros on all but each batch's tail (under an eighth of its words)" },
  { "tail_exact_tf32", "a GEMM exact on each batch's tail (the last launch is one), TF32 on the others (76 %)" },
  { "region_partial", "a region output (a stencil's interior, an in/out buffer) computed a third on all but each batch's tail (each timed launch's box is packed and compared)",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "region_partial_4d", "region_partial with the output seen as 4D tiles: a box packed by one 3D copy per row tile",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "region_partial_flat", "region_partial with the output flat and its first nx*(ny-1) elements compared (a 1D box)",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "luacheck_skip", "an output left to the spec's Lua check, a third computed on every timed launch (the check now sees the last)",
    { {}, { CHEAT = 2 } }, { FRAC = 35 } },
  { "seed_predict", "sets B and C regenerated from set A's public seed in the untimed warm-up, check 2 answered at once (now drawn with the worker's secret)" },
  { "slack_replay", "a whole replay of a 12 us kernel, under the 10 us slack before the event floor came off check 2" },
  { "slack_replay_big", "the same replay of a 40 us kernel (control)" },
  { "heap_hidden", "heap_xeval with malloc and free in an included header or through a macro (the heap is read off the CUBIN)",
    { { HIDE = 0 }, { HIDE = 1 } }, { UNROLL = 1 } },
  { "eighth_gap", "a last timed launch made inexact (0.7 of the tolerance) to lift the less-exact bar, the others at 2x the tolerance",
    { {}, { TC = 8 }, { CHEAT = 3 } }, { TC = 13 } },
  { "probe_predict", "__sinf only on elements equal to their predicted draw (the seed read off x[0])" },
  { "easy_check2", "a partial replay of a data-dependent GEMV whose honest check 2 is 2x faster than its timed median",
    { { PCT = 30 }, { PCT = 15 }, { PCT = 0 } }, { PCT = 30 } },
  { "residue_xeval", "answers kept in local memory that earlier kernels of the worker left, for the next candidate (62x before the scrub: the second and third are new modules finding the first's answers)",
    { { UNROLL = 1 }, { UNROLL = 2 }, { UNROLL = 1 } }, { STORE = 0, UNROLL = 1 } },
  { "int_maxabs_skip", "an i8 output of max_abs 1 (no per-launch comparison) quantized in part on all but the last timed launch",
    { { PCT = 55 }, { PCT = 25 } }, { PCT = 55 } },
  { "argmax_tail", "an i32 argmax of max_abs 0.5 (exact in effect: compared on every timed launch) computed in part " ..
    "on all but the last", { { PCT = 80 }, { PCT = 60 } }, { PCT = 80 } },
  { "short_sampling", "tail_exact_tf32 with a 400 ms spin on the first tail: sampling stopped at 4 launches, under the 8 " ..
    "the less-exact rule needs (now taken past the time cap while cheap)", { { SPIN_MS = 400, PACE_PCT = 55 } },
    { SPIN_MS = 400, PACE_PCT = 55 } },
  { "int_reltol_skip", "an i32 output under a relative tolerance (no per-launch comparison before) computed 55 % on " ..
    "all but each batch's tail", { { PCT = 55 }, { PCT = 20 } }, { PCT = 55 } },
}
local KNOWN = {
  { "addr_dist", "skips when x sits next to y (the timing copy)" },
  { "fastmath_range", "__sinf: within tolerance on the tested distributions only (per evaluation; the range probe on the winner finds it: test_gpu_range_probe)" },
  { "benign_race", "an end-of-tile barrier dropped (per evaluation; racecheck on the winner catches it: test_gpu_sanitize)" },
  { "onepass_var", "variance as E[x^2] - E[x]^2, which cancels when |mean| >> std: no check or probe draws such rows" },
  { "int8_dp4a", "i32 operands narrowed to int8 (per evaluation; the range probe's integer pass finds it: test_gpu_range_probe)" },
  { "i64_acc", "an i64 output summed in 32 bits (per evaluation; the range probe's integer pass finds it)" },
  { "gen_index", "assumes the generator's index map (a transpose): generated inputs are the same in every check" },
  { "softmax_nomax", "no max subtraction: exp overflows past 88 (per evaluation; the range probe on the winner finds it)" },
  { "probe_dodge", "__sinf unless 32 sampled inputs are large (per evaluation; the range probe's sparse pass finds it: test_gpu_range_probe)" },
  { "sanitizer_dodge", "benign_race that keeps its barrier when shared loads are slow, as under racecheck: the sanitizer sees an honest kernel",
    { DODGE = 1 } },
  { "oob_read", "float4 loads past each row and the buffer's end, masked (per evaluation: the bands catch writes only; memcheck on the winner sees the reads: test_gpu_sanitize)" },
  { "delta_gemm", "recomputes only the rows and columns of C whose inputs changed (the nudge changes few): right on every launch, and slower" },
  { "probe_dodge_dense", "probe_dodge sampling 1024 inputs (per evaluation; the range probe's single-element pass finds it)", { SAMPLES = 1024 } },
  { "probe_first_launch", "exact on a module's first launch only (check 1), __sinf after: within tolerance on the spec's distributions (per evaluation; the range probe's timed launches find it: test_gpu_range_probe)" },
  { "expm1_small", "expm1f as __expf - 1: wrong near 0 only (per evaluation; the range probe's pass at 0.001x says so)" },
  { "probe_spin", "probe_first_launch with a 400 ms spin on the first tail (per evaluation; the range probe's timed launches find it: test_gpu_range_probe)",
    { SPIN_MS = 400 } },
}

local spec_mod = require("kopt.spec")
local function evaluate(name, variants, base)
  local spec = spec_mod.load(DIR .. "/" .. name .. ".json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local function config(cheat, v)
    local c = { CHEAT = cheat }
    for kk, vv in pairs(base or {}) do c[kk] = vv end
    for kk, vv in pairs(v or {}) do c[kk] = vv end
    return c
  end
  local jobs = { { key = "honest", config = config(0) } }
  for k, v in ipairs(variants or { {} }) do
    local c = config(1, v)
    jobs[#jobs + 1] = { key = "cheat" .. k, config = c }
  end
  local res = be:evaluate(jobs)
  be:close()
  return res
end

local function show(r)
  return string.format("%s%s", tostring(r.status), r.log and (": " .. tostring(r.log):gsub("\n", " "):sub(1, 160)) or "")
end

for _, c in ipairs(CAUGHT) do
  local res = evaluate(c[1], c[3], c[4])
  T.eq(res[1].status, "ok", c[1] .. ": the honest kernel (" .. show(res[1]) .. ")")
  for k = 2, #res do
    -- (caught: refused, or charged the time of a check's launch on new inputs)
    T.check(res[k].status ~= "ok" or res[k].charged_check2,
            "%s (%s): the cheat passed the verifier (%.4f ms against honest %.4f ms)",
            c[1], c[2], res[k].time_ms or -1, res[1].time_ms or -1)
    print(string.format("caught %-20s %-8s %s", c[1], tostring(res[k].status), show(res[k])))
  end
end
for _, c in ipairs(KNOWN) do
  local res = evaluate(c[1], nil, c[3])
  T.eq(res[1].status, "ok", c[1] .. ": the honest kernel (" .. show(res[1]) .. ")")
  -- (with the times: a cheat that passes at the honest kernel's time has
  -- not skipped any timed work, whatever it tried)
  print(string.format("%s %-20s %s, %.4f ms against honest %.4f ms (%s)",
                      res[2].status == "ok" and "known, not caught:" or "now caught:", c[1], show(res[2]),
                      res[2].time_ms or -1, res[1].time_ms or -1, c[2]))
end

-- A spec whose tolerance is wider than its update: an in-place y += 1e-6
-- g(y) replaced by a one-ulp flip of y is within it, and not stale (it was
-- caught before only through a bug: the timed launch's in/out buffer was
-- copied from the inputs before their nudge, which failed honest in-place
-- kernels too). The spec says so at the start: its own initial content
-- moved by a rounding step passes.
do
  local spec = spec_mod.load(DIR .. "/inout_nearcopy.json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local res = be:evaluate({ { key = "honest", config = { CHEAT = 0 } }, { key = "cheat", config = { CHEAT = 1 } } })
  local warned = table.concat(be.spec_warnings or {}, "\n")
  be:close()
  T.eq(res[1].status, "ok", "inout_nearcopy: the honest kernel (" .. show(res[1]) .. ")")
  print(string.format("known, the spec warns: inout_nearcopy %s, %.4f ms against honest %.4f ms", show(res[2]),
                      res[2].time_ms or -1, res[1].time_ms or -1))
  T.check(warned:find("its own initial content ('y0') moved by a rounding step", 1, true),
          "inout_nearcopy: the spec's warning:\n%s", warned)
end

-- Timing games: a cheat whose output is exact but whose time is not the
-- honest kernel's on a cold L2. l2_pin loads its input with the evict_last
-- policy, which outlived the old flush (a memset of normal priority): 1.25x
-- faster. The flush now sweeps with evict_last too: 1.06x on an H200, the
-- same with a sweep of four times the L2 as of twice, so what is left is
-- its load instruction (ld.global with a cache hint against __ldg), not a
-- warm L2; the bar is 10 %.
do
  local res = evaluate("l2_pin")
  T.eq(res[1].status, "ok", "l2_pin: the honest kernel (" .. show(res[1]) .. ")")
  T.eq(res[2].status, "ok", "l2_pin: the cheat's output is exact (" .. show(res[2]) .. ")")
  local h, c = res[1].time_ms or 0, res[2].time_ms or 0
  print(string.format("timing game l2_pin: honest %.4f ms, cheat %.4f ms (%.2fx)", h, c, c > 0 and h / c or 0))
  T.check(c >= 0.90 * h, "l2_pin: the evict_last input outlived the L2 flush (%.4f ms against honest %.4f ms)", c, h)
end

-- A result cache keyed on the input's address and a few of its words with
-- the low bits masked: it replays set A's answer on every timed launch
-- (the nudge flips one low bit of one word, within the tolerance) and
-- computes on new inputs. Its output passes every comparison; its check 2
-- launch, on new inputs in the same module and buffers, is timed too, and
-- a kernel far faster when timed is charged that time (19x before).
do
  local res = evaluate("const_replay")
  T.eq(res[1].status, "ok", "const_replay: the honest kernel (" .. show(res[1]) .. ")")
  T.check(not res[1].charged_check2, "const_replay: the honest kernel keeps its timed median")
  local h, c = res[1].time_ms or 0, res[2].time_ms or 0
  print(string.format("timing game const_replay: %s, honest %.4f ms, cheat %.4f ms (%.2fx), charged %s",
                      show(res[2]), h, c, c > 0 and h / c or 0, tostring(res[2].charged_check2)))
  T.check(res[2].status ~= "ok" or (res[2].charged_check2 and c >= 0.5 * h),
          "const_replay: the replay was timed (%.4f ms against honest %.4f ms)", c, h)
end

-- The same replay paced to a part of its compute time (2.6x and 3.2x
-- faster before the bar came down to 2x and 10 us), and a cache of answers
-- kept in the device heap, which outlived each evaluation's module: from the
-- second config on, check 1, the timed launches and check 2 all replayed
-- (15x). A candidate whose code allocates on the heap now runs in a worker
-- of its own, so it computes once and is charged like the replay.
for _, c in ipairs({ { "replay_paced", { { PACE_PCT = 40 }, { PACE_PCT = 48 } }, { PACE_PCT = 40 } },
                     { "heap_xeval", { {}, { UNROLL = 4 }, { UNROLL = 1 } }, { UNROLL = 1 } } }) do
  local res = evaluate(c[1], c[2], c[3])
  T.eq(res[1].status, "ok", c[1] .. ": the honest kernel (" .. show(res[1]) .. ")")
  T.check(not res[1].charged_check2, "%s: the honest kernel keeps its timed median", c[1])
  local h = res[1].time_ms or 0
  for k = 2, #res do
    local t = res[k].time_ms or 0
    print(string.format("timing game %s #%d: %s, honest %.4f ms, cheat %.4f ms (%.2fx), charged %s", c[1], k - 1,
                        show(res[k]), h, t, t > 0 and h / t or 0, tostring(res[k].charged_check2)))
    T.check(res[k].status ~= "ok" or t >= 0.5 * h, "%s #%d: the replay was timed (%.4f ms against honest %.4f ms)",
            c[1], k - 1, t, h)
  end
end

-- sabotage_next wrote into check 1's input while timed; the candidate
-- after it is honest and must stay ok (it was blamed before).
do
  local spec = spec_mod.load(DIR .. "/sabotage_next.json")
  local be = cuda.open(spec, { seed = 7, timing = { max_time_s = 0.3 }, timeout_floor_ms = 3000 })
  local res = {}
  for k, cheat in ipairs({ 0, 1, 0 }) do res[k] = be:evaluate({ { key = "s" .. k, config = { CHEAT = cheat } } })[1] end
  be:close()
  T.eq(res[1].status, "ok", "sabotage_next: honest (" .. show(res[1]) .. ")")
  T.check(res[2].status == "wrong", "sabotage_next: the cheat is blamed (%s)", show(res[2]))
  T.eq(res[3].status, "ok", "sabotage_next: the honest candidate after it (" .. show(res[3]) .. ")")
end

-- The same shortcuts where the spec declares the input fixed ({"dist":
-- "ones", "fixed": true}; a generator's "fixed": true): the kernel may rely
-- on it, so both configs are ok.
for _, name in ipairs({ "const_init_fixed", "gen_draw_fixed" }) do
  local res = evaluate(name)
  T.eq(res[1].status, "ok", name .. ": the honest kernel (" .. show(res[1]) .. ")")
  T.eq(res[2].status, "ok", name .. ": the input declared fixed, the shortcut is allowed (" .. show(res[2]) .. ")")
end
return T.done()
