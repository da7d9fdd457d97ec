-- Random search: uniform samples of the valid space, each state at most once.
-- The smallest complete strategy; copy it to start your own.
local S = {
  name = "random",
  description = "uniform random sampling of valid configs, without repeats",
  options = {
    tries = { default = 100, min = 1, help = "draws per candidate before switching to the list of unmeasured configs" },
  },
}

function S.init(ctx)
  ctx.asked = {}   -- keys already proposed
end

-- Once draws keep hitting proposed configs, a small space is nearly used up:
-- the rest is listed once, shuffled, and proposed in that order.
local function remaining(ctx)
  if not ctx.rest then
    local ok, all = pcall(ctx.space.enumerate, ctx.space)
    if not ok then return nil end
    ctx.rest = {}
    for _, c in ipairs(all) do
      if not ctx.asked[ctx:key(c)] then ctx.rest[#ctx.rest + 1] = c end
    end
    ctx.rng:shuffle(ctx.rest)
  end
  return table.remove(ctx.rest)
end

function S.ask(ctx, n)
  local out = {}
  for _ = 1, n do
    local pick
    for _ = 1, ctx.options.tries do
      if ctx.rest then break end
      local c = ctx.space:sample(ctx.rng)
      if c == nil then return out end
      if not ctx.asked[ctx:key(c)] then pick = c break end
    end
    pick = pick or remaining(ctx)
    if pick == nil then return out end
    ctx.asked[ctx:key(pick)] = true
    out[#out + 1] = { config = pick, origin = { method = "random" } }
  end
  return out
end

return S
