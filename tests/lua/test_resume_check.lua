-- What --resume refuses before it replays a record (kopt.resume_check),
-- each accepted before, with the run going on from a broken record:
-- * evaluation lines edited by hand: a line twice (its number and its
--   state on record twice; results.json then held one evaluation less than
--   the log), a line without "n" (the numbers after it shifted), "n" as a
--   string, negative, fractional or past the count on record (10^12: the
--   next evaluation took 10^12 + 1; 10^18 and 10^20, which JSON readers
--   take as floats, were "no whole number"), a status no backend gives, a
--   key that is not its config's; each named with its line number;
-- * a spec whose knobs were edited in what the problem digest leaves out:
--   a default (the baseline changed mid-run, and kopt blamed the strategy
--   for not asking again), tags emptied (the moves changed silently);
--   their help text is documentation and still resumes.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("resume-check")
local REC = "tests/data/convolution_A100.json"

-- a record of 30 evaluations, edited by hand in copies
local base = tmp .. "/base"
local code, _, err = T.run(string.format("random --backend replay:%s --budget 30 --no-db --out %s -q", REC, base),
                           "KOPT_TEST_SIGKILL_AFTER=30")
T.eq(code, 137, "the first run, killed after 30 evaluations\n" .. err)
local lines = {}
for line in io.lines(base .. "/events.jsonl") do lines[#lines + 1] = line end
local first_eval
for i, line in ipairs(lines) do
  if not first_eval and line:find('"event":"eval"', 1, true) then first_eval = i end
end
T.check(first_eval ~= nil, "the record has evaluations")

local function resume_edited(what, edit, want)
  local d = tmp .. "/" .. what:gsub("%W", "_")
  os.execute(string.format("rm -rf '%s' && cp -r '%s' '%s'", d, base, d))
  local copy = {}
  for i, line in ipairs(lines) do copy[i] = line end
  local at = edit(copy)
  T.write(d .. "/events.jsonl", table.concat(copy, "\n") .. "\n")
  local c, _, e = T.run(string.format("random --backend replay:%s --budget 40 --no-db --out %s -q --resume", REC, d))
  T.eq(c, 2, what .. ": the resume is refused\n" .. e)
  T.check(e:find(string.format("events.jsonl: event %d, an evaluation, has ", at), 1, true) and
          e:find(want, 1, true), "%s: names line %d and says %q:\n%s", what, at, want, e)
  T.one_sentence(e, what)
end

-- one evaluation line's fields changed (line 5 after the first evaluation)
local function field(name, value)
  return function(copy)
    local at = first_eval + 4
    local ev = cjson.decode(copy[at])
    if name == "status" then ev.result.status = value else ev[name] = value end
    copy[at] = cjson.encode(ev)
    return at
  end
end

resume_edited("a line twice", function(copy)
  table.insert(copy, first_eval + 10, copy[first_eval + 9])
  return first_eval + 10
end, "the number n=10 of event " .. (first_eval + 9) .. " too")
resume_edited("no n", field("n", nil), "no number 'n'")
resume_edited("n null", field("n", cjson.null), "the number n=null")
resume_edited("n a string", field("n", "5"), "the number n=\"5\"")
resume_edited("n negative", field("n", -3), "the number n=-3")
resume_edited("n fractional", field("n", 10.5), "the number n=10.5")
resume_edited("n huge", field("n", 10 ^ 12 // 1), "past the 30 evaluations on record")
-- whole numbers past 2^53, as written in the line
local function n_written(text)
  return function(copy)
    local at = field("n", "N")(copy)
    copy[at] = copy[at]:gsub('"n":"N"', '"n":' .. text)
    return at
  end
end
resume_edited("n 10^18", n_written("1000000000000000000"),
              "the number n=1000000000000000000, past the 30 evaluations on record")
resume_edited("n 10^20", n_written("100000000000000000000"), "the number n=1e+20, past the 30 evaluations on record")
resume_edited("a status of no backend", field("status", "weird"), "the result status 'weird'")
resume_edited("a key of another config", function(copy)
  local at = first_eval + 4
  local ev = cjson.decode(copy[at])
  ev.key = ev.key:gsub("^%d+", "1")
  copy[at] = cjson.encode(ev)
  return at
end, "which is not its config's")

-- the unedited record resumes
code, _, err = T.run(string.format("random --backend replay:%s --budget 40 --no-db --out %s -q --resume", REC, base))
T.eq(code, 0, "the unedited record resumes\n" .. err)

-- a spec's knobs edited in their default, tags or help
do
  local d = tmp .. "/knobs"
  os.execute(string.format("mkdir -p '%s' && cp tests/data/specs/vector_add.json tests/data/specs/vector_add.cu '%s'/",
                           d, d))
  local spec_path = d .. "/vector_add.json"
  local text = T.slurp(spec_path)
  local run_cmd = string.format("random %s --backend replay:tests/data/vector_add_A4000.json --budget 8 --no-db " ..
                                "--out %s/run -q", spec_path, d)
  code = T.run(run_cmd, "KOPT_TEST_SIGKILL_AFTER=3")
  T.eq(code, 137, "the first run is killed after 3 evaluations")
  local function edited(from, to, what, refused)
    local new = text:gsub(from, to)
    T.check(new ~= text, "%s: the spec is edited", what)
    T.write(spec_path, new)
    local c, _, e = T.run(run_cmd .. " --resume")
    if refused then
      T.check(c == 2 and e:find("the spec's knobs (a default, tags, compiler options or define) have changed", 1, true),
              "--resume after %s is refused: %d %s", what, c, e)
    else
      T.eq(c, 0, "--resume after " .. what .. " goes on\n" .. e)
    end
    T.write(spec_path, text)
  end
  edited('"tags": %["block"%]', '"default": 256, "tags": ["block"]', "a new default", true)
  edited('"tags": %["block"%]', '"tags": []', "tags emptied", true)
  edited('"tags": %["block"%]', '"tags": ["block"], "help": "threads per block"', "a help text", false)
end
T.done()
