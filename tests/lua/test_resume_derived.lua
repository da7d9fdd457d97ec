-- A resume whose run folder lost a derived file (docs/DURABILITY.md: they
-- can be lost without harm), each wrong before:
-- * transitions.jsonl deleted: every replayed transition was appended to
--   the user's dataset ($KOPT_EXPERIENCE) a second time (its lines for this
--   run are now found by the run's id, kept in the start event), and the
--   folder's file is written again whole;
-- * regraph.json deleted or garbage: MCGS with expert moves built its graph
--   again from a dataset that held the run's own transitions by then, and
--   silently searched otherwise than the uninterrupted run; it now leaves
--   them out, says so, and the resumed search is the uninterrupted one.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("resume-derived")
local REC = "--backend replay:tests/data/convolution_A100.json -q"

local function per_key(path)
  local count, lines = {}, 0
  for line in io.lines(path) do
    local t = cjson.decode(line)
    count[t.key] = (count[t.key] or 0) + 1
    lines = lines + 1
  end
  return count, lines
end

-- transitions.jsonl deleted before the resume
do
  local exp, d = tmp .. "/dataset.jsonl", tmp .. "/lost_transitions"
  local cmd = string.format("mcgs %s --budget 200 --out %s", REC, d)
  local code = T.run(cmd, "KOPT_EXPERIENCE=" .. exp .. " KOPT_TEST_SIGINT_AFTER=100")
  T.eq(code, 130, "the run, interrupted after 100 evaluations")
  T.eq(select(2, per_key(exp)), 100, "the dataset after it")
  os.remove(d .. "/transitions.jsonl")
  local err, _
  code, _, err = T.run(cmd .. " --resume", "KOPT_EXPERIENCE=" .. exp)
  T.eq(code, 0, "the resume\n" .. err)
  local count, lines = per_key(exp)
  T.eq(lines, 200, "the dataset holds each of the 200 evaluations' transitions")
  local twice = 0
  for _, n in pairs(count) do if n > 1 then twice = twice + 1 end end
  T.eq(twice, 0, "no state's transition twice in the dataset")
  T.eq(select(2, per_key(d .. "/transitions.jsonl")), 200, "the run folder's file written again whole")
end

-- regraph.json deleted, or garbage, before the resume: the uninterrupted search
do
  local learned = tmp .. "/learned.jsonl"
  local opts = REC .. " --opt moves=rules,experts --budget 300"
  T.eq((T.run(string.format("mcgs %s --seed 99 --out %s/learn", opts, tmp), "KOPT_EXPERIENCE=" .. learned)), 0,
       "a run feeds the dataset")
  local function with_copy(name)
    local exp = tmp .. "/" .. name .. ".jsonl"
    os.execute(string.format("cp '%s' '%s'", learned, exp))
    return "KOPT_EXPERIENCE=" .. exp
  end
  local ref = tmp .. "/ref"
  T.eq((T.run(string.format("mcgs %s --out %s", opts, ref), with_copy("ref"))), 0, "the uninterrupted run")
  for _, how in ipairs({ "missing", "garbage" }) do
    local d = tmp .. "/regraph_" .. how
    local env = with_copy(how)
    local cmd = string.format("mcgs %s --out %s", opts, d)
    T.eq((T.run(cmd, env .. " KOPT_TEST_SIGINT_AFTER=150")), 130, how .. ": interrupted after 150 evaluations")
    if how == "missing" then os.remove(d .. "/regraph.json") else T.write(d .. "/regraph.json", '{"x": 1}\n') end
    local code, _, err = T.run(cmd .. " --resume", env)
    T.eq(code, 0, how .. ": the resume\n" .. err)
    T.check(err:find("regraph.json " .. (how == "missing" and "is missing" or "cannot be read"), 1, true) and
            err:find("without this run's own transitions", 1, true), "%s: says the graph was built again:\n%s", how, err)
    T.same_list(T.keys(d), T.keys(ref), how .. ": the uninterrupted run's evaluations")
  end
end
T.done()
