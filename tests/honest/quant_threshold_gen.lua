-- 4-bit quantized activations: q / 16 for q uniform in [0, 15], drawn from
-- ctx.rng (check 2 draws others). One element in 16 equals 0.5 (the
-- threshold) and one in 16 is the maximum 15/16.
return function(ctx)
  local t, rng = {}, ctx.rng
  for i = 1, ctx.n do t[i] = rng:random(0, 15) / 16 end
  return t
end
