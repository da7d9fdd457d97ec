-- A user move generator: reshape the thread block while keeping its size.
--
-- Use it next to the built-in rules with
--   kopt mcgs SPEC --opt moves=rules,examples/my_moves.lua
-- (any strategy built on kopt.moves takes the same option).
--
-- A generator gets the strategy context and a state {config=, key=, result=}
-- and returns moves: the knobs to change, a method name (statistics and the
-- experience dataset are kept per method) and a prior (relative confidence).
-- Moves that break a constraint or leave the space are dropped by kopt, so a
-- generator may propose freely.
local G = { name = "reshape_block" }

-- The two block-shape knobs of this space, found by name; nil when absent.
local function block_knobs(space)
  local x, y
  for _, k in ipairs(space.knobs) do
    local n = k.name:lower()
    if n == "block_size_x" or n == "block_x" then x = k.name end
    if n == "block_size_y" or n == "block_y" then y = k.name end
  end
  return x, y
end

function G.propose(ctx, state)
  local x, y = block_knobs(ctx.space)
  if not (x and y) then return {} end
  local bx, by = state.config[x], state.config[y]
  return {
    -- wider and flatter: same number of threads (prior 2: tried before the
    -- one-knob rule moves, whose priors are about 1)
    { changes = { [x] = bx * 2, [y] = by // 2 }, method = "block_wider", prior = 2.0 },
    -- narrower and taller
    { changes = { [x] = bx // 2, [y] = by * 2 }, method = "block_taller", prior = 2.0 },
  }
end

return G
