-- Replies shaped the way real models answer, through the real binary
-- (`kopt experts SPEC --backend replay:...`, edits on), served by
-- tests/llm_server.py: partial knob sets with unknown keys, unified diffs with
-- wrong line numbers / no headers / fenced / CRLF / no trailing newline / the
-- prompt's trailing blank line removed, search/replace blocks, whole-kernel
-- replies, host code smuggled into a whole kernel, JSON in prose with
-- trailing commas, 200 KB of nested brackets, and a server that stalls
-- mid-body. Every edit that should apply is measured as a patched state;
-- every rejection is in the run's log with its reason, and in -v output.
local T = require("testlib")
local json = require("kopt.json")

local SPEC = "tests/data/specs/vector_add.json"
local REC = "tests/data/vector_add_A4000.json"

local server, why = require("llm_test_server").start({})
if not server then
  print("skipped: " .. why)
  os.exit(77)
end

local function run(scenario, extra, env)
  local d = T.tmpdir("shape-" .. scenario)
  local code, out, err = T.run(string.format("experts %s --backend replay:%s --out %s/run -v --opt edits=on " ..
                                             "--opt iterations=1 --opt init=1 --opt repairs=0 %s",
                                             SPEC, REC, d, extra or ""),
                               string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_MODEL=test %s", server:base(scenario),
                                             env or ""))
  T.eq(code, 0, scenario .. ": exit code (" .. err .. ")")
  local evals, logs = {}, {}
  for line in T.slurp(d .. "/run/events.jsonl"):gmatch("[^\n]+") do
    local ev = json.decode(line)
    if ev and ev.event == "eval" then evals[#evals + 1] = ev end
    if ev and ev.event == "log" then logs[#logs + 1] = ev.msg end
  end
  return evals, table.concat(logs, "\n"), err, out, d .. "/run"
end

local function fast_edits(evals)
  local n = 0
  for _, ev in ipairs(evals) do
    if ev.patch and ev.patch:find("__fadd_rn(a[i], b[i])", 1, true) then
      T.check(ev.key:find("#", 1, true), "a patched state needs its own key: %s", ev.key)
      n = n + 1
    end
  end
  return n
end

-- Edits that must apply, one scenario each.
for _, sc in ipairs({ "e_wronglines", "e_noheader", "e_fenced", "e_crlf", "e_nonewline", "e_blankend",
                      "e_searchreplace", "e_source", "e_prose" }) do
  local evals, log = run(sc)
  T.check(fast_edits(evals) >= 1, "%s: the edit was not applied and measured; log:\n%s", sc, log)
end

-- Habits of other models: a draft answer inside a reasoning block (the
-- final one counts, the draft is never measured), a multi-line patch with
-- raw newlines in its JSON string after prose, a whole source quoted before
-- and after (~~~ fence), a diff fenced inside a list item, an `edits` list
-- of old_str/new_str pairs.
for _, sc in ipairs({ "e_think", "e_rawnl", "e_twofence", "e_listfence", "e_edits_alias" }) do
  local evals, log = run(sc)
  T.check(fast_edits(evals) >= 1, "%s: the edit was not applied and measured; log:\n%s", sc, log)
  for _, ev in ipairs(evals) do
    T.check(not (ev.patch and ev.patch:find("a[i] - b[i]", 1, true)), "%s: the draft edit was measured", sc)
  end
end

-- The same edit twice, the second re-indented: measured once (it was
-- measured twice, under two keys).
do
  local evals, log = run("e_dup_indent", "--opt per_expert=2")
  T.eq(fast_edits(evals), 1, "e_dup_indent: one measurement of the edit; log:\n" .. log)
  T.check(log:find("the same code but for white space", 1, true), "e_dup_indent: the second is said:\n%s", log)
end

-- "patch": "None" is no edit: the knob change is measured, no edit fails.
do
  local evals, log = run("e_nopatch_word")
  local knob_only = 0
  for _, ev in ipairs(evals) do
    if ev.origin and ev.origin.reason == "knob only" and not ev.patch then knob_only = knob_only + 1 end
  end
  T.check(knob_only >= 1, "e_nopatch_word: the knob change was not measured; log:\n%s", log)
  T.check(not log:find("edit rejected", 1, true), "e_nopatch_word: 'None' was taken as an edit:\n%s", log)
end

-- A reply that holds no proposals list ("see [1]") is a failed reply: the
-- heuristics answer that iteration, and the log says why.
do
  local evals, log = run("e_noproposals")
  T.check(log:find("parse: no proposals list", 1, true), "e_noproposals: no fallback logged:\n%s", log)
  T.check(#evals >= 2, "e_noproposals: the heuristics did not take over")
end

-- The edit format the prompt asks for follows the option.
do
  local _, _, _, _, d = run("e_searchreplace", "--opt edit_format=search_replace")
  local tr = T.slurp(d .. "/llm_transcript.jsonl")
  T.check(tr:find("<<<<<<< SEARCH", 1, true), "edit_format=search_replace: the prompt does not ask for blocks")
end

-- Host code inside a whole-kernel reply is refused, with its reason.
do
  local evals, log, err = run("e_host")
  T.eq(fast_edits(evals), 0, "e_host: the smuggled kernel was measured")
  T.check(log:find("edit rejected: line %d+ adds a main function"), "e_host: no reason in the log:\n%s", log)
  T.check(err:find("adds a main function", 1, true), "e_host: the rejection is not in -v output")
end

-- Partial knob sets: measured; the unknown key and knob are noted, not fatal.
do
  local evals, log, err = run("partial")
  local from_llm = 0
  for _, ev in ipairs(evals) do
    if ev.origin and ev.origin.reason == "test server proposal" then from_llm = from_llm + 1 end
  end
  T.check(from_llm >= 1, "partial: no proposal naming only its changed knobs was measured; log:\n%s", log)
  T.check(log:find("ignored unknown key 'confidence', knob 'NOT_A_KNOB'", 1, true), "partial: not noted:\n%s", log)
  T.check(err:find("ignored unknown", 1, true), "partial: the note is not in -v output")
end

-- 200 KB of nested brackets: rejected at once, the run goes on.
do
  local evals, log = run("nested")
  local secs = tonumber(log:match("iteration 1: .- in ([%d.]+) s;"))
  T.check(secs and secs < 5, "nested: the iteration took %s s", tostring(secs))
  T.check(log:find("no JSON object found", 1, true), "nested: no reason logged:\n%s", log)
  T.check(#evals >= 2, "nested: the heuristics did not take over")
end

-- A server that stalls mid-body: cut by the deadline, shown while waiting.
do
  local evals, log, err = run("stall", "--opt llm_timeout=1 --opt llm_deadline=2", "KOPT_LLM_RETRIES=5")
  local secs = tonumber(log:match("iteration 1: .- in ([%d.]+) s;"))
  T.check(secs and secs < 8, "stall: the iteration took %s s (deadline 2 s)", tostring(secs))
  T.check(log:find("transport", 1, true), "stall: no transport failure logged:\n%s", log)
  T.check(err:find("asking 3 LLM experts", 1, true), "stall: the wait is not shown: %s", err)
  T.check(#evals >= 2, "stall: the heuristics did not take over")
end

-- Tokens: per expert and per run in the summary and results.json; the
-- run's token budget stops the asking (120 tokens a reply, 3 experts).
do
  local evals, log, _, out, d = run("ok", "--opt iterations=3 --opt patience=3 --opt llm_max_tokens=300")
  T.check(out:find("LLM: 3 requests, 0 failed, 360 tokens (300 prompt, 60 completion); throughput 120, " ..
                   "memory 120, robustness 120", 1, true), "tokens: summary line missing:\n%s", out)
  T.check(log:find("LLM token budget spent (360 of 300 tokens)", 1, true), "tokens: budget not logged:\n%s", log)
  local res = json.decode(T.slurp(d .. "/results.json"))
  local llm_meta = res and res.metadata and res.metadata.llm
  T.check(llm_meta and llm_meta.total_tokens == 360 and llm_meta.experts.memory.total_tokens == 120,
          "tokens: results.json metadata.llm")
  T.check(#evals > 3, "tokens: the heuristics did not go on")
end

-- Resume: the edited variants come back from the run's own transcript
-- (the endpoint is dead by then), measured once, never asked again.
do
  local d = T.tmpdir("shape-resume")
  local args = string.format("experts %s --backend replay:%s --out %s/run -q --opt edits=on --opt iterations=4 " ..
                             "--opt patience=4 --opt init=2 --seed 2", SPEC, REC, d)
  local code, _, err = T.run(args .. " --budget 4", "KOPT_LLM_BASE_URL=" .. server:base("e_wronglines"))
  T.eq(code, 0, "resume: first part (" .. err .. ")")
  code, _, err = T.run(args .. " --budget 12 --resume", "KOPT_LLM_BASE_URL=http://127.0.0.1:1/v1 KOPT_LLM_RETRIES=0")
  T.eq(code, 0, "resume: second part (" .. err .. ")")
  local seen, twice, patched, resumed, from_transcript = {}, 0, 0, false, 0
  for line in T.slurp(d .. "/run/events.jsonl"):gmatch("[^\n]+") do
    local ev = json.decode(line)
    if ev.event == "resume" then resumed = true end
    if ev.event == "eval" then
      if seen[ev.key] then twice = twice + 1 end
      seen[ev.key] = true
      if ev.patch then patched = patched + 1 end
    end
    if resumed and ev.event == "log" and ev.msg:match("^iteration %d+: ") and ev.msg:find("(llm)", 1, true) then
      from_transcript = from_transcript + 1
    end
  end
  T.eq(twice, 0, "resume: states measured twice")
  T.check(patched >= 1, "resume: no edited variant on record")
  T.check(from_transcript >= 1, "resume: no iteration answered from the transcript")
end

server:stop()
return T.done()
