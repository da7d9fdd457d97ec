-- `kopt suite` through the real binary, offline: three suite specs (relu,
-- softmax, gemv) copied with synthetic recordings and a synthetic baselines
-- file whose numbers make fast_p known by hand; --only, --target (speedup
-- and speed of light), --resume after kill -9 and after a finished suite,
-- a problem the experience database answered (its row names the folder of
-- the run that answered it), and the usage errors.
local T = require("testlib")
local cjson = require("cjson")
local spec_mod = require("kopt.spec")
local space_mod = require("kopt.space")

local root = T.tmpdir("suite")
local src = T.source_dir
assert(os.execute("mkdir -p '" .. root .. "/specs' '" .. root .. "/rec'"))

-- Times by position in the exhaustive strategy's order (the space's
-- enumeration): relu gets 5 - 0.5 i ms, floored at 1 ms (reached at i = 8);
-- softmax 0.8 ms everywhere; gemv never correct.
local TIMES = {
  relu = function(i) return math.max(1.0, 5 - 0.5 * i) end,
  softmax = function() return 0.8 end,
  gemv = function() return nil end,
}

local function space_of(spec)
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  return space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
end

local sizes = {}
for name, time_of in pairs(TIMES) do
  local doc = cjson.decode(T.slurp(src .. "/specs/suite/" .. name .. ".json"))
  doc.kernel.source = src .. "/kernels/suite/" .. doc.kernel.source:match("([^/]+)$")
  doc.reference.source = src .. "/kernels/suite/" .. doc.reference.source:match("([^/]+)$")
  doc.recording = "../rec/" .. name .. ".t4.json"
  local path = root .. "/specs/" .. name .. ".json"
  T.write(path, cjson.encode(doc))
  local configs = space_of(spec_mod.load(path)):enumerate()
  sizes[name] = #configs
  local results = {}
  for i, c in ipairs(configs) do
    local t = time_of(i)
    results[i] = t and { configuration = c, invalidity = "correct", objectives = { "time" },
                         measurements = { { name = "time", unit = "ms", value = t } }, times = { compilation = 10 } }
      or { configuration = c, invalidity = "correctness", objectives = { "time" }, measurements = {},
           times = { compilation = 10 } }
  end
  T.write(root .. "/rec/" .. name .. ".t4.json",
          cjson.encode({ metadata = { timeunit = "milliseconds" }, results = results }))
end

-- eager: relu 4, softmax 1, gemv 2; compile: relu 3, softmax 0.5, gemv
-- failed. The device facts make relu's speed of light 0.16 ms.
local device = { name = "Test GPU", cc_major = 9, cc_minor = 0, sm_count = 132, clock_khz = 1980000,
                 mem_clock_khz = 2619000, mem_bus_width = 5120 }
T.write(root .. "/baselines.json", cjson.encode({
  gpu = "Test GPU", torch = "test", device = device,
  problems = {
    relu = { eager_ms = 4.0, compile_ms = 3.0 },
    softmax = { eager_ms = 1.0, compile_ms = 0.5 },
    gemv = { eager_ms = 2.0, compile_ms = cjson.null, compile_error = "compile failed (test)" },
  },
}))

local common = string.format("--backend replay --baselines '%s/baselines.json' --budget 1000 -q", root)
local function suite(args, env)
  return T.run("suite exhaustive '" .. root .. "/specs' " .. common .. " " .. args, env)
end
local function read_json(path) return cjson.decode(T.slurp(path)) end
local function rows_by_name(doc)
  local by = {}
  for _, r in ipairs(doc.rows) do by[r.name] = r end
  return by
end
local function near(a, b, what) return T.check(type(a) == "number" and math.abs(a - b) < 1e-9, "%s: expected %s, got %s", what, b, tostring(a)) end

-- The whole (three-problem) suite: fast_p by hand.
local code, out, err, _
code, out, err = suite("--out '" .. root .. "/all'")
T.eq(code, 0, "full suite exit code (" .. err .. ")")
T.check(out:find("kopt suite: exhaustive on 3 problems, 2 correct", 1, true), "summary line: %s", out)
local doc = read_json(root .. "/all/suite.json")
local by = rows_by_name(doc)
T.eq(#doc.rows, 3, "rows")
T.eq(by.relu.correct, true, "relu correct")
near(by.relu.time_ms, 1.0, "relu best time")
near(by.relu.speedup_eager, 4.0, "relu vs eager")
near(by.relu.speedup_compile, 3.0, "relu vs compile")
T.eq(by.relu.evaluations, sizes.relu, "relu evaluated its whole space")
near(by.relu.sol_frac, 8 * 4096 * 16384 / (2 * 2619e6 * 5120 / 8) * 1e3 / 1.0, "relu fraction of the speed of light")
near(by.softmax.speedup_eager, 1.25, "softmax vs eager")
near(by.softmax.speedup_compile, 0.625, "softmax vs compile")
T.eq(by.gemv.correct, false, "gemv has no correct kernel")
T.eq(by.gemv.speedup_eager, nil, "no speedup without a correct kernel")
local f = doc.fast_p
T.eq(f.eager.n, 3, "problems with an eager time")
near(f.eager["0"], 2 / 3, "fast_0 vs eager")
near(f.eager["1"], 2 / 3, "fast_1 vs eager")
near(f.eager["1.5"], 1 / 3, "fast_1.5 vs eager")
near(f.eager["2"], 1 / 3, "fast_2 vs eager")
T.eq(f.compile.n, 2, "problems with a torch.compile time (gemv's failed)")
near(f.compile["0"], 1.0, "fast_0 vs compile")
near(f.compile["1"], 0.5, "fast_1 vs compile")
near(f.compile["1.5"], 0.5, "fast_1.5 vs compile")
near(f.compile["2"], 0.5, "fast_2 vs compile")
local md = T.slurp(root .. "/all/suite.md")
T.check(md:find("| PyTorch eager | 3 | 67% (2) | 67% (2) | 33% (1) | 33% (1) |", 1, true), "fast_p row in suite.md:\n%s", md)
T.check(md:find("| relu | yes | 1 | 4 | 3 | 4.00x | 3.00x | 16% |", 1, true), "relu row in suite.md:\n%s", md)
T.check(md:find("gemv (baseline): torch.compile: compile failed (test)", 1, true), "baseline error noted")
local svg = T.slurp(root .. "/all/suite.svg")
T.check(svg:match("^<svg") and svg:find("no correct kernel", 1, true) and svg:find("4.00x", 1, true), "suite.svg")
T.check(T.slurp(root .. "/all/relu/events.jsonl") ~= "", "each problem is a run folder of its own")

-- --only: two problems, in the order given.
code, _, err = suite("--only softmax,relu --out '" .. root .. "/only'")
T.eq(code, 0, "--only exit code (" .. err .. ")")
doc = read_json(root .. "/only/suite.json")
T.eq(#doc.rows, 2, "--only rows")
T.eq(doc.rows[1].name, "softmax", "--only order")
T.check(not T.slurp(root .. "/only/gemv/events.jsonl"):find("eval"), "--only: gemv not run")

-- --target 2x-eager: relu stops at its sixth evaluation (5 - 0.5*6 = 2 ms).
code, _, err = suite("--only relu --target 2x-eager --out '" .. root .. "/t2x'")
T.eq(code, 0, "--target 2x-eager exit code (" .. err .. ")")
by = rows_by_name(read_json(root .. "/t2x/suite.json"))
T.eq(by.relu.evaluations, 6, "2x-eager: evaluations")
T.eq(by.relu.stop_reason, "target reached (2x-eager)", "2x-eager: stop reason")
T.eq(by.relu.target_met, true, "2x-eager: target met")
near(by.relu.time_ms, 2.0, "2x-eager: best when stopped")

-- --target 15%-sol: 0.16 ms / t >= 0.15 first holds at t = 1 ms, the 8th.
code, _, err = suite("--only relu --target 15%-sol --out '" .. root .. "/tsol'")
T.eq(code, 0, "--target 15%-sol exit code (" .. err .. ")")
by = rows_by_name(read_json(root .. "/tsol/suite.json"))
T.eq(by.relu.evaluations, 8, "15%-sol: evaluations")
T.eq(by.relu.stop_reason, "target reached (15%-sol)", "15%-sol: stop reason")

-- A target never met runs the whole budget.
code = suite("--only softmax --target 2x-eager --budget 5 --out '" .. root .. "/tnever'")
T.eq(code, 0, "unmet target exit code")
by = rows_by_name(read_json(root .. "/tnever/suite.json"))
T.eq(by.softmax.evaluations, 5, "unmet target: the budget")
T.eq(by.softmax.stop_reason, "budget", "unmet target: stopped by the budget")

-- a strategy that fails after correct configs were measured: the row keeps
-- the best it found (checked, as every measurement) beside the error; it
-- showed no result at all
do
  local strat = root .. "/fails_late.lua"
  T.write(strat, "local S = { name = 'fails_late' }\nlocal asked = 0\nfunction S.ask(ctx, n)\n  asked = asked + 1\n" ..
                 "  if asked > 3 then error('gave up') end\n  return { { config = ctx.space:sample(ctx.rng) } }\nend\nreturn S\n")
  local c, _, e = T.run("suite '" .. strat .. "' '" .. root .. "/specs' " .. common .. " --only relu --out '" .. root .. "/late'")
  T.eq(c, 1, "a strategy that fails late: exit code (" .. e .. ")")
  local row = rows_by_name(read_json(root .. "/late/suite.json")).relu
  T.check(row and row.correct == true and type(row.time_ms) == "number" and row.error ~= nil,
          "the row has the best found and the error: %s", cjson.encode(row or {}))
end

-- kill -9 in the first problem, then --resume: the same numbers as the
-- uninterrupted suite, nothing measured twice.
code = suite("--out '" .. root .. "/killed'", "KOPT_TEST_SIGKILL_AFTER=3")
T.check(code ~= 0, "killed suite exits non-zero (got %s)", tostring(code))
code, _, err = suite("--out '" .. root .. "/killed' --resume")
T.eq(code, 0, "--resume exit code (" .. err .. ")")
local resumed = read_json(root .. "/killed/suite.json")
T.eq(cjson.encode(resumed.fast_p), cjson.encode(read_json(root .. "/all/suite.json").fast_p), "resumed fast_p")
by = rows_by_name(resumed)
T.eq(by.relu.evaluations, sizes.relu, "resumed relu evaluations")
local evals = 0
for line in io.lines(root .. "/killed/gemv/events.jsonl") do if line:find('"event":"eval"', 1, true) then evals = evals + 1 end end
T.eq(evals, sizes.gemv, "gemv evaluated once per config across the kill and the resume")

-- --resume of a finished suite runs nothing and writes the same report.
local before = T.slurp(root .. "/all/relu/events.jsonl")
code, _, err = suite("--out '" .. root .. "/all' --resume")
T.eq(code, 0, "--resume of a finished suite (" .. err .. ")")
T.eq(T.slurp(root .. "/all/relu/events.jsonl"), before, "a finished problem is read, not run again")
T.eq(cjson.encode(read_json(root .. "/all/suite.json").fast_p), cjson.encode(f), "same fast_p")
-- --resume without --baselines keeps the file the suite began with (before:
-- "baselines: none" over rows that still had speedups, fast_p over fewer)
code, _, err = T.run("suite exhaustive '" .. root .. "/specs' --backend replay --budget 1000 -q --out '" .. root ..
                     "/all' --resume")
T.eq(code, 0, "--resume without --baselines (" .. err .. ")")
T.eq(cjson.encode(read_json(root .. "/all/suite.json").fast_p), cjson.encode(f), "resumed without --baselines: same fast_p")
code, _, err = suite("--out '" .. root .. "/all' --resume --baselines '" .. root .. "/specs/none.json'")
T.check(code == 2 and err:find("was started with --baselines", 1, true), "--resume with other baselines: %s", err)
-- another --seed or --target on --resume: refused as another --budget is
-- (it ran the rest with the new seed: one suite of two seeds)
code, _, err = suite("--out '" .. root .. "/all' --resume --seed 3")
T.check(code == 2 and err:find("was started with --seed 1, not 3", 1, true), "--resume with another seed: %s", err)
code, _, err = suite("--out '" .. root .. "/all' --resume --target 2x-eager")
T.check(code == 2 and err:find("was started with no --target, not --target 2x-eager", 1, true),
        "--resume with another target: %s", err)
code, _, err = suite("--out '" .. root .. "/all' --resume --seed -5")
T.check(code == 2 and err:find("--seed: expected a non-negative integer", 1, true), "a negative seed: %s", err)
-- an empty results.json in a finished problem: resumed, and written again
-- (it was taken as done and left empty)
T.write(root .. "/all/relu/results.json", "")
code, _, err = suite("--out '" .. root .. "/all' --resume")
T.eq(code, 0, "--resume with an empty results.json (" .. err .. ")")
T.check(type(read_json(root .. "/all/relu/results.json")) == "table", "results.json is written again")
-- a resume killed before it reaches the finished problems keeps their rows
-- in the report it wrote (it wrote none of them until it reached them)
assert(os.execute(string.format("cp -r '%s/all' '%s/rekill' && rm -rf '%s/rekill/gemv'", root, root, root)))
suite("--out '" .. root .. "/rekill' --resume", "KOPT_TEST_SIGKILL_AFTER=1")
by = rows_by_name(read_json(root .. "/rekill/suite.json"))
T.check(by.relu and by.relu.correct and by.softmax and by.softmax.correct,
        "a resume killed in gemv: relu's and softmax's rows are kept")
-- a resume without --backend keeps the suite's own (it replayed the specs'
-- recordings instead of the folder the suite was started with)
assert(os.execute(string.format("cp -r '%s/rec' '%s/rec2'", root, root)))
local own = string.format("suite exhaustive '%s/specs' --backend replay:%s/rec2 --baselines '%s/baselines.json' " ..
                          "--budget 1000 -q --out '%s/ownrec'", root, root, root, root)
T.run(own, "KOPT_TEST_SIGKILL_AFTER=3")
code, _, err = T.run(string.format("suite exhaustive '%s/specs' --baselines '%s/baselines.json' --budget 1000 -q " ..
                                   "--out '%s/ownrec' --resume", root, root, root))
T.eq(code, 0, "--resume without --backend (" .. err .. ")")
for _, name in ipairs({ "relu", "softmax" }) do
  local start = cjson.decode(io.lines(root .. "/ownrec/" .. name .. "/events.jsonl")())
  T.check(tostring(start.backend):find("rec2/", 1, true), "%s ran on the suite's backend: %s", name,
          tostring(start.backend))
end
-- a finished problem whose spec changed since is not reported as this
-- problem's (its old time stood against the new spec's work)
assert(os.execute(string.format("cp -r '%s/specs' '%s/specs_changed' && cp -r '%s/all' '%s/changed'", root, root, root,
                                root)))
local relu_doc = read_json(root .. "/specs_changed/relu.json")
local size_name = next(relu_doc.problem)
relu_doc.problem[size_name] = relu_doc.problem[size_name] * 2
T.write(root .. "/specs_changed/relu.json", cjson.encode(relu_doc))
code, _, err = T.run(string.format("suite exhaustive '%s/specs_changed' %s --out '%s/changed' --resume", root, common, root))
T.eq(code, 1, "--resume after a spec changed: exit code (" .. err .. ")")
T.check(err:find("relu: the spec changed since its run", 1, true), "the changed spec is named: %s", err)

-- lists with an empty item or a name twice (a problem counted twice in
-- fast_p; an empty --only ran nothing and succeeded)
for _, bad in ipairs({ { "--only relu,relu", "'relu' is given twice" }, { "--only ''", "an empty item" },
                       { "--gpus ''", "an empty item" }, { "--gpus 0,,1", "an empty item" } }) do
  code, _, err = suite(bad[1] .. " --out '" .. root .. "/bad'")
  T.check(code == 2 and err:find(bad[2], 1, true), "suite %s: %s", bad[1], err)
end

-- --resume with another --only keeps the rows of the problems not run this
-- time (they were dropped from the report), and another --budget is refused
-- (the report states one)
code, _, err = suite("--only softmax,relu --out '" .. root .. "/grow'")
T.eq(code, 0, "a first subset (" .. err .. ")")
code, _, err = suite("--only gemv --out '" .. root .. "/grow' --resume")
T.eq(code, 0, "--resume with another --only (" .. err .. ")")
by = rows_by_name(read_json(root .. "/grow/suite.json"))
T.check(by.softmax and by.relu and by.gemv, "--resume with another --only: softmax, relu and gemv are in the report")
code, _, err = suite("--only gemv --out '" .. root .. "/grow' --resume --budget 7")
T.check(code == 2 and err:find("was started with --budget", 1, true), "--resume with another --budget: %s", err)

-- A problem whose run cannot start (here: no recording to replay) is a
-- row with its error; the others run, the exit code is 1. Two folders.
assert(os.execute("mkdir -p '" .. root .. "/more'"))
local extra = cjson.decode(T.slurp(src .. "/specs/suite/cumsum.json"))
extra.kernel.source = src .. "/kernels/suite/cumsum.cu"
extra.reference.source = src .. "/kernels/suite/cumsum_ref.cu"
T.write(root .. "/more/cumsum.json", cjson.encode(extra))
code = T.run("suite exhaustive '" .. root .. "/specs' '" .. root .. "/more' " .. common
             .. " --only cumsum,softmax --out '" .. root .. "/err'")
T.eq(code, 1, "a problem that cannot run: exit code")
by = rows_by_name(read_json(root .. "/err/suite.json"))
T.eq(by.cumsum and by.cumsum.correct, false, "cumsum: not correct")
T.check(by.cumsum and tostring(by.cumsum.error):find("has no 'recording'", 1, true), "cumsum: its error (%s)",
        by.cumsum and tostring(by.cumsum.error))
T.eq(by.softmax and by.softmax.correct, true, "softmax ran after it")
T.check(T.slurp(root .. "/err/suite.md"):find("- cumsum: --backend replay: the spec has no 'recording'", 1, true),
        "the error in suite.md's notes")

code, out = T.run("suite --help")
T.eq(code, 0, "suite --help")
T.check(out:find("--target T", 1, true) and out:find("--baselines FILE", 1, true), "suite --help lists the options")
code, out = T.run("--help")
T.check(code == 0 and out:find("  suite                run a strategy over a suite of specs", 1, true), "kopt --help names suite: %s", out)

-- With the experience database on, a second suite over the same problems
-- is answered from it: no evaluations, the same best; --fresh measures again.
local db = root .. "/exp.db"
code, _, err = suite("--only relu --out '" .. root .. "/db1'", "KOPT_DB='" .. db .. "'")
T.eq(code, 0, "suite with a database (" .. err .. ")")
code, _, err = suite("--only relu --out '" .. root .. "/db2'", "KOPT_DB='" .. db .. "'")
T.eq(code, 0, "suite answered by the database (" .. err .. ")")
by = rows_by_name(read_json(root .. "/db2/suite.json"))
T.eq(by.relu.evaluations, 0, "database hit: no evaluations")
near(by.relu.time_ms, 1.0, "database hit: the known best")
near(by.relu.speedup_eager, 4.0, "database hit: its speedup")
-- (no folder of its own: its row names the folder of the run that answered)
T.check(not T.exists(root .. "/db2/relu"), "database hit: no run folder")
T.eq(by.relu.run_dir, require("kopt.sys").realpath(root .. "/db1/relu"), "database hit: the answering run's folder")
T.check(T.slurp(root .. "/db2/suite.md"):find("a problem the experience database answered has none here", 1, true),
        "database hit: suite.md says where its run is")
code, _, err = suite("--only relu --fresh --out '" .. root .. "/db3'", "KOPT_DB='" .. db .. "'")
T.eq(code, 0, "--fresh (" .. err .. ")")
T.eq(rows_by_name(read_json(root .. "/db3/suite.json")).relu.evaluations, sizes.relu, "--fresh measures again")

-- Two suites started at once on one folder: the second is refused while the
-- first holds it (its PID named), or finds the first's suite.json; one
-- complete suite is on record either way.
for trial = 1, 3 do
  local d = string.format("%s/twice_%d", root, trial)
  local line = string.format("%s suite exhaustive '%s/specs' %s --only relu,softmax --out '%s' -q", T.kopt, root, common, d)
  os.execute(string.format("{ %s >/dev/null 2>%s.a & %s >/dev/null 2>%s.b & wait; } 2>/dev/null", line, d, line, d))
  local errs = T.slurp(d .. ".a") .. T.slurp(d .. ".b")
  local refused = 0
  for l in errs:gmatch("[^\n]+") do
    local ok = l:find("is in use by another kopt process %(PID %d+%)") or l:find("already holds a suite run", 1, true)
    T.check(ok, "two suites at once (%d): unexpected message: %s", trial, l)
    refused = refused + 1
  end
  T.eq(refused, 1, "two suites at once (" .. trial .. "): one refused")
  local held = read_json(d .. "/suite.json")
  T.eq(held.state, "done", "two suites at once (" .. trial .. "): the suite on record finished")
  T.eq(#held.rows, 2, "two suites at once (" .. trial .. "): both problems on record")
end

-- Usage errors: one sentence, exit code 2.
code, _, err = suite("--only nosuch --out '" .. root .. "/bad'")
T.eq(code, 2, "--only unknown: exit code")
T.check(T.one_sentence(err, "--only unknown"):find("no problem named 'nosuch'", 1, true), "--only unknown: %s", err)
code, _, err = suite("--out '" .. root .. "/all'")
T.eq(code, 2, "suite folder reused without --resume: exit code")
T.check(err:find("already holds a suite run", 1, true), "reused folder: %s", err)
code, _, err = suite("--target 2y-eager --out '" .. root .. "/bad'")
T.eq(code, 2, "bad --target: exit code")
T.check(err:find("expected Nx-eager, Nx-compile or N%-sol", 1, true), "bad --target: %s", err)
code = suite("--out '" .. root .. "/fresh' --resume")
T.eq(code, 2, "--resume of nothing: exit code")
code, _, err = T.run("suite --only relu --out '" .. root .. "/nogpu'", "CUDA_VISIBLE_DEVICES=none")
T.eq(code, 2, "no GPU, no recordings: exit code")
T.check(T.one_sentence(err, "no GPU"):find("no spec has a 'recording'", 1, true), "no GPU, no recordings: %s", err)

os.execute("rm -rf '" .. root .. "'")
return T.done()
