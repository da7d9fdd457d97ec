-- Interrupts and resumes, found by trying them; each check failed before
-- its fix:
-- * a suite problem killed after its stop event but before results.json
--   and best/ were written was counted done, and never got them;
-- * an events.jsonl holding only a torn first line: kopt says to start
--   again without --resume, which appended to the torn bytes, so the run
--   could never be resumed;
-- * resuming on another device's recording (same file name) mixed two
--   GPUs' measurements without a word;
-- * resuming mcgs with the same command noted "other options" (-2.0 was
--   -2);
-- * an evaluation line edited by hand (no status) ended in an internal error;
-- * a plain --resume of a run extended by --resume --budget N went back to
--   the first budget, and to the default options;
-- * a resumed strategy that asked for other states than before ran past its
--   --budget by the evaluations it did not ask for again, and numbered new
--   evaluations with numbers already on record;
-- * a kill between an evaluation's line and its transition's left that
--   transition out of transitions.jsonl for good (the resume replays the
--   evaluation and wrote no transition for it);
-- * a resumed strategy that failed before asking for anything again ended
--   with "0 evaluations ... nothing measured" over a run with 4 on record;
-- * a resumed run under --time-limit counted only the evaluations' own
--   times, not the run's clock when they were recorded (a GPU's compiles
--   and checks between them), and made more evaluations than the first run;
-- * resuming with another recording of the same file name (another folder)
--   said the first file "has changed since", though it had not;
-- * a resume with one --opt set every other option on record back to its
--   default (and noted them as changed);
-- * the same strategy file resumed from another folder (another path as
--   typed) was noted as another strategy file;
-- * a resume with another number of evaluation slots (KOPT_REPLAY_SLOTS;
--   on a GPU, the compile pool and --gpus) blamed the strategy for not
--   being deterministic; the start event did not record the slots;
-- * a resumed run under --time-limit with several evaluation slots stopped
--   a batch early: each evaluation of a batch is recorded at the clock
--   after the whole batch, and the resume added the batch's other
--   evaluations on top of it.
local T = require("testlib")

local tmp = T.tmpdir("resume-more")
local REC = "tests/data/convolution_A100.json"

-- suite: a finished problem without results.json is resumed, which writes it
do
  local out = tmp .. "/suite"
  local cmd = string.format("suite random specs/convolution.json --backend replay --budget 10 --baselines none " ..
                            "--out %s -q", out)
  local code, _, err = T.run(cmd)
  T.eq(code, 0, "suite: exit code\n" .. err)
  local p = io.popen("ls -d '" .. out .. "'/*/ | head -1")
  local dir = p:read("l"):gsub("/$", "")
  p:close()
  os.execute("rm -rf '" .. dir .. "/results.json' '" .. dir .. "/best'")
  code, _, err = T.run(cmd .. " --resume")
  T.eq(code, 0, "suite --resume: exit code\n" .. err)
  T.check(T.exists(dir .. "/results.json") and T.exists(dir .. "/best/config.json"),
          "suite --resume writes results.json and best/ of a problem killed after its stop event")
end

-- a torn first line: start again, then resume
do
  local dir = tmp .. "/torn"
  os.execute("mkdir -p '" .. dir .. "'")
  T.write(dir .. "/events.jsonl", '{"event":"start","strategy":"random","probl')
  local code, _, err = T.run(string.format("random --backend replay:%s --budget 4 --out %s -q", REC, dir))
  T.eq(code, 0, "a torn first line: started again\n" .. err)
  code, _, err = T.run(string.format("random --backend replay:%s --budget 6 --out %s --resume -q", REC, dir))
  T.eq(code, 0, "a torn first line: the new run resumes\n" .. err)
  T.eq(#(T.events(dir)), 6, "a torn first line: 6 evaluations in the end")
end

-- another device's recording under the same name
do
  local dir, fake = tmp .. "/dev", tmp .. "/fake"
  os.execute("mkdir -p '" .. fake .. "'")
  T.write(fake .. "/convolution_A100.json", T.slurp("tests/data/convolution_A4000.json"))
  T.run(string.format("random --backend replay:%s --budget 4 --out %s -q", REC, dir))
  local code, _, err = T.run(string.format("random --backend replay:%s/convolution_A100.json --budget 8 --out %s " ..
                                           "--resume -q", fake, dir))
  T.eq(code, 2, "another device: refused")
  T.check(err:find("was measured on NVIDIA A100", 1, true) and err:find("RTX A4000", 1, true), "another device: %s", err)
end

-- the same command resumed: no note about options
do
  local dir = tmp .. "/mcgs"
  T.run(string.format("mcgs --backend replay:%s --budget 5 --out %s -q", REC, dir))
  local code, _, err = T.run(string.format("mcgs --backend replay:%s --budget 8 --out %s --resume -q", REC, dir))
  T.eq(code, 0, "mcgs resumed: exit code\n" .. err)
  T.check(not err:find("other options", 1, true), "mcgs resumed with the same options: no note\n%s", err)
end

-- an evaluation line without a status
do
  local dir = tmp .. "/edited"
  T.run(string.format("random --backend replay:%s --budget 4 --out %s -q", REC, dir))
  local lines = {}
  for l in io.lines(dir .. "/events.jsonl") do lines[#lines + 1] = l end
  for i, l in ipairs(lines) do
    if l:find('"event":"eval"', 1, true) then
      lines[i] = l:gsub('"status":"ok"', '"status":null', 1)
      break
    end
  end
  T.write(dir .. "/events.jsonl", table.concat(lines, "\n") .. "\n")
  local code, _, err = T.run(string.format("random --backend replay:%s --budget 6 --out %s --resume -q", REC, dir))
  T.eq(code, 2, "an edited evaluation line: refused")
  T.check(err:find("has no result 'status'", 1, true) and not err:find("internal error", 1, true),
          "an edited evaluation line: %s", err)
end

-- resumed with a smaller budget: the message names the budget, not determinism
do
  local dir = tmp .. "/smaller"
  T.run(string.format("random --backend replay:%s --budget 6 --out %s -q", REC, dir))
  local code, _, err = T.run(string.format("random --backend replay:%s --budget 3 --out %s --resume", REC, dir))
  T.eq(code, 0, "a smaller budget: exit code\n" .. err)
  T.check(err:find("3 evaluations on record lie past this run's budget of 3", 1, true)
          and not err:find("deterministic", 1, true), "a smaller budget: %s", err)
  T.eq(#(T.events(dir)), 6, "a smaller budget: the 6 evaluations stay on record")
end

-- a strategy that asks for other configs when resumed (same budget): the
-- message asks whether it is deterministic, and blames no budget
do
  local dir, strat = tmp .. "/flip", tmp .. "/flip.lua"
  T.write(strat, [[
local S = { name = "flip", options = {} }
function S.ask(ctx, n)
  local list = ctx.space:enumerate()
  if os.getenv("FLIP") == "1" then table.sort(list, function(a, b) return ctx:key(a) > ctx:key(b) end) end
  for _, c in ipairs(list) do if not ctx:lookup(c) then return { { config = c } } end end
  return {}
end
return S
]])
  T.run(string.format("%s --backend replay:%s --budget 6 --out %s -q", strat, REC, dir), "KOPT_TEST_SIGKILL_AFTER=3")
  local code, _, err = T.run(string.format("%s --backend replay:%s --budget 6 --out %s --resume", strat, REC, dir),
                             "FLIP=1")
  T.eq(code, 0, "a strategy that asks for others: exit code\n" .. err)
  T.check(err:find("is it deterministic", 1, true) and not err:find("past this run's budget", 1, true),
          "a strategy that asks for others: %s", err)
  -- the three on record it did not ask for again count against --budget 6
  -- (they were measured), and no evaluation number is used twice
  local ns, seen, dups = {}, {}, 0
  for _, ev in ipairs((T.events(dir))) do
    if ev.event == "eval" then
      ns[#ns + 1] = ev.n
      if seen[ev.n] then dups = dups + 1 end
      seen[ev.n] = true
    end
  end
  T.eq(#ns, 6, "a strategy that asks for others: evaluations on record after a resume under --budget 6")
  T.eq(dups, 0, "a strategy that asks for others: evaluation numbers used twice")
  local t4 = require("cjson").decode(T.slurp(dir .. "/results.json") or "{}")
  T.eq(#(t4.results or {}), 6, "a strategy that asks for others: results in results.json")
end

-- transitions: a run killed right after an evaluation's line (the test hook
-- kills there, before the strategy's tell writes the transition) and
-- resumed has the uninterrupted run's transitions, each once
do
  local function lines(dir)
    local out = {}
    for l in io.lines(dir .. "/transitions.jsonl") do
      local t = require("cjson").decode(l)
      out[#out + 1] = string.format("%s %s>%s %s n=%s %.6g", tostring(t.key), tostring(t.from), tostring(t.to),
                                    tostring(t.status), tostring(t.n), tonumber(t.reward) or 0)
    end
    table.sort(out)
    return out
  end
  local base = string.format("mcgs --backend replay:%s --budget 40 --seed 5 -q", REC)
  T.run(base .. " --out " .. tmp .. "/tr_ref")
  T.run(base .. " --out " .. tmp .. "/tr_kill", "KOPT_TEST_SIGKILL_AFTER=23")
  local killed = #lines(tmp .. "/tr_kill")
  local code, _, err = T.run(base .. " --out " .. tmp .. "/tr_kill --resume")
  T.eq(code, 0, "transitions: the resume\n" .. err)
  T.check(killed < 23, "transitions: the kill came before the transition of evaluation 23 (%d written)", killed)
  T.same_list(lines(tmp .. "/tr_kill"), lines(tmp .. "/tr_ref"), "transitions after kill -9 and --resume")
end

-- a resumed strategy that fails in init(): the summary counts what is on
-- record, and says it was kept
do
  local dir, strat = tmp .. "/boom", tmp .. "/boom.lua"
  T.write(strat, [[
local S = { name = "boom", options = {} }
function S.init(ctx) if os.getenv("BOOM") == "1" then error("boom at start") end end
function S.ask(ctx, n)
  for _, c in ipairs(ctx.space:enumerate()) do if not ctx:lookup(c) then return { { config = c } } end end
  return {}
end
return S
]])
  T.run(string.format("%s --backend replay:%s --budget 4 --out %s -q", strat, REC, dir))
  local code, out, err = T.run(string.format("%s --backend replay:%s --budget 8 --out %s --resume", strat, REC, dir),
                               "BOOM=1")
  T.check(code ~= 0 and err:find("boom at start", 1, true), "boom: the error (exit %d)\n%s", code, err)
  T.check(err:find("4 evaluations on record kept in the results (the strategy stopped with an error", 1, true),
          "boom: the kept evaluations are named: %s", err)
  T.check(out:find("4 evaluations (4 ok)", 1, true) and not out:find("nothing measured", 1, true),
          "boom: the summary counts what is on record:\n%s", out)
end

-- a run extended by `--resume --budget 40` and killed keeps that budget on a
-- plain --resume; a plain --resume keeps the run's --opt values too
do
  local dir = tmp .. "/extend"
  local base = string.format("mcgs --backend replay:%s --out %s -q", REC, dir)
  T.run(base .. " --budget 20 --opt rollout_misses=3")
  T.run(base .. " --resume --budget 40 --opt rollout_misses=3", "KOPT_TEST_SIGKILL_AFTER=30")
  local code, _, err = T.run(base .. " --resume")
  T.eq(code, 0, "a plain resume of an extended run: exit code\n" .. err)
  T.eq(#(T.events(dir)), 40, "a plain resume of an extended run: its budget is the extension's")
  T.check(not err:find("not asked for again", 1, true) and not err:find("other options", 1, true),
          "a plain resume keeps the run's options:\n%s", err)
  local ref = tmp .. "/extend_ref"
  T.run(string.format("mcgs --backend replay:%s --out %s -q --budget 40 --opt rollout_misses=3", REC, ref))
  T.same_list(T.keys(dir), T.keys(ref), "an extended, killed and resumed run: the uninterrupted run's states")
end

-- a resume with one --opt keeps the other options on record
do
  local dir, strat = tmp .. "/opts", tmp .. "/two.lua"
  T.write(strat, [[
local S = { name = "two", options = { a = { default = 1 }, b = { default = 1 } } }
function S.init(ctx) ctx:log("options a=%d b=%d", ctx.options.a, ctx.options.b) end
function S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end
return S
]])
  local base = string.format("%s --backend replay:%s --out %s -q --budget 10", strat, REC, dir)
  T.eq(T.run(base .. " --opt a=5 --opt b=7", "KOPT_TEST_SIGKILL_AFTER=3"), 137, "options: the first run, killed")
  local code, _, err = T.run(base .. " --resume --opt b=7")
  T.eq(code, 0, "options: the resume with one --opt\n" .. err)
  T.check(not err:find("other options", 1, true), "options: b given again as it was: no note\n%s", err)
  local trace = T.slurp(dir .. "/trace.md")
  T.check(not trace:find("options a=1", 1, true), "options: a kept at 5 on resume:\n%s", trace)
  code, _, err = T.run(base .. " --resume --budget 12 --opt b=3")
  T.eq(code, 0, "options: a resume that changes b\n" .. err)
  T.check(err:find("other options: b=3 (was 7)", 1, true) and not err:find("a=", 1, true),
          "options: the note names b alone\n%s", err)
  local last
  for line in io.lines(dir .. "/events.jsonl") do
    local ev = require("cjson").decode(line)
    if ev.event == "resume" then last = ev end
  end
  T.check(last and last.options.a == 5 and last.options.b == 3, "options: the last resume ran with a=5 b=3")
end

-- the same strategy file resumed from another folder
do
  local dir, strat = tmp .. "/elsewhere", tmp .. "/walk.lua"
  T.write(strat, 'local S = { name = "walk" }\nfunction S.ask(ctx, n) return { { config = ctx.space:sample(ctx.rng) } } end\nreturn S\n')
  os.execute("mkdir -p '" .. tmp .. "/sub'")
  T.eq(T.run(string.format("walk.lua --backend replay:%s/%s --out %s -q --budget 20", T.source_dir, REC, dir),
             "KOPT_TEST_SIGKILL_AFTER=5", tmp), 137, "another folder: the first run, killed")
  local code, _, err = T.run(string.format("../walk.lua --backend replay:%s/%s --out %s -q --resume", T.source_dir, REC,
                                           dir), nil, tmp .. "/sub")
  T.eq(code, 0, "another folder: the resume\n" .. err)
  T.check(not err:find("note:", 1, true), "another folder: the same file is no other strategy file\n%s", err)
end

-- another number of evaluation slots: said, and the strategy not blamed
do
  local dir = tmp .. "/slots"
  local base = string.format("mcgs --backend replay:tests/data/pnpoly_RTX_3090.json --out %s --budget 60", dir)
  T.eq(T.run(base .. " -q", "KOPT_REPLAY_SLOTS=4 KOPT_TEST_SIGKILL_AFTER=30"), 137, "slots: the first run, killed")
  local code, _, err = T.run(base:gsub(" %-%-budget 60", "") .. " --resume", "KOPT_REPLAY_SLOTS=2")
  T.eq(code, 0, "slots: the resume\n" .. err)
  T.check(err:find("was run with 4 evaluation slots, this resume has 2", 1, true), "slots: the note\n%s", err)
  T.check(not err:find("is it deterministic", 1, true), "slots: the strategy is not blamed\n%s", err)
  T.check(T.slurp(dir .. "/events.jsonl"):find('"slots":4', 1, true), "slots: the start event records them")
end

-- results a resumed run reads from its log are marked resumed, not only
-- cached: a strategy can tell them from a repeat in this run (synthesis
-- told its writer "the same kernel as an earlier attempt" for each)
do
  local dir, flags = tmp .. "/flags", tmp .. "/flags.txt"
  local strat = tmp .. "/flags.lua"
  T.write(strat, [[
local S = { name = "flags", options = {} }
local asked = 0
function S.ask(ctx, n)
  local list = ctx.space:enumerate()
  asked = asked + 1
  local i = asked
  if i > 6 then return {} end
  -- the third asks the first again: a repeat in this run
  return { { config = i == 3 and list[1] or list[i] } }
end
function S.tell(ctx, results)
  local f = io.open(os.getenv("FLAGS_FILE"), "a")
  for _, r in ipairs(results) do
    f:write(string.format("%s %s\n", r.cached and "cached" or "new", r.resumed and "resumed" or "-"))
  end
  f:close()
end
return S
]])
  local cmd = string.format("%s --backend replay:%s --budget 6 --out %s -q", strat, REC, dir)
  T.run(cmd, "FLAGS_FILE=" .. flags .. " KOPT_TEST_SIGKILL_AFTER=2")
  os.remove(flags)
  local code, _, err = T.run(cmd .. " --resume", "FLAGS_FILE=" .. flags)
  T.eq(code, 0, "flags: the resume\n" .. err)
  local lines = {}
  for l in (T.slurp(flags) or ""):gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(lines[1], "cached resumed", "flags: the first result, read from the log")
  T.eq(lines[2], "cached resumed", "flags: the second result, read from the log")
  T.eq(lines[3], "cached -", "flags: a repeat in this run is cached, not resumed")
  T.eq(lines[4], "new -", "flags: a new measurement")
end

-- the strategy file edited at the same path between the kill and the
-- resume: said (the path alone was compared), so the "not asked for again"
-- note speaks of another strategy, not of a non-deterministic one
do
  local strat, dir = tmp .. "/edit.lua", tmp .. "/edit"
  local function write(draws)
    T.write(strat, "local S = { name = 'edit' }\nfunction S.ask(ctx, n)\n" ..
                   string.rep("  ctx.space:sample(ctx.rng)\n", draws) ..
                   "  return { { config = ctx.space:sample(ctx.rng) } }\nend\nreturn S\n")
  end
  write(0)
  local cmd = string.format("%s --backend replay:%s --budget 10 --no-db --out %s -q", strat, REC, dir)
  T.run(cmd, "KOPT_TEST_SIGKILL_AFTER=5")
  write(1)
  local code, _, err = T.run(cmd .. " --resume")
  T.eq(code, 0, "edited strategy: the resume\n" .. err)
  T.check(err:find("was started with another version of the strategy file", 1, true) and
          not err:find("is it deterministic", 1, true), "the edit is named:\n%s", err)
end

-- lines of events.jsonl edited by hand into valid JSON of the wrong shape:
-- null (an internal error), an ok result of time 0 or -1 (crowned the
-- winner, "infx faster"), an ok result with no time (an internal error), and
-- an ok result for a config outside the space (the winner)
do
  local dir = tmp .. "/shapes"
  local cmd = string.format("random --backend replay:%s --budget 6 --no-db -q --out %s", REC, dir)
  local code = T.run(cmd)
  T.eq(code, 0, "shapes: the run")
  local lines = {}
  for l in io.lines(dir .. "/events.jsonl") do lines[#lines + 1] = l end
  local cjson = require("cjson")
  local ev_at
  for i, l in ipairs(lines) do if not ev_at and l:find('"event":"eval"', 1, true) then ev_at = i end end
  local function with_line(text, want)
    local copy = {}
    for i, l in ipairs(lines) do copy[i] = l end
    copy[ev_at] = text
    T.write(dir .. "/events.jsonl", table.concat(copy, "\n") .. "\n")
    local c, _, e = T.run(cmd .. " --budget 8 --resume")
    T.check(c == 2 and e:find(want, 1, true) and not e:find("internal error", 1, true),
            "%s: exit %d\n%s", text:sub(1, 60), c, e)
  end
  with_line("null", "event " .. ev_at .. " is not a JSON object")
  with_line("7", "event " .. ev_at .. " is not a JSON object")
  with_line("[]", "event " .. ev_at .. " is not a JSON object")
  for _, t in ipairs({ 0, -1 }) do
    local ev = cjson.decode(lines[ev_at])
    ev.result.status, ev.result.time_ms = "ok", t
    with_line(cjson.encode(ev), "an ok result whose 'time_ms' is not a positive time")
  end
  local ev = cjson.decode(lines[ev_at])
  ev.result.status, ev.result.time_ms = "ok", nil
  with_line(cjson.encode(ev), "an ok result whose 'time_ms' is not a positive time")
  ev = cjson.decode(lines[ev_at])
  ev.result.status, ev.result.time_ms, ev.config.block_size_x = "ok", 0.001, 999
  with_line(cjson.encode(ev), "an ok result for a config outside the spec's space")
end

-- a fresh run in a folder whose events.jsonl the user deleted: the old
-- transitions.jsonl was appended to (kopt regraph counted every one twice);
-- and the log as a folder is not spoken of as a --resume
do
  local dir = tmp .. "/deleted_log"
  local cmd = string.format("mcgs --backend replay:%s --budget 20 --no-db -q --out %s", REC, dir)
  T.eq((T.run(cmd)), 0, "deleted log: the first run")
  os.remove(dir .. "/events.jsonl")
  T.eq((T.run(cmd)), 0, "deleted log: the second run")
  local n = 0
  for _ in io.lines(dir .. "/transitions.jsonl") do n = n + 1 end
  local evals = #T.events(dir)
  T.check(n <= evals, "transitions.jsonl holds this run's only: %d lines for %d evaluations", n, evals)
  -- (a folder of the user's, with no kopt run in it: their graph.json stays)
  local mine = tmp .. "/mine"
  os.execute("mkdir -p '" .. mine .. "'")
  T.write(mine .. "/graph.json", '{"mine": 1}')
  T.eq((T.run(string.format("random --backend replay:%s --budget 3 --no-db -q --out %s", REC, mine))), 0, "a run in a user's folder")
  T.eq(T.slurp(mine .. "/graph.json"), '{"mine": 1}', "the user's graph.json is kept")
  os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "/events.jsonl'")
  local c, _, e = T.run(cmd)
  T.check(c == 2 and e:find("cannot read the run's log", 1, true) and not e:find("--resume", 1, true),
          "events.jsonl as a folder on a fresh run: %s", e)
end

-- --time-limit on resume: each eval line carries the run's clock when it was
-- recorded (clock_s), and a resume moves its clock there. Here the first
-- run's clock is set past the limit on its last line, as if the time
-- between evaluations had spent it: the resume stops at once.
do
  local dir = tmp .. "/tlimit"
  local cmd = string.format("random --backend replay:%s --budget 50 --time-limit 100 --out %s -q", REC, dir)
  local code, _, err = T.run(cmd, "KOPT_TEST_SIGKILL_AFTER=5")
  T.check(code ~= 0, "--time-limit: the first run is killed after 5 evaluations\n" .. err)
  local lines = {}
  for line in io.lines(dir .. "/events.jsonl") do lines[#lines + 1] = line end
  local last_eval
  for i, line in ipairs(lines) do if line:find('"event":"eval"', 1, true) then last_eval = i end end
  T.check(lines[last_eval] and lines[last_eval]:find('"clock_s":', 1, true), "an eval line carries clock_s")
  lines[last_eval] = lines[last_eval]:gsub('"clock_s":[-%d.eE+]+', '"clock_s":150')
  T.write(dir .. "/events.jsonl", table.concat(lines, "\n") .. "\n")
  code, _, err = T.run(cmd .. " --resume")
  T.eq(code, 0, "--time-limit: the resume ends\n" .. err)
  T.eq(#T.events(dir), 5, "--time-limit: no evaluation past the first run's clock")
  T.check(T.slurp(dir .. "/events.jsonl"):find('"reason":"time limit"', 1, true), "stopped by the time limit")
end

-- --time-limit with three slots (three ranks' worth of candidates a round):
-- interrupted, then resumed, the run stops where an undisturbed one does,
-- with the same clock on every evaluation.
do
  local cmd = "random --backend replay:" .. REC .. " --budget 400 --time-limit 150 --seed 4 -q --out "
  local whole, parted = tmp .. "/tl_whole", tmp .. "/tl_parted"
  T.eq((T.run(cmd .. whole, "KOPT_REPLAY_SLOTS=3")), 0, "--time-limit, 3 slots: the undisturbed run")
  T.eq((T.run(cmd .. parted, "KOPT_REPLAY_SLOTS=3 KOPT_TEST_SIGINT_AFTER=30")), 130, "--time-limit, 3 slots: interrupted")
  local code, _, err = T.run(cmd .. parted .. " --resume", "KOPT_REPLAY_SLOTS=3")
  T.eq(code, 0, "--time-limit, 3 slots: the resume\n" .. err)
  local a, b = T.events(whole), T.events(parted)
  T.eq(#b, #a, "--time-limit, 3 slots: evaluations of the resumed run")
  for i = 1, math.min(#a, #b) do
    if a[i].key ~= b[i].key or math.abs(a[i].clock_s - b[i].clock_s) > 1e-9 * a[i].clock_s then
      T.check(false, "--time-limit, 3 slots: evaluation %d: %s at %.17g s, undisturbed %s at %.17g s", i, b[i].key,
              b[i].clock_s, a[i].key, a[i].clock_s)
      break
    end
  end
end

-- another recording of the same name: said as another file, not as the
-- first one changed
do
  local cjson = require("cjson")
  local doc = cjson.decode(T.slurp("tests/data/vector_add_A4000.json"))
  os.execute("mkdir -p '" .. tmp .. "/rec1' '" .. tmp .. "/rec2'")
  T.write(tmp .. "/rec1/va.json", cjson.encode(doc))
  for _, e in pairs(doc.cache) do
    if type(e.time) == "number" then e.time = 2 * e.time end
  end
  T.write(tmp .. "/rec2/va.json", cjson.encode(doc))
  local out = tmp .. "/other_rec"
  local code, _, err = T.run(string.format("random --backend replay:%s/rec1/va.json --budget 3 --out %s -q", tmp, out))
  T.eq(code, 0, "another recording: the first run\n" .. err)
  code, _, err = T.run(string.format("random --resume --backend replay:%s/rec2/va.json --budget 6 --out %s -q", tmp, out))
  T.check(code == 2 and err:find("rec2/va.json is another recording", 1, true) ~= nil
          and not err:find("has changed since", 1, true), "resumed with another file of the name (%d): %s", code, err)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
