-- A spec's generator (`"init": {"generate": ...}`) gets ctx.rng with
-- uniform(), normal() and random(m, n), as specs/README.md lists them: called
-- with a dot they once failed inside kopt.rng ("attempt to index a nil value
-- (local 'self')"); a dot and a colon now give the same seeded numbers.
-- random(m, nil), a misspelt size as the upper bound, was read as the
-- one-argument random(m) and blamed an "empty interval [1, 0]".
local T = require("testlib")
local hostdata = require("kopt.hostdata")

local arg = { count = 4, shape = { 4 }, type = "f32" }
local function run(body)
  local fn = assert(hostdata.load_function("return function(ctx) " .. body .. " end", "gen"))
  local bytes, why = hostdata.generate({ fn = fn, seed = 5 }, arg, {}, {})
  T.check(bytes ~= nil, "generator %q: %s", body, tostring(why))
  return bytes and hostdata.unpack(bytes, "f32")
end
local dot = run("local o = {} for i = 1, ctx.n do o[i] = ctx.rng.uniform() + ctx.rng.random(1, 3) + ctx.rng.normal() end return o")
local colon = run("local o = {} for i = 1, ctx.n do o[i] = ctx.rng:uniform() + ctx.rng:random(1, 3) + ctx.rng:normal() end return o")
T.check(dot and colon, "both styles ran")
for i = 1, 4 do T.eq(dot and dot[i], colon and colon[i], "element " .. i .. ": a dot and a colon give the same numbers") end
-- kopt.rng's other methods stay reachable (shuffle, permutation)
local perm = run("local p = ctx.rng:permutation(ctx.n) ctx.rng:shuffle(p) return p")
local seen = {}
for _, x in ipairs(perm or {}) do seen[x] = true end
T.check(seen[1] and seen[2] and seen[3] and seen[4], "permutation and shuffle: a permutation of 1..4")

-- a nil upper bound (ctx.sizes.mm, a size that is not there) is named as
-- such, not read as random(0)
do
  local fn = assert(hostdata.load_function("return function(ctx) return { ctx.rng:random(0, ctx.sizes.mm) } end", "gen"))
  local bytes, why = hostdata.generate({ fn = fn, seed = 5 }, { count = 1, shape = { 1 }, type = "i32" }, {}, {})
  T.check(bytes == nil and tostring(why):find("the bounds must be whole numbers, got 0 and nil", 1, true),
          "random(0, nil): %s", tostring(why))
  local one = run("local o = {} for i = 1, ctx.n do o[i] = ctx.rng:random(3) end return o")
  for i = 1, 4 do T.check(one and one[i] >= 1 and one[i] <= 3, "random(3) is in [1, 3]") end
end

-- a generator that never returns stops at the time limit with a message
-- (it hung `kopt compile` silently before); the hook is gone after it
do
  local limit = hostdata.GENERATOR_LIMIT_S
  hostdata.GENERATOR_LIMIT_S = 0.2
  local fn = assert(hostdata.load_function("return function(ctx) while true do end end", "gen"))
  local bytes, why = hostdata.generate({ fn = fn, seed = 5 }, arg, {}, {})
  hostdata.GENERATOR_LIMIT_S = limit
  T.check(bytes == nil and tostring(why):find("the generator ran past 0.2 s", 1, true), "an endless generator: %s",
          tostring(why))
  T.check(debug.gethook() == nil, "no hook left behind")
  T.check(run("local o = {} for i = 1, ctx.n do o[i] = i end return o") ~= nil, "the next generator runs")
end
return T.done()
