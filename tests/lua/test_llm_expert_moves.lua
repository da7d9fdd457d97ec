-- Experts as move generators: through kopt.moves.propose their heuristic
-- moves are valid, leave the state, carry a method from the vocabulary and
-- their expert's name; each expert follows its bias on a matmul-like space.
local X = require("kopt.experts")
local moves = require("kopt.moves")
local space_mod = require("kopt.space")

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

local space = space_mod.new({
  knobs = {
    { name = "BLOCK_M", values = { 32, 48, 64, 128, 256 }, tags = { "tile_m" } },
    { name = "BLOCK_N", values = { 32, 64, 128, 256 }, tags = { "tile_n" } },
    { name = "WARPS", values = { 2, 4, 8 } },
    { name = "STAGES", values = { 1, 2, 3, 4 } },
    { name = "PAD", values = { 0, 1 }, tags = { "padding" } },
  },
  constraints = { "BLOCK_M * BLOCK_N * STAGES <= 128 * 128 * 3" },
})
local logs = {}
local ctx = { space = space, rng = require("kopt.rng").new(1), options = {},
              key = function(_, c) return space:key(c) end,
              log = function(_, fmt, ...) logs[#logs + 1] = string.format(fmt, ...) end }
local state = { config = { BLOCK_M = 48, BLOCK_N = 64, WARPS = 4, STAGES = 2, PAD = 0 } }
state.key = space:key(state.config)

local vocab = {}
for _, m in ipairs(X.METHODS) do vocab[m] = true end

local gen = X.generator("throughput,memory,robustness")
check(gen.expensive and gen.name == "experts", "generator shape")
local proposed = moves.propose(ctx, state, { gen })
check(#proposed >= 6, "only %d moves", #proposed)
check(#logs == 0, "generator errors: %s", table.concat(logs, "; "))
local seen = {}
for _, m in ipairs(proposed) do
  check(space:is_valid(m.config), "invalid move %s", m.key)
  check(m.key ~= state.key, "a move back to the state")
  check(vocab[m.method], "method %s not in the vocabulary", tostring(m.method))
  seen[m.expert] = true
end
for _, e in ipairs({ "throughput", "memory", "robustness" }) do check(seen[e], "no move from %s", e) end

-- Biases: first heuristic move of each expert.
local view = X.view(ctx, state, { n = 3 })
local t = X.load("throughput").heuristic(view, ctx.rng)[1]
check(t.changes.BLOCK_M == 64 and t.method == "tile_up", "throughput should grow BLOCK_M first, got %s",
      X.config_text(space, setmetatable(t.changes, { __index = state.config })))
local m = X.load("memory").heuristic(view, ctx.rng)[1]
check(m.changes.PAD == 1 and m.method == "toggle_feature", "memory should switch padding on first")
local r = X.load("robustness").heuristic(view, ctx.rng)[1]
check(r.changes.BLOCK_M == 32 and r.method == "tensor_core_align",
      "robustness should move BLOCK_M=48 to the power of two 32 first")

-- With spills, memory shrinks before it switches things on.
local spilled = { status = "ok", time_ms = 1, resources = { spills = 64 } }
local spill = X.view(ctx, { config = state.config, result = spilled }, { n = 3 })
check(X.has_symptom(spill, "register_spills"), "spills are a symptom")

-- Parsing: bad values and unknown knobs lose their proposal only.
local got, rejected = X.parse({ analysis = "", proposals = {
  { method = "tile_up", changes = { BLOCK_M = "128", BLOCK_N = X.null }, reason = "r", patch = X.null },
  { method = "tile_up", changes = { BLOCK_M = 96 }, reason = "r" },
  { method = "made_up", changes = { NOPE = 1 }, reason = "r" },
  { method = "tile_up", changes = {}, reason = "r" },
} }, view, "t")
check(#got == 1 and got[1].changes.BLOCK_M == 128 and math.type(got[1].changes.BLOCK_M) == "integer",
      "string '128' is coerced to the knob's 128")
check(#rejected == 3, "three rejections, got %d", #rejected)
check(rejected[1].why:find("BLOCK_M=96", 1, true), "value outside the set named: %s", rejected[1].why)

-- The schema the server sees lists every knob with its allowed values.
local s = X.schema(view)
local knob = s.schema.properties.proposals.items.properties.changes.properties.STAGES
check(knob.anyOf[1].enum[4] == 4, "schema enum")
-- A move that carries a patch is keyed as the engine keys its evaluation:
-- the config's key and the hash of the whole patched source (so the
-- origin.parent a result names is a state measured, in variants/)
do
  local patch_mod = require("kopt.patch")
  local sys = require("kopt.sys")
  local src = 'extern "C" __global__ void k(float *y) { y[0] = 1.0f; }\n'
  local new_src = 'extern "C" __global__ void k(float *y) { y[0] = 2.0f; }\n'
  local diff = patch_mod.diff(src, new_src)
  local pctx = setmetatable({ spec = { kernel = { source = src } } }, { __index = ctx })
  local pgen = { name = "editor", propose = function()
    return { { method = "tile_up", changes = { BLOCK_M = 64 }, patch = diff } }
  end }
  local pgot = moves.propose(pctx, state, { pgen })
  local want = space:key(setmetatable({ BLOCK_M = 64 }, { __index = state.config })) .. "#" ..
               sys.sha256(new_src):sub(1, 16)
  check(#pgot == 1 and pgot[1].key == want, "a patched move's key: %s, want %s", tostring(pgot[1] and pgot[1].key), want)
end
-- a bare function is a generator too (SEARCH.md): propose wraps it
do
  local fn = function(_, st) return { { method = "tile_up", changes = { BLOCK_M = st.config.BLOCK_M == 64 and 128 or 64 } } } end
  local got_fn = moves.propose(ctx, state, { fn })
  check(#got_fn == 1 and got_fn[1].config.BLOCK_M == 64, "a bare function generator: %d moves", #got_fn)
end
print("ok")
