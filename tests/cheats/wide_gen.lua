-- Inputs of magnitude 1e3 .. 1e5 (both signs): valid f32 inputs that kopt's
-- two checks never draw (uniform01, normal).
return function(ctx)
  local v = {}
  for i = 1, ctx.n do
    local m = 1000 + 99000 * ctx.rng:uniform()
    v[i] = ctx.rng:uniform() < 0.5 and -m or m
  end
  return v
end
