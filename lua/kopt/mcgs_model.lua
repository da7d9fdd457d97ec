-- MCGS's value model (strategies/mcgs.lua, --opt model): a forest of
-- log(time) over the measured states (failures priced as the slowest success
-- plus fail_penalty), a Gaussian process (model_kind), or by default
-- (model_kind=auto) both, read by turns as below; with fail_model, or with
-- the GP, a forest on the failure indicator too. It prices new moves,
-- rollout steps and model samples.
-- The state it keeps lives in st.model (M.new); the search's own state (st)
-- is read, never changed, apart from st.model.
local classic = require("kopt.classic")
local features = require("kopt.model_features")
local moves_mod = require("kopt.moves")

local M = {}
local score_candidates

-- The model's state for a space, or nil when model=false.
function M.new(ctx)
  return { enc = features.encoder(ctx.space, ctx.options.model_features), rng = ctx.rng:fork(), X = {}, t = {},
           ok = 0, fails = 0, fitted_at = 0, fits = 0, fit_s = 0, predicts = 0, predict_s = 0, pruned = 0,
           chose_gp = 0 }
end

-- The value model. Every told state's ordinal vector and outcome are kept
-- (and, with model_kind=auto, each success is first scored against both
-- candidates); the model of log(time) is refitted when the data grew by
-- model_refit, and, with fail_model or auto's GP and failures seen, a
-- forest on the failure indicator gives the chance that a state fails.
-- Nil until model_min successes are in (the first states are priced by
-- the rules alone).
function M.record(st, config, t)
  local m = st.model
  if not m then return end
  -- a failure is kept as false, not nil, so m.t stays aligned with m.X
  local n = #m.X + 1
  m.X[n], m.t[n] = m.enc:vector(config), t or false
  if t and m.candidates then
    local t0 = os.clock()
    score_candidates(m, m.X[n], math.log(t))
    m.predict_s = m.predict_s + (os.clock() - t0)
  end
  if t then m.ok = m.ok + 1 else m.fails = m.fails + 1 end
end

-- model_kind=auto: both a forest and a GP are fitted, and the search reads
-- the one that ranked the recent successes better, each success predicted
-- by both before it was measured (prequential: no refit, no held-out set).
-- Ranking, not error, because the search only compares configs; pairs
-- with one of the fastest AUTO_TOP of the window, because telling the fast
-- configs apart is what finds the optimum; the last AUTO_WINDOW
-- successes, because that is where the search is now.
local AUTO_WINDOW, AUTO_TOP, AUTO_MIN = 32, 0.25, 8

function score_candidates(m, x, lt)
  local w = m.window
  local k = w.n % AUTO_WINDOW + 1
  w.n = w.n + 1
  w.forest[k] = (classic.predict(m.candidates.forest, x))
  w.gp[k] = (classic.predict(m.candidates.gp, x))
  w.actual[k] = lt
end

local function sign(v) return v > 0 and 1 or (v < 0 and -1 or 0) end

-- The candidate to read, from a window { n, actual, gp, forest } (the
-- log-times measured, and each candidate's prediction of them): the forest
-- until AUTO_MIN are in, then the GP if it ordered more of the pairs
-- with a fast member rightly than the forest did, else the forest.
function M.choose(w)
  if w.n < AUTO_MIN then return "forest" end
  local n = math.min(w.n, AUTO_WINDOW)
  local order = {}
  for i = 1, n do order[i] = i end
  table.sort(order, function(a, b) if w.actual[a] ~= w.actual[b] then return w.actual[a] < w.actual[b] end return a < b end)
  local rank = {}
  for r, i in ipairs(order) do rank[i] = r end
  local top, lead = math.max(2, math.floor(AUTO_TOP * n + 0.5)), 0
  for i = 1, n - 1 do
    for j = i + 1, n do
      if math.min(rank[i], rank[j]) <= top then
        local da = w.actual[i] - w.actual[j]
        lead = lead + sign(da * (w.gp[i] - w.gp[j])) - sign(da * (w.forest[i] - w.forest[j]))
      end
    end
  end
  return lead > 0 and "gp" or "forest"
end

function M.get(ctx, st)
  local m, o = st.model, ctx.options
  -- (one success at least, model_min=0 too: a forest of no times predicts NaN)
  if not m or m.ok < math.max(1, o.model_min) then return nil end
  local n = #m.X
  if m.forest and n - m.fitted_at < math.max(1, math.floor(m.fitted_at * o.model_refit)) then return m end
  local t0 = os.clock()
  -- the regression fits log(time) of the successes, plus the failures at a
  -- penalty (below) unless fail_penalty=0; the classifier, when on, sees
  -- every state as failed or not
  local Xok, y, fy = {}, {}, {}
  for i = 1, n do
    if m.t[i] then
      Xok[#Xok + 1] = m.X[i]
      y[#y + 1] = math.log(m.t[i])
    end
    fy[i] = m.t[i] and 0 or 1
  end
  local fo = { trees = o.model_trees, features = 0.5, min_leaf = 2, max_depth = 12, free = m.enc.free,
              knobs = m.enc.knobs }
  local n_ok = #y -- Xok and y hold the successes first, then any priced failures
  if o.fail_penalty > 0 and m.fails > 0 and #y > 0 then
    -- (the surrogate strategy's way: a failure stands for the slowest
    -- success plus fail_penalty log-units, in the regression itself; with
    -- no success yet, model_min=0, there is no slowest to stand for)
    local worst = -math.huge
    for _, v in ipairs(y) do worst = math.max(worst, v) end
    for i = 1, n do
      if not m.t[i] then Xok[#Xok + 1], y[#y + 1] = m.X[i], worst + o.fail_penalty end
    end
  end
  local kind = o.model_kind or "forest"
  m.read_classifier = o.fail_model
  if kind == "auto" and classic.gp_fits(m.enc.free) then
    -- the GP sees the successes only, the classifier the failures (the
    -- pairing measured best, docs/SEARCH.md); the forest as configured
    local Xs, ys = table.move(Xok, 1, n_ok, 1, {}), table.move(y, 1, n_ok, 1, {})
    m.gp_cache = m.gp_cache or {}
    m.window = m.window or { n = 0, forest = {}, gp = {}, actual = {} }
    fo.ard = true
    m.candidates = { forest = classic.forest(m.rng, Xok, y, fo), gp = classic.gp(m.gp_cache, Xs, ys, fo) }
    local chosen = M.choose(m.window)
    m.forest = m.candidates[chosen]
    m.read_classifier = chosen == "gp" or o.fail_model
    if chosen == "gp" then m.chose_gp = m.chose_gp + 1 end
  elseif kind ~= "forest" and classic.gp_fits(m.enc.free) then
    m.gp_cache = m.gp_cache or {}
    fo.ard = kind ~= "gp_iso"
    m.forest = classic.gp(m.gp_cache, Xok, y, fo)
    if kind == "mix" then m.forest.with = classic.forest(m.rng, Xok, y, fo) end
  else
    m.forest = classic.forest(m.rng, Xok, y, fo)
  end
  if (o.fail_model or m.candidates) and m.fails > 0 then
    fo.trees = math.max(4, o.model_trees // 2)
    m.classifier = classic.forest(m.rng, m.X, fy, fo)
  else
    m.classifier = nil
  end
  m.fitted_at, m.fits = n, m.fits + 1
  m.fit_s = m.fit_s + (os.clock() - t0)
  return m
end

-- What graph.json reports of the model (nil without one): its fits,
-- predictions, their CPU time and the moves it pruned.
function M.summary(m)
  return m and { fits = m.fits, fit_ms = m.fit_s * 1e3, predictions = m.predicts, predict_ms = m.predict_s * 1e3,
                 pruned = m.pruned, gp_chosen = m.chose_gp } or nil
end

-- Optimistic predicted log-time of a config, and its chance of success.
function M.predict(ctx, m, config)
  local t0 = os.clock()
  local x = m.enc:vector(config)
  local mu, sd = classic.predict(m.forest, x)
  local p_ok = 1
  if m.classifier and m.read_classifier then p_ok = 1 - classic.predict(m.classifier, x) end
  m.predicts = m.predicts + 1
  m.predict_s = m.predict_s + (os.clock() - t0)
  return mu - ctx.options.model_kappa * sd, p_ok, mu, sd
end

-- The optimistic predicted log-time charged for the chance of failure
-- (-log p_ok): how rollouts and region descents rank configs.
function M.score(ctx, m, config)
  local lt, p_ok = M.predict(ctx, m, config)
  return lt - math.log(math.max(p_ok, 1e-3))
end

-- Reweights fresh proposals from state `id` by the model: exp(gain / tau)
-- times the chance of success, and weak moves (predicted gain under
-- min_pred_gain) down to prune_factor. props: the moves as lists
-- (kopt.moves.collect_lists), their priors reweighted in place.
function M.weigh(ctx, st, id, props)
  local m = M.get(ctx, st)
  if not m then return end
  local o = ctx.options
  local base = st.time[id]
  local lbase = base and math.log(base) or (M.predict(ctx, m, st.cfg[id]))
  local weak = math.log(1 + o.min_pred_gain)
  local config, priors = st.cfg[id], props.prior
  for i = 1, props.n do
    local c = props.config[i] or moves_mod.changed_config(ctx.space, config, props.changes[i])
    local lt, p_ok = M.predict(ctx, m, c)
    local gain = lbase - lt
    local f = math.exp(math.max(-20, math.min(20, gain / o.model_tau))) * p_ok
    if gain < weak then
      f = f * o.prune_factor
      m.pruned = m.pruned + 1
    end
    priors[i] = priors[i] * f
  end
end

-- A fresh sample chosen by the model: the best of model_pool random
-- unmeasured configurations by expected improvement over the best time
-- (times the chance of success); idle(id) says whether a known state is
-- neither measured nor in flight. Nil when there is no model yet.
function M.sample(ctx, st, idle)
  local m = M.get(ctx, st)
  if not m or not st.best_id then return nil end
  local best_lt = math.log(st.time[st.best_id])
  local pick, pick_ei
  for _ = 1, ctx.options.model_pool do
    local c = ctx.space:sample(ctx.rng)
    if not c then break end
    local id = st.g:find(ctx:key(c))
    if not id or idle(id) then
      local _, p_ok, mu, sd = M.predict(ctx, m, c)
      local ei = classic.expected_improvement(best_lt, mu, sd) * p_ok
      if not pick or ei > pick_ei then pick, pick_ei = c, ei end
    end
  end
  return pick
end

return M
