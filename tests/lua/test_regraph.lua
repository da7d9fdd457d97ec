-- `kopt regraph`: transitions of two runs (rules on convolution, mcgs on
-- pnpoly) aggregate into method statistics whose counts add up to the lines
-- read; the file loads as MCGS priors (--opt priors=FILE) and changes the
-- search; bad inputs are usage errors (exit 2) naming the problem.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("regraph")
local function lines(path)
  local n = 0
  for _ in io.lines(path) do n = n + 1 end
  return n
end

T.eq((T.run("rules --backend replay:tests/data/convolution_A100.json --budget 60 -q --out " .. tmp .. "/a")), 0, "rules run")
T.eq((T.run("mcgs --backend replay:tests/data/pnpoly_RTX_3090.json --budget 60 -q --out " .. tmp .. "/b")), 0, "mcgs run")
local n = lines(tmp .. "/a/transitions.jsonl") + lines(tmp .. "/b/transitions.jsonl")
T.eq(n, 120, "transition lines")

local code, _, err = T.run(string.format("regraph %s/a %s/b/transitions.jsonl -o %s/priors.json", tmp, tmp, tmp))
T.eq(code, 0, "regraph exit code")
T.check(err:find("120 transitions", 1, true) ~= nil, "regraph summary: %s", err)
local stats = cjson.decode(T.slurp(tmp .. "/priors.json"))
T.eq(stats.version, 1, "version")
T.eq(stats.transitions_read, 120, "transitions read")
local sum, pair_sum = 0, 0
for _, s in pairs(stats.methods) do
  sum = sum + s.count
  T.check(s.ok <= s.count and s.success >= 0 and s.success <= 1, "method stats consistent")
end
for _, row in pairs(stats.transitions) do
  for _, s in pairs(row) do pair_sum = pair_sum + s.count end
end
T.eq(sum, 120, "method counts add up")
T.eq(pair_sum, 120, "transition counts add up")
T.check(stats.methods.start ~= nil and stats.transitions.start ~= nil, "start transitions present")

-- the statistics act as priors
local base = tmp .. "/base"
local with = tmp .. "/with"
T.eq((T.run("mcgs --backend replay:tests/data/convolution_A100.json --budget 40 --seed 9 -q --out " .. base)), 0, "mcgs without priors")
T.eq((T.run(string.format("mcgs --backend replay:tests/data/convolution_A100.json --budget 40 --seed 9 -q --opt priors=%s/priors.json --out %s", tmp, with))), 0, "mcgs with priors")
T.check(T.slurp(base .. "/graph.json") ~= T.slurp(with .. "/graph.json"), "priors change the graph")

-- rewards past any measurement (a hand-edited dataset) are left out of the
-- sums: the priors file regraph writes loads (they summed to inf, written
-- as null, which the loader refused)
T.write(tmp .. "/wild.jsonl", '{"from":"root","to":"block_x_up","status":"ok","reward":1e308,"speedup":1e308}\n' ..
        '{"from":"root","to":"block_x_up","status":"ok","reward":1e308,"speedup":2}\n' ..
        '{"from":"root","to":"block_x_up","status":"ok","reward":0.5,"speedup":1.5}\n')
T.eq((T.run(string.format("regraph %s/wild.jsonl -o %s/wild_priors.json", tmp, tmp))), 0, "regraph of wild rewards")
local wc, _, we = T.run(string.format("mcgs --backend replay:tests/data/convolution_A100.json --budget 5 -q " ..
                                      "--opt priors=%s/wild_priors.json --out %s/wild_run", tmp, tmp))
T.eq(wc, 0, "the priors regraph wrote load (" .. we .. ")")

-- errors
local c1, _, e1 = T.run("regraph")
T.eq(c1, 2, "no runs")
T.check(e1:find("no runs", 1, true) ~= nil, "message: %s", e1)
local c2, _, e2 = T.run("regraph " .. tmp .. "/nope")
T.eq(c2, 2, "missing run")
T.check(e2:find(tmp .. "/nope", 1, true) ~= nil, "message names the path: %s", e2)
local c3, _, e3 = T.run("mcgs --backend replay:tests/data/convolution_A100.json --opt priors=" .. tmp .. "/a/events.jsonl -q --out " .. tmp .. "/bad")
T.eq(c3, 2, "bad priors file")
T.check(e3:find("priors", 1, true) ~= nil, "message names the option: %s", e3)

-- a file of something else, and a folder without transitions, are named so
T.write(tmp .. "/other.jsonl", '{"a":1}\n')
local c4, _, e4 = T.run("regraph " .. tmp .. "/other.jsonl")
T.check(c4 == 2 and e4:find("not a transitions file", 1, true), "a file of something else: %s", e4)
os.execute("mkdir -p '" .. tmp .. "/empty'")
local c5, _, e5 = T.run("regraph " .. tmp .. "/empty")
T.check(c5 == 2 and e5:find("transitions.jsonl: no such file", 1, true), "a folder without transitions: %s", e5)

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
