-- ReGraph online, measured on replay (docs/SEARCH.md, "ReGraph online"):
--
--   kopt script tools/regraph_experiment.lua OUT [SEEDS] [BUDGET]
--
-- 1. Learning: MCGS with expert moves (the heuristic experts: no LLM, no
--    GPU) on the learning spaces, seeds 1001..1003, budget 200, without a
--    ReGraph; their transitions (from_method -> to_method, speedup) are
--    OUT/experience.jsonl, what $KOPT_EXPERIENCE would hold after them.
-- 2. Evaluation: MCGS with expert moves on every space, seeds 1..SEEDS
--    (default 20), BUDGET evaluations (default 100), three ways: regraph=off,
--    regraph=OUT/experience.jsonl (the expert moves' priors), and the same
--    with regraph_filter=on. The learning spaces are evaluated with other
--    seeds (same kernels); the held-out ones never fed the graph.
-- Prints, per space and variant, the mean fraction of the optimum
-- (t_opt / t_found) after 25, 50 and BUDGET evaluations, the mean number of
-- evaluations to reach 1 % of the optimum (BUDGET+1 when not reached), and
-- per seed how often the variant reached 1 % sooner / later than regraph=off;
-- the same as JSON in OUT/regraph_experiment.json.
local benchstats = require("kopt.benchstats")
local engine_mod = require("kopt.engine")
local json = require("kopt.json")
local replay = require("kopt.backends.replay")
local strategy_mod = require("kopt.strategy")
local sys = require("kopt.sys")
local experience = require("kopt.experience")
local relabel = require("kopt.relabel")

-- (a benchmark neither writes the user's dataset and method map nor learns
-- from them, as `kopt compare`: its figures must not depend on the runs
-- before it, and its runs must not skew the user's later ones; the
-- learning runs' transitions go to their run folders and OUT only)
experience.set_persistent(false)
relabel.set_persistent(false)

local out = arg and arg[1] or "regraph-experiment"
local seeds = tonumber(arg and arg[2]) or 20
local budget = tonumber(arg and arg[3]) or 100
local LEARN = { "tests/data/convolution_A100.json", "tests/data/pnpoly_RTX_3090.json",
                "tests/data/dedispersion_A100.json" }
local HELD_OUT = { "tests/data/convolution_A4000.json", "tests/data/coulomb_2080.json",
                   "tests/data/matmul_f16_wide_h200.t4.json", "tests/data/reduce_h200.t4.json" }
sys.mkdir_p(out)
local exp = out .. "/experience.jsonl"

local mcgs = strategy_mod.load("mcgs")
local function run(file, seed, opts, n, dir)
  local backend = replay.open(nil, { file = file })
  local best, curve = math.huge, {}
  local pairs_list = { { "moves", "rules,experts" } }
  for _, kv in ipairs(opts) do pairs_list[#pairs_list + 1] = kv end
  engine_mod.run({
    strategy = mcgs, strategy_name = "mcgs", options = strategy_mod.options(mcgs, pairs_list), space = backend.space,
    backend = backend, budget = n, seed = seed, quiet = true, out_dir = dir,
    on_eval = function(_, rec)
      local r = rec.result
      if r.status == "ok" and type(r.time_ms) == "number" and r.time_ms < best then best = r.time_ms end
      curve[#curve + 1] = best
    end,
  })
  for i = #curve + 1, n do curve[i] = best end
  return curve, backend
end

-- 1. learning
local f = assert(io.open(exp, "w"))
local learned = 0
for _, file in ipairs(LEARN) do
  for s = 1, 3 do
    local dir = string.format("%s/learn/%s-%d", out, file:match("([^/]+)%.json$"), s)
    os.execute("rm -rf '" .. dir .. "'")
    run(file, 1000 + s, { { "regraph", "off" } }, 200, dir)
    for line in io.lines(dir .. "/transitions.jsonl") do
      f:write(line, "\n")
      learned = learned + 1
    end
  end
end
f:close()
io.write(string.format("learned from %d transitions (%s)\n", learned, exp))

-- 2. evaluation
local VARIANTS = {
  { name = "regraph=off", opts = { { "regraph", "off" } } },
  { name = "regraph", opts = { { "regraph", exp } } },
  { name = "regraph+filter", opts = { { "regraph", exp }, { "regraph_filter", "on" } } },
}
local report = { learned = learned, seeds = seeds, budget = budget, spaces = {} }
local function evaluate(file, group)
  local name = file:match("([^/]+)%.json$")
  local row = { name = name, group = group, variants = {} }
  local to1 = {}
  local opt
  for vi, v in ipairs(VARIANTS) do
    local frac = { 0, 0, 0 }
    local marks = { 25, 50, budget }
    local sum_to1 = 0
    to1[vi] = {}
    for s = 1, seeds do
      local curve, backend = run(file, s, v.opts, budget)
      opt = opt or benchstats.space_facts(backend.rec.entries).opt
      for j, m in ipairs(marks) do frac[j] = frac[j] + (curve[m] < math.huge and opt / curve[m] or 0) end
      local hit = budget + 1
      for i, t in ipairs(curve) do if t <= opt * 1.01 then hit = i break end end
      to1[vi][s] = hit
      sum_to1 = sum_to1 + hit
    end
    local vr = { name = v.name, at25 = frac[1] / seeds, at50 = frac[2] / seeds, atB = frac[3] / seeds,
                 to1 = sum_to1 / seeds }
    if vi > 1 then
      local sooner, later = 0, 0
      for s = 1, seeds do
        if to1[vi][s] < to1[1][s] then sooner = sooner + 1 elseif to1[vi][s] > to1[1][s] then later = later + 1 end
      end
      vr.sooner, vr.later = sooner, later
    end
    row.variants[#row.variants + 1] = vr
  end
  report.spaces[#report.spaces + 1] = row
  for _, vr in ipairs(row.variants) do
    io.write(string.format("| %s (%s) | %s | %.3f | %.3f | %.3f | %.1f | %s |\n", name, group, vr.name, vr.at25, vr.at50,
                           vr.atB, vr.to1, vr.sooner and string.format("%d / %d", vr.sooner, vr.later) or "-"))
  end
  io.stdout:flush()
end
io.write(string.format("| space | variant | @25 | @50 | @%d | evals to 1 %% | sooner / later than off |\n", budget))
io.write("|---|---|---:|---:|---:|---:|---|\n")
for _, file in ipairs(LEARN) do evaluate(file, "learned") end
for _, file in ipairs(HELD_OUT) do evaluate(file, "held out") end
-- means over the spaces
for _, group in ipairs({ "learned", "held out" }) do
  for vi, v in ipairs(VARIANTS) do
    local a, b, c, d, n, so, la = 0, 0, 0, 0, 0, 0, 0
    for _, row in ipairs(report.spaces) do
      if row.group == group then
        local vr = row.variants[vi]
        a, b, c, d, n = a + vr.at25, b + vr.at50, c + vr.atB, d + vr.to1, n + 1
        so, la = so + (vr.sooner or 0), la + (vr.later or 0)
      end
    end
    io.write(string.format("| mean (%s) | %s | %.3f | %.3f | %.3f | %.1f | %s |\n", group, v.name, a / n, b / n, c / n,
                           d / n, vi > 1 and string.format("%d / %d", so, la) or "-"))
  end
end
json.write_file(out .. "/regraph_experiment.json", json.encode(report) .. "\n", true)
