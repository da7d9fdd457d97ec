-- Faults under mpirun (docs/MPI.md), on the replay backend. A serving rank
-- killed by SIGKILL (mpirun --enable-recovery, so Open MPI lets the job
-- live) or one that stops answering (--mpi-timeout) loses only its
-- candidates in flight: they are evaluated elsewhere and the run ends with
-- exactly the evaluations of an undisturbed one-process run. Without
-- --enable-recovery Open MPI ends the whole job when a rank dies; --resume
-- then continues it to the same end. A rank that never reaches MPI_Init
-- does not keep the others waiting for ever.
local T = require("testlib")
local M = require("mpi_testlib")

M.require_mpi()

local file = "tests/data/convolution_A100.json"
local tmp = T.tmpdir("mpif")
local args = string.format("random --backend replay:%s --budget 60 --seed 5 --no-db", file)

local function reference(slots)
  local dir = string.format("%s/one-%d", tmp, slots)
  local code, _, err = T.run(args .. " -q --out " .. dir, "KOPT_REPLAY_SLOTS=" .. slots)
  T.eq(code, 0, "one process, " .. slots .. " slots: exit code\n" .. err)
  return dir
end
local one3, one2 = reference(3), reference(2)
reference(1)

local function lost_run(name, np, fault, extra, mpi_args)
  local dir = tmp .. "/" .. name
  local code, _, err = M.mpirun(np, args .. " --out " .. dir .. (extra or ""), "KOPT_TEST_MPI_FAULT=" .. fault, mpi_args)
  T.eq(code, 0, name .. ": exit code\n" .. err)
  return dir, err
end

-- rank 2 dies (SIGKILL) when its third chunk arrives
local dir, err = lost_run("kill", 3, "2:3:kill", "", "--enable-recovery")
M.same_evals(one3, dir, "kill: eval events")
T.check(err:find("kopt: rank 2 %(.-%) is lost: its process is gone; 1 candidate in flight evaluated elsewhere") ~= nil,
        "kill: the loss is reported:\n%s", err)
T.check(err:find("rank 2 2 %(lost%); 1 re%-queued from lost ranks") ~= nil, "kill: the per-rank line:\n%s", err)
T.check(err:find("lost during the run; the run is written", 1, true) ~= nil, "kill: the end is explained:\n%s", err)
T.eq(M.ranks_used(dir)[2], 2, "kill: evaluations recorded from rank 2 (before it died)")

-- the same with four ranks: the two still serving are let go before rank
-- 0's MPI_Abort (under --enable-recovery it does not end them, and the job
-- hung until mpirun's timeout)
local t4 = require("kopt.sys").now()
dir = lost_run("kill4", 4, "2:3:kill", "", "--enable-recovery")
T.check(require("kopt.sys").now() - t4 < 60, "kill4: the job ends (it took %.0f s)", require("kopt.sys").now() - t4)
M.same_evals(reference(4), dir, "kill4: eval events")

-- rank 1 stops answering at its fourth chunk
dir, err = lost_run("hang", 3, "1:4:hang", " --mpi-timeout 1")
M.same_evals(one3, dir, "hang: eval events")
T.check(err:find("kopt: rank 1 %(.-%) is lost: no word from it for %d+ s; 1 candidate in flight evaluated elsewhere") ~= nil,
        "hang: the loss is reported:\n%s", err)

-- rank 0 only runs the engine, rank 1 dies: rank 2 evaluates the rest
dir, err = lost_run("engine-kill", 3, "1:2:kill", " --mpi-root engine", "--enable-recovery")
M.same_evals(one2, dir, "engine-kill: eval events")
local used = M.ranks_used(dir)
T.eq(used[0], nil, "engine-kill: rank 0 evaluated")
T.eq(used[1], 1, "engine-kill: evaluations from rank 1")
T.eq(used[2], 59, "engine-kill: evaluations from rank 2")
T.check(err:find("rank 1 1 (lost), rank 2 59; 1 re-queued from lost ranks", 1, true) ~= nil, "engine-kill: the per-rank line:\n%s", err)

-- every rank lost and rank 0 not evaluating: rank 0 evaluates the rest itself
dir, err = lost_run("alone", 2, "1:2:kill", " --mpi-root engine", "--enable-recovery")
M.same_evals(tmp .. "/one-1", dir, "alone: eval events")
T.check(err:find("no serving rank is left: rank 0 evaluates the rest itself", 1, true) ~= nil,
        "alone: the note:\n%s", err)

-- a rank that never reaches MPI_Init (here a program that exits at once):
-- under --enable-recovery the others waited in MPI_Init for ever; after
-- twice --mpi-timeout, at least 60 s, each says so and exits
do
  local t0 = os.time()
  local code, _, e = M.mpirun(2, args .. " --mpi-timeout 1 --out " .. tmp .. "/noinit : -np 1 true", nil,
                              "--enable-recovery")
  T.check(code ~= 124, "noinit: the job ended by itself (exit %s)", tostring(code))
  local _, said = e:gsub("MPI_Init did not finish within 60 s", "")
  T.eq(said, 2, "noinit: each kopt rank says why it stops:\n" .. e)
  T.check(os.time() - t0 < 110, "noinit: ended after %d s", os.time() - t0)
end

os.execute("rm -rf '" .. tmp .. "'")
os.exit(T.done())
