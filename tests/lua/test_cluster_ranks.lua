-- Which rank of its host this is (kopt.cluster.local_ranks, which deals the
-- host's GPUs to its ranks): the local rank and size from Open MPI's or
-- Slurm's variables, and nothing when they are missing or make no sense.
-- The dealing itself (kopt.cluster.share_gpus) on a faked two-GPU host: one
-- GPU per rank, a third rank refused; under --mpi-root engine the GPUs go
-- to the ranks other than rank 0 (two ranks: both GPUs to rank 1, three:
-- one each to ranks 1 and 2), rank 0 keeping the first for the checks after
-- the search, and only on rank 0's host. No MPI needed: the environment is a
-- table here.
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

-- dealing a faked host's two GPUs
local gpu = require("kopt.gpu")
gpu.devices = function() return { { name = "H200" }, { name = "H200" } } end
local function deal(rank, size, root_local, is_root)
  local ok, mine = pcall(cluster.share_gpus, root_local, is_root,
                         env({ OMPI_COMM_WORLD_LOCAL_RANK = tostring(rank), OMPI_COMM_WORLD_LOCAL_SIZE = tostring(size) }))
  if not ok then return "refused: " .. tostring(type(mine) == "table" and mine.msg or mine) end
  return mine and table.concat(mine, ",") or "all"
end
T.eq(deal(0, 2), "0", "two ranks: rank 0 takes GPU 0")
T.eq(deal(1, 2), "1", "two ranks: rank 1 takes GPU 1")
T.check(deal(2, 3):find("^refused: local rank 2 of 3 on this host has no GPU") ~= nil, "three ranks: the third refused")
T.eq(deal(0, 1), "all", "a rank alone on its host takes them all")
-- --mpi-root engine, rank 0 (local rank 0) on this host
T.eq(deal(0, 2, 0, true), "0", "--mpi-root engine: rank 0 keeps GPU 0 for the checks after the search")
T.eq(deal(1, 2, 0), "0,1", "--mpi-root engine, two ranks: rank 1 takes both GPUs")
T.eq(deal(1, 3, 0), "0", "--mpi-root engine, three ranks: rank 1 takes GPU 0")
T.eq(deal(2, 3, 0), "1", "--mpi-root engine, three ranks: rank 2 takes GPU 1")
T.check(deal(3, 4, 0):find("^refused: .*other than rank 0") ~= nil, "--mpi-root engine, four ranks: the fourth refused")
T.eq(deal(0, 1, 0, true), "0", "--mpi-root engine, rank 0 alone on its host: it keeps GPU 0")
-- another host than rank 0's: its message names another host
local msg = { op = "root", host = "head", local_rank = 0 }
T.eq(cluster.root_here(msg, "head"), 0, "rank 0's host: its local rank")
T.eq(cluster.root_here(msg, "node2"), nil, "another host: nothing")
T.eq(deal(1, 2, cluster.root_here(msg, "node2")), "1", "--mpi-root engine on another host: dealt as usual")

return T.done()
