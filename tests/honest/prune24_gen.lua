-- int4-style quantized weights: k / 8 for k uniform in [-7, 7] (0 as +0.0),
-- drawn from ctx.rng (check 2 draws other weights).
return function(ctx)
  local t, rng = {}, ctx.rng
  for i = 1, ctx.n do t[i] = rng:random(-7, 7) / 8 end
  return t
end
