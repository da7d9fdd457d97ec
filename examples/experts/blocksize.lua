-- A custom expert: believes the thread-block size is what matters, and that
-- 256 threads per block is the sweet spot on recent NVIDIA GPUs.
--
--   kopt experts SPEC --opt experts=throughput,memory,examples/experts/blocksize.lua
--
-- Only `heuristic` is required. Without `prompt`/`parse`, the LLM sees the
-- common prompt with this file's `focus` paragraph and the common answer is
-- parsed; define them to take over (see lua/kopt/experts/*.lua).
local X = require("kopt.experts")

local E = {
  name = "blocksize",
  summary = "steers the block size towards 256 threads",
  focus = "thread-block shape. Aim for about 256 threads per block, as square as the data layout allows, " ..
    "and change tile sizes only to keep the work per block constant.",
  temperature = 0.5,
}

-- Offline: for every block-size knob, the allowed values ordered by distance
-- from the sweet spot (the current value skipped), best first.
function E.heuristic(view, _rng)
  local moves = {}
  for _, k in ipairs(X.knobs_in(view, { "block", "warps" })) do
    local target = k.family == "warps" and 8 or 256
    local values = {}
    for _, v in ipairs(k.values) do
      if type(v) == "number" and v ~= view.config[k.name] then values[#values + 1] = v end
    end
    table.sort(values, function(a, b)
      local da, db = math.abs(a - target), math.abs(b - target)
      if da ~= db then return da < db end
      return a < b
    end)
    for _, v in ipairs(values) do
      local method = v > view.config[k.name] and "more_threads" or "fewer_threads"
      moves[#moves + 1] = { changes = { [k.name] = v }, method = method, reason = "block size towards " .. target }
    end
  end
  return moves
end

return E
