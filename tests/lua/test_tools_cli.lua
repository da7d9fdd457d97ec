-- Small commands and the tools the docs send users to, on input they get
-- wrong. Each check failed before its fix:
-- * `kopt script` of a file returning 256 exited 0 (the shell's status is
--   the value modulo 256), and 1.5 or true exited 0 too;
-- * `kopt regraph RUN RUN` (or the run and its transitions.jsonl) counted
--   every transition twice;
-- * tools/events_summary.py gave span_s null for every run (kopt writes ISO
--   timestamps), and a missing file or --help was a Python traceback;
-- * tools/suite_baselines.py --specs of a missing folder was a traceback;
-- * the smaller ones below, each with its before.
local T = require("testlib")
local cjson = require("cjson")
local tmp = T.tmpdir("tools-cli")

for _, case in ipairs({ { "256", 1 }, { "1.5", 1 }, { "true", 1 }, { "3", 3 }, { "nil", 0 } }) do
  T.write(tmp .. "/r.lua", "return " .. case[1] .. "\n")
  local code = T.run("script " .. tmp .. "/r.lua")
  T.eq(code, case[2], "kopt script returning " .. case[1])
end

local run = tmp .. "/run"
local code, _, err = T.run("mcgs --backend replay:tests/data/convolution_A100.json --budget 20 -q --out " .. run)
T.eq(code, 0, "an mcgs run: " .. err)
for _, args in ipairs({ run .. " " .. run, run .. " " .. run .. "/transitions.jsonl" }) do
  code, _, err = T.run("regraph " .. args)
  T.check(code == 2 and err:find("is given twice", 1, true), "regraph %s: %d %s", args, code, err)
end

local function py(args)
  local out = os.tmpname()
  local ok, _, rc = os.execute(string.format("python3 %s > %s 2>&1", args, out))
  local text = T.slurp(out)
  os.remove(out)
  return ok and 0 or rc, text
end
local rc, text = py("tools/events_summary.py " .. run .. "/events.jsonl")
local doc = rc == 0 and cjson.decode(text) or {}
T.check(type(doc.span_s) == "number" and doc.evaluations == 20, "events_summary: %s", text)
rc, text = py("tools/events_summary.py " .. tmp .. "/missing.jsonl")
T.check(rc ~= 0 and text:find("No such file", 1, true) and not text:find("Traceback", 1, true),
        "events_summary of a missing file: %s", text)
rc, text = py("tools/suite_baselines.py --list --specs " .. tmp .. "/nowhere")
T.check(rc ~= 0 and text:find("not a folder of specs", 1, true) and not text:find("Traceback", 1, true),
        "suite_baselines --specs of a missing folder: %s", text)

-- --config naming a knob twice took the last value without a word
code, _, err = T.run("compile specs/transpose.json --config TILE=32,TILE=16")
T.check(code == 2 and err:find("TILE is given twice", 1, true), "--config with a knob twice: %s", err)

-- kopt db: a problem named by '_' or '%' matched any key (SQL LIKE), and an
-- export to a folder was a write failure (exit 1), not a usage error
local db = tmp .. "/e.db"
code, _, err = T.run("random tests/data/specs/vector_add.json --backend replay:tests/data/vector_add_A4000.json " ..
                     "--budget 3 -q --out " .. tmp .. "/va", "KOPT_DB=" .. db)
T.eq(code, 0, "a run recorded in the database: " .. err)
for _, what in ipairs({ "_", "%", "__" }) do
  code, _, err = T.run("db --db " .. db .. " show '" .. what .. "'")
  T.check(code == 2, "db show '%s' matches no problem: %d %s", what, code, err)
end
code, _, err = T.run("db --db " .. db .. " export 1 -o " .. tmp)
T.check(code == 2 and err:find("expected a file name", 1, true), "db export -o a folder: %d %s", code, err)

-- tools/gen_spaces.py --count 0 wrote nothing and exited 0
rc, text = py("tools/gen_spaces.py " .. tmp .. "/gs --count 0")
T.check(rc ~= 0 and text:find("--count must be 1 or more", 1, true), "gen_spaces --count 0: %s", text)

-- synthesize's numbers have ranges (attempts=-1, temperature=-3 ran)
code, _, err = T.run("synthesize examples/synth/row_softmax.json --opt attempts=-1")
T.check(code == 2 and err:find("--opt attempts", 1, true), "synthesize attempts=-1: %s", err)

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
