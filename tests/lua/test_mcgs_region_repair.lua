-- MCGS's region descents whose start fails (--opt region_repair): the held
-- value may need another knob changed with it (a larger tile with a
-- smaller block), so the descent goes on from the failed start over its
-- neighbours that keep the held knob. A hand-made space of 300 configs:
-- method M = 3 is the fastest by 20 %, but only with S <= 3, as a resource
-- limit would have it; at larger S it fails. M = 1 and M = 2 are bowls whose
-- best lies at S = 6, so the search settles there, and the region M = 3
-- starts from S = 6: a failure. Without the option that ends the region;
-- with it, the descent holds M = 3, steps S down through the failures and
-- reaches the valid part.
local T = require("testlib")

local tmp = T.tmpdir("mcgs_region_repair")
local function time_of(m, s, k)
  if m == 3 then return s <= 3 and 0.8 * (1 + 0.05 * (s - 3) ^ 2) * (1 + 0.02 * math.abs(k - 4)) or 1e20 end
  return (m == 1 and 1 or 1.1) * (1 + 0.05 * (s - 6) ^ 2) * (1 + 0.02 * math.abs(k - 4))
end
local space = T.grid_space(tmp .. "/space.json", { { "M", 3 }, { "S", 10 }, { "K", 10 } }, time_of)

-- per run: whether a region M=3 descent step followed a failed M=3 start
-- (a region's start is its first evaluation in that region), and whether
-- that descent then measured a valid M=3 config
local function run(seed, opts)
  local failed, after_failed, reached = {}, false, false
  for _, e in ipairs(T.mcgs_replay(tmp, space, 120, seed, "--opt stall_move=region " .. opts)) do
    local o, r, c = e.origin or {}, e.result or {}, e.config or {}
    local key = string.format("%d,%d,%d", c.M or 0, c.S or 0, c.K or 0)
    if r.status ~= "ok" and c.M == 3 then failed[key] = true end
    if o.region == "M=3" and o.rollout and o.parent and failed[o.parent] then after_failed = true end
    if after_failed and o.region == "M=3" and r.status == "ok" and c.M == 3 then reached = true end
  end
  return after_failed, reached
end

local SEEDS = 12
local on_after, on_reached, off_after = 0, 0, 0
for seed = 1, SEEDS do
  local a, r = run(seed, "--opt region_repair=true")
  on_after, on_reached = on_after + (a and 1 or 0), on_reached + (r and 1 or 0)
  a = run(seed, "--opt region_repair=false")
  off_after = off_after + (a and 1 or 0)
end
T.eq(off_after, 0, "without region_repair no descent goes on from a failed region start")
-- (random samples find M = 3 with S <= 3 in most runs before a region
-- starts there: 10 % of the space; in the others the descent must walk S
-- down past the failures, and it misses once per failure)
T.check(on_after >= 2, "with it, a descent goes on from a failed M=3 start: %d of %d runs", on_after, SEEDS)
T.check(on_reached >= 1, "and reaches a valid M=3 config: %d of those %d", on_reached, on_after)

return T.done()
