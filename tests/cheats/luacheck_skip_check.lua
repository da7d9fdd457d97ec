-- verify.check of luacheck_skip.json: numpy.allclose(y, ref, rtol=1e-4,
-- atol=1e-6), as a Kernel Tuner user's verify function would say it.
return function(outputs, refs, inputs, sizes)
  local y, r = outputs.y, refs.y
  if not y or not r or #y ~= #r then return false, "y missing or of the wrong length" end
  for i = 1, #r do
    local d = math.abs(y[i] - r[i])
    if not (d <= 1e-6 + 1e-4 * math.abs(r[i])) then
      return false, string.format("y[%d] = %.9g, want %.9g", i - 1, y[i], r[i])
    end
  end
  return true
end
