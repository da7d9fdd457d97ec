-- The experts strategy end to end through the real binary on a recorded
-- space: offline (heuristic experts), with LLM experts served by
-- tests/llm_server.py in parallel, replayed from the recorded transcript, with
-- every kind of bad reply, with kernel edits that apply and that do not, and
-- with the custom expert from examples/.
local T = require("testlib")
local json = require("kopt.json")

local REC = "tests/data/convolution_A100.json"
local KEY = "sk-experts-test-key-0001"

local function events(dir)
  local out = {}
  for line in T.slurp(dir .. "/events.jsonl"):gmatch("[^\n]+") do
    local ev = json.decode(line)
    if ev then out[#out + 1] = ev end
  end
  return out
end

local function evals(dir)
  local out = {}
  for _, ev in ipairs(events(dir)) do if ev.event == "eval" then out[#out + 1] = ev end end
  return out
end

local function logs(dir)
  local out = {}
  for _, ev in ipairs(events(dir)) do if ev.event == "log" then out[#out + 1] = ev.msg end end
  return out
end

local function by_expert(dir)
  local n = {}
  for _, ev in ipairs(evals(dir)) do
    local e = ev.origin and ev.origin.expert or "?"
    n[e] = (n[e] or 0) + 1
  end
  return n
end

-- 1. Offline: heuristic experts improve on the initial samples.
local d1 = T.tmpdir("experts-offline")
local code, _, err = T.run(string.format("experts --backend replay:%s --out %s/run -q --seed 3", REC, d1))
T.eq(code, 0, "offline run exit code (" .. err .. ")")
local n = by_expert(d1 .. "/run")
for _, e in ipairs({ "throughput", "memory", "robustness" }) do
  T.check((n[e] or 0) > 0, "offline: expert %s measured nothing", e)
end
T.check(not T.exists(d1 .. "/run/llm_transcript.jsonl"), "offline run wrote an LLM transcript")
do
  local first, best = nil, math.huge
  for _, ev in ipairs(evals(d1 .. "/run")) do
    if ev.result.status == "ok" then
      first = first or ev.result.time_ms
      best = math.min(best, ev.result.time_ms)
    end
  end
  T.check(first and best < first * 0.9, "offline: experts did not improve on the first config (%s -> %s)",
          tostring(first), tostring(best))
end

local server, why = require("llm_test_server").start({ key = KEY })
if not server then
  print("LLM parts skipped: " .. why)
  return T.done()
end

local function llm_env(scenario, extra)
  return string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_API_KEY=%s KOPT_LLM_MODEL=test %s", server:base(scenario), KEY,
                       extra or "")
end

-- 2. LLM experts, each answering after 1 s: every iteration takes about 1 s.
local d2 = T.tmpdir("experts-llm")
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/run -q --seed 3 --opt iterations=3", REC, d2),
                     llm_env("delay"))
T.eq(code, 0, "LLM run exit code (" .. err .. ")")
local iters = 0
for _, msg in ipairs(logs(d2 .. "/run")) do
  local secs = msg:match("^iteration %d+: .- in ([%d.]+) s;")
  if secs then
    iters = iters + 1
    T.check(msg:find("(llm)", 1, true), "iteration did not use the LLM: %s", msg)
    T.check(tonumber(secs) >= 0.95 and tonumber(secs) < 2, "three 1-second experts took %s s (not parallel?)", secs)
    print(string.format("iteration with three 1-second LLM experts: %s s", secs))
  end
end
T.eq(iters, 3, "LLM iterations")
local transcript = T.slurp(d2 .. "/run/llm_transcript.jsonl")
local reqs, oks = 0, 0
for line in transcript:gmatch("[^\n]+") do
  local rec = json.decode(line)
  if rec.kind == "request" then reqs = reqs + 1 end
  if rec.kind == "reply" and rec.ok then oks = oks + 1 end
end
T.eq(reqs, 9, "LLM requests in the transcript")
T.eq(oks, 9, "good LLM replies in the transcript")
do
  local leaked = os.execute(string.format("grep -rq -- '%s' %s", KEY, d2))
  T.check(not leaked, "the API key appears in the run directory")
end
local llm_methods = 0
for _, ev in ipairs(evals(d2 .. "/run")) do
  if ev.origin and ev.origin.method == "tile_up" and ev.origin.reason == "test server proposal" then
    llm_methods = llm_methods + 1
  end
end
T.check(llm_methods > 0, "no evaluation came from an LLM proposal")

-- 3. Replay of the transcript, no server: the same evaluations in the same order.
local d3 = T.tmpdir("experts-replay")
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/run -q --seed 3 --opt iterations=3 " ..
                                   "--opt llm_replay=%s/run/llm_transcript.jsonl", REC, d3, d2))
T.eq(code, 0, "transcript replay exit code (" .. err .. ")")
do
  local a, b = evals(d2 .. "/run"), evals(d3 .. "/run")
  T.eq(#b, #a, "replayed evaluations")
  local same = #a == #b
  for i = 1, math.min(#a, #b) do
    if a[i].key ~= b[i].key then same = false end
  end
  T.check(same, "the replayed run evaluated different configurations")
end

-- 4. Bad replies: the run goes on (heuristic fallback), nothing is lost, the
-- transcript says what happened.
local bad = {
  outofrange = "not an allowed value", badschema = "schema", garbage = "parse",
  ["429"] = nil, ["500"] = nil, truncated = "transport", slow = "transport", length = "length",
}
for _, sc in ipairs({ "outofrange", "badschema", "garbage", "429", "500", "truncated", "slow", "length" }) do
  local d = T.tmpdir("experts-" .. sc)
  code, _, err = T.run(string.format("experts --backend replay:%s --out %s/run -q --seed 3 --opt iterations=2 " ..
                                     "--opt llm_timeout=1", REC, d), llm_env(sc, "KOPT_LLM_RETRIES=1"))
  T.eq(code, 0, sc .. ": exit code (" .. err .. ")")
  local ev = evals(d .. "/run")
  T.check(#ev > 4, "%s: only %d evaluations", sc, #ev)
  local text = T.slurp(d .. "/run/llm_transcript.jsonl")
  T.check(#text > 0, "%s: no transcript", sc)
  if bad[sc] then
    local all = text .. table.concat(logs(d .. "/run"), "\n")
    T.check(all:find(bad[sc], 1, true), "%s: neither transcript nor log mentions '%s'", sc, bad[sc])
  end
end

-- 5. Kernel edits on a spec: a diff that applies becomes a patched candidate,
-- one that does not is rejected naming the hunk.
local SPEC = "tests/data/specs/vector_add.json"
local d5 = T.tmpdir("experts-edits")
code, _, err = T.run(string.format("experts %s --backend replay:tests/data/vector_add_A4000.json --out %s/good -q " ..
                                   "--opt edits=on --opt iterations=1 --opt init=1", SPEC, d5), llm_env("gooddiff"))
T.eq(code, 0, "gooddiff exit code (" .. err .. ")")
local patched = 0
for _, ev in ipairs(evals(d5 .. "/good")) do
  if ev.patch then
    patched = patched + 1
    T.check(ev.patch:find("// tuned", 1, true), "the patch lost the edit: %s", ev.patch)
    T.check(ev.key:find("#", 1, true), "a patched state needs its own key: %s", ev.key)
  end
end
T.check(patched > 0, "no patched candidate was evaluated")
-- the run's results.json and an export of its database name the edited
-- kernel's variant (the export wrote it as a plain config, which a replay
-- refused as a duplicate)
code, _, err = T.run(string.format("experts %s --backend replay:tests/data/vector_add_A4000.json --out %s/gooddb -q " ..
                                   "--opt edits=on --opt iterations=1 --opt init=1 --db %s/e.db", SPEC, d5, d5),
                     llm_env("gooddiff"))
T.eq(code, 0, "gooddiff with a database (" .. err .. ")")
code, _, err = T.run(string.format("db --db %s/e.db export vector_add_test -o %s/export.json", d5, d5))
T.eq(code, 0, "db export (" .. err .. ")")
local exported = require("cjson").decode(T.slurp(d5 .. "/export.json"))
local variants = 0
for _, r in ipairs(exported.results or {}) do if r.variant then variants = variants + 1 end end
T.check(variants > 0, "the export names the edited kernel's variant")
code, _, err = T.run(string.format("experts %s --backend replay:tests/data/vector_add_A4000.json --out %s/bad -q " ..
                                   "--opt edits=on --opt iterations=1 --opt init=1", SPEC, d5), llm_env("baddiff"))
T.eq(code, 0, "baddiff exit code (" .. err .. ")")
T.check(table.concat(logs(d5 .. "/bad"), "\n"):find("does not apply: hunk 1", 1, true),
        "a diff that does not apply must be logged naming its hunk")

-- 6. Resume: the resumed run answers the questions it asked before from its
-- own transcript (the endpoint is now dead), so it proposes the same states
-- and measures nothing twice; later iterations fall back to the heuristics.
local d7 = T.tmpdir("experts-resume")
local args7 = string.format("experts --backend replay:%s --out %s/run -q --seed 5 --opt iterations=6 --opt patience=6",
                            REC, d7)
code, _, err = T.run(args7 .. " --budget 12", llm_env("ok"))
T.eq(code, 0, "resume: first part exit code (" .. err .. ")")
local first_part = evals(d7 .. "/run")
local dead = "KOPT_LLM_BASE_URL=http://127.0.0.1:1/v1 KOPT_LLM_RETRIES=0"
code, _, err = T.run(args7 .. " --budget 30 --resume", dead)
T.eq(code, 0, "resume: second part exit code (" .. err .. ")")
do
  local all = evals(d7 .. "/run")
  local seen, twice = {}, 0
  for _, ev in ipairs(all) do
    if seen[ev.key] then twice = twice + 1 end
    seen[ev.key] = true
  end
  T.eq(twice, 0, "resume: states measured twice")
  T.check(#all > #first_part, "resume: nothing new was measured (%d then %d)", #first_part, #all)
  local from_transcript, fell_back = 0, 0
  local resumed = false
  for _, ev in ipairs(events(d7 .. "/run")) do
    if ev.event == "resume" then resumed = true end
    if resumed and ev.event == "log" and ev.msg:match("^iteration %d+: ") then
      if ev.msg:find("(llm)", 1, true) then from_transcript = from_transcript + 1 end
      if ev.msg:find("(heuristic)", 1, true) then fell_back = fell_back + 1 end
    end
  end
  T.check(from_transcript > 0, "resume: no iteration was answered from the transcript")
  T.check(fell_back > 0, "resume: no iteration went past the transcript")
end

-- The same resume with no endpoint at all: the transcript alone answers
-- what it holds (before, every iteration went to the heuristics, and the
-- run proposed other states than the interrupted one did).
local d8 = T.tmpdir("experts-resume-offline")
local args8 = string.format("experts --backend replay:%s --out %s/run -q --seed 5 --opt iterations=6 --opt patience=6",
                            REC, d8)
code, _, err = T.run(args8 .. " --budget 12", llm_env("ok"))
T.eq(code, 0, "offline resume: first part exit code (" .. err .. ")")
local transcript_before = T.slurp(d8 .. "/run/llm_transcript.jsonl")
code, _, err = T.run(args8 .. " --budget 30 --resume", "KOPT_LLM_BASE_URL=")
T.eq(code, 0, "offline resume: second part exit code (" .. err .. ")")
do
  local from_transcript = 0
  local resumed = false
  for _, ev in ipairs(events(d8 .. "/run")) do
    if ev.event == "resume" then resumed = true end
    if resumed and ev.event == "log" and ev.msg:match("^iteration %d+: ") and ev.msg:find("(llm)", 1, true) then
      from_transcript = from_transcript + 1
    end
  end
  T.check(from_transcript > 0, "offline resume: no iteration was answered from the transcript")
  T.eq(T.slurp(d8 .. "/run/llm_transcript.jsonl"), transcript_before, "offline resume: the transcript was rewritten")
end

-- 9. MCGS's default moves (rules,heuristics) ask the experts' heuristics and
-- never the LLM the environment configures; moves=rules,experts asks it.
local d9 = T.tmpdir("experts-default-offline")
local mcgs9 = string.format("mcgs --backend replay:%s -q --seed 3 --budget 60", REC)
code, _, err = T.run(string.format("%s --out %s/default", mcgs9, d9), llm_env("ok"))
T.eq(code, 0, "default MCGS with an LLM configured, exit code (" .. err .. ")")
T.check(not T.exists(d9 .. "/default/llm_transcript.jsonl"), "MCGS's default moves asked the LLM")
code, _, err = T.run(string.format("%s --opt moves=rules,experts --out %s/experts", mcgs9, d9), llm_env("ok"))
T.eq(code, 0, "MCGS with moves=rules,experts, exit code (" .. err .. ")")
T.check(T.exists(d9 .. "/experts/llm_transcript.jsonl"), "moves=rules,experts did not ask the configured LLM")
-- killed and resumed, moves=rules,experts answers from its transcript first:
-- no request is sent twice (they were, before: the resume paid again and
-- took another path)
do
  local function requests(dir)
    local count = 0
    for line in (T.slurp(dir .. "/llm_transcript.jsonl") or ""):gmatch("[^\n]+") do
      if json.decode(line).kind == "request" then count = count + 1 end
    end
    return count
  end
  local base = string.format("%s --opt moves=rules,experts --out %s/killed", mcgs9, d9)
  T.run(base, llm_env("ok", "KOPT_TEST_SIGKILL_AFTER=45"))
  code, _, err = T.run(base .. " --resume", llm_env("ok"))
  T.eq(code, 0, "moves=rules,experts resumed, exit code (" .. err .. ")")
  T.eq(requests(d9 .. "/killed"), requests(d9 .. "/experts"), "moves=rules,experts: requests after a kill and a resume")
  T.check(not err:find("not asked for again", 1, true), "moves=rules,experts: the resumed run took another path: %s", err)
end
code, _, err = T.run(string.format("compare --strategies mcgs --spaces %s --seeds 2 --budgets 100 --out %s/cmp -q",
                                   REC, d9), llm_env("ok"))
T.eq(code, 0, "compare exit code (" .. err .. ")")
do
  local st = json.decode(T.slurp(d9 .. "/cmp/benchmark.json")).spaces[1].strategies
  local calls
  for _, s in ipairs(st) do if s.name == "mcgs" then calls = s.stats.expert_calls end end
  T.check((calls or 0) > 0, "the default's heuristic experts were not asked (expert_calls %s)", tostring(calls))
end

-- replies that parse but hold no proposals are counted in the summary's
-- LLM line (it said "0 failed" while every reply fell back)
do
  local dnp = T.tmpdir("experts-noprops")
  local c9, out9, e9 = T.run(string.format("mcgs --backend replay:tests/data/vector_add_A4000.json --opt moves=rules,experts " ..
                                           "--budget 20 --out %s/run", dnp), llm_env("badschema"))
  T.eq(c9, 0, "badschema under mcgs: exit code (" .. e9 .. ")")
  T.check(out9:find("answered without proposals", 1, true), "the LLM line counts replies without proposals:\n%s", out9)
  T.check(out9:find("; throughput %d+") ~= nil, "the LLM line splits tokens per expert under mcgs:\n%s", out9)
end

server:stop()

-- 7. A custom expert from a file, and an unknown one.
local d6 = T.tmpdir("experts-custom")
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/run -q " ..
                                   "--opt experts=memory,examples/experts/blocksize.lua", REC, d6))
T.eq(code, 0, "custom expert exit code (" .. err .. ")")
T.check((by_expert(d6 .. "/run").blocksize or 0) > 0, "the example expert measured nothing")
-- The same expert dropped into a folder on the Lua path, named by name.
assert(os.execute(string.format("mkdir -p %s/lib/kopt/experts && " ..
                                "cp examples/experts/blocksize.lua %s/lib/kopt/experts/", d6, d6)))
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/bypath -q --opt experts=robustness,blocksize",
                                   REC, d6), string.format("LUA_PATH='%s/lib/?.lua;;'", d6))
T.eq(code, 0, "expert on the Lua path exit code (" .. err .. ")")
T.check((by_expert(d6 .. "/bypath").blocksize or 0) > 0, "the expert found on the Lua path measured nothing")
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/x -q --opt experts=wizard", REC, d6))
T.eq(code, 2, "unknown expert exit code")
T.check(err:find("unknown expert 'wizard'", 1, true), "unknown expert message: %s", err)

-- A custom expert whose heuristic returns malformed moves: each is rejected
-- with its reason in trace.md, and the run goes on (a string for a move
-- stopped it; a value outside a knob's list vanished without a word)
do
  local bad_file = d6 .. "/bad_expert.lua"
  T.write(bad_file, [[
local E = { name = "bad", description = "malformed moves" }
function E.heuristic(view, rng)
  return { "not a table", { changes = "nope", method = "x" }, { changes = { block_size_x = 123457 }, method = "y" },
           { changes = { nope = 1 }, method = "z" } }
end
function E.prompt() return "" end
return E
]])
  code, _, err = T.run(string.format("experts --backend replay:%s --out %s/bad -q --budget 10 --opt experts=%s", REC, d6, bad_file))
  T.eq(code, 0, "a custom expert with malformed moves: exit code (" .. err .. ")")
  local trace = T.slurp(d6 .. "/bad/trace.md") or ""
  for _, want in ipairs({ "proposal 1 rejected: not a table", "proposal 2 rejected: changes: expected a table",
                          "proposal 3 rejected: block_size_x=123457 is not one of the knob's values",
                          "proposal 4 rejected: 'nope' is not a knob" }) do
    T.check(trace:find(want, 1, true), "malformed heuristic moves: trace.md lacks '%s'", want)
  end
end

-- 8. Experts as move generators in another strategy.
code, _, err = T.run(string.format("rules --backend replay:%s --out %s/rules -q --budget 40 --opt moves=rules,experts",
                                   REC, d6))
T.eq(code, 0, "rules with expert moves exit code (" .. err .. ")")
do
  local n8 = by_expert(d6 .. "/rules")
  T.check((n8.throughput or 0) + (n8.memory or 0) + (n8.robustness or 0) > 0,
          "no evaluation of the rules strategy came from an expert move")
end

return T.done()
