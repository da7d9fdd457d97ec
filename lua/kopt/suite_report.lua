-- The suite's report, from the rows and fast_p of kopt.suite: suite.md (the
-- tables), suite.json (the same numbers, machine-readable) and suite.svg (a
-- hand-written bar chart of the speedups). Pure text builders; the command
-- writes the files.
local suite = require("kopt.suite")

local M = {}

local function ms(v) return v and string.format("%.4g", v) or "-" end
local function times(v) return v and string.format("%.2fx", v) or "-" end
local function pct(v) return v and string.format("%.0f%%", v * 100) or "-" end

-- doc: { strategy, budget, target (text or nil), backend, device, kopt, date,
--        baselines = { file, gpu, torch, note } or nil, wall_s, rows, fast_p }
function M.markdown(doc)
  local L = {}
  local function w(fmt, ...) L[#L + 1] = select("#", ...) > 0 and string.format(fmt, ...) or fmt end
  w("# kopt suite: %s on %d problems", doc.strategy, #doc.rows)
  w("")
  w("- device: %s (%s backend), kopt %s, %s", doc.device or "unknown", doc.backend, doc.kopt or "?", doc.date or "")
  w("- budget: %s evaluations per problem%s", tostring(doc.budget),
    doc.target and string.format("; target %s (a problem stops once its best meets it)", doc.target) or "")
  if doc.baselines then
    local b = doc.baselines
    w("- baselines: `%s` (%s%s)", b.file, b.gpu or "GPU not named",
      b.torch and (", PyTorch " .. b.torch) or "")
    if b.gpu and doc.device and b.gpu ~= doc.device then
      w("- **the baselines were measured on %s, not on this device**: speedups compare two GPUs", b.gpu)
    end
  else
    w("- baselines: none (%s): no speedups, no fast_p", doc.baselines_note or "no baselines file for this device")
  end
  if doc.wall_s then w("- wall time: %.0f s", doc.wall_s) end
  w("")
  w("## fast_p")
  w("")
  w("The fraction of problems whose kopt kernel is correct and more than p times faster than the baseline")
  w("(fast_0: the fraction correct), over the problems that have a time for that baseline.")
  w("")
  local head, rule = { "baseline", "problems" }, { "---", "---:" }
  for _, p in ipairs(suite.P) do
    head[#head + 1] = "fast_" .. suite.p_key(p)
    rule[#rule + 1] = "---:"
  end
  w("| %s |", table.concat(head, " | "))
  w("| %s |", table.concat(rule, " | "))
  for _, b in ipairs(suite.BASES) do
    local f = doc.fast_p[b]
    local cells = { suite.BASE_LABEL[b], tostring(f.n) }
    for _, p in ipairs(suite.P) do
      local v = f[suite.p_key(p)]
      cells[#cells + 1] = v and string.format("%.0f%% (%d)", v * 100, math.floor(v * f.n + 0.5)) or "-"
    end
    w("| %s |", table.concat(cells, " | "))
  end
  w("")
  w("## Problems")
  w("")
  w("| problem | correct | kopt ms | eager ms | compile ms | vs eager | vs compile | of speed of light | evals | stopped |")
  w("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
  for _, r in ipairs(doc.rows) do
    local correct = r.correct and (suite.probe_flagged(r) and "yes, on the spec's inputs only" or "yes") or "**no**"
    w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", r.name, correct,
      ms(r.time_ms), ms(r.eager_ms), ms(r.compile_ms), times(r.speedup_eager), times(r.speedup_compile),
      pct(r.sol_frac), r.evaluations and tostring(r.evaluations) or "-", r.stop_reason or "-")
  end
  local notes = {}
  for _, r in ipairs(doc.rows) do
    if r.error then notes[#notes + 1] = string.format("- %s: %s", r.name, r.error) end
    if r.baseline_error then notes[#notes + 1] = string.format("- %s (baseline): %s", r.name, r.baseline_error) end
    local pr = r.range_probe
    if suite.probe_flagged(r) then
      notes[#notes + 1] = string.format("- %s: range probe: the winner fails on inputs scaled %gx (%s: %s); "
        .. "it stays the winner (--range-probe strict would replace it)", r.name, pr.scale or 0, pr.status, pr.log or "")
    elseif pr and pr.new_winner then
      notes[#notes + 1] = string.format("- %s: range probe: the fastest config failed on inputs scaled %gx; "
        .. "the winner shown is the next one that passes", r.name, pr.scale or 0)
    end
  end
  if #notes > 0 then
    w("")
    w("## Notes")
    w("")
    for _, n in ipairs(notes) do w("%s", n) end
  end
  local answered = 0
  for _, r in ipairs(doc.rows) do if r.from_db then answered = answered + 1 end end
  w("")
  w("Each problem's run is in its own folder (`<problem>/`: events.jsonl, trace.md, best/)%s. Speed of light:",
    answered > 0 and "; a problem the experience database answered has none here (suite.json's `run_dir` names "
      .. "the folder of the run that answered it)" or "")
  w("the spec's work at the device's peak f32 (or tensor) rate and DRAM bandwidth, whichever is slower.")
  return table.concat(L, "\n") .. "\n"
end

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

-- Horizontal bars, one pair per problem (vs eager, vs torch.compile), on a
-- log axis with 1x marked; a failed problem or a missing baseline is said
-- in words where its bar would be.
function M.svg(doc)
  local rows = doc.rows
  local lo, hi = 0.5, 4
  for _, r in ipairs(rows) do
    for _, b in ipairs(suite.BASES) do
      local s = r["speedup_" .. b]
      if s then lo, hi = math.min(lo, s), math.max(hi, s) end
    end
  end
  lo, hi = 2 ^ math.floor(math.log(lo, 2)), 2 ^ math.ceil(math.log(hi, 2))
  local left, right, top, rowh = 170, 30, 56, 26
  local W = 780
  local pw = W - left - right
  local H = top + rowh * #rows + 46
  local function fx(s) return left + pw * (math.log(s) - math.log(lo)) / (math.log(hi) - math.log(lo)) end
  local out = {}
  local function w(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  w('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', W, H, W, H)
  w('<rect width="%d" height="%d" fill="white"/>', W, H)
  w('<text x="%d" y="20" font-size="14" text-anchor="middle">%s</text>', W // 2,
    esc(string.format("kopt suite (%s) on %s: speedup over PyTorch", doc.strategy, doc.device or "unknown device")))
  w('<rect x="%d" y="30" width="12" height="10" fill="#1f77b4"/><text x="%d" y="39">vs eager</text>', left, left + 16)
  w('<rect x="%d" y="30" width="12" height="10" fill="#ff7f0e"/><text x="%d" y="39">vs torch.compile</text>',
    left + 90, left + 106)
  local t = lo
  while t <= hi + 1e-9 do
    local x = fx(t)
    w('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>', x, top - 4, x, top + rowh * #rows,
      math.abs(t - 1) < 1e-9 and "#333" or "#e6e6e6")
    w('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x, top + rowh * #rows + 16,
      t >= 1 and string.format("%gx", t) or string.format("%.3gx", t))
    t = t * 2
  end
  w('<text x="%d" y="%d" text-anchor="middle">speedup (log scale; right of the dark line: kopt is faster)</text>',
    left + pw // 2, H - 8)
  for i, r in ipairs(rows) do
    local y = top + (i - 1) * rowh
    w('<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>', left - 8, y + rowh // 2,
      esc(r.name))
    if not r.correct then
      w('<text x="%d" y="%d" dominant-baseline="middle" fill="#d62728">no correct kernel</text>', left + 6, y + rowh // 2)
    else
      for j, b in ipairs(suite.BASES) do
        local s = r["speedup_" .. b]
        local by = y + 3 + (j - 1) * 10
        if s then
          local x0, x1 = fx(1), fx(s)
          w('<rect x="%.1f" y="%d" width="%.1f" height="9" fill="%s"/>', math.min(x0, x1), by,
            math.max(1, math.abs(x1 - x0)), j == 1 and "#1f77b4" or "#ff7f0e")
          w('<text x="%.1f" y="%d" font-size="9" dominant-baseline="middle">%.2fx</text>', math.max(x0, x1) + 3,
            by + 5, s)
        else
          w('<text x="%.1f" y="%d" font-size="9" dominant-baseline="middle" fill="#777">no %s time</text>',
            fx(1) + 3, by + 5, b)
        end
      end
    end
  end
  w("</svg>")
  return table.concat(out, "\n") .. "\n"
end

return M
