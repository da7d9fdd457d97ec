-- kopt under mpirun on the replay backend (docs/MPI.md): three ranks give
-- the same evaluations, in the same order with the same results and times,
-- the same winner and the same counts as one process asking as many
-- candidates per round (KOPT_REPLAY_SLOTS=3), and every rank evaluates some
-- of them; with --mpi-root engine rank 0 evaluates none; candidates with an
-- edited kernel (a source or a patch, replayed without a spec) are invalid
-- on every rank, as in one process; a rank on another device is refused
-- before anything is written, unless --allow-mixed; a rank replaying another
-- space (part of rank 0's configurations, another kernel) is refused even
-- with --allow-mixed; notes from the command line are said once, by rank 0,
-- not once per rank.
local T = require("testlib")
local M = require("mpi_testlib")

M.require_mpi()

local file = "tests/data/convolution_A100.json"
local tmp = T.tmpdir("mpi")

local function summary_counts(out) return out:match("(%d+ evaluations %b()[^\n]*)") end

local function compare(strategy, budget, np, root_mode)
  local what = string.format("%s, %d ranks%s", strategy, np, root_mode and (", --mpi-root " .. root_mode) or "")
  local slots = root_mode == "engine" and np - 1 or np
  local one = string.format("%s/%s-%d-one-%d", tmp, strategy, np, slots)
  local many = string.format("%s/%s-%d-%s", tmp, strategy, np, root_mode or "eval")
  local args = string.format("%s --backend replay:%s --budget %d --seed 3 --no-db", strategy, file, budget)
  local code, out1, err1 = T.run(args .. " --out " .. one, "KOPT_REPLAY_SLOTS=" .. slots)
  T.eq(code, 0, what .. ": one process exit code\n" .. err1)
  local code2, out2, err2 = M.mpirun(np, args .. " --out " .. many .. (root_mode and (" --mpi-root " .. root_mode) or ""))
  T.eq(code2, 0, what .. ": mpirun exit code\n" .. err2)
  M.same_evals(one, many, what .. ": eval events")
  T.eq(M.best_line(out2), M.best_line(out1), what .. ": winner")
  T.eq(summary_counts(out2), summary_counts(out1), what .. ": counts")
  T.check(summary_counts(out1) ~= nil, "%s: no count line in\n%s", what, out1)
  T.check(err2:find("evaluations by rank: ", 1, true) ~= nil, "%s: no per-rank line on stderr:\n%s", what, err2)
  return M.ranks_used(many)
end

-- every rank, rank 0 included, takes part
local used = compare("random", 60, 3)
for r = 0, 2 do T.check((used[r] or 0) > 0, "random, 3 ranks: rank %d evaluated nothing", r) end
-- a strategy that reads its results (the batch it gets back decides the next)
compare("anneal", 60, 3)
-- rank 0 only runs the engine
used = compare("random", 40, 3, "engine")
T.eq(used[0], nil, "--mpi-root engine: evaluations by rank 0")
T.check((used[1] or 0) > 0 and (used[2] or 0) > 0, "--mpi-root engine: ranks 1 and 2 both evaluate")
-- one rank and --mpi-root engine: rank 0 evaluates, and says why (it said
-- "no serving rank is left", and its start event "evaluates: false")
do
  local dir = tmp .. "/engine-one"
  local code, _, err = M.mpirun(1, "random --backend replay:" .. file .. " --budget 10 --no-db --out " .. dir ..
                                   " --mpi-root engine")
  T.eq(code, 0, "one rank, --mpi-root engine: exit code\n" .. err)
  T.check(err:find("this run has one rank, so rank 0 evaluates too", 1, true) and
          not err:find("no serving rank is left", 1, true), "one rank, --mpi-root engine: said as such\n%s", err)
  local start = require("cjson").decode(io.lines(dir .. "/events.jsonl")())
  local r0 = start and start.device and start.device.mpi and start.device.mpi.ranks and start.device.mpi.ranks[1]
  T.check(r0 and r0.evaluates == true, "one rank: the start event says rank 0 evaluates")
end

-- Edited candidates on a replay without a spec: the edit (a source, a
-- patch) travels with the candidate, so a serving rank finds them invalid as
-- one process does, rather than giving them the plain config's time.
do
  local strategy = tmp .. "/edit.lua"
  T.write(strategy, [[
local S = { name = "edits", options = {} }
function S.init(ctx) ctx.i, ctx.asked = 0, {} end
function S.ask(ctx, n)
  local out = {}
  for _ = 1, n do
    local c
    repeat c = ctx.space:sample(ctx.rng) until not ctx.asked[ctx:key(c)]
    ctx.asked[ctx:key(c)] = true
    ctx.i = ctx.i + 1
    local edit = ctx.i % 3
    out[#out + 1] = { config = c, source = edit == 1 and "// an edited kernel\n" or nil,
                      patch = edit == 2 and "--- a/k.cu\n+++ b/k.cu\n" or nil }
  end
  return out
end
return S
]])
  local args = string.format("%s --backend replay:%s --budget 12 --seed 3 --no-db -q", strategy, file)
  local one, many = tmp .. "/edit-one", tmp .. "/edit-many"
  local code1, _, err1 = T.run(args .. " --out " .. one, "KOPT_REPLAY_SLOTS=3")
  T.eq(code1, 0, "edited candidates: one process exit code\n" .. err1)
  local code3, _, err3 = M.mpirun(3, args .. " --out " .. many)
  T.eq(code3, 0, "edited candidates: mpirun exit code\n" .. err3)
  M.same_evals(one, many, "edited candidates: eval events")
  local invalid = 0
  for _, ev in ipairs((T.events(many))) do
    if ev.result and ev.result.status == "invalid" then invalid = invalid + 1 end
  end
  T.eq(invalid, 8, "edited candidates: every edited one is invalid under mpirun")
end

-- Notes are rank 0's: said once, not by every rank (here a spec run
-- replays the spec's recording: the GPU flags do nothing)
do
  local code, _, err = M.mpirun(3, "random specs/convolution.json --backend replay:" .. file .. " --budget 5 --no-db "
                                   .. "--finalists 2 --gpus 0 --out " .. tmp .. "/notes")
  T.eq(code, 0, "notes: exit code\n" .. err)
  local _, said = err:gsub("do nothing here", "")
  T.eq(said, 1, "notes: --finalists and --gpus said once, by rank 0:\n" .. err)
end

-- A rank whose device differs (its recording is another GPU's) is refused
-- at the start: one sentence, exit 2, no run folder.
local mixed = tmp .. "/mixed"
local other = "tests/data/convolution_A4000.json"
local function mpmd(extra)
  local a = string.format("random --backend replay:%s --budget 10 --no-db -q --out %s%s", file, mixed, extra)
  local b = string.format("random --backend replay:%s --budget 10 --no-db -q --out %s%s", other, mixed, extra)
  return M.mpirun(1, a .. " : -np 1 " .. T.kopt .. " " .. b)
end
local code, _, err = mpmd("")
T.eq(code, 2, "mixed devices: exit code")
T.check(err:find("kopt: rank 1 %(.-%) has NVIDIA RTX A4000, rank 0 has NVIDIA A100%-PCIE%-40GB: mixing devices "
                 .. "corrupts timings; give %-%-allow%-mixed") ~= nil, "mixed devices: the sentence:\n%s", err)
T.check(not T.exists(mixed), "mixed devices: a run folder was written")
code, _, err = mpmd(" --allow-mixed")
T.eq(code, 0, "--allow-mixed: exit code\n" .. err)
T.eq(#(T.events(mixed)), 10, "--allow-mixed: evaluations")

-- --allow-mixed is about devices: a rank replaying part of the space (every
-- second entry of the other GPU's recording), or another kernel, is refused
-- all the same (its missing configs came back unmeasured, as invalid)
do
  local cjson = require("cjson")
  local doc = cjson.decode(T.slurp(other))
  local keys, half = {}, {}
  for k in pairs(doc.cache) do keys[#keys + 1] = k end
  table.sort(keys)
  for i = 1, #keys, 2 do half[keys[i]] = doc.cache[keys[i]] end
  doc.cache = half
  local part = tmp .. "/half.json"
  T.write(part, cjson.encode(doc))
  for _, rec in ipairs({ part, "tests/data/pnpoly_RTX_3090.json" }) do
    local dir = tmp .. "/other_space"
    local a = string.format("random --backend replay:%s --budget 10 --no-db -q --allow-mixed --out %s", file, dir)
    local b = string.format("random --backend replay:%s --budget 10 --no-db -q --allow-mixed --out %s", rec, dir)
    code, _, err = M.mpirun(1, a .. " : -np 1 " .. T.kopt .. " " .. b)
    T.eq(code, 2, rec .. " on rank 1, --allow-mixed: exit code")
    T.check(err:find("kopt: rank 1 (", 1, true) and err:find("which records another space than rank 0's", 1, true),
            "%s on rank 1, --allow-mixed: the sentence:\n%s", rec, err)
    T.check(not T.exists(dir), "%s on rank 1: a run folder was written", rec)
  end
end

-- A rank replaying another recording of the same GPU (a stale copy: here
-- every time x10) is refused the same way: it mixed the two sets of times
do
  local stale = tmp .. "/stale.json"
  local doc = require("cjson").decode(T.slurp(file))
  for _, e in pairs(doc.cache) do if type(e.time) == "number" then e.time = e.time * 10 end end
  T.write(stale, require("cjson").encode(doc))
  local sdir = tmp .. "/stale_run"
  code, _, err = M.mpirun(1, string.format("random --backend replay:%s --budget 10 --no-db -q --out %s : -np 1 %s "
                                           .. "random --backend replay:%s --budget 10 --no-db -q --out %s",
                                           file, sdir, T.kopt, stale, sdir))
  T.eq(code, 2, "a stale recording on rank 1: exit code")
  T.check(err:find("replays a recording of NVIDIA A100%-PCIE%-40GB other than rank 0's") ~= nil,
          "a stale recording on rank 1: the sentence:\n%s", err)
end

-- a run refused before it evaluates anything (its --out holds a run): its
-- one sentence, without the line of evaluations by rank before it
do
  local held = tmp .. "/held"
  local args = string.format("random --backend replay:%s --budget 5 --no-db --out %s", file, held)
  M.mpirun(2, args .. " -q")
  code, _, err = M.mpirun(2, args)
  T.eq(code, 2, "a refused MPI run: exit code")
  T.check(err:find("already holds a run", 1, true) and not err:find("evaluations by rank", 1, true),
          "a refused MPI run: one sentence, no rank counts:\n%s", err)
end

-- kopt suite and kopt compare under mpirun: one sentence each, exit 2 (each
-- rank ran all of it into the same folder, and the job was killed early)
for _, cmd in ipairs({ "suite random specs/suite", "compare --strategies random --seeds 1 --budgets 5" }) do
  code, _, err = M.mpirun(2, cmd .. " --out " .. tmp .. "/no_" .. cmd:match("^%a+"))
  T.eq(code, 2, cmd .. " under mpirun: exit code")
  T.check(err:find(cmd:match("^%a+") .. " does not run under mpirun or srun", 1, true), "%s under mpirun:\n%s", cmd, err)
end

-- A rank that cannot start (its recording is missing) stops the run the
-- same way, named by rank 0 alone.
local broken = tmp .. "/broken"
local missing = tmp .. "/no-such-recording.json"
code, _, err = M.mpirun(1, string.format("random --backend replay:%s --budget 10 --no-db -q --out %s : -np 1 %s "
                                         .. "random --backend replay:%s --budget 10 --no-db -q --out %s",
                                         file, broken, T.kopt, missing, broken))
T.eq(code, 2, "a rank that cannot start: exit code")
local _, n = err:gsub("cannot read replay file", "")
T.eq(n, 1, "a rank that cannot start: the sentence, once:\n" .. err)
T.check(err:find("kopt: rank 1 (", 1, true) and err:find(") cannot serve this run: cannot read replay file " .. missing, 1, true),
        "a rank that cannot start: the sentence:\n%s", err)
T.check(not T.exists(broken), "a rank that cannot start: a run folder was written")

os.execute("rm -rf '" .. tmp .. "'")
os.exit(T.done())
