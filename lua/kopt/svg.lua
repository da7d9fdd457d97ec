-- Line charts as standalone SVG text: axes, ticks, grid, a legend, one
-- polyline per series. No fonts beyond the generic family, no scripts, so the
-- files render the same on GitHub and in a browser.
local M = {}

M.COLORS = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f" }

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local function num(x) return string.format("%.1f", x) end

-- Round steps for a linear axis over [lo, hi]: about `want` ticks.
local function linear_ticks(lo, hi, want)
  local raw = (hi - lo) / math.max(1, want)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    if m * mag >= raw then step = m * mag break end
  end
  local ticks = {}
  local t = math.ceil(lo / step - 1e-9) * step
  while t <= hi + 1e-9 * step do
    ticks[#ticks + 1] = t
    t = t + step
  end
  return ticks
end

-- 1, 2, 5, 10, 20, 50, ... within [lo, hi] for a log axis.
local function log_ticks(lo, hi)
  local ticks = {}
  local d = 10 ^ math.floor(math.log(lo, 10))
  while d <= hi do
    for _, m in ipairs({ 1, 2, 5 }) do
      local t = m * d
      if t >= lo - 1e-9 and t <= hi + 1e-9 then ticks[#ticks + 1] = t end
    end
    d = d * 10
  end
  return ticks
end

local function label(t)
  if math.abs(t - math.floor(t + 0.5)) < 1e-9 then return string.format("%d", math.floor(t + 0.5)) end
  return (string.format("%.3f", t):gsub("0+$", ""):gsub("%.$", ""))
end

-- opts: title, xlabel, ylabel, xmin, xmax, ymin, ymax, xlog (bool),
-- width, height, series = { {name=, points={{x, y}, ...}, color=?, dash=?}, ... }.
-- Returns the SVG document as a string.
function M.line_chart(opts)
  local W, H = opts.width or 720, opts.height or 440
  local left, right, top, bottom = 64, 170, 36, 52
  local pw, ph = W - left - right, H - top - bottom
  local xmin, xmax, ymin, ymax = opts.xmin, opts.xmax, opts.ymin, opts.ymax
  -- (an axis of one value, `compare --budgets 1`, would divide by zero:
  -- it is widened, so the chart has coordinates and not NaN)
  if xmax <= xmin then xmax = opts.xlog and xmin * 2 or xmin + 1 end
  if ymax <= ymin then ymax = ymin + 1 end
  local function fx(x)
    if opts.xlog then return left + pw * (math.log(x) - math.log(xmin)) / (math.log(xmax) - math.log(xmin)) end
    return left + pw * (x - xmin) / (xmax - xmin)
  end
  local function fy(y) return top + ph * (1 - (y - ymin) / (ymax - ymin)) end
  local out = {}
  local function w(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  w('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', W, H, W, H)
  w('<rect width="%d" height="%d" fill="white"/>', W, H)
  w('<text x="%s" y="22" font-size="14" text-anchor="middle">%s</text>', num(left + pw / 2), esc(opts.title or ""))
  local xt = opts.xlog and log_ticks(xmin, xmax) or linear_ticks(xmin, xmax, 8)
  if opts.xlog and xt[#xt] < xmax / 1.5 then xt[#xt + 1] = xmax end -- label the right end
  for _, t in ipairs(xt) do
    local x = num(fx(t))
    w('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#e6e6e6"/>', x, top, x, top + ph)
    w('<text x="%s" y="%d" text-anchor="middle">%s</text>', x, top + ph + 16, label(t))
  end
  for _, t in ipairs(linear_ticks(ymin, ymax, 6)) do
    local y = num(fy(t))
    w('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e6e6e6"/>', left, y, left + pw, y)
    w('<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>', left - 6, y, label(t))
  end
  w('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>', left, top, pw, ph)
  w('<text x="%s" y="%d" text-anchor="middle">%s</text>', num(left + pw / 2), H - 12, esc(opts.xlabel or ""))
  w('<text x="16" y="%s" text-anchor="middle" transform="rotate(-90 16 %s)">%s</text>',
    num(top + ph / 2), num(top + ph / 2), esc(opts.ylabel or ""))
  for i, s in ipairs(opts.series) do
    local color = s.color or M.COLORS[(i - 1) % #M.COLORS + 1]
    local pts = {}
    for _, p in ipairs(s.points) do
      local y = math.max(ymin, math.min(ymax, p[2]))
      pts[#pts + 1] = num(fx(p[1])) .. "," .. num(fy(y))
    end
    w('<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>', color,
      s.dash and ' stroke-dasharray="6 4"' or "", table.concat(pts, " "))
    local ly = top + 10 + (i - 1) * 20
    w('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>', left + pw + 12, ly,
      left + pw + 36, ly, color, s.dash and ' stroke-dasharray="6 4"' or "")
    w('<text x="%d" y="%d" dominant-baseline="middle">%s</text>', left + pw + 42, ly, esc(s.name))
  end
  w("</svg>")
  return table.concat(out, "\n") .. "\n"
end

return M
