-- verify.check of quant_threshold_tol.json: first_max (0-based) is the
-- first index of the largest x, on the inputs the checked launch read.
return function(outputs, _, inputs)
  local x, fm = inputs.x, outputs.first_max
  if not x or not fm or #fm ~= 1 then return false, "first_max or x missing" end
  local i = fm[1]
  if i ~= math.floor(i) or i < 0 or i >= #x then return false, "first_max = " .. tostring(i) .. " is no index" end
  local m, first = -math.huge, nil
  for k = 1, #x do
    if x[k] > m then m, first = x[k], k - 1 end
  end
  if i ~= first then
    return false, string.format("first_max = %d (x = %.9g), want %d (x = %.9g)", i, x[i + 1], first, m)
  end
  return true
end
