-- A run under mpirun or srun (docs/MPI.md): every rank parses the same
-- command line and opens its own backend; rank 0 then runs the engine with
-- kopt.backends.mpi spreading the evaluations, and the other ranks serve
-- them. Only rank 0 writes the run folder and reads or writes the experience
-- database. This module owns MPI's lifecycle: init, the end of the job
-- (every rank told to quit, then MPI_Finalize), and the end of a job that
-- lost a rank (MPI_Abort once the run is written: Open MPI 4.1 cannot
-- finalize without the lost rank).
local errors = require("kopt.errors")
local gpu = require("kopt.gpu")
local mpi = require("kopt.mpi")
local mpi_backend = require("kopt.backends.mpi")
local run = require("kopt.run")
local sys = require("kopt.sys")

local M = {}
local Cluster = {}
Cluster.__index = Cluster

function M.launched() return mpi.launched() end

-- Called by kopt.run once the local backend is open and before anything is
-- written: rank 0 gets the distributing backend back; a serving rank serves
-- until rank 0 says quit and gets nil (its run is over).
function Cluster:attach(backend, spec)
  if self.rank ~= 0 then
    self.serving = true
    mpi_backend.serve(backend, self, spec)
    backend:close()
    return nil
  end
  local o = self.opts
  local root_evaluates = o.mpi_root ~= "engine"
  if not root_evaluates and self.size == 1 then
    -- (no rank to serve it: said as such, not as ranks lost)
    io.stderr:write("kopt: --mpi-root engine: this run has one rank, so rank 0 evaluates too\n")
    root_evaluates = true
  end
  self.backend = mpi_backend.open(backend, {
    comm = self, spec = spec, root_evaluates = root_evaluates, timeout_s = o.mpi_timeout,
    allow_mixed = o.allow_mixed, quiet = o.q })
  return self.backend
end

-- This rank's place among the ranks of its host, as mpirun or srun tell it:
-- local rank, local size; nil when they do not say. getenv: os.getenv
-- (tests pass their own).
function M.local_ranks(getenv)
  getenv = getenv or os.getenv
  local lr = math.tointeger(tonumber(getenv("OMPI_COMM_WORLD_LOCAL_RANK") or getenv("SLURM_LOCALID") or ""))
  local ln = math.tointeger(tonumber(getenv("OMPI_COMM_WORLD_LOCAL_SIZE") or getenv("SLURM_NTASKS_PER_NODE") or ""))
  if not lr or not ln or ln < 1 or lr < 0 or lr >= ln then return nil end
  return lr, ln
end

-- Several ranks on one host share its GPUs: local rank i of n takes GPUs
-- i, i+n, i+2n, ... (mpirun and srun say which local rank this is). Under
-- --mpi-root engine rank 0 evaluates nothing, so on its host the GPUs are
-- dealt among the other ranks alone, and rank 0 keeps the host's first GPU
-- for the checks after the search that stay in one process (--finalists,
-- --sanitize): a serving rank evaluated on it, and is idle by then.
-- root_local: rank 0's local rank when it runs on this host under --mpi-root
-- engine, else nil; is_root: this rank is rank 0; getenv: os.getenv (tests
-- pass their own). nil when the rank is alone on its host or no driver.
-- kopt.run asks only for a run on GPUs without --gpus: a replay run needs
-- none, so any number of ranks may share a host then.
function M.share_gpus(root_local, is_root, getenv)
  local lr, ln = M.local_ranks(getenv)
  if not lr or (ln < 2 and not (is_root and root_local)) then return nil end
  local devices = gpu.devices()
  if not devices or #devices == 0 then return nil end
  if is_root and root_local then return { 0 } end
  local place, among = lr, ln
  if root_local then
    among = ln - 1
    if lr > root_local then place = lr - 1 end
  end
  local mine = {}
  for g = place, #devices - 1, among do mine[#mine + 1] = g end
  if #mine == 0 then
    errors.usage("local rank %d of %d on this host has no GPU (the host has %d%s); start fewer ranks per host", lr, ln,
                 #devices, root_local and ", dealt among the ranks other than rank 0 under --mpi-root engine" or "")
  end
  return mine
end

-- What rank 0 tells every rank at the start under --mpi-root engine: its
-- host and local rank, so the ranks of its host leave it out of the dealing.
function M.root_message()
  return { op = "root", host = sys.hostname(), local_rank = (M.local_ranks()) }
end

-- Rank 0's local rank from its message when it runs on this host, else nil.
function M.root_here(msg, host)
  if type(msg) == "table" and msg.host == (host or sys.hostname()) then return msg.local_rank end
  return nil
end

M.ROOT_WAIT_S = 60  -- how long a rank waits for rank 0's message before dealing GPUs

-- The same, for kopt.run, which holds this run's cluster but does not
-- require this module (it requires kopt.run).
function Cluster:share_gpus()
  local root_local
  if self.opts.mpi_root == "engine" and self.size > 1 then
    if self.rank == 0 then
      root_local = (M.local_ranks())
    else
      -- (rank 0 sent it first thing: nothing from it comes before)
      local src, flat = mpi.recv(M.ROOT_WAIT_S)
      local msg = src == 0 and mpi_backend.decode(flat) or nil
      if not (msg and msg.op == "root") then
        errors.raise(errors.RUNTIME, "MPI: rank 0 did not say where it runs within %d s (--mpi-root engine)",
                     M.ROOT_WAIT_S)
      end
      root_local = M.root_here(msg)
    end
  end
  return M.share_gpus(root_local, self.rank == 0)
end

local function handler(e)
  if errors.is_user_error(e) or errors.is_interrupt(e) then return e end
  return debug.traceback(errors.describe(e), 2)
end

local function describe(e)
  if type(e) == "table" and e.msg then return e.msg end
  return tostring(e):match("^[^\n]*")
end

function M.main(opts, pos)
  -- MPI_Init waits for every rank: one that died before it got there kept
  -- the others waiting for ever; after twice --mpi-timeout (at least 60 s,
  -- as a hello's bound) this rank says so and exits
  local rank, size = mpi.init(math.max(60, 2 * (opts.mpi_timeout or mpi_backend.TIMEOUT_S)))
  if not rank then errors.raise(errors.RUNTIME, "MPI: %s", size) end
  local self = setmetatable({ rank = rank, size = size, lost = {}, opts = opts }, Cluster)
  opts.cluster = self
  if rank == 0 and opts.mpi_root == "engine" then
    for r = 1, size - 1 do mpi.send(r, mpi_backend.encode(M.root_message())) end
  end
  if rank ~= 0 then
    opts.no_db = true  -- the experience database is rank 0's
    run.notes = false  -- and so are the notes: rank 0 says each once
  end
  local ok, rc = xpcall(function() return run.main(opts, pos) end, handler)
  if rank ~= 0 and not ok then
    mpi.send(0, mpi_backend.encode({ op = "fail", host = sys.hostname(), msg = describe(rc) }))
    -- a rank that exits with an error ends the whole job at once (mpirun):
    -- wait until rank 0 has said why and lets the ranks go
    local deadline = sys.now() + 60
    while true do
      local src, flat = mpi.recv(math.max(0, deadline - sys.now()))
      if not src then break end
      local okd, msg = pcall(mpi_backend.decode, flat)
      if src == 0 and okd and msg.op == "quit" then break end
    end
  end
  if rank ~= 0 then
    -- (a job that lost a rank ends with rank 0's MPI_Abort, which ends this
    -- rank too; under --enable-recovery it does not, so this rank leaves
    -- after a while by itself: MPI_Finalize would wait for the lost rank)
    if mpi_backend.aborting then
      sys.sleep(5)
      os.exit(0, false)
    end
    mpi.finalize()
    -- rank 0 says it once (the same sentence N times helps nobody), naming
    -- this rank when only this rank failed
    if not ok and type(rc) == "table" then return rc.code or errors.RUNTIME end
    if not ok then io.stderr:write("kopt: internal error on rank " .. rank .. ": " .. tostring(rc) .. "\n") end
    return ok and rc or errors.RUNTIME
  else
    local code = ok and rc or (type(rc) == "table" and rc.code) or errors.RUNTIME
    -- (a run refused before it evaluated anything gets its one sentence alone)
    local evaluated = false
    for _, n in pairs(self.backend and self.backend.counts or {}) do evaluated = evaluated or n > 0 end
    if self.backend and not opts.q and (ok or evaluated) then
      io.stdout:flush()  -- (after the run's summary, not inside it)
      io.stderr:write("kopt: " .. self.backend:summary() .. "\n")
    end
    if #self.lost > 0 then
      local names = {}
      for i, l in ipairs(self.lost) do names[i] = string.format("rank %d (%s)", l.rank, l.host or "?") end
      io.stdout:flush()
      if not ok then io.stderr:write("kopt: " .. describe(rc) .. "\n") end
      io.stderr:write(string.format("kopt: %s lost during the run; the run is written, and the job ends with "
                                    .. "MPI_Abort (exit code %d), which Open MPI reports below\n",
                                    table.concat(names, ", "), code))
      -- the ranks still serving are let go first: under --enable-recovery
      -- MPI_Abort does not end them, and they would wait for rank 0 for ever
      local gone = {}
      for _, l in ipairs(self.lost) do gone[l.rank] = true end
      for r = 1, size - 1 do
        if not gone[r] then mpi.send(r, mpi_backend.encode({ op = "quit", abort = true })) end
      end
      sys.sleep(0.2)
      mpi.abort(code)
    end
    -- a user error is said before the other ranks are let go: one of them
    -- exiting with an error ends the job, maybe before this rank could speak
    local said = not ok and type(rc) == "table" and rc.msg ~= nil
    if said then
      io.stdout:flush()
      io.stderr:write("kopt: " .. rc.msg .. "\n")
    end
    for r = 1, size - 1 do mpi.send(r, mpi_backend.encode({ op = "quit" })) end
    mpi.finalize()
    if said then return code end
  end
  if not ok then error(rc, 0) end
  return rc
end

return M
