-- `kopt random --backend replay:<A100 convolution> --budget 200 --seed 1`:
-- the best it reports must be the best of the 200 configs it evaluated,
-- according to an independent read of the cache file (plain cjson, not
-- kopt's recording reader). Then the same run killed by SIGKILL at evaluation
-- 100 and resumed must end with the same evaluated set, in the same order.
local T = require("testlib")
local cjson = require("cjson")

local file = "tests/data/convolution_A100.json"
local tmp = T.tmpdir("replay")

local read_events = T.events

-- Independent read of the Kernel Tuner cache: key -> time (or a failure string).
local raw = cjson.decode(T.slurp(file))
local function kt_key(config)
  local parts = {}
  for i, name in ipairs(raw.tune_params_keys) do parts[i] = string.format("%d", config[name]) end
  return table.concat(parts, ",")
end

local full = tmp .. "/full"
local code, out = T.run(string.format("random --backend replay:%s --budget 200 --seed 1 --out %s -q", file, full))
T.eq(code, 0, "exit code of the uninterrupted run")
local evals, stop = read_events(full)
T.eq(#evals, 200, "evaluations recorded")
local best_time, best_key = math.huge, nil
local distinct = {}
for _, ev in ipairs(evals) do
  local entry = raw.cache[kt_key(ev.config)]
  T.check(entry ~= nil, "evaluated config %s is not in the file", kt_key(ev.config))
  distinct[kt_key(ev.config)] = true
  if entry and type(entry.time) == "number" then
    T.check(ev.result.status == "ok", "config %s: recorded time but status %s", kt_key(ev.config), ev.result.status)
    T.check(math.abs(ev.result.time_ms - entry.time) < 1e-9 * entry.time, "config %s: time %s vs file %s",
            kt_key(ev.config), ev.result.time_ms, entry.time)
    if entry.time < best_time then best_time, best_key = entry.time, kt_key(ev.config) end
  elseif entry then
    T.check(ev.result.status ~= "ok", "config %s: file says %s but kopt says ok", kt_key(ev.config), tostring(entry.time))
  end
end
local n = 0
for _ in pairs(distinct) do n = n + 1 end
T.eq(n, 200, "distinct configs among the 200 evaluations")
T.check(stop and math.abs(stop.best.time_ms - best_time) < 1e-9 * best_time, "stop event best %s, file says %s",
        stop and stop.best.time_ms, best_time)
local best_cfg = cjson.decode(T.slurp(full .. "/best/config.json"))
T.eq(kt_key(best_cfg), best_key, "best/config.json")
T.check(out:find(string.format("best: %.5g ms", best_time), 1, true) ~= nil, "summary names the best time:\n%s", out)
local results = cjson.decode(T.slurp(full .. "/results.json"))
T.eq(#results.results, 200, "results.json (T4) entries")
T.eq(results.schema_version, "1.0.0", "results.json schema_version")

-- Kill at evaluation 100, then resume.
local killed = tmp .. "/killed"
code = T.run(string.format("random --backend replay:%s --budget 200 --seed 1 --out %s -q", file, killed),
             "KOPT_TEST_SIGKILL_AFTER=100")
T.eq(code, 137, "exit status of the run killed by SIGKILL")
local half = read_events(killed)
T.eq(#half, 100, "evaluations on record after the kill")
T.check(not T.exists(killed .. "/results.json"), "a killed run has no results.json yet")
-- A torn last line, as a kill in the middle of a write would leave.
local f = assert(io.open(killed .. "/events.jsonl", "ab"))
f:write('{"event":"eval","n":101,"key":"16,1')
f:close()
code = T.run(string.format("random --backend replay:%s --budget 200 --out %s --resume -q", file, killed))
T.eq(code, 0, "exit code of the resumed run")
local resumed, rstop = read_events(killed)
T.eq(#resumed, 200, "evaluations after resume")
for i = 1, math.min(#resumed, #evals) do
  if resumed[i].key ~= evals[i].key then
    T.check(false, "evaluation %d differs after resume: %s vs %s", i, resumed[i].key, evals[i].key)
    break
  end
end
T.check(rstop and rstop.best.key == stop.best.key, "resumed run's best differs")
-- Resuming a finished run measures nothing new.
code = T.run(string.format("random --backend replay:%s --budget 200 --out %s --resume -q", file, killed))
T.eq(code, 0, "exit code of resuming a finished run")
T.eq(#read_events(killed), 200, "evaluations after resuming a finished run")
-- Without --resume an existing run is refused, and nothing is changed.
local code2, _, err = T.run(string.format("random --backend replay:%s --out %s", file, killed))
T.eq(code2, 2, "exit code when the run directory is taken")
T.eq(err, "kopt: " .. killed .. " already holds a run; continue it with --resume or choose another --out\n", "message")
-- --resume with another seed is refused.
code2, _, err = T.run(string.format("random --backend replay:%s --out %s --resume --seed 5", file, killed))
T.eq(code2, 2, "exit code of --resume with another seed")
T.check(err:find("was started with --seed 1, not 5", 1, true) ~= nil, "message of --resume with another seed: %s", err)

-- --resume after the spec was edited (its problem size, a constraint, its
-- kernel's source) is refused: before, it went on and mixed the times
-- measured before the edit with the new problem's, blaming the strategy
do
  local d = T.tmpdir("resume-edited")
  os.execute(string.format("cp tests/data/specs/vector_add.json tests/data/specs/vector_add.cu '%s'/ && " ..
                           "cp tests/data/vector_add_A4000.json '%s'/rec.json", d, d))
  local spec_path = d .. "/vector_add.json"
  local text = T.slurp(spec_path)
  local run_cmd = string.format("random %s --backend replay:%s/rec.json --budget 8 --out %s/run -q", spec_path, d, d)
  local c = T.run(run_cmd, "KOPT_TEST_SIGKILL_AFTER=3")
  T.check(c ~= 0, "the first run is killed after 3 evaluations")
  local function edited(from, to, what)
    T.write(spec_path, (text:gsub(from, to)))
    local code3, _, err3 = T.run(run_cmd .. " --resume")
    T.check(code3 == 2 and err3:find("has changed since the run began", 1, true),
            "--resume after %s: %d %s", what, code3, err3)
  end
  edited('"n": 100000', '"n": 5000000', "a new problem size")
  edited('"block_size_x %% 128 == 0"', '"block_size_x %% 128 == 0", "block_size_x <= 512"', "a new constraint")
  T.write(spec_path, text)
  local cu = T.slurp(d .. "/vector_add.cu")
  T.write(d .. "/vector_add.cu", cu .. "\n// edited\n")
  local code4, _, err4 = T.run(run_cmd .. " --resume")
  T.check(code4 == 2 and err4:find("has changed since the run began", 1, true), "--resume after a source edit: %s", err4)
  T.write(d .. "/vector_add.cu", cu)
  local code5, _, err5 = T.run(run_cmd .. " --resume")
  T.eq(code5, 0, "--resume of the unedited spec goes on: " .. err5)
  os.execute("rm -rf '" .. d .. "'")
end

-- A resume with other options asks in another order: what the trace and
-- the progress line call a new best must beat everything on record, not
-- only what the resumed strategy has asked again (before: "new best" lines
-- for times worse than the best before the kill)
do
  local d = T.tmpdir("resume-newbest")
  local cmd = string.format("anneal --backend replay:tests/data/convolution_A100.json --budget 40 --out %s/run -q", d)
  T.run(cmd, "KOPT_TEST_SIGKILL_AFTER=20")
  local c, summary = T.run(cmd .. " --resume --opt init=0")
  T.eq(c, 0, "the resume with another init")
  -- the speedup's baseline is evaluation 1's time, whatever order the
  -- resumed strategy asked in
  local first_ok
  for _, x in ipairs(T.events(d .. "/run")) do
    if x.event == "eval" and x.result.status == "ok" and (not first_ok or x.n < first_ok.n) then first_ok = x end
  end
  T.check(first_ok and summary:find(string.format("than the first valid config measured (%.5g ms)",
                                                  first_ok.result.time_ms), 1, true),
          "the baseline is evaluation %s's: %s", first_ok and first_ok.n, summary)
  local best_before, after, worse = math.huge, false, {}
  for line in io.lines(d .. "/run/trace.md") do
    if line:find("^## Resumed") then after = true end
    local t = tonumber(line:match("new best ([%d.e+-]+) ms"))
    if t and not after then best_before = math.min(best_before, t) end
    if t and after and t >= best_before then worse[#worse + 1] = line end
  end
  T.check(best_before < math.huge and #worse == 0, "new best lines after the resume, no faster than %.5g: %s",
          best_before, table.concat(worse, " | "))
  os.execute("rm -rf '" .. d .. "'")
end

-- A fresh start in a folder whose log holds only a torn first line: what
-- the killed run wrote beside it is not the new run's (before: its
-- transitions were appended to, so kopt regraph counted them twice, and
-- its regraph.json gave the new run its priors)
do
  local d = T.tmpdir("fresh-derived")
  local cmd = string.format("mcgs --backend replay:tests/data/convolution_A100.json --budget 30 --out %s/run -q", d)
  T.run(cmd, "KOPT_TEST_SIGKILL_AFTER=20")
  local ev = T.slurp(d .. "/run/events.jsonl")
  T.write(d .. "/run/events.jsonl", ev:sub(1, 50))
  local c, _, e = T.run(cmd)
  T.eq(c, 0, "the fresh start: " .. e)
  local lines = 0
  for _ in io.lines(d .. "/run/transitions.jsonl") do lines = lines + 1 end
  local fresh = 0
  for _, x in ipairs(T.events(d .. "/run")) do if x.event == "eval" then fresh = fresh + 1 end end
  T.eq(lines, fresh, "transitions.jsonl holds the fresh run's evaluations only")
  os.execute("rm -rf '" .. d .. "'")
end

-- A run folder's files replaced by something else before a resume: one
-- sentence naming the path (before: an internal error with a traceback for
-- best/, and "experience.lua:75: Is a directory" blamed on the strategy)
do
  local d = T.tmpdir("resume-odd-files")
  local cmd = string.format("mcgs --backend replay:tests/data/convolution_A100.json --budget 30 --out %s/run -q", d)
  T.run(cmd, "KOPT_TEST_SIGKILL_AFTER=20")
  os.execute(string.format("rm -rf '%s/run/best' && echo hi > '%s/run/best'", d, d))
  local c, _, e = T.run(cmd .. " --resume")
  T.check(c ~= 0 and e:find("cannot write " .. d .. "/run/best", 1, true) and not e:find("traceback", 1, true),
          "best/ as a file: %s", e)
  os.execute(string.format("rm -f '%s/run/best' '%s/run/transitions.jsonl' && mkdir '%s/run/transitions.jsonl'", d, d, d))
  c, _, e = T.run(cmd .. " --resume")
  T.check(c == 2 and e:find("cannot read " .. d .. "/run/transitions.jsonl: it is a directory", 1, true),
          "transitions.jsonl as a directory: %s", e)
  os.execute("rm -rf '" .. d .. "'")
end

-- kopt's own results.json, replayed: the knobs keep the spec's order (a
-- T4 file lists parameters by name; read in the order of names, mcgs broke
-- its ties otherwise and took another path from the same seed)
do
  local all, a, b = tmp .. "/all", tmp .. "/mcgs_cache", tmp .. "/mcgs_t4"
  T.run(string.format("exhaustive --backend replay:%s --out %s -q", file, all))
  T.run(string.format("mcgs --backend replay:%s --budget 40 --seed 3 --out %s -q", file, a))
  T.run(string.format("mcgs --backend replay:%s/results.json --budget 40 --seed 3 --out %s -q", all, b))
  local ka, kb = {}, {}
  for _, ev in ipairs((read_events(a))) do ka[#ka + 1] = ev.key end
  for _, ev in ipairs((read_events(b))) do kb[#kb + 1] = ev.key end
  T.same_list(kb, ka, "mcgs on kopt's results.json against mcgs on the cache it was made from")
end

-- a candidate with an edited source under replay: it was given the
-- recorded time of its config, won, and its text went to best/
do
  local d = T.tmpdir("replay-edited")
  T.write(d .. "/srcwin.lua", [[
local S = { name = "srcwin" }
local i = 0
function S.ask(ctx, n)
  i = i + 1
  if i == 1 then return { { config = { TILE = 32, BLOCK_ROWS = 4, PAD = 1 } } } end
  if i == 2 then return { { config = { TILE = 64, BLOCK_ROWS = 4, PAD = 1 }, source = "this is not CUDA at all" } } end
  return {}
end
return S]])
  for _, backend in ipairs({ "", " --backend replay:tests/data/transpose_h200.t4.json" }) do
    local spec = backend == "" and " specs/transpose.json" or ""
    local c, _, e = T.run(d .. "/srcwin.lua" .. spec .. backend .. " --no-db --out " .. d .. "/run")
    T.eq(c, 0, "edited source under replay: exit code\n" .. e)
    T.check(e:find("candidates with an edited source are invalid here", 1, true), "said once: %s", e)
    local best = T.slurp(d .. "/run/results.json")
    T.check(best and not best:find("edited kernel", 1, true), "the edited candidate is not a result: %s", tostring(best))
    T.check(not T.exists(d .. "/run/best/transpose.cu") or not T.slurp(d .. "/run/best/transpose.cu"):find("not CUDA", 1, true),
            "best/ holds no unmeasured source")
    os.execute("rm -rf '" .. d .. "/run'")
  end
  os.execute("rm -rf '" .. d .. "'")
end

-- a constraint that fails only past the first configs checked at load, met
-- while the spec's space is matched to its recording: an internal error
-- with a traceback (it is one sentence naming the config, exit 2)
do
  local d = T.tmpdir("late-constraint")
  local json = require("kopt.json")
  local cache, bx = {}, {}
  for b = 1, 20 do
    bx[b] = b
    for t = 1, 3 do
      cache[b .. "," .. t] = { BX = b, TY = t, time = 1 + 0.1 * b + t, times = { 1 + 0.1 * b + t } }
    end
  end
  T.write(d .. "/kt.json", json.encode({ device_name = "GPU", kernel_name = "k", tune_params_keys = { "BX", "TY" },
                                          tune_params = { BX = bx, TY = { 1, 2, 3 } }, objective = "time",
                                          cache = cache }))
  T.write(d .. "/k.cu", 'extern "C" __global__ void k(float *out, int n) { int i = blockIdx.x * BX + threadIdx.x * TY; ' ..
                        "if (i < n) out[i] = 1.0f; }\n")
  for what, case in pairs({ number = { "BX < 20 or TY % 2", "gave 1 (a number), expected true or false (at BX=20, TY=1)" },
                            division = { "BX < 20 or TY // (BX - 20) > 0", "attempt to divide by zero (at BX=20, TY=1)" } }) do
    T.write(d .. "/s.json", json.encode({ name = "late", kernel = { source = "k.cu", entry = "k" }, problem = { n = 1024 },
      knobs = { { name = "BX", values = bx }, { name = "TY", values = { 1, 2, 3 } } }, constraints = { case[1] },
      launch = { grid = { "cdiv(n, 32)" }, block = { 32 } },
      args = { { name = "out", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } },
      recording = "kt.json" }))
    local c, _, e = T.run("random " .. d .. "/s.json --budget 5 --no-db -q --out " .. d .. "/run")
    T.check(c == 2 and e:find("constraints[1]: ", 1, true) and e:find(case[2], 1, true) and
            not e:find("internal error", 1, true), "a constraint failing late (%s): exit %d\n%s", what, c, e)
  end
  os.execute("rm -rf '" .. d .. "'")
end

-- results.json's costs under replay with several slots: each config's own
-- recorded cost (a batch's average eval_s was written), and its compile time
-- under compilation (it was 0); a KOPT_REPLAY_SLOTS that is no whole number
-- of at least 1 (abc, 0) was read as 1 without a word
do
  local d = T.tmpdir("replay-costs")
  local json = require("kopt.json")
  local cache = {}
  for b = 1, 6 do
    cache[tostring(b)] = { BX = b, time = b, times = { b }, compile_time = 100 * b, benchmark_time = 10 * b,
                           verification_time = 0 }
  end
  T.write(d .. "/kt.json", json.encode({ device_name = "GPU", kernel_name = "k", tune_params_keys = { "BX" },
                                          tune_params = { BX = { 1, 2, 3, 4, 5, 6 } }, objective = "time", cache = cache }))
  local c, _, e = T.run("exhaustive --backend replay:" .. d .. "/kt.json --no-db -q --out " .. d .. "/run", "KOPT_REPLAY_SLOTS=3")
  T.eq(c, 0, "exhaustive with 3 slots\n" .. e)
  -- (a value that is no whole number of at least 1 is said, not read as 1)
  for _, bad in ipairs({ "abc", "0", "2.5" }) do
    local cb, _, eb = T.run("exhaustive --backend replay:" .. d .. "/kt.json --no-db -q --out " .. d .. "/bad_" .. bad,
                            "KOPT_REPLAY_SLOTS=" .. bad)
    T.check(cb == 2 and eb:find("KOPT_REPLAY_SLOTS: expected a whole number", 1, true) ~= nil,
            "KOPT_REPLAY_SLOTS=%s (%d): %s", bad, cb, eb)
  end
  local doc = json.decode(T.slurp(d .. "/run/results.json"))
  for _, r in ipairs(doc.results) do
    local b, t = r.configuration.BX, r.times
    T.eq(t.compilation, 100 * b, "BX=" .. b .. ": the recorded compile time")
    local total = t.compilation + t.validation + t.runtimes[1]
    T.check(math.abs(total - 110 * b) < 1e-6, "BX=%d: the recorded cost %g ms, got %g", b, 110 * b, total)
  end
  os.execute("rm -rf '" .. d .. "'")
end

-- a metric objective that goes negative: the summary gave "-0.48x that
-- of the first valid config" (a ratio of two values of other signs)
do
  local d = T.tmpdir("negative-metric")
  local json = require("kopt.json")
  local root = require("kopt.sys").realpath(".")
  local sp = json.decode(T.slurp("specs/transpose.json"))
  sp.kernel.source = root .. "/kernels/transpose.cu"
  sp.reference.source = root .. "/kernels/transpose_ref.cu"
  sp.recording = root .. "/tests/data/transpose_h200.t4.json"
  sp.name = "tr_negative"
  sp.metrics = { ["GB/s"] = "bytes / time_s / 1e9 - 3600" }
  sp.objective = { metric = "GB/s", goal = "max" }
  T.write(d .. "/s.json", json.encode(sp))
  local c, nout, e = T.run("random " .. d .. "/s.json --budget 20 --no-db --out " .. d .. "/run")
  T.eq(c, 0, "a negative metric: exit code\n" .. e)
  local best = nout:match("\n  best: [^\n]*") or ""
  T.check(best ~= "" and not best:find("x that of", 1, true), "no ratio of values of other signs: %s", best)
  os.execute("rm -rf '" .. d .. "'")
end

-- a Kernel Tuner cache of float32 knob values (0.10000000149011612) with a
-- spec listing the script's values (0.1): "holds none of the
-- configurations the spec allows"; they are one value
do
  local d = T.tmpdir("float32-spec")
  local json = require("kopt.json")
  local root = require("kopt.sys").realpath(".")
  T.write(d .. "/k.cu", 'extern "C" __global__ void k(float *out, int n) { int i = blockIdx.x * bs + threadIdx.x; ' ..
                        "if (i < n) out[i] = alpha; }\n")
  T.write(d .. "/s.json", json.encode({ name = "fl32", kernel = { source = "k.cu", entry = "k" }, problem = { n = 1024 },
    knobs = { { name = "alpha", values = { 0.1, 0.2 } }, { name = "bs", values = { 32, 64 } } },
    launch = { grid = { "cdiv(n, bs)" }, block = { "bs" } },
    args = { { name = "out", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } },
    recording = root .. "/tests/data/float32/kt32.json" }))
  local c, fout, e = T.run("exhaustive " .. d .. "/s.json --no-db --out " .. d .. "/run")
  T.check(c == 0 and fout:find("4 evaluations (4 ok)", 1, true) and fout:find("alpha=0.1 bs=32", 1, true),
          "float32 recording, spec of 0.1 and 0.2: exit %d\n%s%s", c, fout, e)
  os.execute("rm -rf '" .. d .. "'")
end

-- a strategy's patch of two files (the kernel's and the spec's): the files
-- left out came back where an error was read, the candidate was invalid
-- with a table for its log, and a stall message ended in an internal error
do
  local d = T.tmpdir("two-file-patch")
  T.write(d .. "/strat.lua", [=[
local S = { name = "twofile" }
local DIFF = "--- a/transpose.cu\n+++ b/transpose.cu\n@@ -10,3 +10,3 @@\n #ifndef TILE\n-#define TILE 32\n+#define TILE 16\n" ..
             " #endif\n--- a/transpose.json\n+++ b/transpose.json\n@@ -1,1 +1,1 @@\n-{\n+{ \n"
function S.ask(ctx, n) return { { config = ctx.space:first(), patch = DIFF } } end
return S]=])
  local c, _, e = T.run(d .. "/strat.lua specs/transpose.json --budget 3 --no-db -q --out " .. d .. "/run")
  T.check(not e:find("internal error", 1, true) and not e:find("table:", 1, true), "a two-file patch: exit %d\n%s", c, e)
  local ev = T.events(d .. "/run")
  T.check(#ev >= 1 and type(ev[1].result.log) == "string", "the candidate is an evaluation with a sentence for its log")
  os.execute("rm -rf '" .. d .. "'")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
