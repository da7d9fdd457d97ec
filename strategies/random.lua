-- Random search: uniform samples of the valid space, each state at most once.
-- The smallest complete strategy; copy it to start your own.
local S = {
  name = "random",
  description = "uniform random sampling of valid configs, without repeats",
  options = {
    tries = { default = 100, help = "draws per candidate before deciding the space is exhausted" },
  },
}

function S.init(ctx)
  ctx.asked = {}   -- keys already proposed
end

function S.ask(ctx, n)
  local out = {}
  for _ = 1, n do
    for _ = 1, ctx.options.tries do
      local c = ctx.space:sample(ctx.rng)
      if c == nil then return out end
      local k = ctx:key(c)
      if not ctx.asked[k] then
        ctx.asked[k] = true
        out[#out + 1] = { config = c, origin = { method = "random" } }
        break
      end
    end
  end
  return out
end

return S
