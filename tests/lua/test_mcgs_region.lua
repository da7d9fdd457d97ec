-- MCGS's region descents (--opt stall=N --opt stall_move=region, one of the
-- two moves of the default adaptive,
-- kopt.mcgs_portfolio): once the search makes no progress, the best state's
-- knob is set to another value and held while a descent retunes the others.
-- A hand-made trap of 1080 configs: method M = 2 is best as the trap's own
-- sizes stand (S = 3, K = 3); M = 1 is slower there and improves steadily
-- with S and K, and only with both near their top (three knobs changed from
-- the trap's optimum) does it beat the trap, by 8 %. No one-knob move and no
-- two-knob move of the trap's optimum is faster, so neither the plain search
-- nor the pair moves of stall_move=pair see the way out; a descent held in
-- M = 1 walks it. For seeds where MCGS without stall stays in the trap for
-- 150 evaluations, region descents must beat the trap within the same budget.
local T = require("testlib")

local tmp = T.tmpdir("mcgs_region")
local function time_of(m, s, k, c)
  local t
  if m == 2 then t = (1 + 0.05 * (s - 3) ^ 2) * (1 + 0.02 * math.abs(k - 3))
  elseif m == 1 then t = 1.5 * (1 - 0.03 * (s - 1)) * (1 - 0.03 * (k - 1))
  else t = 2.0 end
  return t * (1 + 0.01 * c)
end
local space = T.grid_space(tmp .. "/trap.json", { { "M", 3 }, { "S", 10 }, { "K", 6 }, { "C", 6 } }, time_of)

-- the trap holds: its optimum beats every one- and two-knob move of itself
local trap = time_of(2, 3, 3, 1)
for m = 1, 3 do
  for s = 1, 10 do
    for k = 1, 6 do
      local changed = (m ~= 2 and 1 or 0) + (s ~= 3 and 1 or 0) + (k ~= 3 and 1 or 0)
      if changed <= 2 then T.check(time_of(m, s, k, 1) >= trap, "trap: (%d,%d,%d) is not faster", m, s, k) end
    end
  end
end

-- whether the run measured a state faster than the trap's optimum
local function escaped(seed, opts)
  for _, e in ipairs(T.mcgs_replay(tmp, space, 150, seed, opts)) do
    if e.result and e.result.status == "ok" and e.result.time_ms < trap * 0.999 then return true end
  end
  return false
end

-- (arm_c=0.3, the portfolio's former exploration weight: with the default
-- 0.6 the plain search leaves this trap on every seed by itself; and
-- model_kind=forest: a GP, which the default model_kind=auto may choose,
-- follows M = 1's steady slope out of it; moves=rules: the trap is for the
-- rule moves alone)
local PLAIN = "--opt arm_c=0.3 --opt model_kind=forest --opt moves=rules"
local trapped, freed = T.trapped_and_freed(16, escaped, "--opt stall=0 " .. PLAIN,
                                           "--opt stall=15 --opt stall_move=region " .. PLAIN)
T.check(trapped >= 2, "without stall some seeds stay in the trap for 150 evaluations: %d of 16", trapped)
T.eq(freed, trapped, "with region descents each of them beats the trap")
-- The stall bandit's choices (kopt compare sums MCGS's counters): stalled
-- iterations go to both moves under the default, to region descents alone
-- under stall_move=region.
do
  local out = T.tmpdir("mcgs_region_compare")
  local code, _, err = T.run(string.format("compare --strategies 'mcgs,mcgs@stall_move=region' --spaces %s " ..
                                           "--seeds 4 --budgets 150 --out %s -q", space, out))
  T.eq(code, 0, "compare (" .. err .. ")")
  local bench = require("cjson").decode(T.slurp(out .. "/benchmark.json"))
  local stats = {}
  for _, st in ipairs(bench.spaces[1].strategies) do stats[st.name] = st.stats or {} end
  local a, r = stats["mcgs"] or {}, stats["mcgs@stall_move=region"] or {}
  T.check((a.stall_region or 0) > 0 and (a.stall_ei or 0) > 0, "adaptive: stalled iterations to region %s, ei %s",
          tostring(a.stall_region), tostring(a.stall_ei))
  T.check(r.stall_region == nil and r.stall_ei == nil, "stall_move=region has no stall bandit")
end

return T.done()
