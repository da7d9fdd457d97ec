-- MCGS on a space of many knobs: a region was ranked by what one step into
-- it reaches, a model score of a neighbourhood of every other knob for every
-- region of every knob, a cost of the cube of the knob count (300 knobs: 42 s
-- for 100 evaluations). Past 32 knobs regions are ranked by their start; the
-- reach stays on below that (the recorded benchmark spaces have at most 10).
-- The reach is counted here as the neighbourhoods drawn with a knob held.
local T = require("testlib")
local engine_mod = require("kopt.engine")
local json = require("kopt.json")
local replay = require("kopt.backends.replay")
local space_mod = require("kopt.space")
local strategy_mod = require("kopt.strategy")

local tmp = T.tmpdir("mcgs-wide")

-- A Kernel Tuner cache of `n_knobs` knobs of 3 values, 400 configs, a time
-- that rises with the sum of the values.
local function cache(n_knobs, path)
  local rng = require("kopt.rng").new(2)
  local keys, params, entries = {}, {}, {}
  for i = 1, n_knobs do keys[i] = "k" .. i params[keys[i]] = { 0, 1, 2 } end
  local made = 0
  while made < 400 do
    local x, e, sum = {}, {}, 0
    for i = 1, n_knobs do x[i] = rng:random(0, 2) e[keys[i]] = x[i] sum = sum + x[i] end
    local key = table.concat(x, ",")
    if not entries[key] then
      e.time = 1 + sum / n_knobs + rng:uniform() * 0.01
      entries[key], made = e, made + 1
    end
  end
  json.write_file(path, { device_name = "X", kernel_name = "k", tune_params_keys = keys, tune_params = params,
                          objective = "time", cache = entries })
end

local held = 0
local Space = getmetatable(space_mod.new({ knobs = { { name = "a", values = { 1 } } } }))
local neighbours = Space.neighbours
Space.neighbours = function(self, config, mode, opts)
  if opts and opts.hold then held = held + 1 end
  return neighbours(self, config, mode, opts)
end

local function run(n_knobs)
  local file = string.format("%s/wide%d.json", tmp, n_knobs)
  cache(n_knobs, file)
  local backend = replay.open(nil, { file = file, quiet = true })
  local S = strategy_mod.load("mcgs")
  held = 0
  local e = engine_mod.run({ strategy = S, strategy_name = "mcgs", options = strategy_mod.options(S, {}),
                             space = backend.space, backend = backend, budget = 60, seed = 1, quiet = true,
                             out_dir = tmp .. "/run" .. n_knobs })
  T.eq(e.evaluations, 60, n_knobs .. " knobs: the budget spent")
  return held
end

T.check(run(8) > 0, "8 knobs: regions are ranked by their reach")
T.eq(run(40), 0, "40 knobs: no reach (regions ranked by their start)")

Space.neighbours = neighbours
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
