-- ReGraph online: MCGS with expert moves (the heuristic experts, on replay)
-- builds the transition graph of earlier runs itself at the start of a run,
-- from $KOPT_EXPERIENCE (no `kopt regraph` step), and uses it as the expert
-- moves' priors; --opt regraph=off turns it off, --opt regraph=FILE names
-- the transitions; regraph_filter=on keeps, at each expansion, the methods
-- that have followed the state's own method with a speedup. The graph a run
-- used is kept in its folder, and a resumed run reads it back (its own
-- transitions joined the dataset meanwhile).
local T = require("testlib")
local cjson = require("cjson")
local experience = require("kopt.experience")

local tmp = T.tmpdir("regraph-online")
local exp = tmp .. "/experience.jsonl"
local space = "--backend replay:tests/data/convolution_A100.json -q --opt moves=rules,experts"
local function lines(path)
  local n = 0
  for _ in io.lines(path) do n = n + 1 end
  return n
end
local function digest(dir) return cjson.decode(T.slurp(dir .. "/graph.json")).digest end

-- 1. Two runs feed the user's dataset.
for s = 1, 2 do
  T.eq((T.run(string.format("mcgs %s --budget 60 --seed %d --out %s/learn%d", space, s, tmp, s), "KOPT_EXPERIENCE=" .. exp)),
       0, "learning run " .. s)
end
local learned = lines(exp)
T.eq(learned, 120, "transitions in the dataset")
-- (every run below with KOPT_EXPERIENCE appends to it: a copy stays as learned)
os.execute(string.format("cp '%s' '%s/learned.jsonl'", exp, tmp))

-- 2. The next run learns from them on its own, and searches differently.
local env = "KOPT_EXPERIENCE=" .. exp
T.eq((T.run(string.format("mcgs %s --budget 50 --seed 9 --out %s/with", space, tmp), env)), 0, "run with ReGraph")
local trace = T.slurp(tmp .. "/with/trace.md")
T.check(trace:find("regraph: 120 transitions from " .. exp, 1, true), "trace:\n%s", trace)
local saved = cjson.decode(T.slurp(tmp .. "/with/regraph.json"))
T.eq(saved.transitions_read, 120, "the run keeps the graph it used")
T.check(saved.canonical and saved.canonical.transitions and next(saved.canonical.transitions), "canonical transitions")
T.eq((T.run(string.format("mcgs %s --budget 50 --seed 9 --opt regraph=off --out %s/off", space, tmp), env)), 0, "off")
T.check(not T.exists(tmp .. "/off/regraph.json") and not T.slurp(tmp .. "/off/trace.md"):find("regraph:", 1, true),
        "regraph=off still built a graph")
T.check(digest(tmp .. "/with") ~= digest(tmp .. "/off"), "the ReGraph priors do not change the search")
-- a named file gives the same graph as the same file through the environment
T.eq((T.run(string.format("mcgs %s --budget 50 --seed 9 --opt regraph=%s/learned.jsonl --out %s/named", space, tmp, tmp))),
     0, "named")
T.eq(digest(tmp .. "/named"), digest(tmp .. "/with"), "regraph=FILE and KOPT_EXPERIENCE=FILE")
-- rule moves alone are not touched
local conv = "mcgs --backend replay:tests/data/convolution_A100.json -q --budget 40 --seed 3"
T.eq((T.run(string.format("%s --opt moves=rules --out %s/r1", conv, tmp), env)), 0, "rules")
T.eq((T.run(string.format("%s --opt moves=rules --opt regraph=off --out %s/r2", conv, tmp))), 0, "rules off")
T.eq(digest(tmp .. "/r1"), digest(tmp .. "/r2"), "MCGS without expert moves ignores the dataset")
-- the default's offline expert moves (moves=rules,heuristics) take the priors
T.eq((T.run(string.format("%s --out %s/h1", conv, tmp), env)), 0, "default moves")
T.check(T.slurp(tmp .. "/h1/trace.md"):find("regraph: ", 1, true), "the default's heuristic moves read no graph")

-- 3. The filter restricts expansion and changes the search.
T.eq((T.run(string.format("mcgs %s --budget 50 --seed 9 --opt regraph_filter=on --out %s/filter", space, tmp), env)), 0, "filter")
T.check(digest(tmp .. "/filter") ~= digest(tmp .. "/with"), "the filter does not change the search")
local stats = {
  transitions_read = 4, methods = {}, transitions = {},
  canonical = { methods = {}, transitions = {
    tile_up = { more_warps = { count = 2, ok = 2, improved = 0.5 }, fewer_warps = { count = 3, ok = 3, improved = 0 },
                deeper_pipeline = { count = 1, ok = 0, improved = 0 } } } },
}
local rg = experience.online(stats)
local set = rg.followers("tile_m_up")   -- a rule move's label: its canonical method is tile_up
T.check(set and set.more_warps and not set.fewer_warps and not set.deeper_pipeline, "followers of tile_up")
T.eq(rg.followers("more_threads"), nil, "a method the graph never saw before anything: no restriction")

-- 4. A resumed run searches with the graph it started with.
T.eq((T.run(string.format("mcgs %s --budget 80 --seed 5 --out %s/res", space, tmp), env)), 0, "first part")
T.check(lines(exp) > learned, "the runs fed the dataset")
T.eq((T.run(string.format("mcgs %s --budget 120 --seed 5 --out %s/res --resume", space, tmp), env)), 0, "resumed")
local first = cjson.decode(T.slurp(tmp .. "/res/regraph.json")).transitions_read
T.check(first < lines(exp), "the dataset grew during the first part")
T.check(T.slurp(tmp .. "/res/trace.md"):find(string.format("regraph: %d transitions from %s/res/regraph.json", first, tmp), 1, true),
        "the resumed run did not read its own graph back")

-- 5. A named source that cannot be read is a usage error naming it.
local code, _, err = T.run(string.format("mcgs %s --budget 10 --opt regraph=%s/nope.jsonl --out %s/bad", space, tmp, tmp))
T.eq(code, 2, "unreadable regraph source")
T.check(err:find("--opt regraph", 1, true) and err:find("nope.jsonl: no such file", 1, true), "message: %s", err)
-- a file of something else is named as such (it was read as no transitions)
T.write(tmp .. "/garbage.jsonl", "not json\n")
code, _, err = T.run(string.format("mcgs %s --budget 10 --opt regraph=%s/garbage.jsonl --out %s/bad2", space, tmp, tmp))
T.check(code == 2 and err:find("not a transitions file", 1, true), "a file that is no transitions file: %s", err)
-- (a killed run's torn last line alone is no such file: no transitions yet)
T.write(tmp .. "/torn.jsonl", '{"to":"x","fr')
code, _, err = T.run(string.format("mcgs %s --budget 10 --opt regraph=%s/torn.jsonl --out %s/torn", space, tmp, tmp))
T.eq(code, 0, "a torn line alone: " .. err)

-- --no-db: the dataset is neither appended to nor learned from (it was both)
do
  local lines_before = #(T.slurp(exp) or "")
  local code2, _, err2 = T.run(string.format("mcgs %s --budget 30 --seed 3 --no-db --out %s/nodb", space, tmp),
                             "KOPT_EXPERIENCE=" .. exp)
  T.eq(code2, 0, "--no-db with KOPT_EXPERIENCE: exit code\n" .. err2)
  T.eq(#(T.slurp(exp) or ""), lines_before, "--no-db: $KOPT_EXPERIENCE not appended to")
  T.check(not (T.slurp(tmp .. "/nodb/trace.md") or ""):find("transitions from", 1, true),
          "--no-db: nothing learned from $KOPT_EXPERIENCE")
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
