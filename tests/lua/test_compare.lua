-- `kopt compare` (the strategy benchmark), small: random and anneal on the
-- pnpoly RTX 3090 space and the 15-config vector_add space, 2 seeds. The
-- numbers it writes are checked against computations made here from the raw
-- files (plain cjson, not kopt's reader or kopt.benchstats):
--   * the exact random-search row: P(best = j-th fastest) = C(M-j, b-1)/C(M, b),
--     with the failures ranked after every success;
--   * the methodology cutoff (p = 0.95), also against the value INDEX.tsv of
--     the shared data set lists for each file (pnpoly 198, vector_add 7);
--   * the rows of random and anneal against the same runs made through the
--     CLI (`kopt STRATEGY --backend replay:FILE --seed S`), read from events.jsonl;
--   * the simulated random row against the exact expectation within four
--     standard errors, with 60 seeds on vector_add;
--   * the SVG curves and the markdown table;
--   * a space whose successes all take one time has no score (n/a, with the
--     reason) and is left out of the averaged score, saying so;
--   * without --spaces (every tests/data/*.json), JSON that is no recording
--     is left out, while a recording that cannot be read (one bad entry) is
--     an error naming it (it was left out unsaid, changing every average).
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("compare")
local PN, VA = "tests/data/pnpoly_RTX_3090.json", "tests/data/vector_add_A4000.json"

-- Raw file: all entries (successes sorted first, failures after).
local function load(file)
  local raw = cjson.decode(T.slurp(file))
  local ok, m = {}, 0
  for _, e in pairs(raw.cache) do
    m = m + 1
    if type(e.time) == "number" and e.time < 1e19 then ok[#ok + 1] = e.time end
  end
  table.sort(ok)
  return { ok = ok, m = m, opt = ok[1], worst = ok[#ok] }
end

local function log_choose(n, k)
  if k < 0 or k > n then return -math.huge end
  local s = 0
  for i = 1, k do s = s + math.log((n - k + i) / i) end
  return s
end

-- Exact expected fraction and time of random search after b evaluations.
local function exact(d, b)
  b = math.min(b, d.m)
  local lc = log_choose(d.m, b)
  local ef, et, pnone = 0, 0, 1
  for j = 1, #d.ok do
    local p = math.exp(log_choose(d.m - j, b - 1) - lc)
    ef, et, pnone = ef + p * d.opt / d.ok[j], et + p * d.ok[j], pnone - p
  end
  return ef, et + math.max(0, pnone) * d.worst, pnone
end

local function cutoff(d, p)
  local n = #d.ok
  local median = n % 2 == 1 and d.ok[(n + 1) // 2] or (d.ok[n // 2] + d.ok[n // 2 + 1]) / 2
  local target = d.opt + (median - d.opt) * (1 - p)
  local i = 0 -- successes slower than the target (counted from the slow end)
  while i < n and d.ok[n - i] > target do i = i + 1 end
  return math.ceil(i / (n + 1 - i))
end

local function near(a, b, tol) return math.abs(a - b) <= tol * math.max(1, math.abs(b)) end

local out = tmp .. "/out"
local code, stdout, stderr = T.run(string.format(
  "compare --strategies random,anneal --spaces %s,%s --seeds 2 --budgets 1,10,25 --out %s -q", PN, VA, out))
T.eq(code, 0, "kopt compare exit code (" .. stderr .. ")")
local res = cjson.decode(T.slurp(out .. "/benchmark.json"))
local budgets = res.budgets
T.eq(#res.spaces, 2, "spaces in benchmark.json")

local want_cutoff = { pnpoly_RTX_3090 = 198, vector_add_A4000 = 7 } -- INDEX.tsv, methodology_budget_p0.95
for _, sp in ipairs(res.spaces) do
  local d = load(sp.file)
  T.eq(sp.entries, d.m, sp.name .. ": entries")
  T.eq(sp.valid, #d.ok, sp.name .. ": successful entries")
  T.eq(sp.cutoff, cutoff(d, 0.95), sp.name .. ": cutoff against the independent computation")
  T.eq(sp.cutoff, want_cutoff[sp.name], sp.name .. ": cutoff against INDEX.tsv")
  local rows = {}
  for _, r in ipairs(sp.strategies) do rows[r.name] = r end
  local ex = rows["random (exact)"]
  for i, b in ipairs(budgets) do
    T.check(near(ex.fraction[i], (exact(d, b)), 1e-9), "%s: exact random fraction at %d: %s vs %s", sp.name, b,
            ex.fraction[i], (exact(d, b)))
  end
  T.eq(ex.score, 0, sp.name .. ": score of exact random search")
  -- The same runs through the CLI, to the same length (the cutoff or the largest budget).
  local length = math.max(budgets[#budgets], sp.cutoff)
  for _, s in ipairs({ "random", "anneal" }) do
    local frac, needed5, scoresum = {}, {}, 0
    local curves = {}
    -- (anneal cools over its budget, so compare runs it once per budget:
    -- its fraction at b is that of a run of b evaluations)
    local function cli_curve(seed, budget)
      local dir = string.format("%s/%s_%s_%d_%d", tmp, sp.name, s, seed, budget)
      local c = T.run(string.format("%s --backend replay:%s --budget %d --seed %d --out %s -q", s, sp.file, budget,
                                    seed, dir))
      T.eq(c, 0, string.format("%s seed %d on %s: exit code", s, seed, sp.name))
      local curve, best = {}, math.huge
      for line in io.lines(dir .. "/events.jsonl") do
        local ev = cjson.decode(line)
        if ev.event == "eval" then
          if ev.result.status == "ok" and ev.result.time_ms < best then best = ev.result.time_ms end
          curve[#curve + 1] = best
        end
      end
      for n = #curve + 1, budget do curve[n] = best end
      return curve
    end
    T.eq(rows[s].per_budget, s == "anneal", sp.name .. "/" .. s .. ": runs once per budget")
    for seed = 1, 2 do
      local curve = cli_curve(seed, length)
      curves[seed] = curve
      for i, b in ipairs(budgets) do
        local at = (s == "anneal" and b < length) and cli_curve(seed, b) or curve
        local f = at[b] < math.huge and d.opt / at[b] or 0
        frac[i] = (frac[i] or 0) + f / 2
        local per_seed = rows[s].seed_fraction[seed]
        T.check(near(per_seed[i], f, 1e-9), "%s/%s seed %d: fraction at %d: compare says %s, the CLI run gives %s",
                sp.name, s, seed, b, per_seed[i], f)
      end
      needed5[seed] = math.huge
      for n = 1, length do if curve[n] <= d.opt * 1.05 then needed5[seed] = n break end end
    end
    local r = rows[s]
    for i, b in ipairs(budgets) do
      T.check(near(r.fraction[i], frac[i], 1e-9), "%s/%s: fraction at %d: compare says %s, CLI runs give %s",
              sp.name, s, b, r.fraction[i], frac[i])
    end
    local med5 = (needed5[1] + needed5[2]) / 2
    local got5 = r.evals_to_5pct == cjson.null and math.huge or r.evals_to_5pct
    T.check(got5 == med5, "%s/%s: evals to 5 %%: compare says %s, CLI runs give %s", sp.name, s, got5, med5)
    if sp.name == "vector_add_A4000" then
      for b = 1, sp.cutoff do
        local _, rt = exact(d, b)
        local mean = 0
        for _, c in ipairs(curves) do mean = mean + (c[b] < math.huge and c[b] or d.worst) / 2 end
        if rt - d.opt > 1e-12 * d.opt then scoresum = scoresum + (rt - mean) / (rt - d.opt) / sp.cutoff end
      end
      T.check(near(r.score, scoresum, 1e-6), "%s/%s: score %s, independent %s", sp.name, s, r.score, scoresum)
    end
  end
  local svgtext = T.slurp(out .. "/img/" .. sp.name .. ".svg")
  T.check(svgtext:match("^<svg") ~= nil, "%s: SVG starts with <svg", sp.name)
  local lines = 0
  for _ in svgtext:gmatch("<polyline") do lines = lines + 1 end
  T.eq(lines, 3, sp.name .. ": curves in the SVG (2 strategies + exact random)")
  local md = T.slurp(out .. "/benchmark.md")
  T.check(md:find("### " .. sp.name, 1, true) ~= nil, "benchmark.md has a section for %s", sp.name)
  T.check(md:find(string.format("| random (exact) | %.3f |", ex.fraction[1]), 1, true) ~= nil,
          "benchmark.md has the exact random row of %s", sp.name)
end
T.check(stdout:find("### Average over 2 spaces", 1, true) ~= nil, "stdout has the averaged table")

-- Statistical agreement of the simulated random search with the exact curve.
code = T.run(string.format("compare --strategies random --spaces %s --seeds 60 --budgets 1,3 --out %s/stat -q",
                           VA, tmp))
T.eq(code, 0, "kopt compare (60 seeds) exit code")
local d = load(VA)
local sp = cjson.decode(T.slurp(tmp .. "/stat/benchmark.json")).spaces[1]
for i, b in ipairs({ 1, 3 }) do
  -- Variance of opt/best from the exact distribution of the best rank.
  local lc, m1, m2 = log_choose(d.m, b), 0, 0
  for j = 1, #d.ok do
    local p = math.exp(log_choose(d.m - j, b - 1) - lc)
    local f = d.opt / d.ok[j]
    m1, m2 = m1 + p * f, m2 + p * f * f
  end
  local se = math.sqrt(math.max(0, m2 - m1 * m1) / 60)
  local got = sp.strategies[2].fraction[i]
  T.check(math.abs(got - m1) <= 4 * se + 1e-12, "random at %d over 60 seeds: %.4f, exact %.4f (4 SE = %.4f)", b,
          got, m1, 4 * se)
end

-- A seed range (--seeds A-B) runs seeds A..B: its first seed's row is seed 2
-- of the first run, and the report says which seeds it holds.
code, stdout = T.run(string.format("compare --strategies anneal --spaces %s --seeds 2-3 --budgets 1,10,25 --out %s/range",
                                   PN, tmp))
T.eq(code, 0, "kopt compare --seeds 2-3 exit code")
local ranged = cjson.decode(T.slurp(tmp .. "/range/benchmark.json"))
T.eq(ranged.first_seed, 2, "--seeds 2-3: first_seed in benchmark.json")
T.eq(ranged.seeds, 2, "--seeds 2-3: seeds in benchmark.json")
local function anneal_row(report)
  for _, space in ipairs(report.spaces) do
    if space.name == "pnpoly_RTX_3090" then
      for _, r in ipairs(space.strategies) do if r.name == "anneal" then return r end end
    end
  end
end
for i = 1, #budgets do
  T.eq(anneal_row(ranged).seed_fraction[1][i], anneal_row(res).seed_fraction[2][i],
       "--seeds 2-3: its first run is seed 2 (budget " .. budgets[i] .. ")")
end
T.check(stdout:find("over 2 seeds (2-3)", 1, true) ~= nil, "the report names the seed range")

-- a folder reused for a report of fewer spaces keeps no chart of the others
-- (those its last report listed), and no picture that is not compare's is
-- touched (every .svg of the folder went, docs/img's diagrams with it)
T.write(out .. "/img/architecture.svg", "<svg/>\n")
local before = require("kopt.sys").list_dir(out .. "/img")
code = T.run(string.format("compare --strategies random --spaces %s --seeds 1 --budgets 5 --out %s -q", PN, out))
T.eq(code, 0, "a compare into a used folder")
local charts = require("kopt.sys").list_dir(out .. "/img")
table.sort(charts)
T.check(#before > 2 and #charts == 2 and charts[1] == "architecture.svg" and charts[2] == "pnpoly_RTX_3090.svg",
        "the reused folder's charts: %s (before: %s)", table.concat(charts, ", "), table.concat(before, ", "))
for _, bad in ipairs({ "3-1", "0-4", "0", "2-", "x" }) do
  local c, _, err = T.run(string.format("compare --strategies anneal --spaces %s --seeds %s --out %s/bad -q", PN, bad, tmp))
  T.check(c ~= 0 and err:find("--seeds", 1, true) ~= nil, "--seeds %s: rejected with a message naming --seeds (%s)",
          bad, err)
end

-- found by writing odd spaces: evaluations counted as made (not the padded
-- curve), the exact median where the chance is exactly 1/2, one chart per space
do
  local function t4(path, results)
    T.write(path, cjson.encode({ schema_version = "1.0.0", metadata = { timeunit = "ms" }, results = results }))
  end
  local function entry(x, ms, bad)
    return { configuration = { X = x }, invalidity = bad or "correct", objectives = { "time" },
             measurements = { { name = "time", value = ms, unit = "ms" } } }
  end
  t4(tmp .. "/one.json", { entry(1, 2.5) })
  local many = {}
  for i = 1, 200 do many[i] = i % 40 == 0 and entry(i, 1 + i / 100) or entry(i, 0, "runtime") end
  t4(tmp .. "/needle.json", many)
  T.write(tmp .. "/one_2.json", T.slurp(tmp .. "/one.json"))
  -- (one file twice is refused: it would count twice in the means)
  local c, _, e = T.run(string.format("compare --strategies random --spaces %s/one.json,%s/needle.json,%s/one.json " ..
                                      "--seeds 2 --budgets 400 --out %s/odd -q", tmp, tmp, tmp, tmp))
  T.check(c == 2 and e:find("names " .. tmp .. "/one.json twice", 1, true), "one space twice: %s", e)
  c = T.run(string.format("compare --strategies random --spaces %s/one.json,%s/needle.json," ..
                          "%s/one_2.json --seeds 2 --budgets 400 --out %s/odd -q", tmp, tmp, tmp, tmp))
  T.eq(c, 0, "odd spaces: exit code")
  local rep = cjson.decode(T.slurp(tmp .. "/odd/benchmark.json"))
  for _, space in ipairs(rep.spaces) do
    for _, st in ipairs(space.strategies) do
      if space.name == "one" and st.name == "random" then T.eq(st.evaluations, 2, "one config, 2 seeds: 2 evaluations") end
      if space.name == "needle" and st.name == "random (exact)" then
        T.eq(st.evals_to_5pct, 100, "one success in 200: the exact median is 100 draws")
      end
    end
  end
  local p = io.popen("ls '" .. tmp .. "/odd/img' | wc -l")
  T.eq(tonumber(p:read("l")), 3, "one chart per space (one, needle, one_2)")
  p:close()
end

-- a space whose successes all take one time: the score is not defined there
-- (every R(b) - t_opt is 0; it read +0.000, "as good as random search", for
-- every strategy), says why, and is left out of the averaged score
do
  local only = T.grid_space(tmp .. "/only_one.json", { { "a", 6 }, { "b", 5 } }, function(a, b)
    return (a == 5 and b == 4) and 1.0 or "RuntimeFailedConfig"
  end)
  local tied = T.grid_space(tmp .. "/tied.json", { { "a", 4 } }, function(a) return a <= 2 and 2.0 or "InvalidConfig" end)
  local dir = tmp .. "/undefined"
  local c, md, e = T.run(string.format("compare --strategies random,anneal --spaces %s,%s,%s --seeds 2 --budgets 5,10 " ..
                                       "--out %s -q", only, tied, VA, dir))
  T.eq(c, 0, "spaces without a score: exit code\n" .. e)
  local rep = cjson.decode(T.slurp(dir .. "/benchmark.json"))
  local va_score = {}
  for _, space in ipairs(rep.spaces) do
    for _, st in ipairs(space.strategies) do
      if space.name == "vector_add_A4000" then
        T.check(type(st.score) == "number", "vector_add: %s has a score", st.name)
        va_score[st.name] = st.score
      else
        T.eq(st.score, cjson.null, space.name .. ": " .. st.name .. "'s score in benchmark.json")
      end
    end
    T.eq(space.score_undefined ~= nil, space.name ~= "vector_add_A4000", space.name .. ": score_undefined given")
  end
  T.check(md:find("only one of the 30 configurations ran, so random search's expected best", 1, true),
          "the note on the space with one success:\n%s", md)
  T.check(md:find("the 2 configurations that ran all take 2 ms", 1, true), "the note on the tied space:\n%s", md)
  T.check(md:find("| anneal | [%d.]+ | [%d.]+ | [%d.>]+ | [%d.>]+ | n/a |"), "n/a in the score column:\n%s", md)
  T.check(md:find("Score: the mean over the 1 space where it is defined; left out: only_one, tied.", 1, true),
          "the average says which spaces it leaves out:\n%s", md)
  local avg = md:match("### Average over 3 spaces\n.-\n| anneal |[^\n]* | ([^ |]+) |\n")
  T.eq(avg, string.format("%+.3f", va_score.anneal), "anneal's averaged score: vector_add's alone")
end

-- the default spaces: other JSON left out, a bad recording refused by name
do
  local dir = tmp .. "/default"
  os.execute("mkdir -p '" .. dir .. "/tests/data'")
  T.write(dir .. "/tests/data/vector_add.json", T.slurp(VA))
  T.write(dir .. "/tests/data/corpus.json", '{"replies": []}')
  local doc = cjson.decode(T.slurp(VA))
  local first = next(doc.cache)
  doc.cache[first].time = "1.5"
  T.write(dir .. "/tests/data/vector_add_bad.json", cjson.encode(doc))
  local c, _, e = T.run("compare --strategies random --seeds 1 --budgets 5 --out cmp -q", nil, dir)
  T.check(c == 2 and e:find("tests/data/vector_add_bad.json", 1, true) ~= nil and e:find("--spaces", 1, true) ~= nil,
          "a bad recording among the default spaces is an error naming it (%d: %s)", c, e)
  os.remove(dir .. "/tests/data/vector_add_bad.json")
  c, _, e = T.run("compare --strategies random --seeds 1 --budgets 5 --out cmp -q", nil, dir)
  T.eq(c, 0, "the default spaces, other JSON among them\n" .. e)
  local rep = cjson.decode(T.slurp(dir .. "/cmp/benchmark.json"))
  T.eq(#rep.spaces, 1, "the default spaces: the recording alone")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
