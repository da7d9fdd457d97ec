-- An endpoint that cannot serve a run is not asked again (kopt.llm
-- Client:watch): a refused key (HTTP 401) turns the LLM off after its first
-- batch; an endpoint down (503 on every request, after the retries) or a
-- model unknown (404) after DEAD_BATCHES batches in a row. Either way the run goes on with the
-- experts' heuristics, says so once on stderr, and its summary and
-- results.json say why. The same under MCGS with moves=experts, whose
-- summary said nothing of the LLM before. A resumed run replays its
-- recorded failures without acting on them: its live requests decide, so
-- one resumed after the key was fixed asks the endpoint again, and one
-- resumed with the same refused key goes off after one live batch.
local T = require("testlib")
local json = require("kopt.json")

local REC = "tests/data/convolution_A100.json"
local KEY = "sk-breaker-test"
local server, why = require("llm_test_server").start({ key = KEY })
if not server then
  print("skipped: " .. why)
  return 77
end
local function env(scenario)
  return string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_API_KEY=%s KOPT_LLM_MODEL=test", server:base(scenario), KEY)
end
local function requests(dir)
  local n = 0
  for line in io.lines(dir .. "/llm_transcript.jsonl") do
    if json.decode(line).kind == "request" then n = n + 1 end
  end
  return n
end
local tmp = T.tmpdir("breaker")

-- a refused key: one batch (three experts), then off
local code, out, err = T.run(string.format("experts --backend replay:%s --out %s/key --opt iterations=5", REC, tmp),
                             env("keyerr"))
T.eq(code, 0, "keyerr: the run goes on with the heuristics (" .. err .. ")")
T.eq(requests(tmp .. "/key"), 3, "keyerr: requests before the LLM went off")
local _, n_lines = err:gsub("the LLM is off for the rest of the run", "")
T.eq(n_lines, 1, "keyerr: said once on stderr:\n" .. err)
T.check(err:find("HTTP 401", 1, true) and err:find("the key was refused", 1, true), "keyerr: why:\n%s", err)
T.check(not err:find(KEY, 1, true), "keyerr: the key is not printed")
T.check(out:find("off since: HTTP 401", 1, true), "keyerr: the summary says why:\n%s", out)
local res = json.decode(T.slurp(tmp .. "/key/results.json"))
T.check(res.metadata.llm and res.metadata.llm.off and res.metadata.llm.off:find("HTTP 401", 1, true),
        "keyerr: results.json's llm.off")

-- resumed with more iterations and the same refused key: the recorded
-- failures replayed, one live batch refused again, then off
code, out, err = T.run(string.format("experts --backend replay:%s --out %s/key --resume --opt iterations=7", REC,
                                     tmp), env("keyerr"))
T.eq(code, 0, "keyerr resumed (" .. err .. ")")
T.eq(requests(tmp .. "/key"), 6, "keyerr resumed: one live batch, then off")
_, n_lines = err:gsub("the LLM is off for the rest of the run", "")
T.eq(n_lines, 1, "keyerr resumed: said once on stderr:\n" .. err)
T.check(out:find("LLM: 6 requests, 6 failed", 1, true), "keyerr resumed: the summary:\n%s", out)

-- a wrong key, then resumed with the right one (and another URL): the
-- recorded refusals do not keep the fixed endpoint off
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/fixed --opt iterations=3", REC, tmp),
                     string.format("KOPT_LLM_BASE_URL=%s KOPT_LLM_API_KEY=sk-wrong KOPT_LLM_MODEL=test",
                                   server:base("ok")))
T.check(code == 0 and err:find("the key was refused", 1, true), "wrong key: off (%s)", err)
code, out, err = T.run(string.format("experts --backend replay:%s --out %s/fixed --resume --opt iterations=5 " ..
                                     "--opt patience=100", REC, tmp), env("ok"))
T.eq(code, 0, "key fixed, resumed (" .. err .. ")")
T.check(not err:find("the LLM is off", 1, true), "key fixed: not off:\n%s", err)
T.check(requests(tmp .. "/fixed") > 3, "key fixed: the endpoint is asked again")
T.check(out:find("LLM: %d+ requests, 3 failed") and not out:find("off since", 1, true),
        "key fixed: only the recorded refusals failed:\n%s", out)

-- an endpoint down: DEAD_BATCHES batches of failures, then off
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/down --opt iterations=6 --opt llm_timeout=5",
                                   REC, tmp), env("down503"))
T.eq(code, 0, "down503: the run goes on (" .. err .. ")")
T.eq(requests(tmp .. "/down"), 9, "down503: three batches of three requests, then off")
T.check(err:find("3 batches in a row failed without an answer", 1, true), "down503: why:\n%s", err)

-- a model unknown (404: also what a gateway says with no provider for a
-- request): three batches, then off
code, _, err = T.run(string.format("experts --backend replay:%s --out %s/nomodel --opt iterations=6", REC, tmp),
                     env("nomodel404"))
T.eq(code, 0, "nomodel404: the run goes on (" .. err .. ")")
T.eq(requests(tmp .. "/nomodel"), 9, "nomodel404: three batches, then off")
T.check(err:find("does not exist", 1, true), "nomodel404: the server's words:\n%s", err)

-- MCGS with the experts' moves: the same breaker, and the summary says it
code, out, err = T.run(string.format("mcgs --backend replay:%s --out %s/mcgs --budget 60 --opt moves=rules,experts", REC,
                                     tmp), env("keyerr"))
T.eq(code, 0, "mcgs keyerr (" .. err .. ")")
T.eq(requests(tmp .. "/mcgs"), 3, "mcgs keyerr: requests before the LLM went off")
T.check(out:find("LLM: 3 requests, 3 failed", 1, true) and out:find("off since: HTTP 401", 1, true),
        "mcgs keyerr: the summary's LLM line:\n%s", out)

server:stop()
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
