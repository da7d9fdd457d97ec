-- Memory expert: less pressure on registers and shared memory, higher
-- occupancy, better access patterns. Smaller tiles, shallower pipelines, less
-- unrolling, padding and caching switches on, wider (fewer) memory transactions.
local X = require("kopt.experts")

local E = { name = "memory", temperature = 0.5,
            summary = "smaller tiles, less register and shared-memory pressure, higher occupancy" }

E.persona = "You favour memory efficiency: occupancy, coalescing and avoiding spills and bank conflicts."
E.focus = "memory. Lower register and shared-memory pressure to raise occupancy and remove spills: " ..
  "smaller tiles, fewer pipeline stages, less unrolling; improve access patterns: coalesced and " ..
  "vectorised loads, shared-memory padding against bank conflicts, read-only caching. " ..
  "Use the symptoms (spills, low occupancy, memory-bound) to pick the change."

function E.prompt(view) return X.messages(E, view) end
function E.parse(value, view) return X.parse(value, view, E.name) end

local DOWN = {
  tile_m = "tile_down", tile_n = "tile_down", tile = "tile_down", tile_k = "tile_down", stages = "shallower_pipeline",
  unroll = "less_unroll", block = "fewer_threads", warps = "fewer_warps", split = "rebalance", knob = "rebalance",
}

-- Switches that usually help memory traffic when turned on (last value of a
-- two-valued knob, e.g. 0/1).
local SWITCHES = { "padding", "shmem", "cache", "layout", "async" }

function E.heuristic(view, _rng)
  local moves = {}
  local pressure = X.has_symptom(view, "register_spills") or X.has_symptom(view, "high_registers")
    or X.has_symptom(view, "low_occupancy")
  local down_order = pressure and { "unroll", "tile_m", "tile_n", "tile", "stages", "tile_k", "block", "warps", "knob" }
    or { "tile_m", "tile_n", "tile", "stages", "tile_k", "unroll", "block", "split", "knob" }
  for _, k in ipairs(X.knobs_in(view, SWITCHES)) do
    if #k.values == 2 and view.config[k.name] == k.values[1] then
      moves[#moves + 1] = { changes = { [k.name] = k.values[2] }, method = "toggle_feature" }
    end
  end
  for _, k in ipairs(X.knobs_in(view, { "vector" })) do
    local mv = X.step(view, k, 1, "wider_vectors")
    if mv then moves[#moves + 1] = mv end
  end
  local downs = {}
  for _, fam in ipairs(down_order) do
    for _, k in ipairs(X.knobs_in(view, { fam })) do
      local mv = X.step(view, k, -1, DOWN[fam])
      if mv then downs[#downs + 1] = mv end
    end
  end
  -- Interleave: a single step down, then the same with the next one (less
  -- pressure on two fronts), keeping the switches first.
  for i, mv in ipairs(downs) do
    moves[#moves + 1] = mv
    if downs[i + 1] then
      local both = X.combine(mv, downs[i + 1], mv.method)
      if both then moves[#moves + 1] = both end
    end
  end
  for _, k in ipairs(X.knobs_in(view, SWITCHES)) do
    if #k.values == 2 and view.config[k.name] == k.values[2] then
      moves[#moves + 1] = { changes = { [k.name] = k.values[1] }, method = "toggle_feature" }
    end
  end
  return moves
end

return E
