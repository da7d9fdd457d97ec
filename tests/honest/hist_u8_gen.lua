-- An 8-bit grey frame (W x rows): a smooth shaded scene, saturated patches
-- (one hot bin: global atomics contend on it) and sensor noise drawn from
-- ctx.rng, so check 2 reads another frame. Returned as raw bytes.
return function(ctx)
  local W, n, rng = ctx.sizes.W, ctx.n, ctx.rng
  local floor, sin, cos, char, unpack = math.floor, math.sin, math.cos, string.char, table.unpack
  local parts, buf, nb = {}, {}, 0
  for i = 0, n - 1 do
    local x, y = i % W, i // W
    local base = 96 + 70 * sin(x / 180.0) * cos(y / 130.0) + 0.03 * x
    if (x // 64 + y // 64) % 7 == 0 then base = 250 end
    local v = floor(base + 12 * rng:normal() + 0.5)
    if v < 0 then v = 0 elseif v > 255 then v = 255 end
    nb = nb + 1
    buf[nb] = v
    if nb == 4096 then
      parts[#parts + 1] = char(unpack(buf, 1, nb))
      nb = 0
    end
  end
  if nb > 0 then parts[#parts + 1] = char(unpack(buf, 1, nb)) end
  return table.concat(parts)
end
