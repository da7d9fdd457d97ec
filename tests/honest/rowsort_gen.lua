-- Quantized keys with many ties: k / 8 for k uniform in [-64, 63] (no -0.0),
-- drawn from ctx.rng (check 2 draws other rows).
return function(ctx)
  local t, rng = {}, ctx.rng
  for i = 1, ctx.n do t[i] = rng:random(-64, 63) / 8 end
  return t
end
