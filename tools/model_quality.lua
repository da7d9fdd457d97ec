-- How well a value model predicts a recorded space from a few samples, and
-- how smooth the space is along single knobs:
--   kopt script tools/model_quality.lua SPACE.json[,SPACE.json...] [SAMPLES [TRIALS]]
-- For each space, TRIALS times (default 10): SAMPLES (default 20) uniform
-- random successes fit the forest and the Gaussian process that MCGS and
-- the surrogate strategy use (kopt.classic), and 300 random successes not
-- among them are predicted. It prints, averaged over the trials:
--   spearman  the rank correlation of predicted and measured log(time);
--   top       the quantile, among the 300, of the measured time of the one
--             each model predicts fastest (0: it found the fastest);
--   step      the mean |log(time)| change of a one-knob adjacent step over
--             that of two random configurations (small: a walk of small
--             steps sees a smooth space).
-- A space where the models rank well rewards model-guided search (the
-- surrogate, MCGS's ei arm); one where they do not and steps are smooth
-- rewards walking (anneal). docs/SEARCH.md compares the recorded and the
-- generated spaces this way.
local classic = require("kopt.classic")
local features = require("kopt.model_features")
local replay = require("kopt.backends.replay")
local rng_mod = require("kopt.rng")

local USAGE = "usage: kopt script tools/model_quality.lua SPACE.json[,SPACE.json...] [SAMPLES [TRIALS]]"
local files = arg[1]
local n_fit = math.tointeger(tonumber(arg[2] or "20"))
local trials = math.tointeger(tonumber(arg[3] or "10"))
if not files or not n_fit or n_fit < 3 or not trials or trials < 1 or #arg > 3 then
  io.stderr:write(USAGE, "\n")
  os.exit(2)
end
local N_TEST, N_STEPS, DRAWS = 300, 400, 20000

-- Ranks of v, ties sharing their mean rank (a forest predicts the same
-- time for every configuration in one leaf).
local function ranks(v)
  local order = {}
  for i = 1, #v do order[i] = i end
  table.sort(order, function(a, b) if v[a] ~= v[b] then return v[a] < v[b] end return a < b end)
  local r, k = {}, 1
  while k <= #order do
    local last = k
    while last < #order and v[order[last + 1]] == v[order[k]] do last = last + 1 end
    for m = k, last do r[order[m]] = (k + last) / 2 end
    k = last + 1
  end
  return r
end

-- (the Pearson correlation of the ranks: exact with ties too)
local function spearman(a, b)
  local n, ra, rb = #a, ranks(a), ranks(b)
  local mean, sab, saa, sbb = (n + 1) / 2, 0, 0, 0
  for i = 1, n do
    local da, db = ra[i] - mean, rb[i] - mean
    sab, saa, sbb = sab + da * db, saa + da * da, sbb + db * db
  end
  if saa == 0 or sbb == 0 then return 0 end
  return sab / math.sqrt(saa * sbb)
end

-- The quantile among `actual` of the entry `predicted` puts first.
local function top_quantile(actual, predicted)
  local pick = 1
  for i = 2, #predicted do if predicted[i] < predicted[pick] then pick = i end end
  local faster = 0
  for _, a in ipairs(actual) do if a < actual[pick] then faster = faster + 1 end end
  return faster / #actual
end

-- Up to n random successes of the space as { config, log(time) }, none
-- of the keys in `exclude` (the fitted ones: a model that interpolates
-- would be scored on what it was given).
local function draw(space, log_time, rng, n, exclude)
  local out = {}
  for _ = 1, DRAWS do
    if #out >= n then break end
    local c = space:sample(rng)
    local lt = c and not (exclude and exclude[space:key(c)]) and log_time(c)
    if lt then out[#out + 1] = { c, lt } end
  end
  return out
end

local function assess(file)
  local backend = replay.open(nil, { file = file, quiet = true })
  local space = backend.space
  local function log_time(c)
    local e = backend:lookup(c)
    if e and e.status == "ok" and type(e.time_ms) == "number" and e.time_ms > 0 then return math.log(e.time_ms) end
    return nil
  end
  local enc = features.encoder(space, "ordinal")
  if #enc.free == 0 then return nil, "no knob has two values" end
  local rng = rng_mod.new(1)
  local sum = { sg = 0, sf = 0, tg = 0, tf = 0 }
  local gp_ok = classic.gp_fits(enc.free)
  for _ = 1, trials do
    local fit, fitted = draw(space, log_time, rng, n_fit), {}
    for _, s in ipairs(fit) do fitted[space:key(s[1])] = true end
    local test = draw(space, log_time, rng, N_TEST, fitted)
    if #fit < 3 or #test < 3 then return nil, "fewer than 3 successes drawn" end
    local X, y = {}, {}
    for i, s in ipairs(fit) do X[i], y[i] = enc:vector(s[1]), s[2] end
    local o = { trees = 12, features = 0.5, min_leaf = 2, max_depth = 12, free = enc.free, knobs = enc.knobs,
                ard = true }
    local forest = classic.forest(rng, X, y, o)
    -- (a GP that cannot be fitted, such as on times all equal, is left out)
    local gp = gp_ok and select(2, pcall(classic.gp, {}, X, y, o))
    if type(gp) ~= "table" then gp = nil end
    local actual, pf, pg = {}, {}, {}
    for i, s in ipairs(test) do
      local x = enc:vector(s[1])
      actual[i], pf[i] = s[2], (classic.predict(forest, x))
      pg[i] = gp and (classic.predict(gp, x)) or pf[i]
    end
    sum.sf, sum.tf = sum.sf + spearman(actual, pf), sum.tf + top_quantile(actual, pf)
    sum.sg, sum.tg = sum.sg + spearman(actual, pg), sum.tg + top_quantile(actual, pg)
  end
  -- one-knob adjacent steps against random pairs
  local step, apart, pairs_n = 0, 0, 0
  for _ = 1, N_STEPS do
    local a = draw(space, log_time, rng, 2)
    if #a < 2 then break end
    local c, lt = a[1][1], a[1][2]
    local j = enc.free[rng:random(1, #enc.free)]
    local k = space.knobs[j]
    local at = space.index[k.name].pos[c[k.name]]
    local to = at + (rng:uniform() < 0.5 and -1 or 1)
    if to < 1 then to = 2 elseif to > #k.values then to = #k.values - 1 end
    local n = {}
    for name, v in pairs(c) do n[name] = v end
    n[k.name] = k.values[to]
    local lt_step = space:is_valid(n) and log_time(n)
    if lt_step then
      step, apart, pairs_n = step + math.abs(lt - lt_step), apart + math.abs(lt - a[2][2]), pairs_n + 1
    end
  end
  return { spearman_gp = gp_ok and sum.sg / trials, spearman_forest = sum.sf / trials,
           top_gp = gp_ok and sum.tg / trials, top_forest = sum.tf / trials,
           step = pairs_n > 0 and apart > 0 and step / apart or nil }
end

local function fmt(v) return v and string.format("%.2f", v) or "  - " end

print(string.format("%-30s %18s %18s %6s", "space", "spearman gp/forest", "top gp/forest", "step"))
for file in files:gmatch("[^,]+") do
  local r, err = assess(file)
  local name = file:match("([^/]+)%.json$") or file
  if r then
    print(string.format("%-30s %8s / %-7s %8s / %-7s %6s", name, fmt(r.spearman_gp), fmt(r.spearman_forest),
                        fmt(r.top_gp), fmt(r.top_forest), fmt(r.step)))
  else
    print(string.format("%-30s %s", name, err))
  end
end
