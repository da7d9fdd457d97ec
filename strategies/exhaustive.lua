-- Exhaustive search: every valid config once, in enumeration order.
local S = {
  name = "exhaustive",
  description = "every valid config, in order (needs an enumerable space)",
  default_budget = math.huge,
  options = {},
}

function S.init(ctx)
  ctx.list = ctx.space:enumerate()
  ctx.next = 1
end

function S.ask(ctx, n)
  local out = {}
  while #out < n and ctx.next <= #ctx.list do
    out[#out + 1] = { config = ctx.list[ctx.next], origin = { method = "exhaustive" } }
    ctx.next = ctx.next + 1
  end
  return out
end

return S
