-- `kopt compare`: the strategy benchmark. Runs strategies x recorded spaces x
-- seeds through the engine on the replay backend, in this process, and
-- reports per space and averaged: the mean fraction of optimum at each
-- budget, the evaluations needed to get within 5 % and 1 % of the optimum
-- (median over seeds) and the methodology score against random search,
-- whose curve is computed exactly from the recording (kopt.benchstats).
-- Writes DIR/benchmark.md, DIR/benchmark.json and DIR/img/<space>.svg.
local benchstats = require("kopt.benchstats")
local errors = require("kopt.errors")
local json = require("kopt.json")
local recording = require("kopt.recording")
local replay = require("kopt.backends.replay")
local runs = require("kopt.compare_runs")
local rng_mod = require("kopt.rng")
local strategy_mod = require("kopt.strategy")
local svg = require("kopt.svg")
local sys = require("kopt.sys")

local M = { summary = "benchmark strategies on recorded spaces (replay): fraction of optimum, evals to 5 %/1 %, score" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--per-budget", "--help" }

M.DEFAULT_STRATEGIES = { "random", "anneal", "genetic", "surrogate", "mcgs", "rules" }
M.DEFAULT_BUDGETS = { 25, 50, 100, 200, 400 }
M.P = 0.95 -- methodology cutoff percentile
-- Gaps and seed noise: a strategy is behind on a space when its mean is
-- below the best other strategy's by more than GAP_BEHIND, and clearly
-- behind when the GAP_LEVEL bootstrap interval of that gap (GAP_DRAWS
-- draws over the seeds) lies below zero.
M.GAP_BEHIND, M.GAP_LEVEL, M.GAP_DRAWS = 0.005, 0.9, 2000

local USAGE = [[
usage: kopt compare [--strategies a,b,...] [--spaces FILE,...] [--seeds N|A-B]
                    [--budgets 25,50,...] [--out DIR] [--opt STRATEGY.KEY=VALUE]
                    [--replay-check strict|lenient] [--jobs N|auto] [--per-budget] [-q]
  --strategies  built-in names or paths (default: random, anneal, genetic,
                surrogate, and mcgs and rules when built in); NAME@K=V+K=V is a
                variant with its own options (mcgs@pw_c=1+model=false), reported
                under that label; variants of one strategy are chosen between
                leave-one-space-out
  --spaces      recorded spaces (Kernel Tuner cache, T4, KTT); default every
                tests/data/*.json under the current directory that is one
                (other JSON is left out; a recording kopt cannot read is an
                error)
  --seeds       runs per strategy and space, seeds 1..N (default 50), or
                A-B for seeds A..B (fresh seeds for a check of settings
                chosen on 1..N)
  --budgets     evaluation counts to report (default 25,50,100,200,400); every
                run goes on to the largest, or to the methodology cutoff when larger;
                a strategy that plans with its budget (anneal) also gets a run of
                each smaller budget, and its fraction there is that run's
  --out         output directory (default compare/): benchmark.md, benchmark.json, img/*.svg
  --opt         a strategy option, e.g. --opt anneal.t0=0.2 (repeatable)
  --replay-check  a bad entry in a space is an error (strict, the default) or
                skipped and counted (lenient), as for a run
  --jobs        runs in N processes at once (auto: one per CPU; default 1);
                every number but the timings is the same as with one
  --per-budget  a run of each budget for every strategy (for one that reads
                its budget without declaring plans_with_budget)
]]

-- "NAME@K=V+K=V" -> "NAME", { {K, V}, ... } (no '@': no variant options).
function M.split_variant(full)
  local label, rest = full:match("^(.-)@(.*)$")
  if not label then return full, {} end
  local kv = {}
  for item in (rest .. "+"):gmatch("([^+]*)%+") do
    local k, v = item:match("^([%w_%-]+)=(.*)$")
    if not k then errors.usage("compare: --strategies: expected NAME@KEY=VALUE+KEY=VALUE, got '%s'", full) end
    kv[#kv + 1] = { k, v }
  end
  return label, kv
end

local function split(s)
  local out = {}
  for item in (s .. ","):gmatch("([^,]*),") do if item ~= "" then out[#out + 1] = item end end
  return out
end

local function parse(argv)
  local o = { seeds = 50, first_seed = 1, budgets = M.DEFAULT_BUDGETS, out = "compare", opts = {} }
  local i = 1
  local function value(flag)
    i = i + 1
    if argv[i] == nil then errors.usage("compare: %s needs a value", flag) end
    return argv[i]
  end
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "-q" then o.quiet = true
    elseif a == "--strategies" then o.strategies = split(value(a))
    elseif a == "--spaces" then o.spaces = split(value(a))
    elseif a == "--replay-check" then o.check = recording.check_mode(value(a), "compare: --replay-check")
    elseif a == "--jobs" then
      local v = value(a)
      o.jobs = v == "auto" and sys.cpu_count() or math.tointeger(tonumber(v))
      if not o.jobs or o.jobs < 1 then errors.usage("compare: --jobs: expected a positive integer or auto, got '%s'", v) end
    elseif a == "--shard" then o.shard = value(a)
    elseif a == "--per-budget" then o.per_budget = true
    elseif a == "--out" then
      o.out = value(a)
      if not o.out:find("%S") then errors.usage("compare: --out: expected a folder name, got an empty string") end
    elseif a == "--seeds" then
      local v = value(a)
      local lo, hi = v:match("^(%d+)%-(%d+)$")
      lo, hi = math.tointeger(tonumber(lo or 1)), math.tointeger(tonumber(hi or v))
      if not lo or not hi or lo < 1 or hi < lo then
        errors.usage("compare: --seeds: expected a positive integer N or a range A-B with 1 <= A <= B, got '%s'", v)
      end
      o.first_seed, o.seeds = lo, hi - lo + 1
    elseif a == "--budgets" then
      o.budgets = {}
      local text = value(a)
      -- (digits only: "10,,20", "1e2" or " 10" is a typo, not a budget)
      if not text:find("^%d+[%d,]*$") or text:find(",,", 1, true) or text:find(",$") then
        errors.usage("compare: --budgets: expected positive integers separated by commas, got '%s'", text)
      end
      for _, b in ipairs(split(text)) do
        local n = math.tointeger(tonumber(b))
        if not n or n < 1 then errors.usage("compare: --budgets: expected positive integers, got '%s'", b) end
        o.budgets[#o.budgets + 1] = n
      end
      table.sort(o.budgets)
      -- (a budget given twice is one column)
      local uniq = {}
      for _, b in ipairs(o.budgets) do if uniq[#uniq] ~= b then uniq[#uniq + 1] = b end end
      o.budgets = uniq
      if #o.budgets == 0 then errors.usage("compare: --budgets: empty list") end
    elseif a == "--opt" then
      local v = value(a)
      -- (STRATEGY may be a file's path, dots and all: the KEY is what follows
      -- the last dot before the first '=')
      local s, k, x = v:match("^([^=]+)%.([%w_%-]+)=(.*)$")
      if not s then errors.usage("compare: --opt: expected STRATEGY.KEY=VALUE, got '%s'", v) end
      o.opts[s] = o.opts[s] or {}
      table.insert(o.opts[s], { k, x })
    else
      errors.usage("compare: unknown argument '%s' (see kopt compare --help)", a)
    end
    i = i + 1
  end
  return o
end

local function default_spaces()
  local names = sys.list_dir("tests/data")
  if not names then errors.usage("compare: no --spaces given and no tests/data here") end
  local out = {}
  for _, n in ipairs(names) do if n:match("%.json$") then out[#out + 1] = "tests/data/" .. n end end
  table.sort(out)
  return out
end

local function default_strategies()
  local have, out = {}, {}
  for _, n in ipairs(strategy_mod.builtins()) do have[n] = true end
  for _, n in ipairs(M.DEFAULT_STRATEGIES) do if have[n] then out[#out + 1] = n end end
  return out
end

local function fmt_evals(n, limit)
  if n == math.huge then return ">" .. limit end
  if n == math.floor(n) then return string.format("%d", n) end
  return string.format("%.1f", n)
end

-- Each file's label: its name without .json, with as many of its folders
-- in front as it takes to tell it from the others ("d1/space", "d2/space");
-- two files of one name in one folder's depth get "#2".
local function space_names(files)
  local parts, names = {}, {}
  for i, f in ipairs(files) do
    parts[i] = {}
    for seg in f:gsub("%.json$", ""):gmatch("[^/]+") do table.insert(parts[i], 1, seg) end
  end
  local function label(i, depth)
    local p, out = parts[i], {}
    for d = math.min(depth, #p), 1, -1 do out[#out + 1] = p[d] end
    return table.concat(out, "/")
  end
  for i in ipairs(files) do
    local depth = 1
    while true do
      local clash = false
      for j in ipairs(files) do
        if j ~= i and label(j, depth) == label(i, depth) and depth < math.max(#parts[i], #parts[j]) then clash = true end
      end
      if not clash then break end
      depth = depth + 1
    end
    names[i] = label(i, depth)
  end
  local count = {}
  for i, n in ipairs(names) do
    count[n] = (count[n] or 0) + 1
    if count[n] > 1 then names[i] = n .. "#" .. count[n] end
  end
  return names
end

function M.main(argv)
  local o = parse(argv)
  if o.help then io.stdout:write(USAGE) return 0 end
  if o.shard then return runs.shard(o.shard) end
  local files = o.spaces or default_spaces()
  local defaulted = o.spaces == nil
  local strategies = o.strategies or default_strategies()
  if #files == 0 then errors.usage("compare: no spaces to run on") end
  -- (one file twice would count twice in every mean and rank)
  local seen_file = {}
  for _, f in ipairs(files) do
    local real = sys.realpath(f) or f
    if seen_file[real] then
      errors.usage("compare: --spaces names %s twice (its rows would count twice in the means)", f)
    end
    seen_file[real] = true
  end
  if #strategies == 0 then errors.usage("compare: --strategies: an empty list, no strategy to run") end
  -- Load every strategy once up front, so a typo fails before hours of runs.
  local loaded = {}
  for i, full in ipairs(strategies) do
    local label, variant = M.split_variant(full)
    local saved = package.path
    local s = strategy_mod.load(label)
    package.path = saved
    local name = s.name
    local pairs_list = {}
    for _, kv in ipairs(o.opts[name] or o.opts[label] or {}) do pairs_list[#pairs_list + 1] = kv end
    for _, kv in ipairs(variant) do pairs_list[#pairs_list + 1] = kv end
    loaded[i] = { label = label, name = #variant > 0 and (name .. full:sub(#label + 1)) or name, base = name,
                  options = strategy_mod.options(s, pairs_list), pairs = pairs_list,
                  per_budget = o.per_budget or s.plans_with_budget == true }
    for j = 1, i - 1 do
      if loaded[j].name == loaded[i].name then
        if loaded[j].label ~= loaded[i].label then
          errors.usage("compare: --strategies: %s and %s both call themselves '%s' (a report's rows go by that name)",
                       loaded[j].label, loaded[i].label, loaded[i].name)
        end
        errors.usage("compare: --strategies names '%s' twice (its rows would be one strategy's, reported twice)",
                     loaded[i].name)
      end
    end
  end
  -- an --opt for a strategy that is not in the list would change nothing
  for who in pairs(o.opts) do
    local found = false
    for _, l in ipairs(loaded) do found = found or l.base == who or l.label == who end
    if not found then
      local names = {}
      for _, l in ipairs(loaded) do names[#names + 1] = l.base end
      errors.usage("compare: --opt %s.KEY=VALUE: no strategy in --strategies is called '%s' (they are: %s)", who, who,
                   table.concat(names, ", "))
    end
  end
  local budgets, maxb = o.budgets, o.budgets[#o.budgets]
  local report = { budgets = budgets, seeds = o.seeds, first_seed = o.first_seed, p = M.P, spaces = {} }
  -- every space read and the output folder made before any run: a bad one
  -- is an error now, not after the runs of the spaces before it
  -- (the default, every tests/data/*.json, holds other JSON too, such as
  -- the LLM reply corpus: JSON that is no recording is left out there, and
  -- is an error when named; a recording that cannot be read is an error in
  -- both, as a space left out unsaid would change every average)
  local opened, kept = {}, {}
  for _, file in ipairs(files) do
    local rec, rerr, kind = recording.read(file, o.check)
    if not rec and not (defaulted and kind == recording.NOT_RECORDING) then
      if defaulted then
        errors.usage("%s (compare reads every recording among tests/data/*.json; --spaces names the ones to compare)",
                     rerr)
      end
      errors.usage("%s", rerr)
    end
    if rec then
      local backend = replay.open(nil, { file = file, check = o.check, rec = rec })
      local facts = benchstats.space_facts(backend.rec.entries)
      if facts.valid == 0 then errors.usage("compare: %s records no successful configuration", file) end
      opened[#opened + 1], kept[#kept + 1] = { backend = backend, facts = facts }, file
    end
  end
  files = kept
  if #files == 0 then errors.usage("compare: no recording among tests/data/*.json") end
  local made, merr = sys.mkdir_p(o.out .. "/img")
  if not made then errors.usage("compare: --out: %s", tostring(merr)) end
  -- (the report's files must be writable: found after hours of runs otherwise)
  for _, f in ipairs({ "benchmark.md", "benchmark.json" }) do
    local kind = sys.stat(o.out .. "/" .. f)
    if kind and kind ~= "file" then
      errors.usage("compare: --out: %s/%s is a %s, not a file", o.out, f, kind == "dir" and "directory" or kind)
    end
  end
  local names = space_names(files)
  -- with --jobs, every run first, in child processes: ran[fi][si][run]
  local ran
  if (o.jobs or 1) > 1 then
    local lengths = {}
    for fi in ipairs(files) do lengths[fi] = math.max(maxb, benchstats.cutoff(opened[fi].facts, M.P)) end
    local units = runs.units(files, lengths, loaded, budgets, o)
    if not o.quiet then
      io.stderr:write(string.format("compare: %d runs in %d processes\n", #units, math.min(o.jobs, #units)))
    end
    local t0 = sys.now()
    ran = runs.gather(units, runs.parallel(units, o.jobs, o.out .. "/.shards", not o.quiet))
    if not o.quiet then io.stderr:write(string.format("compare: runs done in %.1f s\n", sys.now() - t0)) end
  end
  for fi, file in ipairs(files) do
    local backend, facts = opened[fi].backend, opened[fi].facts
    local cutoff = benchstats.cutoff(facts, M.P)
    local length = math.max(maxb, cutoff)
    local rtimes, rfrac = benchstats.random_curve(facts, length)
    local sp = { name = names[fi], file = file, entries = facts.entries, valid = facts.valid,
                 opt_ms = facts.opt, median_ms = facts.median, cutoff = cutoff, results = {} }
    sp.score_note = benchstats.score_undefined(facts, cutoff, rtimes)
    local exact = { name = "random (exact)", fraction = {}, within = {}, score = not sp.score_note and 0 or nil,
                    curve = rfrac }
    for i, b in ipairs(budgets) do exact.fraction[i] = rfrac[math.min(b, #rfrac)] end
    for _, tol in ipairs({ 0.05, 0.01 }) do exact.within[tol] = (benchstats.random_evals_within(facts, tol)) end
    sp.exact = exact
    for si, st in ipairs(loaded) do
      local t0, c0 = sys.now(), os.clock()
      local curves, stats, evals, own = {}, {}, 0, {}
      local seconds, cpu_s = 0, 0
      for run = 1, o.seeds do
        local c, counters, n
        local r, seed = ran and ran[fi][si][run], o.first_seed + run - 1
        if r then
          c, counters, n, own[run] = r.curve, r.stats, r.made + r.extra.made, r.own
          seconds, cpu_s = seconds + r.seconds + r.extra.seconds, cpu_s + r.cpu_s + r.extra.cpu_s
        else
          c, counters, n = runs.run_one(st.base, st.label, st.options, backend, seed, length)
          own[run] = {}
          for _, ib in ipairs(runs.own_budgets(st, budgets, length)) do
            local oc, _, on = runs.run_one(st.base, st.label, st.options, backend, seed, ib[2])
            own[run][ib[1]], n = oc[ib[2]], n + on
          end
        end
        curves[run], evals = c, evals + n
        for k, v in pairs(counters) do stats[k] = (stats[k] or 0) + v end
      end
      local sum = benchstats.summarise(facts, curves, budgets, cutoff, rtimes)
      runs.apply_own_budgets(sum, facts, own)
      sum.per_budget = st.per_budget
      -- (with --jobs: the runs' own times, summed, as if made one after another)
      sum.name, sum.base, sum.seconds = st.name, st.base, ran and seconds or sys.now() - t0
      sum.cpu_s, sum.evals, sum.stats = ran and cpu_s or os.clock() - c0, evals, stats
      sum.curve = {}
      for n = 1, maxb do
        local acc = 0
        for _, c in ipairs(curves) do acc = acc + (c[n] < math.huge and facts.opt / c[n] or 0) end
        sum.curve[n] = acc / #curves
      end
      sp.results[#sp.results + 1] = sum
      if not o.quiet then
        io.stderr:write(string.format("compare: %-22s %-12s %d seeds x %d evals in %.1f s\n", sp.name, st.name,
                                      o.seeds, length, sum.seconds))
      end
    end
    backend:close()
    report.spaces[#report.spaces + 1] = sp
  end
  -- (the bootstrap takes seconds on many spaces: drawn once, for both files)
  report.gaps = M.gaps(report)
  local md = M.markdown(report)
  io.stdout:write(md)
  json.write_file(o.out .. "/benchmark.md", md, true)
  -- (one chart per space: "A#2" and "A_2" must not share a file name)
  local used = {}
  for _, sp in ipairs(report.spaces) do
    local base = sp.name:gsub("[%./#]", "_")
    local name, k = base, 1
    while used[name] do k = k + 1; name = base .. "_" .. k end
    used[name] = true
    M.write_svg(o.out .. "/img/" .. name .. ".svg", sp, maxb)
  end
  -- (a folder reused from an earlier compare: its charts of spaces not in
  -- this report would read as part of it. Only the charts that report
  -- listed go: other pictures in the folder are not compare's)
  local old = io.open(o.out .. "/benchmark.json")
  local old_text = old and old:read("a")
  if old then old:close() end
  local ok, prev = pcall(json.decode, old_text or "null")
  for _, name in ipairs(ok and type(prev) == "table" and type(prev.charts) == "table" and prev.charts or {}) do
    if type(name) == "string" and not used[name] and name:match("^[^/]+$") then
      os.remove(o.out .. "/img/" .. name .. ".svg")
    end
  end
  local plain = M.plain(report)
  plain.charts = {}
  for name in pairs(used) do plain.charts[#plain.charts + 1] = name end
  table.sort(plain.charts)
  json.write_file(o.out .. "/benchmark.json", plain)
  return 0
end

local function header(budgets, with_evals)
  local cols = { "strategy" }
  for _, b in ipairs(budgets) do cols[#cols + 1] = "@" .. b end
  if with_evals then cols[#cols + 1] = "evals to 5 %"; cols[#cols + 1] = "evals to 1 %" end
  cols[#cols + 1] = "score"
  local sep = {}
  for i = 1, #cols do sep[i] = i == 1 and "---" or "---:" end
  return "| " .. table.concat(cols, " | ") .. " |\n|" .. table.concat(sep, "|") .. "|\n"
end

local function row(r, budgets, limit, with_evals)
  local cells = { r.name }
  for i = 1, #budgets do cells[#cells + 1] = string.format("%.3f", r.fraction[i]) end
  if with_evals then
    cells[#cells + 1] = fmt_evals(r.within[0.05], limit)
    cells[#cells + 1] = fmt_evals(r.within[0.01], limit)
  end
  cells[#cells + 1] = r.score and string.format("%+.3f", r.score) or "n/a"
  return "| " .. table.concat(cells, " | ") .. " |\n"
end

-- "20 seeds" (seeds 1..20), or "20 seeds (21-40)".
local function seed_label(report)
  local first = report.first_seed or 1
  local n = string.format("%d seed%s", report.seeds, report.seeds == 1 and "" or "s")
  if first == 1 then return n end
  return string.format("%s (%d-%d)", n, first, first + report.seeds - 1)
end

-- The report as markdown: one table per space, the average over spaces, the
-- ranks and the leave-one-space-out table.
function M.markdown(report)
  local out, budgets = {}, report.budgets
  out[#out + 1] = string.format("Mean fraction of optimum (t_opt / t_found) after N evaluations, over %s; "
    .. "evaluations to get within 5 %% / 1 %% of the optimum (median over seeds; random: exact median); "
    .. "score: methodology score against exact random search, mean over evaluations 1..cutoff (p = %.2f).\n\n",
    seed_label(report), report.p)
  local planners = {}
  for _, r in ipairs(report.spaces[1] and report.spaces[1].results or {}) do
    if r.per_budget then planners[#planners + 1] = r.name end
  end
  if #planners > 0 then
    out[#out + 1] = string.format("Run once per budget (they plan with it): %s. For these, the fraction after N "
      .. "evaluations is that of runs of N evaluations; evaluations to 5 %% / 1 %%, score and curve are those "
      .. "of the runs to the longest budget or the cutoff.\n\n", table.concat(planners, ", "))
  end
  for _, sp in ipairs(report.spaces) do
    local length = math.max(budgets[#budgets], sp.cutoff)
    out[#out + 1] = string.format("### %s\n\n%d configurations (%d ok), optimum %.5g ms, median %.5g ms, "
      .. "cutoff %d evaluations (`%s`)\n\n", sp.name, sp.entries, sp.valid, sp.opt_ms, sp.median_ms, sp.cutoff, sp.file)
    out[#out + 1] = header(budgets, true)
    out[#out + 1] = row(sp.exact, budgets, sp.entries, true)
    for _, r in ipairs(sp.results) do out[#out + 1] = row(r, budgets, length, true) end
    if sp.score_note then out[#out + 1] = "\nScore not defined (n/a): " .. sp.score_note .. ".\n" end
    out[#out + 1] = "\n"
  end
  if #report.spaces > 1 then
    out[#out + 1] = string.format("### Average over %d spaces\n\n", #report.spaces)
    out[#out + 1] = header(budgets, false)
    -- (the score over the spaces where it is defined)
    local scored, unscored = 0, {}
    for _, sp in ipairs(report.spaces) do
      if sp.score_note then unscored[#unscored + 1] = sp.name else scored = scored + 1 end
    end
    local function avg(get)
      local r = { fraction = {}, score = scored > 0 and 0 or nil }
      for _, sp in ipairs(report.spaces) do
        local x = get(sp)
        r.name = x.name
        for i = 1, #budgets do r.fraction[i] = (r.fraction[i] or 0) + x.fraction[i] / #report.spaces end
        if r.score and not sp.score_note then r.score = r.score + x.score / scored end
      end
      return r
    end
    out[#out + 1] = row(avg(function(sp) return sp.exact end), budgets, 0, false)
    for i in ipairs(report.spaces[1].results) do
      out[#out + 1] = row(avg(function(sp) return sp.results[i] end), budgets, 0, false)
    end
    if #unscored > 0 then
      out[#out + 1] = string.format("\nScore: the mean over the %d space%s where it is defined; left out: %s.\n",
        scored, scored == 1 and "" or "s", table.concat(unscored, ", "))
    end
    out[#out + 1] = "\n"
  end
  if #report.spaces > 0 and #report.spaces[1].results > 1 then
    out[#out + 1] = M.rank_markdown(report)
    out[#out + 1] = M.loo_markdown(report)
    out[#out + 1] = M.gaps_markdown(report)
  end
  if #report.spaces > 0 then out[#out + 1] = M.cost_markdown(report) end
  return table.concat(out)
end

-- The cost of each strategy itself (replay answers an evaluation at once, so
-- this is the search and the engine): CPU time per evaluation over all
-- spaces and seeds, and the strategy's own counters (stats(ctx): MCGS's
-- expert calls and the evaluations of their moves) per 100 evaluations.
function M.cost_markdown(report)
  local rows, names = {}, {}
  for _, sp in ipairs(report.spaces) do
    for ri, r in ipairs(sp.results) do
      local c = rows[ri] or { name = r.name, cpu_s = 0, evals = 0, stats = {} }
      c.cpu_s, c.evals = c.cpu_s + (r.cpu_s or 0), c.evals + (r.evals or 0)
      for k, v in pairs(r.stats or {}) do
        if not c.stats[k] then names[#names + 1] = k end
        c.stats[k] = (c.stats[k] or 0) + v
      end
      rows[ri] = c
    end
  end
  local seen, cols = {}, {}
  for _, k in ipairs(names) do if not seen[k] then seen[k], cols[#cols + 1] = true, k end end
  table.sort(cols)
  local out = { "### Cost of the search\n\nCPU time of the strategy and the engine per evaluation (replay: "
    .. "no kernel is run), over every space and seed", #cols > 0 and "; the strategies' own counters per 100 "
    .. "evaluations" or "", ".\n\n| strategy | ms per evaluation |" }
  for _, k in ipairs(cols) do out[#out + 1] = " " .. k:gsub("_", " ") .. " |" end
  out[#out + 1] = "\n|---|---:|"
  for _ = 1, #cols do out[#out + 1] = "---:|" end
  out[#out + 1] = "\n"
  for _, c in ipairs(rows) do
    out[#out + 1] = string.format("| %s | %.3f |", c.name, c.evals > 0 and c.cpu_s * 1e3 / c.evals or 0)
    for _, k in ipairs(cols) do
      local v = c.stats[k]
      out[#out + 1] = v and string.format(" %.2f |", 100 * v / math.max(1, c.evals)) or " |"
    end
    out[#out + 1] = "\n"
  end
  out[#out + 1] = "\n"
  return table.concat(out)
end

-- Ranks per space: at each budget the strategies are ranked by mean
-- fraction of optimum as printed (3 decimals, so seed noise below the
-- printed precision is a tie; tied strategies share the mean of their
-- ranks); a space's rank is the mean over its budgets. Returns
-- ranks[space index][result index] and mean[result index] over spaces.
function M.ranks(report)
  local ranks, mean = {}, {}
  local nb = #report.budgets
  for si, sp in ipairs(report.spaces) do
    ranks[si] = {}
    for ri in ipairs(sp.results) do ranks[si][ri] = 0 end
    for b = 1, nb do
      local v = {}
      -- (ranked as printed: %.3f rounds a half to even, as floor(x + 0.5) does not)
      for ri, r in ipairs(sp.results) do v[ri] = tonumber(string.format("%.3f", r.fraction[b])) end
      for ri in ipairs(sp.results) do
        local better, equal = 0, 0
        for rj in ipairs(sp.results) do
          if v[rj] > v[ri] then better = better + 1 elseif v[rj] == v[ri] then equal = equal + 1 end
        end
        ranks[si][ri] = ranks[si][ri] + (better + (equal + 1) / 2) / nb
      end
    end
    for ri in ipairs(sp.results) do mean[ri] = (mean[ri] or 0) + ranks[si][ri] / #report.spaces end
  end
  return ranks, mean
end

-- Leave-one-space-out. Results are grouped by strategy (variants NAME@...
-- of one strategy form a group); for each held-out space every group
-- picks the variant with the best mean fraction over the other spaces and
-- budgets, and is scored on the held-out space with it. Returns groups in
-- first-seen order: { name, fraction[space][budget], pick[space] }.
function M.loo(report)
  local groups, by = {}, {}
  local spaces, nb = report.spaces, #report.budgets
  if #spaces == 0 then return groups end
  for ri, r in ipairs(spaces[1].results) do
    local base = r.base or r.name
    if not by[base] then
      by[base] = { name = base, members = {}, fraction = {}, pick = {} }
      groups[#groups + 1] = by[base]
    end
    table.insert(by[base].members, ri)
  end
  for _, gr in ipairs(groups) do
    for h, sp in ipairs(spaces) do
      local best, pick = -math.huge, nil
      for _, ri in ipairs(gr.members) do
        local acc = 0
        for si, other in ipairs(spaces) do
          if si ~= h or #spaces == 1 then
            for b = 1, nb do acc = acc + other.results[ri].fraction[b] end
          end
        end
        if acc > best + 1e-12 then best, pick = acc, ri end
      end
      gr.pick[h] = sp.results[pick].name
      gr.fraction[h] = sp.results[pick].fraction
    end
  end
  return groups
end

function M.loo_markdown(report)
  local groups = M.loo(report)
  local budgets, spaces = report.budgets, report.spaces
  local out = {}
  out[#out + 1] = "### Leave-one-space-out\n\nFor each space, each strategy runs with the variant that did best "
    .. "on the other spaces (mean fraction over the budgets); mean and worst space of the held-out fractions, "
    .. "and the worst gap to the best other strategy on the same space (negative: behind it).\n\n"
  local cols, sep = { "strategy" }, { "---" }
  for _, b in ipairs(budgets) do
    cols[#cols + 1] = "@" .. b .. " mean"; cols[#cols + 1] = "@" .. b .. " worst"; cols[#cols + 1] = "@" .. b .. " gap"
    sep[#sep + 1] = "---:"; sep[#sep + 1] = "---:"; sep[#sep + 1] = "---:"
  end
  out[#out + 1] = "| " .. table.concat(cols, " | ") .. " |\n|" .. table.concat(sep, "|") .. "|\n"
  for gi, gr in ipairs(groups) do
    local cells = { gr.name }
    for b = 1, #budgets do
      local mean, worst, gap, gap_at = 0, math.huge, math.huge, nil
      for h, sp in ipairs(spaces) do
        local f = gr.fraction[h][b]
        mean = mean + f / #spaces
        if f < worst then worst = f end
        local other = -math.huge
        for gj, g2 in ipairs(groups) do if gj ~= gi then other = math.max(other, g2.fraction[h][b]) end end
        if other > -math.huge and f - other < gap then gap, gap_at = f - other, sp.name end
      end
      cells[#cells + 1] = string.format("%.3f", mean)
      cells[#cells + 1] = string.format("%.3f", worst)
      cells[#cells + 1] = gap_at and string.format("%+.3f (%s)", gap, gap_at) or "-"
    end
    out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |\n"
  end
  local picks = {}
  for _, gr in ipairs(groups) do
    if #gr.members > 1 then
      local list = {}
      for h, sp in ipairs(spaces) do list[#list + 1] = sp.name .. ": " .. gr.pick[h] end
      picks[#picks + 1] = "- " .. gr.name .. " picks: " .. table.concat(list, "; ") .. "\n"
    end
  end
  if #picks > 0 then out[#out + 1] = "\n" .. table.concat(picks) end
  return table.concat(out) .. "\n"
end

-- Each strategy's gap to the best strategy of another group (variants of
-- one strategy are not each other's rivals) on every space and budget, with
-- its bootstrap interval over the seeds (kopt.benchstats.gap_interval).
-- Returns { name, space, budget, gap, lo, hi } rows; none without per-seed
-- fractions or with fewer than two seeds.
function M.gaps(report)
  local rows = {}
  local rng = rng_mod.new(1)
  for _, sp in ipairs(report.spaces) do
    for _, r in ipairs(sp.results) do
      local rivals = {}
      for _, o in ipairs(sp.results) do
        if (o.base or o.name) ~= (r.base or r.name) and o.seed_fraction then rivals[#rivals + 1] = o end
      end
      if r.seed_fraction and #r.seed_fraction > 1 and #rivals > 0 then
        for b, budget in ipairs(report.budgets) do
          local function column(x)
            local c = {}
            for s, f in ipairs(x.seed_fraction) do c[s] = f[b] end
            return c
          end
          local others = {}
          for j, o in ipairs(rivals) do others[j] = column(o) end
          local gap, lo, hi = benchstats.gap_interval(column(r), others, M.GAP_DRAWS, rng, M.GAP_LEVEL)
          rows[#rows + 1] = { name = r.name, space = sp.name, budget = budget, gap = gap, lo = lo, hi = hi }
        end
      end
    end
  end
  return rows
end

function M.gaps_markdown(report)
  local rows = report.gaps or M.gaps(report)
  if #rows == 0 then return "" end
  local budgets, cells, names = report.budgets, {}, {}
  for _, g in ipairs(rows) do
    if not cells[g.name] then cells[g.name], names[#names + 1] = {}, g.name end
    local c = cells[g.name][g.budget] or { behind = 0, clearly = 0 }
    if g.gap < -M.GAP_BEHIND then
      c.behind = c.behind + 1
      if g.hi < 0 then c.clearly = c.clearly + 1 end
    end
    if not c.worst or g.gap < c.worst.gap then c.worst = g end
    cells[g.name][g.budget] = c
  end
  local out = { string.format("### Gaps and seed noise\n\nAt each budget, the spaces where a strategy's mean "
    .. "is behind the best strategy of another group by more than %.3f, those where it is clearly behind (the "
    .. "%d %% bootstrap interval of the gap, %d draws over the seeds, lies below zero), and its worst gap with "
    .. "that interval.\n\n| strategy |", M.GAP_BEHIND, math.floor(M.GAP_LEVEL * 100 + 0.5), M.GAP_DRAWS) }
  for _, b in ipairs(budgets) do out[#out + 1] = " @" .. b .. " |" end
  out[#out + 1] = "\n|---|" .. string.rep("---|", #budgets) .. "\n"
  for _, name in ipairs(names) do
    out[#out + 1] = "| " .. name .. " |"
    for _, b in ipairs(budgets) do
      local c = cells[name][b]
      local w = c.worst
      out[#out + 1] = string.format(" %d behind, %d clearly; worst %+.3f [%+.3f, %+.3f] %s |", c.behind, c.clearly,
                                    w.gap, w.lo, w.hi, w.space)
    end
    out[#out + 1] = "\n"
  end
  return table.concat(out) .. "\n"
end

function M.rank_markdown(report)
  local ranks, mean = M.ranks(report)
  local out = { "### Rank per space\n\nRank of each strategy on each space (1 = best; at each budget by the "
    .. "mean fraction as printed, ties share their mean rank; averaged over the budgets), and the mean rank.\n\n" }
  local cols, sep = { "strategy" }, { "---" }
  for _, sp in ipairs(report.spaces) do cols[#cols + 1] = sp.name; sep[#sep + 1] = "---:" end
  cols[#cols + 1] = "mean rank"; sep[#sep + 1] = "---:"
  out[#out + 1] = "| " .. table.concat(cols, " | ") .. " |\n|" .. table.concat(sep, "|") .. "|\n"
  for ri, r in ipairs(report.spaces[1].results) do
    local cells = { r.name }
    for si in ipairs(report.spaces) do cells[#cells + 1] = string.format("%.2f", ranks[si][ri]) end
    cells[#cells + 1] = string.format("%.2f", mean[ri])
    out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |\n"
  end
  return table.concat(out) .. "\n"
end

function M.write_svg(path, sp, maxb)
  local series, lo = {}, 1
  -- (the axis starts at the tenth evaluation's values on long curves, whose
  -- first samples would flatten the rest; a short one is drawn whole: from
  -- its last point alone, everything below was drawn on the axis's floor)
  local from = maxb <= 20 and 1 or 10
  local function pts(curve)
    local p = {}
    for n = 1, maxb do
      p[#p + 1] = { n, curve[n] }
      if n >= from then lo = math.min(lo, curve[n]) end
    end
    return p
  end
  for _, r in ipairs(sp.results) do series[#series + 1] = { name = r.name, points = pts(r.curve) } end
  series[#series + 1] = { name = "random (exact)", points = pts(sp.exact.curve), color = "#555555", dash = true }
  local ymin = math.max(0, math.floor(lo * 10) / 10)
  if ymin >= 0.95 then ymin = 0.9 end
  json.write_file(path, svg.line_chart({
    title = string.format("%s: mean fraction of optimum", sp.name), xlabel = "evaluations (log scale)",
    ylabel = "t_opt / t_found", xmin = 1, xmax = maxb, ymin = ymin, ymax = 1, xlog = true, series = series,
  }), true)
end

-- The report without curves and with string keys, for benchmark.json.
function M.plain(report)
  local out = { budgets = report.budgets, seeds = report.seeds, first_seed = report.first_seed, p = report.p,
                spaces = {} }
  for _, sp in ipairs(report.spaces) do
    local s = { name = sp.name, file = sp.file, entries = sp.entries, valid = sp.valid, opt_ms = sp.opt_ms,
                median_ms = sp.median_ms, cutoff = sp.cutoff, score_undefined = sp.score_note, strategies = {} }
    for _, r in ipairs({ sp.exact, table.unpack(sp.results) }) do
      local w5, w1 = r.within[0.05], r.within[0.01]
      s.strategies[#s.strategies + 1] = { name = r.name, fraction = r.fraction, score = r.score or json.null,
        evals_to_5pct = w5 < math.huge and w5 or json.null, evals_to_1pct = w1 < math.huge and w1 or json.null,
        seconds = r.seconds, cpu_s = r.cpu_s, evaluations = r.evals, stats = r.stats,
        seed_fraction = r.seed_fraction, per_budget = r.per_budget }
    end
    out.spaces[#out.spaces + 1] = s
  end
  if #report.spaces > 0 and #report.spaces[1].results > 0 then
    local ranks, mean = M.ranks(report)
    out.mean_rank = {}
    for ri, r in ipairs(report.spaces[1].results) do
      out.mean_rank[#out.mean_rank + 1] = { name = r.name, rank = mean[ri] }
      for si, s in ipairs(out.spaces) do s.strategies[ri + 1].rank = ranks[si][ri] end
    end
    out.loo = {}
    for _, gr in ipairs(M.loo(report)) do out.loo[#out.loo + 1] = { name = gr.name, fraction = gr.fraction, pick = gr.pick } end
    out.gaps = report.gaps or M.gaps(report)
  end
  return out
end

return M
