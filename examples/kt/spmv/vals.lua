-- The matrix values: uniform in [-1, 1), from the spec's seeded generator.
return function(ctx)
  local v = {}
  for i = 1, ctx.n do v[i] = 2 * ctx.rng:uniform() - 1 end
  return v
end
