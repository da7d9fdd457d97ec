-- Numbers for comparing strategies on a recorded space (kopt compare).
--
-- Random search is never simulated here: its curve is computed exactly from
-- the recording. Random sampling without replacement draws b of the M
-- recorded configurations (failures included: each costs an evaluation, as
-- in replay); with the N successful times sorted v_1 <= ... <= v_N, the
-- chance that none of the k fastest is among the b drawn is
--   Q_b(k) = C(M-k, b) / C(M, b),   Q_b(k+1) = Q_b(k) * (M-k-b) / (M-k),
-- so the best found is v_j with probability Q_b(j-1) - Q_b(j), and nothing
-- successful with probability Q_b(N).
local M = {}

-- Facts of a recording: sorted successful times, entry count, optimum,
-- median, worst.
function M.space_facts(entries)
  local v = {}
  for _, e in ipairs(entries) do
    if e.status == "ok" and type(e.time_ms) == "number" then v[#v + 1] = e.time_ms end
  end
  table.sort(v)
  local n = #v
  local median
  if n > 0 then median = n % 2 == 1 and v[(n + 1) // 2] or (v[n // 2] + v[n // 2 + 1]) / 2 end
  return { sorted = v, entries = #entries, valid = n, opt = v[1], median = median, worst = v[n] }
end

-- Expected best time and expected fraction of optimum (opt / best, 0 when
-- nothing succeeded) of random search after b evaluations. `nothing` is the
-- time charged while no success was found (default: the worst time).
function M.random_expectation(facts, b, nothing)
  local v, m, n = facts.sorted, facts.entries, facts.valid
  nothing = nothing or facts.worst
  if n == 0 then return nothing, 0 end
  b = math.min(b, m)
  local q, et, ef = 1.0, 0.0, 0.0
  for j = 1, n do
    local k = j - 1
    local nq = (m - k - b) > 0 and q * (m - k - b) / (m - k) or 0.0
    local p = q - nq
    et, ef = et + p * v[j], ef + p * (facts.opt / v[j])  -- (the ratio first: a subnormal opt underflows)
    q = nq
    if q < 1e-17 then break end -- the rest weighs less than rounding
  end
  return et + q * nothing, ef
end

-- The exact random-search curves for b = 1..upto: times[b], fractions[b].
function M.random_curve(facts, upto)
  local times, fractions = {}, {}
  for b = 1, upto do times[b], fractions[b] = M.random_expectation(facts, b) end
  return times, fractions
end

-- Probability that random search has not yet found any of the k best
-- configurations after t evaluations (C(M-k, t) / C(M, t)).
local function miss_prob(m, k, t)
  local q = 1.0
  for i = 0, t - 1 do
    if m - k - i <= 0 then return 0.0 end
    q = q * (m - k - i) / (m - i)
  end
  return q
end

-- Number of successful configurations within `tol` (0.05 = 5 %) of the optimum.
function M.count_within(facts, tol)
  local k, limit = 0, facts.opt * (1 + tol)
  for _, t in ipairs(facts.sorted) do
    if t <= limit then k = k + 1 else break end
  end
  return k
end

-- Median number of evaluations random search needs to get within `tol` of
-- the optimum (smallest t with P(hit by t) >= 1/2), and the mean (M+1)/(k+1).
function M.random_evals_within(facts, tol)
  local k, m = M.count_within(facts, tol), facts.entries
  local lo, hi = 1, m
  while lo < hi do
    local mid = (lo + hi) // 2
    -- (with a tolerance: the product of ratios ends a few ulps off an exact 1/2)
    if 1 - miss_prob(m, k, mid) >= 0.5 - 1e-12 then hi = mid else lo = mid + 1 end
  end
  return lo, (m + 1) / (k + 1)
end

-- Willemsen et al.'s cutoff: the evaluations random search needs, in
-- expectation, to reach opt + (median - opt) * (1 - p). With i = the number
-- of successful configurations slower than that target, the budget is
-- ceil(i / (N + 1 - i)) (autotuning_methodology, searchspace_statistics.py,
-- cutoff_point; N counts successes only, as there).
function M.cutoff(facts, p)
  p = p or 0.95
  if facts.valid == 0 then return 1, nil end
  local target = facts.opt + (facts.median - facts.opt) * (1 - p)
  local n, i = facts.valid, 0
  for j = n, 1, -1 do
    if facts.sorted[j] > target then i = i + 1 else break end
  end
  return math.max(1, math.ceil(i / (n + 1 - i))), target
end

-- Whether the score's term at b counts: R(b) - opt, its denominator, is
-- not 0 (random search's expected best is not the optimum yet).
local function score_counts(facts, r) return r - facts.opt > 1e-12 * facts.opt end

-- Why the methodology score is not defined on a space, or nil when it is:
-- with every success at one time, "nothing found yet" is charged that time
-- too, so R(b) is the optimum at every b and each term divides by 0.
function M.score_undefined(facts, cutoff, random_times)
  for b = 1, cutoff do
    if score_counts(facts, random_times[b]) then return nil end
  end
  local who = facts.valid == 1 and string.format("only one of the %d configurations ran", facts.entries)
    or string.format("the %d configurations that ran all take %.5g ms", facts.valid, facts.opt)
  return who .. ", so random search's expected best (with \"nothing found yet\" charged at the slowest time that "
    .. "ran) is the optimum at every evaluation, and each (R(b) - S(b)) / (R(b) - t_opt) divides by 0"
end

-- Summary of one strategy on one space. curves[s][b] = best time after b
-- evaluations in seed s (math.huge before the first success).
-- random_times: M.random_curve's times, at least `cutoff` long.
function M.summarise(facts, curves, budgets, cutoff, random_times)
  -- seed_fraction[s][i]: seed s's fraction at budgets[i], so a reader can
  -- see which seeds make a mean (and how far apart they are)
  local out = { fraction = {}, seed_fraction = {}, within = {}, score = nil }
  local S = #curves
  for s = 1, S do out.seed_fraction[s] = {} end
  for i, b in ipairs(budgets) do
    local sum = 0
    for s, c in ipairs(curves) do
      local t = c[math.min(b, #c)]
      local f = (t and t < math.huge) and facts.opt / t or 0
      out.seed_fraction[s][i] = f
      sum = sum + f
    end
    out.fraction[i] = sum / S
  end
  for _, tol in ipairs({ 0.05, 0.01 }) do
    local needed, limit = {}, facts.opt * (1 + tol)
    for s, c in ipairs(curves) do
      needed[s] = math.huge
      for b = 1, #c do
        if c[b] <= limit then needed[s] = b break end
      end
    end
    table.sort(needed)
    local med = S % 2 == 1 and needed[(S + 1) // 2] or (needed[S // 2] + needed[S // 2 + 1]) / 2
    out.within[tol] = med
  end
  -- Methodology score: mean over b = 1..cutoff of (R(b) - S(b)) / (R(b) - opt),
  -- R the exact random expectation and S the strategy's mean best time
  -- (the worst time stands for "nothing found yet", in both); nil where
  -- no b counts (M.score_undefined).
  local total, count = 0, 0
  for b = 1, cutoff do
    local r = random_times[b]
    local sum = 0
    for _, c in ipairs(curves) do
      local t = c[math.min(b, #c)]
      sum = sum + ((t and t < math.huge) and t or facts.worst)
    end
    if score_counts(facts, r) then
      total, count = total + (r - sum / S) / (r - facts.opt), count + 1
    end
  end
  out.score = count > 0 and total / count or nil
  return out
end

-- The gap of one strategy to the best of others at one budget, and how far
-- seed noise moves it: own[s] and each others[j][s] are per-seed fractions.
-- Returns the gap (own mean minus the largest other mean) and the bounds of
-- its central `level` interval by the percentile bootstrap: each list's
-- seeds are resampled on their own (the runs are independent), `draws`
-- times, with rng (a kopt.rng). The largest mean is taken again in every
-- draw, so the interval also carries the upward bias of a best-of-several.
function M.gap_interval(own, others, draws, rng, level)
  local function mean(xs) local acc = 0 for _, x in ipairs(xs) do acc = acc + x end return acc / #xs end
  local function resampled_mean(xs)
    local acc = 0
    for _ = 1, #xs do acc = acc + xs[rng:random(#xs)] end
    return acc / #xs
  end
  local function best_other(m)
    local b = -math.huge
    for _, o in ipairs(others) do b = math.max(b, m(o)) end
    return b
  end
  local gap = mean(own) - best_other(mean)
  local sample = {}
  for d = 1, draws do sample[d] = resampled_mean(own) - best_other(resampled_mean) end
  table.sort(sample)
  local tail = (1 - level) / 2
  local lo = sample[math.max(1, math.floor(tail * draws + 0.5))]
  local hi = sample[math.min(draws, math.ceil((1 - tail) * draws - 0.5))]
  return gap, lo, hi
end

return M
