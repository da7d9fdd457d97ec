-- Which rank of its host this is (kopt.cluster.local_ranks, which deals the
-- host's GPUs to its ranks): the local rank and size from Open MPI's or
-- Slurm's variables, and nothing when they are missing or make no sense. No
-- MPI needed: the environment is a table here.
local T = require("testlib")
local cluster = require("kopt.cluster")

local function env(t) return function(k) return t[k] end end

local lr, ln = cluster.local_ranks(env({ OMPI_COMM_WORLD_LOCAL_RANK = "1", OMPI_COMM_WORLD_LOCAL_SIZE = "2" }))
T.eq(lr, 1, "Open MPI local rank")
T.eq(ln, 2, "Open MPI local size")
lr, ln = cluster.local_ranks(env({ SLURM_LOCALID = "3", SLURM_NTASKS_PER_NODE = "4" }))
T.eq(lr * 10 + ln, 34, "Slurm's local id and tasks per node")
T.eq(cluster.local_ranks(env({})), nil, "no launcher: nothing")
T.eq(cluster.local_ranks(env({ OMPI_COMM_WORLD_LOCAL_RANK = "2", OMPI_COMM_WORLD_LOCAL_SIZE = "2" })), nil,
  "a local rank outside the local size is not believed")
T.eq(cluster.local_ranks(env({ OMPI_COMM_WORLD_LOCAL_RANK = "x", OMPI_COMM_WORLD_LOCAL_SIZE = "2" })), nil,
  "a local rank that is not a number")

return T.done()
