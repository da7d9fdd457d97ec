-- Throughput expert: more work per thread and per block. Bigger tiles, more
-- warps or threads, deeper pipelines, wider vectors, more unrolling, as long
-- as registers and shared memory allow.
local X = require("kopt.experts")

local E = { name = "throughput", temperature = 0.7,
            summary = "bigger tiles, more warps, deeper pipelines, wider vectors" }

E.persona = "You favour throughput: arithmetic intensity and instruction-level parallelism."
E.focus = "throughput. Make each thread and block do more useful work: larger tiles, more warps or " ..
  "threads per block, deeper software pipelines (stages), wider vector loads, more unrolling, and " ..
  "tensor-core-sized tiles, while registers and shared memory still fit. Say which bottleneck each proposal attacks."

function E.prompt(view) return X.messages(E, view) end
function E.parse(value, view) return X.parse(value, view, E.name) end

-- Family -> method when stepping up.
local UP = {
  tile_m = "tile_up", tile_n = "tile_up", tile = "tile_up", tile_k = "tile_up", block = "more_threads",
  warps = "more_warps", stages = "deeper_pipeline", vector = "wider_vectors", unroll = "more_unroll",
  async = "toggle_feature", knob = "rebalance",
}
local ORDER = { "tile_m", "tile_n", "tile", "warps", "block", "stages", "vector", "tile_k", "unroll", "async", "knob" }

function E.heuristic(view, _rng)
  local spills = X.has_symptom(view, "register_spills") or X.has_symptom(view, "high_registers")
  local order = ORDER
  if spills then
    -- Registers are the limit: grow parallelism and pipelining, not per-thread tiles.
    order = { "warps", "block", "stages", "vector", "async", "tile_k", "tile_m", "tile_n", "tile", "unroll", "knob" }
  end
  local singles = {}
  for _, fam in ipairs(order) do
    for _, k in ipairs(X.knobs_in(view, { fam })) do
      local mv = X.step(view, k, 1, UP[fam])
      if mv then singles[#singles + 1] = mv end
    end
  end
  local moves = {}
  for i, mv in ipairs(singles) do
    moves[#moves + 1] = mv
    -- Grow two dimensions at once: square-ish tiles stay balanced.
    if singles[i + 1] then
      local both = X.combine(mv, singles[i + 1], mv.method)
      if both then moves[#moves + 1] = both end
    end
  end
  for _, fam in ipairs(order) do
    for _, k in ipairs(X.knobs_in(view, { fam })) do
      local mv = X.step(view, k, 2, UP[fam])
      if mv then moves[#moves + 1] = mv end
    end
  end
  return moves
end

return E
