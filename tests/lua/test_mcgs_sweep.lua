-- How MCGS's region descents begin (kopt.mcgs_portfolio, stall_move=region):
-- the sweep (stall_sweep) measures the best state's other settings of its
-- small knobs alone before any descent, and with region_order=turns the
-- knobs take turns among the regions (each one's most promising value
-- first) rather than one knob's values filling the first descents. Read
-- from the event stream of replays of a space with a plateau: each check
-- is also run with the feature off, where it must fail for some seed, so a
-- check that cannot fail is caught too.
local T = require("testlib")

local tmp = T.tmpdir("mcgs_sweep")
-- A plateau around M = 2, S = 3, K = 3 (no one-knob move of it is faster),
-- and a better region at M = 1 with large S and K; C and D are near-flat.
local function time_of(m, s, k, c, d)
  local t
  if m == 2 then t = (1 + 0.05 * (s - 3) ^ 2) * (1 + 0.02 * math.abs(k - 3))
  elseif m == 1 then t = 1.5 * (1 - 0.03 * (s - 1)) * (1 - 0.03 * (k - 1))
  else t = 2.0 end
  return t * (1 + 0.01 * c) * (1 + 0.005 * d)
end
local knobs = { { "M", 3 }, { "S", 10 }, { "K", 6 }, { "C", 4 }, { "D", 3 } }
local nvalues = {}
for _, k in ipairs(knobs) do nvalues[k[1]] = k[2] end
local space = T.grid_space(tmp .. "/plateau.json", knobs, time_of)

-- a config's key in the recording (the knobs in order)
local function key(c) return string.format("%d,%d,%d,%d,%d", c.M, c.S, c.K, c.C, c.D) end

-- the knobs in which config a differs from b
local function changed(a, b)
  local out = {}
  for _, k in ipairs(knobs) do
    if a[k[1]] ~= b[k[1]] then out[#out + 1] = k[1] end
  end
  return out
end

-- Walks a run's evaluations with the best state so far; calls
-- visit(ev, best, seen) for each, seen: key -> true for those before it.
local function walk(evals, visit)
  local best, best_t, seen = nil, math.huge, {}
  for _, ev in ipairs(evals) do
    visit(ev, best, seen)
    seen[ev.key] = true
    local r = ev.result
    if r and r.status == "ok" and r.time_ms < best_t then best, best_t = ev.config, r.time_ms end
  end
end

local function method(ev) return ev.origin and ev.origin.method end

-- Sweep: every sweep evaluation is a one-knob change of the best state in
-- a knob of at most 6 values; and when a descent's start is measured, the
-- best state's small-knob settings have all been measured already.
local function sweep_violations(evals)
  local bad, sweeps = 0, 0
  walk(evals, function(ev, best, seen)
    if method(ev) == "region_sweep" then
      sweeps = sweeps + 1
      local c = changed(ev.config, best)
      T.check(#c == 1 and nvalues[c[1]] <= 6, "a sweep evaluation changes one small knob of the best: %s",
              table.concat(c, ","))
    elseif method(ev) == "region" then
      for _, k in ipairs(knobs) do
        if k[2] <= 6 then
          for v = 1, k[2] do
            local c = {}
            for name, x in pairs(best) do c[name] = x end
            c[k[1]] = v
            if not seen[key(c)] then bad = bad + 1 end
          end
        end
      end
    end
  end)
  return bad, sweeps
end

-- Turns: the first two region descents after a new best (origin.region of
-- their evaluations, "KNOB=VALUE") hold different knobs.
local function turn_repeats(evals)
  local repeats, pairs_seen, regions, best_key = 0, 0, {}, nil
  walk(evals, function(ev, best)
    local bk = best and key(best)
    if bk ~= best_key then best_key, regions = bk, {} end
    local region = ev.origin and ev.origin.region
    if not region or regions[#regions] == region then return end
    regions[#regions + 1] = region
    if #regions == 2 then
      pairs_seen = pairs_seen + 1
      if regions[1]:match("^[^=]+") == regions[2]:match("^[^=]+") then repeats = repeats + 1 end
    end
  end)
  return repeats, pairs_seen
end

-- The evaluations that made progress (a new best by stall_gain, 0.01 in
-- log-time, over the last progress): n -> true.
local function progress_marks(evals)
  local made, progress_t, best_t = {}, math.huge, math.huge
  for n, ev in ipairs(evals) do
    local r = ev.result
    if r and r.status == "ok" and r.time_ms < best_t then
      best_t = r.time_ms
      if math.log(progress_t / best_t) > 0.01 then progress_t, made[n] = best_t, true end
    end
  end
  return made
end

-- Memory: since the last progress, no region is descended a second time,
-- though smaller gains give new best states. On the plateau with two fine
-- knobs F and C (a step of either changes the time by less than 0.4 %, in
-- no order), whose new bests come during the descents.
local function region_repeats(evals)
  local made = progress_marks(evals)
  local repeats, done, last = 0, {}, nil
  for n, ev in ipairs(evals) do
    local region = ev.origin and ev.origin.region
    if region and region ~= last then
      if done[region] then repeats = repeats + 1 end
      done[region] = true
    end
    last = region or last
    if made[n] then done, last = {}, nil end
  end
  return repeats
end

local total = { sweeps = 0, pairs = 0, off_bad = 0, knob_repeats = 0 }
for seed = 1, 6 do
  local on = T.mcgs_replay(tmp, space, 160, seed, "--opt stall=15 --opt stall_move=region")
  local bad, sweeps = sweep_violations(on)
  T.eq(bad, 0, "seed " .. seed .. ": descents start after the sweep of the small knobs")
  local repeats, n = turn_repeats(on)
  T.eq(repeats, 0, "seed " .. seed .. ": the first two regions of a best state change different knobs")
  total.sweeps, total.pairs = total.sweeps + sweeps, total.pairs + n
  local off = T.mcgs_replay(tmp, space, 160, seed, "--opt stall=15 --opt stall_move=region --opt stall_sweep=0 --opt region_order=knob")
  total.off_bad = total.off_bad + sweep_violations(off)
  total.knob_repeats = total.knob_repeats + turn_repeats(off)
end
T.check(total.sweeps > 0, "the runs swept (%d sweep evaluations)", total.sweeps)
T.check(total.pairs > 0, "the runs had two region starts after one best (%d times)", total.pairs)
T.check(total.off_bad > 0, "without the sweep a descent starts before the small knobs are measured")
T.check(total.knob_repeats > 0, "with region_order=knob a knob's second value comes before the next knob")

-- Early sweep (sweep_at, 5 by default): a sweep evaluation may come 5
-- evaluations after the last progress, before the stall (15); with an
-- expensive move generator in the search (an LLM expert's place) the
-- sweep waits for the stall, so the tree keeps the iterations that ask it.
-- Counts the sweep evaluations fewer than stall - 1 evaluations after the
-- last progress.
local function early_sweeps(evals)
  local made = progress_marks(evals)
  local early, progress_n = 0, 0
  for n, ev in ipairs(evals) do
    if method(ev) == "region_sweep" and n - 1 - progress_n < 14 then early = early + 1 end
    if made[n] then progress_n = n end
  end
  return early
end
local tmp_early = T.tmpdir("mcgs_sweep_early")
local idle_expert = tmp_early .. "/idle_expert.lua"
T.write(idle_expert, [[return { name = "idle_expert", expensive = true, propose = function() return {} end }]])
local early = { plain = 0, expert = 0 }
for seed = 1, 6 do
  early.plain = early.plain + early_sweeps(T.mcgs_replay(tmp_early, space, 160, seed,
                                                         "--opt stall=15 --opt stall_move=region --opt moves=rules"))
  early.expert = early.expert + early_sweeps(T.mcgs_replay(tmp_early, space, 160, seed,
                                                           "--opt stall=15 --opt stall_move=region --opt moves=rules," .. idle_expert))
end
T.check(early.plain > 0, "without an expensive generator the sweep comes before the stall (%d times)", early.plain)
T.eq(early.expert, 0, "with an expensive generator no sweep comes before the stall")

local function fine_time(m, s, k, f, c)
  return time_of(m, s, k, 1, 1) * (1 + 0.004 * ((f * 7) % 12) / 11) * (1 + 0.003 * ((c * 5) % 8) / 7)
end
local tmp_fine = T.tmpdir("mcgs_sweep_fine")
local fine = T.grid_space(tmp_fine .. "/fine.json", { { "M", 3 }, { "S", 10 }, { "K", 6 }, { "F", 12 }, { "C", 8 } },
                          fine_time)
local forgot = 0
for seed = 1, 6 do
  T.eq(region_repeats(T.mcgs_replay(tmp_fine, fine, 160, seed, "--opt stall=15 --opt stall_move=region")), 0,
       "seed " .. seed .. ": no region descended twice without progress")
  forgot = forgot + region_repeats(T.mcgs_replay(tmp_fine, fine, 160, seed, "--opt stall=15 --opt stall_move=region --opt region_memory=false"))
end
T.check(forgot > 0, "with region_memory=false a region is descended again after a small gain")

return T.done()
