-- Bad input: each case asserts the exact one-sentence message on stderr, the
-- exit code, that stderr holds no traceback and no "internal error", and that
-- no run directory was left behind. Every command runs in a temporary folder
-- of its own, so a runs/ folder left in the checkout by the README's main
-- command cannot make it fail (and one it wrongly made would be seen here).
local T = require("testlib")

local root = require("kopt.sys").realpath(os.getenv("KOPT_SOURCE_DIR") or ".")
local tmp = T.tmpdir("cli")
-- The specs below test other mistakes with args of their own: their kernel's
-- parameter list holds a preprocessor line, so kopt does not judge it
-- against the args (test_spec_signature.lua tests that check).
local kernel = tmp .. "/vector_add_any.cu"
T.write(kernel, "extern \"C\" __global__ void vector_add(float *c, const float *a, const float *b,\n" ..
               "#if 1\n    int n\n#endif\n)\n{\n    int i = blockIdx.x * block_size_x + threadIdx.x;\n" ..
               "    if (i < n)\n        c[i] = a[i] + b[i];\n}\n")
local replay = root .. "/tests/data/vector_add_A4000.json"

local function spec_text(overrides)
  local base = {
    name = '"bad"',
    kernel = string.format('{"source": "%s", "entry": "vector_add"}', kernel),
    problem = '{"n": 1000}',
    knobs = '[{"name": "block_size_x", "values": [128, 256]}, {"name": "unroll", "values": [1, 2]}]',
    launch = '{"grid": ["cdiv(n, block_size_x)"], "block": ["block_size_x"]}',
  }
  for k, v in pairs(overrides) do base[k] = v end
  local parts = {}
  for _, k in ipairs({ "name", "kernel", "problem", "knobs", "constraints", "launch", "args", "knbos" }) do
    if base[k] and base[k] ~= false then parts[#parts + 1] = string.format('"%s": %s', k, base[k]) end
  end
  return "{" .. table.concat(parts, ",\n") .. "}"
end

local function spec_file(name, overrides, raw)
  local path = tmp .. "/" .. name .. ".json"
  T.write(path, raw or spec_text(overrides))
  return path
end

local function strategy_file(name, body)
  local path = tmp .. "/" .. name .. ".lua"
  T.write(path, body)
  return path
end

local cases = {}
local function case(args, code, want, opts)
  cases[#cases + 1] = { args = args, code = code, want = want, prefix = opts and opts.prefix }
end

-- flags
case("--bogus random " .. replay, 2, "kopt: unknown option '--bogus' (see kopt --help)")
case("random --budget 0 --backend replay:" .. replay, 2, "kopt: --budget: expected a positive integer, got '0'")
case("random --profile top-0 --backend replay:" .. replay, 2,
     "kopt: --profile: N must be a whole number from 1 to 2^63 - 1, got 'top-0'")
case("random --profile every-0 --backend replay:" .. replay, 2,
     "kopt: --profile: N must be a whole number from 1 to 2^63 - 1, got 'every-0'")
case("random --backend replay:" .. replay .. " --budget", 2, "kopt: --budget needs a value (N)")
case("random --backend gpu7", 2, "kopt: --backend: expected 'cuda' or 'replay:FILE', got 'gpu7'")
case("random --time-limit -3 --backend replay:" .. replay, 2, "kopt: --time-limit: expected a positive number of seconds, got '-3'")
case("random --compile-timeout 0 --backend replay:" .. replay, 2,
     "kopt: --compile-timeout: expected a positive number of seconds, got '0'")
-- kopt compile --timeout takes seconds as --compile-timeout does (2.5 was
-- refused as no positive integer)
case("compile specs/transpose.json --timeout 0", 2, "kopt: compile: --timeout: expected a positive number of seconds, got '0'")
-- a subcommand's --flag=value, as the run's own flags take it (refused as an
-- unknown option)
case("compile specs/transpose.json --timeout=-1", 2, "kopt: compile: --timeout: expected a positive number of seconds, got '-1'")
case("db --db=" .. tmp .. "/none.db list -o " .. tmp .. "/x.json", 2, "kopt: db list: -o is for export only")
-- a flag of no value given one: named (the value was read as the next
-- argument: "unknown argument 'yes'", or a strategy named '1')
case("compare --per-budget=yes --seeds 1", 2, "kopt: compare: --per-budget takes no value (got '--per-budget=yes')")
case("suite --resume=1 random specs/transpose.json", 2, "kopt: suite: --resume takes no value (got '--resume=1')")
case("devices --json=true", 2, "kopt: devices: --json takes no value (got '--json=true')")
case("random --gpus 0,x --backend replay:" .. replay, 2, "kopt: --gpus: expected a comma-separated list of GPU indices, got '0,x'")
case("-q -v random --backend replay:" .. replay, 2, "kopt: -q and -v cannot be used together")
case("random --sanitize helgrind --backend replay:" .. replay, 2,
     "kopt: --sanitize: expected none or a comma-separated list of racecheck, memcheck, synccheck, initcheck; got 'helgrind'")
case("random --sanitize racecheck --backend replay:" .. replay, 2,
     "kopt: --sanitize: checks the winner on a GPU; this run replays " .. replay .. " (no kernel runs)")
case("random --range-probe loud --backend replay:" .. replay, 2,
     "kopt: --range-probe: expected off, note or strict, got 'loud'")
case("random --range-probe strict --backend replay:" .. replay, 2,
     "kopt: --range-probe: checks the winner on a GPU; this run replays " .. replay .. " (no kernel runs)")
case("", 2, "kopt: missing STRATEGY (see kopt --help)")
case("random", 2, "kopt: missing SPEC (a JSON file); it may be left out only with --backend replay:FILE")
case("random a.json b.json c.json", 2, "kopt: too many arguments: 'b.json' (expected STRATEGY [SPEC])")
-- strategies
case("nosuch --backend replay:" .. replay, 2, "kopt: unknown strategy 'nosuch': not a file, and not a built-in strategy (", { prefix = true })
case(tmp .. "/missing.lua --backend replay:" .. replay, 2, "kopt: strategy file '" .. tmp .. "/missing.lua' not found")
case(strategy_file("syntax", "return { ask = function( end }") .. " --backend replay:" .. replay, 2,
     "kopt: strategy " .. tmp .. "/syntax.lua:1: <name> or '...' expected near 'end'")
-- an error the file's own code raises while it loads: it does not load (exit 2)
case(strategy_file("rt_load", "local t = nil\nlocal y = t.x\nreturn { ask = function() return {} end }") ..
     " --backend replay:" .. replay, 2, "kopt: strategy " .. tmp .. "/rt_load.lua failed to load: " .. tmp ..
     "/rt_load.lua:2: attempt to index a nil value (local 't')")
-- options a strategy declares: a bound its default breaks was an internal
-- error (table.concat over nil holes); a list, a non-finite default, a bound
-- on a string and choices of another type were taken as written
local function opt_case(name, decl, want)
  case(strategy_file(name, "return { name = '" .. name .. "', options = " .. decl ..
                           ", ask = function() return {} end }") .. " --backend replay:" .. replay, 2,
       "kopt: strategy " .. tmp .. "/" .. name .. ".lua: " .. want)
end
opt_case("o_max", "{ threads = { default = 2048, max = 1024 } }",
         "options.threads: the default 2048 is outside the option's own range (max 1024)")
opt_case("o_gt", "{ t = { default = 0, gt = 0 } }", "options.t: the default 0 is outside the option's own range (gt 0)")
opt_case("o_both", "{ t = { default = 0, min = 1, max = 3 } }",
         "options.t: the default 0 is outside the option's own range (min 1, max 3)")
opt_case("o_list", "{ { default = 1 } }",
         "'options' must be keyed by the options' names ({ name = { default = ... } }), not a list")
opt_case("o_inf", "{ t = { default = math.huge } }", "options.t: the default inf is not a finite number")
opt_case("o_strmin", "{ t = { default = 'a', min = 1 } }", "options.t: min, max and gt bound a number, and the default is a string")
opt_case("o_choices", "{ a = { default = 1, choices = { 1, '2' } } }", "options.a.choices: 2 is a string, and the default is a number")
opt_case("o_nanmin", "{ k = { default = 1, min = 0/0 } }", "options.k.min must be a number, got NaN")
opt_case("o_key", "{ ['bad key'] = { default = 1 } }", "options: 'bad key' cannot be set with --opt (a name of letters, digits, _ and -)")
case(strategy_file("noask", "return { name = 'noask' }") .. " --backend replay:" .. replay, 2,
     "kopt: strategy " .. tmp .. "/noask.lua has no ask(ctx, n) function")
case(strategy_file("notable", "return 42") .. " --backend replay:" .. replay, 2,
     "kopt: strategy " .. tmp .. "/notable.lua must return a table, got number")
case(strategy_file("bad_ask", "return { name = 'bad_ask', ask = function() error('boom') end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_bad_ask", 1,
     "kopt: strategy 'bad_ask' failed in ask(): " .. tmp .. "/bad_ask.lua:1: boom")
case(strategy_file("bad_tell", [[
local S = { name = 'bad_tell' }
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
function S.tell(ctx, results) local x = nil; return x.field end
return S]]) .. " --backend replay:" .. replay .. " --out " .. tmp .. "/run_bad_tell", 1,
     "kopt: strategy 'bad_tell' failed in tell(): " .. tmp .. "/bad_tell.lua:3: attempt to index a nil value (local 'x')")
case(strategy_file("garbage", "return { name = 'garbage', ask = function() return { { config = { block_size_x = 7 } } } end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_garbage", 2,
     "kopt: strategy 'garbage' returned a bad candidate from ask(): candidates[1].config.block_size_x: 7 is not one of the knob's values (128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, ...)")
case(strategy_file("garbage2", "return { name = 'garbage2', ask = function() return 'all of them' end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_garbage2", 2,
     "kopt: strategy 'garbage2': ask() must return a table of candidates, got string")
case(strategy_file("garbage3", "return { name = 'garbage3', ask = function() return { { config = { block_size_x = 128, warps = 4 } } } end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_garbage3", 2,
     "kopt: strategy 'garbage3' returned a bad candidate from ask(): candidates[1].config.warps: no such knob")
case("random --opt nope=1 --backend replay:" .. replay, 2, "kopt: strategy 'random' has no option 'nope' (options: tries)")
case("random --opt tries=many --backend replay:" .. replay, 2, "kopt: --opt tries: expected an integer, got 'many'")
-- replay files
case("random --backend replay:" .. tmp .. "/none.json", 2,
     "kopt: cannot read replay file " .. tmp .. "/none.json: No such file or directory")
T.write(tmp .. "/trunc.json", '{\n"device_name": "x",\n"tune_params_keys": ["a"],\n"tune_par')
case("random --backend replay:" .. tmp .. "/trunc.json", 2,
     "kopt: replay file " .. tmp .. "/trunc.json is not valid JSON (", { prefix = true })
T.write(tmp .. "/notspace.json", '{"hello": "world"}')
case("random --backend replay:" .. tmp .. "/notspace.json", 2,
     "kopt: replay file " .. tmp .. "/notspace.json is not a Kernel Tuner cache, a T4 results file or a KTT results file")
os.execute("mkdir -p '" .. tmp .. "/adir'")
case("random --backend replay:" .. tmp .. "/adir", 2,
     "kopt: cannot read replay file " .. tmp .. "/adir: is a directory, not a file")
case("random --backend replay:/dev/zero", 2, "kopt: cannot read replay file /dev/zero: not a regular file")
case("random --replay-check loose --backend replay:" .. replay, 2,
     "kopt: --replay-check: expected strict or lenient, got 'loose'")
local function kt_cache(entries)
  return '{"device_name": "x", "kernel_name": "k", "tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 4]},' ..
         ' "objective": "time", "cache": {' .. entries .. '}}'
end
-- (a number beyond tune_params' list is a value a resumed cache added, and
-- joins the space; a string among numbers is a fault of the file)
T.write(tmp .. "/kt_outside.json", kt_cache('"1": {"a": 1, "time": 1.5}, "x": {"a": "x", "time": 0.5}'))
case("exhaustive --backend replay:" .. tmp .. "/kt_outside.json --out " .. tmp .. "/run_outside", 2,
     "kopt: replay file " .. tmp .. "/kt_outside.json: cache[\"x\"].a: 'x' is not one of the recording's tune_params.a (they are numbers); fix the entry, or replay with --replay-check lenient to skip bad entries")
T.write(tmp .. "/kt_entry.json", kt_cache('"1": {"a": 1, "time": 1.5}, "2": [1, 2]'))
case("random --backend replay:" .. tmp .. "/kt_entry.json", 2,
     "kopt: replay file " .. tmp .. "/kt_entry.json: cache[\"2\"]: expected an object, got an array; fix the entry, or replay with --replay-check lenient to skip bad entries")
T.write(tmp .. "/kt_times.json", kt_cache('"1": {"a": 1, "time": 1.5, "times": [1.4, "x"]}'))
case("random --backend replay:" .. tmp .. "/kt_times.json", 2,
     "kopt: replay file " .. tmp .. "/kt_times.json: cache[\"1\"].times[2]: expected a number, got 'x'; fix the entry, or replay with --replay-check lenient to skip bad entries")
-- a time written as a string is not Kernel Tuner's failure name
T.write(tmp .. "/kt_strtime.json", kt_cache('"1": {"a": 1, "time": "1.5"}'))
case("random --backend replay:" .. tmp .. "/kt_strtime.json", 2,
     "kopt: replay file " .. tmp .. "/kt_strtime.json: cache[\"1\"].time: a time written as a string ('1.5'); expected a number; fix the entry, or replay with --replay-check lenient to skip bad entries")
-- one configuration under two cache keys
T.write(tmp .. "/kt_dup.json", kt_cache('"1": {"a": 1, "time": 1.5}, "1,x": {"a": 1, "time": 0.5}'))
case("random --backend replay:" .. tmp .. "/kt_dup.json", 2,
     "kopt: replay file " .. tmp .. "/kt_dup.json: cache[\"1,x\"]: the same configuration as cache[\"1\"]; remove one, or replay with --replay-check lenient to keep the first")
-- an objective that is not a time
T.write(tmp .. "/kt_energy.json", (kt_cache('"1": {"a": 1, "time": 1.5, "energy": 3}'):gsub('"objective": "time"', '"objective": "energy"')))
case("random --backend replay:" .. tmp .. "/kt_energy.json", 2,
     "kopt: replay file " .. tmp .. "/kt_energy.json: objective 'energy' is not a time; kopt replays time objectives")
-- a cache that is an array
T.write(tmp .. "/kt_array.json", '{"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": [{"a": 1, "time": 1}]}')
case("random --backend replay:" .. tmp .. "/kt_array.json", 2,
     "kopt: replay file " .. tmp .. "/kt_array.json: cache: expected an object keyed by configuration, got an array")
T.write(tmp .. "/kt_cost.json", kt_cache('"1": {"a": 1, "time": 1.5, "compile_time": "slow"}'))
case("random --backend replay:" .. tmp .. "/kt_cost.json", 2,
     "kopt: replay file " .. tmp .. "/kt_cost.json: cache[\"1\"].compile_time: expected a non-negative number, got 'slow'; fix the entry, or replay with --replay-check lenient to skip bad entries")
T.write(tmp .. "/kt_alloff.json", kt_cache('"1": "x", "2": 3'))
case("random --replay-check lenient --backend replay:" .. tmp .. "/kt_alloff.json", 2,
     "kopt: replay file " .. tmp .. "/kt_alloff.json records no usable configurations (2 bad entries skipped; the first: cache[\"1\"]: expected an object, got 'x')")
local function t4(unit, meta)
  return '{"schema_version": "1.0.0", "metadata": {' .. (meta or "") .. '}, "results": [' ..
         '{"configuration": {"a": 1}, "invalidity": "correct", "objectives": ["time"],' ..
         ' "measurements": [{"name": "time", "value": 2.5, "unit": "' .. unit .. '"}]}]}'
end
T.write(tmp .. "/t4_unit.json", t4("fortnights"))
-- a unitless objective that is not a time (GFLOP/s: higher is better)
T.write(tmp .. "/t4_gflops.json", (t4(""):gsub('"time"', '"GFLOP/s"')))
case("random --backend replay:" .. tmp .. "/t4_gflops.json", 2,
     "kopt: replay file " .. tmp .. "/t4_gflops.json: results[1].measurements[1]: objective 'GFLOP/s' has no unit and its name is not a time, and no measurement is a time; kopt replays time objectives")
-- (a whole-file fault: skipping entries would not mend it)
case("random --replay-check lenient --backend replay:" .. tmp .. "/t4_gflops.json", 2,
     "kopt: replay file " .. tmp .. "/t4_gflops.json: results[1].measurements[1]: objective 'GFLOP/s' has no unit and its name is not a time, and no measurement is a time; kopt replays time objectives")
case("random --backend replay:" .. tmp .. "/t4_unit.json", 2,
     "kopt: replay file " .. tmp .. "/t4_unit.json: results[1].measurements[1].unit: unknown time unit 'fortnights' (kopt knows ms, s, us, ns); fix the entry, or replay with --replay-check lenient to skip bad entries")
T.write(tmp .. "/t4_meta_unit.json", t4("", '"timeunit": "jiffies"'))
case("random --backend replay:" .. tmp .. "/t4_meta_unit.json", 2,
     "kopt: replay file " .. tmp .. "/t4_meta_unit.json: metadata.timeunit: unknown time unit 'jiffies' (kopt knows ms, s, us, ns)")
T.write(tmp .. "/t4_params.json", '{"results": [{"configuration": {"a": 1}, "measurements": [{"name": "time", "value": 1, "unit": "ms"}]},' ..
        ' {"configuration": {"b": 1}, "measurements": [{"name": "time", "value": 1, "unit": "ms"}]}]}')
case("random --backend replay:" .. tmp .. "/t4_params.json", 2,
     "kopt: replay file " .. tmp .. "/t4_params.json: results[2].configuration: has the parameters b where the recording's first entry has a; fix the entry, or replay with --replay-check lenient to skip bad entries")
-- option ranges: refused at the start (these crashed mid-run, or ran and did nothing)
case("mcgs --backend replay:" .. replay .. " --opt dirichlet_alpha=0", 2,
     "kopt: --opt dirichlet_alpha: expected a number above 0, got '0'")
case("mcgs --backend replay:" .. replay .. " --opt max_depth=-1", 2,
     "kopt: --opt max_depth: expected an integer above 0, got '-1'")
case("mcgs --backend replay:" .. replay .. " --opt c_puct=1e400", 2,
     "kopt: --opt c_puct: expected a finite number, got '1e400'")
case("mcgs --backend replay:" .. replay .. " --opt p_sample=2", 2,
     "kopt: --opt p_sample: expected a number from 0 to 1, got '2'")
-- counts a loop runs that many times (these hung), a reward clipped to one
-- value (a blind search), an experts run of 0 evaluations
case("genetic --backend replay:" .. replay .. " --opt tournament=1e12", 2,
     "kopt: --opt tournament: expected an integer from 1 to 1000, got '1e12'")
case("surrogate --backend replay:" .. replay .. " --opt pool=1e12", 2,
     "kopt: --opt pool: expected an integer from 0 to 1000000, got '1e12'")
case("mcgs --backend replay:" .. replay .. " --opt model_pool=1e12", 2,
     "kopt: --opt model_pool: expected an integer from 0 to 1000000, got '1e12'")
case("anneal --backend replay:" .. replay .. " --opt free_steps=1e12", 2,
     "kopt: --opt free_steps: expected an integer from 0 to 1000000, got '1e12'")
case("experts --backend replay:" .. replay .. " --opt init=0", 2,
     "kopt: --opt init: expected an integer from 1 to 100000, got '0'")
-- a tools file that cannot be read fails at the start, as in experts (mcgs ran without it)
case("mcgs --backend replay:" .. replay .. " --opt tools=/nonexistent/tools.lua", 2,
     "kopt: --opt tools: tools file cannot open /nonexistent/tools.lua: No such file or directory")
case("mcgs --backend replay:" .. replay .. " --opt clip_lo=5 --opt clip_hi=-5", 2,
     "kopt: mcgs: --opt clip_lo must be below clip_hi")
case("random --profile top-99999999999999999999999 --backend replay:" .. replay, 2,
     "kopt: --profile: N must be a whole number from 1 to 2^63 - 1, got 'top-99999999999999999999999'")
case("rules --backend replay:" .. replay .. " --opt tabu=-1", 2,
     "kopt: --opt tabu: expected an integer at least 0, got '-1'")
-- a kopt script that fails: the script's error, named as such (not kopt's
-- "internal error"), exit 1
do
  T.write(tmp .. "/tool.lua", 'local t = nil\nreturn t.field\n')
  local code, _, err = T.run("script " .. tmp .. "/tool.lua")
  T.check(code == 1 and err:find("kopt: script " .. tmp .. "/tool.lua failed: ", 1, true) ~= nil
          and not err:find("internal error", 1, true), "a failing script (%d):\n%s", code, err)
end
-- an option with a maximum only
T.write(tmp .. "/capped.lua", 'return { name = "capped", options = { cap = { default = 5, max = 10 } }, ' ..
        'ask = function() return {} end }')
case(tmp .. "/capped.lua --backend replay:" .. replay .. " --opt cap=20", 2,
     "kopt: --opt cap: expected an integer at most 10, got '20'")
-- a priors file whose statistics are not numbers (crashed ten evaluations in)
T.write(tmp .. "/badpriors.json", '{"methods": {"block_x_up": {"count": "x"}}}')
case("mcgs --backend replay:" .. replay .. " --opt priors=" .. tmp .. "/badpriors.json", 2,
     "kopt: --opt priors: " .. tmp .. "/badpriors.json: methods.block_x_up: count: expected a finite number, got 'x'")
T.write(tmp .. "/nullpriors.json", '{"methods": {"block_x_up": {"count": 3, "mean_reward": null}}}')
case("mcgs --backend replay:" .. replay .. " --opt priors=" .. tmp .. "/nullpriors.json", 2,
     "kopt: --opt priors: " .. tmp .. "/nullpriors.json: methods.block_x_up: mean_reward: expected a finite number, got null")
T.write(tmp .. "/badcanon.json", '{"methods": {}, "canonical": {"methods": {"step_up": {"count": -5}}}}')
case("rules --backend replay:" .. replay .. " --opt priors=" .. tmp .. "/badcanon.json", 2,
     "kopt: --opt priors: " .. tmp .. "/badcanon.json: canonical.methods.step_up: count: expected a number of at least 0, got -5")
-- secondary commands: checked before anything runs
os.execute("mkdir -p '" .. tmp .. "/cmp_dirjson/benchmark.json'")
case("compare --strategies random --spaces " .. replay .. " --seeds 1 --budgets 5 --out " .. tmp .. "/cmp_dirjson", 2,
     "kopt: compare: --out: " .. tmp .. "/cmp_dirjson/benchmark.json is a directory, not a file")
case("compare --strategies random,anneal,random --spaces " .. replay .. " --seeds 1 --budgets 5 --out " .. tmp ..
     "/cmp_dup", 2, "kopt: compare: --strategies names 'random' twice (its rows would be one strategy's, reported twice)")
for _, b in ipairs({ "10,,20", "10,", "1e2" }) do
  case("compare --strategies random --spaces " .. replay .. " --seeds 1 --budgets " .. b .. " --out " .. tmp ..
       "/cmp_b", 2, "kopt: compare: --budgets: expected positive integers separated by commas, got '" .. b .. "'")
end
case("compare --strategies '' --spaces " .. replay .. " --seeds 1 --budgets 5 --out " .. tmp .. "/cmp_none", 2,
     "kopt: compare: --strategies: an empty list, no strategy to run")
case("compare --strategies , --spaces " .. replay .. " --seeds 1 --budgets 5 --out " .. tmp .. "/cmp_none", 2,
     "kopt: compare: --strategies: an empty list, no strategy to run")
case("compare --strategies random --spaces " .. replay .. " --seeds 1 --budgets 5 --out ''", 2,
     "kopt: compare: --out: expected a folder name, got an empty string")
case("compare --strategies random --spaces " .. replay .. "," .. tmp .. "/absent.json --seeds 1 --budgets 5 --out " ..
     tmp .. "/cmp_absent", 2, "kopt: cannot read replay file " .. tmp .. "/absent.json: No such file or directory")
-- a space given twice (it ran as "#2" and counted twice in the means)
case("compare --strategies random --spaces " .. replay .. "," .. replay .. " --seeds 1 --budgets 5 --out " .. tmp ..
     "/cmp_twice", 2, "kopt: compare: --spaces names " .. replay .. " twice (its rows would count twice in the means)")
case("compare --strategies genetic@population=0 --spaces " .. replay .. " --seeds 1 --budgets 5 --out " .. tmp ..
     "/cmp_pop", 2, "kopt: --opt population: expected an integer at least 2, got '0'")
case("suite mcsg tests/data/specs --out " .. tmp .. "/suite_typo", 2,
     "kopt: unknown strategy 'mcsg': not a file, and not a built-in strategy (", { prefix = true })
case("suite random tests/data/specs --replay-check loose --out " .. tmp .. "/suite_check", 2,
     "kopt: suite: --replay-check: expected strict or lenient, got 'loose'")
case("suite random tests/data/specs --range-probe wild --out " .. tmp .. "/suite_probe", 2,
     "kopt: suite: --range-probe: expected off, note or strict, got 'wild'")
case("suite random " .. root .. "/specs/suite --range-probe note --out " .. tmp .. "/suite_probe", 2,
     "kopt: suite: --range-probe: checks each winner on a GPU, and this suite replays recordings")
case("db --db " .. tmp .. "/none.db list -o " .. tmp .. "/x.json", 2, "kopt: db list: -o is for export only")
-- an empty file and a folder: said in kopt's words, not SQLite's ("no such table", "disk I/O error")
T.write(tmp .. "/empty.db", "")
os.execute("mkdir -p '" .. tmp .. "/folder.db'")
case("db --db " .. tmp .. "/empty.db list", 2,
     "kopt: the experience database " .. tmp .. "/empty.db is empty: no run has written to it yet")
case("db --db " .. tmp .. "/folder.db list", 2,
     "kopt: the experience database " .. tmp .. "/folder.db is a folder, not a file: give the file's path (--db PATH)")
T.write(tmp .. "/empty_transitions.jsonl", "")
case("regraph " .. tmp .. "/no_such_run", 2, "kopt: regraph: " .. tmp .. "/no_such_run: no such file or directory")
case("regraph " .. tmp .. "/empty_transitions.jsonl", 2, "kopt: regraph: " .. tmp .. "/empty_transitions.jsonl: no " ..
     "transitions (expected a run directory of mcgs, rules or experts, or a .jsonl file)")
-- strategy values and errors
case(strategy_file("fraction", "return { name = 'fraction', ask = function() return { { config = { block_size_x = 256 / 3 } } } end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_fraction", 2,
     "kopt: strategy 'fraction' returned a bad candidate from ask(): candidates[1].config.block_size_x: 85.333333333333 is not one of the knob's values (128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, ...)")
case(strategy_file("stringy", "return { name = 'stringy', ask = function() return { { config = { block_size_x = '128' } } } end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_stringy", 2,
     "kopt: strategy 'stringy' returned a bad candidate from ask(): candidates[1].config.block_size_x: '128' (a string) is not one of the knob's values (128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, ...)")
case(strategy_file("tablerr", "return { name = 'tablerr', ask = function() error({ code = 3, why = 'no idea' }) end }") ..
     " --backend replay:" .. replay .. " --out " .. tmp .. "/run_tablerr", 1,
     "kopt: strategy 'tablerr' failed in ask(): {code = 3, why = \"no idea\"} (at " .. tmp .. "/tablerr.lua:1)")
-- resume
os.execute("mkdir -p '" .. tmp .. "/empty_run' && : > '" .. tmp .. "/empty_run/events.jsonl'")
case("random --resume --backend replay:" .. replay .. " --out " .. tmp .. "/empty_run", 2,
     "kopt: --resume: " .. tmp .. "/empty_run/events.jsonl is empty: the run recorded nothing to resume; start it again without --resume")
case("random --resume --backend replay:" .. replay .. " --out " .. tmp .. "/no_run", 2,
     "kopt: --resume: " .. tmp .. "/no_run holds no run to resume (no events.jsonl)")
-- specs
local s
s = spec_file("malformed", nil, '{"name": "x", "knobs": [1, 2,}')
case("random " .. s, 2, "kopt: " .. s .. ": malformed JSON: ", { prefix = true })
case("random " .. tmp .. "/absent.json", 2, "kopt: " .. tmp .. "/absent.json: No such file or directory")
s = spec_file("noname", { name = false })
case("random " .. s, 2, "kopt: " .. s .. ": name: expected a name of letters, digits, '_', '-', '.' that starts with a letter, digit or '_', got nothing")
s = spec_file("knobs_object", { knobs = '{"block_size_x": [128]}' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs: expected a non-empty array of knobs ({\"name\": ..., \"values\": [...]}), got an object")
s = spec_file("empty_values", { knobs = '[{"name": "block_size_x", "values": [128]}, {"name": "unroll", "values": []}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[2].values: expected a non-empty array of numbers or strings, got an empty array")
s = spec_file("bool_value", { knobs = '[{"name": "block_size_x", "values": [128, true]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[1].values[2]: expected a number or a string, got boolean")
s = spec_file("dup_knob", { knobs = '[{"name": "a", "values": [1]}, {"name": "a", "values": [2]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[2].name: duplicate knob 'a'")
s = spec_file("never", { constraints = '["block_size_x > 4096"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints: no configuration of the 4 satisfies every constraint")
s = spec_file("syntax_expr", { constraints = '["block_size_x >"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression 'block_size_x >' has a syntax error: unexpected symbol near <eof>")
-- C's and Python's operators (a Kernel Tuner restriction copied as it is):
-- a bare syntax error said nothing of Lua's spelling
s = spec_file("c_ops", { constraints = '["block_size_x != 48 && unroll > 0"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression 'block_size_x != 48 && unroll > 0' has a syntax " ..
     "error: <eof> expected near '!' (Lua writes != as ~=, && as and, || as or, ! as not)")
s = spec_file("os_expr", { constraints = '["os.time() > 0"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression 'os.time() > 0' reads a field of 'os'; only device has fields (knobs, problem sizes and device are known)")
s = spec_file("func_expr", { constraints = '["(function() while true do end end)()"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression '(function() while true do end end)()' may not define functions")
-- string methods are reachable from any string value: a pattern that
-- backtracks for hours, or a string of 1e9 bytes, is refused before it runs
s = spec_file("str_method", { constraints = '["((\\"a\\").rep(\\"a\\", 3000)).find(\\"b\\") == nil"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression '((\"a\").rep(\"a\", 3000)).find(\"b\") == nil' " ..
     "reads a field of a value; only device has fields (knobs, problem sizes and device are known)")
s = spec_file("str_colon", { constraints = '["(\\"a\\"):rep(9) ~= \\"\\""]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression '(\"a\"):rep(9) ~= \"\"' calls a method (':'); " ..
     "only device has fields (knobs, problem sizes and device are known)")
s = spec_file("div_zero", { constraints = '["block_size_x // (unroll - unroll) > 0"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: attempt to divide by zero (at block_size_x=128, unroll=1)")
-- kopt compile checks a spec as a run does: one sentence, no traceback
case("compile " .. s, 2, "kopt: " .. s .. ": constraints[1]: attempt to divide by zero (at block_size_x=128, unroll=1)")
-- a device field that is known on a GPU but not without one: named (on a
-- GPU it is known, and there is no error to check)
if not require("kopt.backends.cuda").available() then
  s = spec_file("dev_clock", { constraints = '["device.clock_khz > 5"]' })
  case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: attempt to compare number with nil (device.clock_khz " ..
       "is not known on this device: no GPU is attached)")
end
s = spec_file("typo", { knbos = "[]" })
case("random " .. s, 2, "kopt: " .. s .. ": knbos: unknown field (expected one of: ", { prefix = true })
s = spec_file("nokernel", { kernel = '{"source": "missing.cu", "entry": "k"}' })
case("random " .. s, 2, "kopt: " .. s .. ": kernel.source: cannot read 'missing.cu': No such file or directory")
s = spec_file("badlaunch", { launch = '{"grid": [1, 1, 1, 1], "block": [32]}' })
case("random " .. s, 2, "kopt: " .. s .. ": launch.grid: expected an array of 1 to 3 expressions, got 4")
s = spec_file("badarg", { args = '[{"name": "x", "type": "f12", "shape": [4]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": args[1].type: unknown type 'f12' (expected one of bf16, f16, f32, f64, i16, i32, i64, i8, u16, u32, u64, u8)")
s = spec_file("zero_size", { problem = '{"n": 0}' })
case("random " .. s, 2, "kopt: " .. s .. ": problem.n: expected a positive number, got 0")
s = spec_file("neg_size", { problem = '{"n": -1000}' })
case("random " .. s, 2, "kopt: " .. s .. ": problem.n: expected a positive number, got -1000")
s = spec_file("zero_block", { launch = '{"grid": ["cdiv(n, block_size_x)"], "block": ["block_size_x * (unroll - 1)"]}' })
case("random " .. s, 2, "kopt: " .. s .. ": launch.block[1]: expression 'block_size_x * (unroll - 1)' gave 0, expected a positive integer (at block_size_x=128, unroll=1)")
s = spec_file("frac_grid", { launch = '{"grid": ["n / block_size_x"], "block": ["block_size_x"]}' })
case("random " .. s, 2, "kopt: " .. s .. ": launch.grid[1]: expression 'n / block_size_x' gave 7.8125, expected a positive integer (at block_size_x=128, unroll=1)")
s = spec_file("neg_shape", { args = '[{"name": "x", "type": "f32", "shape": ["unroll - 2"]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": args[1].shape[1]: expression 'unroll - 2' gave -1, expected a positive integer (at block_size_x=128, unroll=1)")
-- what users write that kopt once took silently or with a traceback
s = spec_file("src_dir", { kernel = '{"source": ".", "entry": "k"}' })
case("random " .. s, 2, "kopt: " .. s .. ": kernel.source: cannot read '.': is a directory, not a file")
s = spec_file("src_empty", { kernel = '{"source": "", "entry": "k"}' })
case("random " .. s, 2, "kopt: " .. s .. ": kernel.source: expected a file name, got an empty string")
s = spec_file("trailing_comma", nil, '{"name": "x",\n "knobs": [1, 2,]}')
case("random " .. s, 2, "kopt: " .. s .. ": malformed JSON: Expected value but found T_ARR_END at character 31 " ..
     "(line 2, column 17): JSON allows no trailing comma")
s = spec_file("name_dotdot", { name = '".."' })
case("random " .. s, 2, "kopt: " .. s .. ": name: expected a name of letters, digits, '_', '-', '.' that starts with a letter, digit or '_', got '..'")
s = spec_file("knob_keyword", { knobs = '[{"name": "block_size_x", "values": [128]}, {"name": "float", "values": [1]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[2].name: 'float' is a C++ keyword, a CUDA built-in or a name CUDA's headers use: it cannot be a define (rename the knob, or set \"define\": false)")
s = spec_file("knob_lua_word", { knobs = '[{"name": "block_size_x", "values": [128]}, {"name": "end", "values": [1]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[2].name: 'end' is a word of the expression language (Lua)")
s = spec_file("one_and_string_one", { knobs = '[{"name": "block_size_x", "values": [128]}, {"name": "unroll", "values": [1, "1"]}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[2].values[2]: duplicate value '1' (a string)")
s = spec_file("device_typo", { constraints = '["block_size_x <= device.max_thread_block"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression 'block_size_x <= device.max_thread_block' reads " ..
     "device.max_thread_block, which kopt does not know (known: ", { prefix = true })
s = spec_file("init_field", { args = '[{"name": "x", "type": "f32", "shape": ["n"], "init": {"dist": "uniform", "low": 0}}]' })
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.low: unknown field (expected one of: dist, value, fixed)")
s = spec_file("int_fraction", { args = '[{"name": "x", "type": "f32", "shape": ["n"]}, {"name": "m", "type": "i32", "value": "n / 3"}]' })
case("random " .. s .. " --backend replay:" .. replay, 2, "kopt: " .. s .. ": args[2].value: gave 333.33333333333, " ..
     "expected an integer that fits i32 (at block_size_x=128, unroll=1)")
-- a 1e10 space whose one constraint prunes nothing and holds nowhere: a
-- bounded walk, one sentence (an unbounded walk would not end)
do
  local knobs, names = { '{"name": "block_size_x", "values": [128]}' }, {}
  for i = 0, 9 do
    knobs[#knobs + 1] = string.format('{"name": "K%d", "values": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}', i)
    names[#names + 1] = "K" .. i
  end
  s = spec_file("huge_empty", { knobs = "[" .. table.concat(knobs, ", ") .. "]",
                                constraints = '["' .. table.concat(names, " + ") .. ' == 1000"]' })
  case("random " .. s, 2, "kopt: " .. s .. ": constraints: no configuration of the 10000000000 found that satisfies " ..
       "every constraint (random samples and a walk of 5000000 knob values found none; constraints on fewer knobs " ..
       "at a time let the walk prune)")
end
s = spec_file("number_constraint", { constraints = '["64"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression '64' gave 64 (a number), expected true or false")
s = spec_file("number_constraint2", { constraints = '["block_size_x >= 128", 0]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[2]: expression '0' gave 0 (a number), expected true or false")
s = spec_file("string_constraint", { constraints = '["unroll == 1 and \'yes\'"]' })
case("random " .. s, 2, "kopt: " .. s .. ": constraints[1]: expression 'unroll == 1 and 'yes'' gave yes (a string), expected true or false (at block_size_x=128, unroll=1)")
s = spec_file("bom_error", nil, "\239\187\191" .. spec_text({ problem = '{"n": "many"}' }))
case("random " .. s, 2, "kopt: " .. s .. ": problem.n: expected a positive number, got a string")
s = spec_file("replay_mismatch", {})
case("random " .. s .. " --backend replay:" .. replay, 2,
     "kopt: replay file " .. replay .. " has no parameter 'unroll' (knob of " .. s .. "); it records: block_size_x")

-- the fields for Kernel Tuner kernels (examples/kt/): every bad value gets
-- one sentence naming the field
local npy = root .. "/examples/kt/spmv/col_idx.npy"
T.write(tmp .. "/x.bin", string.rep("\0", 4000))
T.write(tmp .. "/gen_bad.lua", "return function(ctx) return { 1, 2, 3 } end")
local function byok(name, args, extra, no_launch)
  local text = spec_text({ launch = not no_launch and nil, args = args or '[{"name": "y", "type": "f32", "shape": ["n"], "output": true}, ' ..
                                        '{"name": "x", "type": "f32", "shape": ["n"]}]' })
  if extra then text = text:gsub("}$", ",\n" .. extra .. "}") end
  return spec_file(name, nil, text)
end
local y_out = '{"name": "y", "type": "f32", "shape": ["n"], "output": true'
local x_in = '{"name": "x", "type": "f32", "shape": ["n"]'
s = byok("byok_copy_input", "[" .. x_in .. ', "init": "copy:y"}, ' .. y_out .. "}]")
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: 'copy:y' is for outputs: an in/out buffer that starts as a copy of an input")
s = byok("byok_copy_none", "[" .. y_out .. ', "init": "copy:z"}, ' .. x_in .. "}]")
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: 'copy:z' names no argument")
s = byok("byok_copy_type", "[" .. y_out .. ', "init": "copy:x"}, {"name": "x", "type": "f64", "shape": ["n"]}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: 'copy:x' is of type f64, this output of type f32")
s = byok("byok_copy_output", "[" .. y_out .. ', "init": "copy:z"}, {"name": "z", "type": "f32", "shape": ["n"], "output": true}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: 'copy:z' must name an input array (not an output, a scalar or a constant)")
s = byok("byok_copy_size", "[" .. y_out .. ', "init": "copy:x"}, {"name": "x", "type": "f32", "shape": ["n + 1"]}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: 'copy:x' has 1001 elements, this output 1000 (at block_size_x=128, unroll=1)")
-- "fixed" keeps a constant input the same in check 2; only constants can be fixed
s = byok("byok_fixed_random", "[" .. y_out .. "}, " .. x_in .. ', "init": {"dist": "normal", "fixed": true}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[2].init.fixed: only a constant ('zeros', 'ones', 'constant') or 'arange' can be fixed; 'normal' is drawn anew in every input set")
s = byok("byok_fixed_type", "[" .. y_out .. "}, " .. x_in .. ', "init": {"dist": "ones", "fixed": "yes"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[2].init.fixed: expected true or false, got a string")
-- tolerances: 0 asks for exact equality, a negative one is refused
s = byok("byok_tol_negative", nil, '"tolerance": {"rel_l2": -1e-6}')
case("random " .. s, 2, "kopt: " .. s .. ": tolerance.rel_l2: expected a number >= 0 (0: exactly equal), got -1e-06")
s = byok("byok_tol_out_negative", nil, '"verify": {"outputs": {"y": {"max_abs": -1}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.max_abs: expected a number >= 0 (0: exactly equal), got -1")
s = byok("byok_param_out", "[" .. y_out .. ', "param": false}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].param: only an input array can be left out of the kernel's parameters")
s = byok("byok_npy_missing", "[" .. x_in .. ', "init": {"file": "nope.npy"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.file: cannot read '" .. tmp .. "/nope.npy': No such file or directory")
s = byok("byok_npy_dtype", "[" .. x_in .. ', "init": {"file": "' .. npy .. '"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.file: '" .. npy .. "' holds i32 elements, the argument is f32")
s = byok("byok_npy_shape", '[{"name": "x", "type": "i32", "shape": ["n"], "init": {"file": "' .. npy .. '"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.file: '" .. npy .. "' holds an array of shape (32768,), the argument's shape is (1000,) (at block_size_x=128, unroll=1)")
s = byok("byok_npy_output", "[" .. y_out .. ', "init": {"file": "' .. npy .. '"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: an output's data comes from the kernel (for an in/out buffer, write \"copy:NAME\")")
s = byok("byok_raw_dtype", "[" .. x_in .. ', "init": {"file": "x.bin", "dtype": "f64"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.dtype: the file holds f64, the argument is f32")
s = byok("byok_raw_size", '[{"name": "x", "type": "f32", "shape": ["n + 1"], "init": {"file": "x.bin"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.file: '" .. tmp .. "/x.bin' holds 4000 bytes after offset 0, the argument needs 4004 (1001 x f32) (at block_size_x=128, unroll=1)")
s = byok("byok_raw_offset", "[" .. x_in .. ', "init": {"file": "x.bin", "offset": -4}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.offset: expected a non-negative integer, got -4")
s = byok("byok_gen_syntax", "[" .. x_in .. ', "init": {"generate": "return function(ctx) return {"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.generate: args[1].init.generate:1: unexpected symbol near <eof>")
-- an output's init other than copy:NAME was dropped without a word (an
-- atomic histogram expecting zeros met the poison)
s = byok("byok_out_zeros", "[" .. y_out .. ', "init": "zeros"}, ' .. x_in .. "}]")
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init: an output is poisoned before every launch, so 'zeros' would never be its contents; an output that starts from values is an in/out buffer: \"copy:NAME\" of an input (zeros: an input {\"init\": {\"dist\": \"zeros\", \"fixed\": true}, \"param\": false}; specs/README.md)")
-- a generated value the type cannot hold was a Lua traceback
s = byok("byok_gen_overflow", '[{"name": "x", "type": "u8", "shape": ["n"], "init": {"generate": "return function(ctx) local t = {} for i = 1, ctx.n do t[i] = i end return t end"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.generate: the generator's value 256 (256) does not fit u8 (at block_size_x=128, unroll=1)")
s = byok("byok_gen_count", "[" .. x_in .. ', "init": {"generate": "gen_bad.lua"}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.generate: the generator returned 3 values, the argument has 1000 elements (at block_size_x=128, unroll=1)")
s = byok("byok_gen_seed", "[" .. x_in .. ', "init": {"generate": "gen_bad.lua", "seed": 1.5}}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[1].init.seed: expected an integer, got 1.5")
s = byok("byok_verify_input", nil, '"verify": {"outputs": {"x": {"rel_l2": 1e-3}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.x: 'x' is not an output argument")
s = byok("byok_verify_region", nil, '"verify": {"outputs": {"y": {"region": [[0, 1], [0, 1]]}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.region: expected an array of 1 [lo, hi] pairs (one per dimension of the shape), got 2")
s = byok("byok_verify_bounds", nil, '"verify": {"outputs": {"y": {"region": [[1, "n + 1"]]}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.region[1]: [1, 1001) is not a non-empty part of 0..1000 (at block_size_x=128, unroll=1)")
s = byok("byok_verify_first", nil, '"verify": {"outputs": {"y": {"first": "2 * n"}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.first: 2000 elements, the output has 1000 (at block_size_x=128, unroll=1)")
s = byok("byok_verify_compare", nil, '"verify": {"outputs": {"y": {"compare": "no"}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.compare: expected true or false, got a string")
s = byok("byok_verify_tol", nil, '"verify": {"outputs": {"y": {"rel_l2": -1}}}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.outputs.y.rel_l2: expected a number >= 0 (0: exactly equal), got -1")
s = byok("byok_verify_check", nil, '"verify": {"check": "return 42"}')
case("random " .. s, 2, "kopt: " .. s .. ": verify.check: the code must return a function, it returned number")
s = byok("byok_metric_name", nil, '"metrics": {"GB/s": "bites / time_s"}')
case("random " .. s, 2, "kopt: " .. s .. ": metrics.GB/s: expression 'bites / time_s' uses unknown name 'bites' (known: block_size_x, n, time_ms, time_s, unroll, device, and ceil/floor/min/max/abs/sqrt/log/log2/exp/cdiv/int)")
s = byok("byok_objective_metric", nil, '"metrics": {"GB/s": "n / time_s"}, "objective": {"metric": "GFLOP/s", "goal": "max"}')
case("random " .. s, 2, "kopt: " .. s .. ": objective.metric: 'GFLOP/s' is not one of the spec's metrics")
s = byok("byok_objective_goal", nil, '"metrics": {"GB/s": "n / time_s"}, "objective": {"metric": "GB/s", "goal": "up"}')
case("random " .. s, 2, "kopt: " .. s .. ": objective.goal: expected 'max' or 'min', got 'up'")
s = byok("byok_reference_knob", nil, string.format('"reference": {"source": "%s", "entry": "vector_add", "knobs": ["FILTER"]}', kernel))
case("random " .. s, 2, "kopt: " .. s .. ": reference.knobs[1]: 'FILTER' is not a knob of this spec")
s = spec_file("byok_entry", { kernel = string.format('{"source": "%s", "entry": "k<int; x>"}', kernel) })
case("random " .. s, 2, "kopt: " .. s .. ": kernel.entry: expected a kernel function name (qualified or not, 'ops::scale'), or a template instance such as 'stencil<float, BLOCK>', got 'k<int; x>'")
s = spec_file("byok_knob_options", { knobs = '[{"name": "block_size_x", "values": [128], "options": {"256": ["-O3"]}}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[1].options.256: '256' is not one of the knob's values")
s = spec_file("byok_pipeline_launch", nil, spec_text({}):gsub("}$", ',\n"pipeline": [{"entry": "vector_add", "args": [], "launch": {"grid": [1], "block": [32]}}]}'))
case("random " .. s, 2, "kopt: " .. s .. ": launch: not allowed with a pipeline (each of its kernels has its own launch)")
s = byok("byok_pipeline_arg", nil, '"pipeline": [{"entry": "vector_add", "args": ["y", "z"], "launch": {"grid": [1], "block": [32]}}]', true)
case("random " .. s, 2, "kopt: " .. s .. ": pipeline[1].args[2]: 'z' is not one of the spec's args")
s = byok("byok_pipeline_entry", nil, '"pipeline": [{"entry": "first", "args": ["y"], "launch": {"grid": [1], "block": [32]}}]', true)
case("random " .. s, 2, "kopt: " .. s .. ": kernel.entry: 'vector_add' is not the pipeline's first kernel 'first' (leave it out)")
s = byok("byok_scratch_init", "[" .. y_out .. '}, {"name": "p", "type": "f32", "shape": ["n"], "scratch": true, "init": "ones"}]')
case("random " .. s, 2, "kopt: " .. s .. ": args[2].scratch: a scratch buffer takes no init and is no constant")
s = byok("byok_reference_args", nil, string.format('"reference": {"source": "%s", "entry": "vector_add", "args": ["y", "w"]}', kernel))
case("random " .. s, 2, "kopt: " .. s .. ": reference.args[2]: 'w' is not one of the spec's args")
s = spec_file("byok_knob_define", { knobs = '[{"name": "block_size_x", "values": [128], "define": "no"}]' })
case("random " .. s, 2, "kopt: " .. s .. ": knobs[1].define: expected true or false, got a string")

-- too many candidates when n was cut by the budget, not by the slots: the
-- message said "1 on a replay" with 4 slots
do
  local twice = strategy_file("twice", "return { name = 'twice', ask = function(ctx, n)\n" ..
    "  return { { config = ctx.space:sample(ctx.rng) }, { config = ctx.space:sample(ctx.rng) } } end }")
  local code, _, err = T.run(twice .. " --backend replay:" .. replay .. " --budget 5 --no-db -q --out " .. tmp ..
                             "/run_twice", "KOPT_REPLAY_SLOTS=4")
  T.eq(code, 2, "too many candidates: exit code")
  T.check(err:find("ask(ctx, 1) returned 2 candidates", 1, true) and err:find("4 here", 1, true) and
          err:find(": 1 left)", 1, true), "the message names the slots and the budget left:\n%s", err)
end

-- KOPT_MPI=off (the word KOPT_DB takes) turned MPI on: a kopt built without
-- it refused to run, one built with it started MPI outside mpirun
for _, word in ipairs({ "off", "no", "false", "0" }) do
  local code, _, err = T.run("random --backend replay:" .. replay .. " --budget 2 --no-db -q --out " .. tmp ..
                             "/run_mpi_" .. word, "KOPT_MPI=" .. word)
  T.check(code == 0 and not err:find("MPI", 1, true), "KOPT_MPI=%s is off: exit %d\n%s", word, code, err)
  os.execute("rm -rf '" .. tmp .. "/run_mpi_" .. word .. "'")
end

do
  local code, out, err = T.run("compile " .. root .. "/specs/transpose.json --timeout=2.5 --sample=1")
  T.check(code == 0 and out:find(" ok ", 1, true), "compile --timeout=2.5 --sample=1: exit %d\n%s%s", code, out, err)
end

-- an --opt the strategy refuses as it starts: one sentence, and nothing
-- written (a summary of "0 evaluations" went to stdout and the database
-- file was created)
for _, bad in ipairs({ "portfolio=tree,bogus", "moves=", "clip_lo=5 --opt clip_hi=-5" }) do
  local db = tmp .. "/opt_refused.db"
  local code, out, err = T.run("mcgs --backend replay:" .. replay .. " --budget 5 --db " .. db .. " --out " .. tmp ..
                               "/run_opt_refused --opt " .. bad)
  T.check(code == 2 and out == "" and not T.exists(db) and not T.exists(tmp .. "/run_opt_refused"),
          "--opt %s: exit %d, stdout %q, database left: %s\n%s", bad, code, out, tostring(T.exists(db)), err)
end

-- GPU-only flags under replay: said (they were taken silently)
do
  local code, _, err = T.run("random --backend replay:" .. replay .. " --budget 2 --no-db --out " .. tmp ..
                             "/run_gpu_flags --gpus 7 --finalists 5 --compile-timeout 3")
  T.check(code == 0 and err:find("note: --gpus, --finalists, --compile-timeout do nothing here: this run replays", 1, true),
          "GPU-only flags under replay: exit %d\n%s", code, err)
  os.execute("rm -rf '" .. tmp .. "/run_gpu_flags'")
end

-- MPI flags in a run that is no MPI job: said (they were taken silently)
do
  local code, _, err = T.run("random --backend replay:" .. replay .. " --budget 2 --no-db --out " .. tmp ..
                             "/run_mpi_flags --mpi-root engine --mpi-timeout 5 --allow-mixed")
  T.check(code == 0 and err:find("note: --mpi-root, --mpi-timeout, --allow-mixed do nothing here: this run is not " ..
                                 "spread over MPI ranks", 1, true), "MPI flags without MPI: exit %d\n%s", code, err)
  os.execute("rm -rf '" .. tmp .. "/run_mpi_flags'")
end

for _, c in ipairs(cases) do
  local code, _, err = T.run(c.args, nil, tmp)
  T.check(not err:lower():find("traceback", 1, true), "`kopt %s`: a traceback on stderr:\n%s", c.args, err)
  T.check(not err:lower():find("internal error", 1, true), "`kopt %s`: an internal error:\n%s", c.args, err)
  err = err:gsub("\n$", ""):match("[^\n]*$")  -- the last line: progress lines may come first
  T.eq(code, c.code, "exit code of `kopt " .. c.args .. "`")
  if c.prefix then
    T.check(err:sub(1, #c.want) == c.want, "`kopt %s`:\n  expected prefix: %s\n  got:             %s", c.args, c.want, err)
  else
    T.check(err == c.want, "`kopt %s`:\n  expected: %s\n  got:      %s", c.args, c.want, err)
  end
  T.check(not T.exists(tmp .. "/runs"), "`kopt %s` left a runs/ directory behind", c.args)
end
-- A tolerance of 0 (exact) is accepted.
local exact = spec_file("exact_tol", nil, spec_text({ knobs = '[{"name": "block_size_x", "values": [128, 256]}]' })
                          :gsub("}%s*$", ', "tolerance": {"rel_l2": 0, "max_abs": 0}}'))
local ecode, _, eerr = T.run("compile " .. exact, nil, tmp)
T.check(ecode == 0, "a spec with tolerance 0: exit code %s\n%s", tostring(ecode), eerr)
-- A spec with a UTF-8 byte order mark is read like one without.
local bom = spec_file("bom", nil, "\239\187\191" .. spec_text({ knobs = '[{"name": "block_size_x", "values": [128, 256]}]' }))
local code, _, err = T.run("random " .. bom .. " --backend replay:" .. replay .. " --budget 2 -q --out " .. tmp .. "/run_bom",
                           nil, tmp)
T.check(code == 0, "a spec with a byte order mark: exit code %s\n%s", tostring(code), err)
for _, d in ipairs({ "outside", "fraction", "stringy", "tablerr" }) do
  T.check(not T.exists(tmp .. "/run_" .. d), "bad input before any evaluation left %s/run_%s behind", tmp, d)
end
-- A strategy that fails before any evaluation leaves no run directory; one
-- that fails later leaves a resumable one.
T.check(not T.exists(tmp .. "/run_bad_ask"), "a failed ask() before any evaluation left a run directory")
T.check(not T.exists(tmp .. "/run_garbage"), "a garbage candidate before any evaluation left a run directory")
T.check(T.exists(tmp .. "/run_bad_tell/events.jsonl"), "the run that failed in tell() lost its recorded evaluation")
io.stdout:write(#cases, " bad inputs checked\n")
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
