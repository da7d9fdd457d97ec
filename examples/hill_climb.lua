-- Hill climbing in 15 lines: measure the unmeasured neighbours of the best
-- config so far; stop when the best has none left (a local optimum).
local S = { name = "hill_climb", options = {} }

function S.ask(ctx, n)
  if not ctx.best then return { { config = ctx.space:sample(ctx.rng) } } end
  local out = {}
  for _, c in ipairs(ctx.space:neighbours(ctx.best.config, "adjacent")) do
    if #out < n and not ctx:lookup(c) then
      out[#out + 1] = { config = c, origin = { method = "neighbour" } }
    end
  end
  return out   -- empty: every neighbour of the best is measured, we are done
end

return S
