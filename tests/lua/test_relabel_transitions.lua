-- Transitions with canonical methods: the experts strategy (which recorded
-- none before) and rules write one line per evaluation to transitions.jsonl,
-- each with its labels (from/to), their canonical methods
-- (from_method/to_method), ok, the kernel's name and source hash (not the run
-- folder's name) and the device; `kopt regraph` reads those and lines in the
-- old format (no canonical fields) together, counting both by label and by
-- canonical method; priors give a label the file never saw its canonical
-- method's statistics.
local T = require("testlib")
local cjson = require("cjson")
local experience = require("kopt.experience")

local tmp = T.tmpdir("relabel-transitions")
local SPEC = "tests/data/specs/vector_add.json"
local REC = "tests/data/vector_add_A4000.json"

local function lines(path)
  local out = {}
  for line in T.slurp(path):gmatch("[^\n]+") do out[#out + 1] = cjson.decode(line) end
  return out
end
local function count_evals(dir)
  local n = 0
  for line in T.slurp(dir .. "/events.jsonl"):gmatch("[^\n]+") do
    local ev = cjson.decode(line)
    if ev.event == "eval" and not ev.cached then n = n + 1 end
  end
  return n
end

local code, _, err = T.run(string.format("experts %s --backend replay:%s --out %s/experts -q --seed 3 --budget 40",
                                         SPEC, REC, tmp), "KOPT_METHODS=off")
T.eq(code, 0, "experts run: " .. tostring(err))
code, _, err = T.run(string.format("rules %s --backend replay:%s --out %s/rules -q --seed 3 --budget 40", SPEC, REC,
                                   tmp), "KOPT_METHODS=off")
T.eq(code, 0, "rules run: " .. tostring(err))

local hashes = {}
for _, run in ipairs({ "experts", "rules" }) do
  local tr = lines(tmp .. "/" .. run .. "/transitions.jsonl")
  T.eq(#tr, count_evals(tmp .. "/" .. run), run .. ": one transition per evaluation")
  for _, t in ipairs(tr) do
    T.eq(t.strategy, run, "strategy")
    T.eq(t.kernel, "vector_add_test", "kernel keyed by the spec's name")
    T.check(type(t.source_hash) == "string" and t.source_hash:match("^%x+$") and #t.source_hash == 16,
            "source hash: %s", tostring(t.source_hash))
    hashes[t.source_hash] = true
    T.check(type(t.device) == "string" and #t.device > 0, "device")
    T.eq(t.ok, t.status == "ok", "ok")
    T.check(type(t.from_method) == "string" and type(t.to_method) == "string", "canonical methods")
    T.check(not t.to_method:find("^block") and not t.to_method:find("_x_"), "%s: rule name left uncanonical: %s", run,
            t.to_method)
  end
end
local nh = 0
for _ in pairs(hashes) do nh = nh + 1 end
T.eq(nh, 1, "one kernel source, one hash")

-- an old-format dataset: no canonical fields, the kernel named after a folder
local old = tmp .. "/old.jsonl"
T.write(old, table.concat({
  '{"kernel":"run7","from":"start","to":"tile_k_up","status":"ok","speedup":1.2,"strategy":"mcgs","n":1}',
  '{"kernel":"run7","from":"tile_k_up","to":"tile_m_up","status":"ok","speedup":1.1,"strategy":"mcgs","n":2}',
  '{"kernel":"run7","from":"tile_m_up","to":"warps_down","status":"wrong","strategy":"mcgs","n":3}',
  '{"kernel":"run7","from":"tile_m_up","to":"Increase BLOCK_K to 64","status":"ok","speedup":0.9,"n":4}',
}, "\n") .. "\n")
code, _, err = T.run(string.format("regraph %s/experts %s/rules %s -o %s/stats.json", tmp, tmp, old, tmp),
                     "KOPT_METHODS=off")
T.eq(code, 0, "regraph: " .. tostring(err))
local stats = cjson.decode(T.slurp(tmp .. "/stats.json"))
local total = stats.transitions_read
local function sum(methods)
  local s = 0
  for _, v in pairs(methods) do s = s + v.count end
  return s
end
T.eq(sum(stats.methods), total, "label counts add up")
T.eq(sum(stats.canonical.methods), total, "canonical counts add up")
T.check(stats.methods.tile_k_up and stats.methods.tile_m_up, "labels kept as recorded")
local tu = stats.canonical.methods.tile_up
T.check(tu and tu.count >= 3, "tile_k_up, tile_m_up and 'Increase BLOCK_K to 64' counted as tile_up")
T.eq(stats.canonical.transitions.tile_up.fewer_warps.count, 1, "old line's pair by canonical method")
T.eq(stats.canonical.methods.fewer_warps.ok, 0, "old line's failure kept")

-- priors: a label the file never saw gets its canonical method's statistics
local prior = assert(experience.load_priors(tmp .. "/stats.json"))
T.check(stats.methods.tile_n_up == nil, "tile_n_up never recorded")
T.check(prior("start", "tile_n_up") ~= 1, "unseen label has its canonical method's prior")
T.eq(prior("start", "no_such_label_ever"), 1, "unknown label stays neutral")
T.done()
