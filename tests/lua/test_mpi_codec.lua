-- The MPI transport's codec (kopt.backends.mpi: nested tables <-> the flat
-- typed fields of a core/wire.h payload) and kopt.mpi before MPI_Init, in
-- one process, no mpirun: every value comes back with its type and bits
-- (integers stay integers, 0.1 stays 0.1, NaN stays NaN, booleans and empty
-- tables survive, keys that look like the codec's own marks are escaped),
-- and a send without MPI is a status, not a crash.
local T = require("testlib")
local mpi = require("kopt.mpi")
local codec = require("kopt.backends.mpi")

local function same(a, b, path)
  if type(a) ~= type(b) then return T.check(false, "%s: %s vs %s", path, type(a), type(b)) end
  if type(a) == "number" then
    if a ~= a then return T.check(b ~= b, "%s: NaN became %s", path, tostring(b)) end
    T.eq(math.type(b), math.type(a), path .. ": number type")
    return T.check(a == b, "%s: %.17g vs %.17g", path, a, b)
  end
  if type(a) ~= "table" then return T.eq(b, a, path) end
  for k, v in pairs(a) do same(v, b[k], path .. "." .. tostring(k)) end
  for k in pairs(b) do T.check(a[k] ~= nil, "%s.%s: not in the original", path, tostring(k)) end
end

local msg = {
  op = "results", chunk = 12,
  results = {
    { status = "ok", time_ms = 0.1, p90_ms = 1 / 3, samples = 32, free = false, cost_s = 3.2617045240477,
      metrics = { ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 71.5, ["#odd"] = 1, ["\\odd"] = 2 },
      resources = { regs = 128, smem = 0 }, log = "line 1\nline 2\0binary", empty = {} },
    { status = "invalid", free = true, log = "not in the recorded space", nan = 0 / 0, big = math.maxinteger,
      neg = -2 ^ 60, tiny = 5e-324 },
  },
  jobs = { { key = "256,4,4,1", config = { BLOCK = 128, NAME = "x", F = 0.5 }, origin = { method = "random" } } },
}
local flat = codec.encode(msg)
for k, v in pairs(flat) do
  T.check(type(k) == "string", "flat key of type %s", type(k))
  T.check(type(v) == "number" or type(v) == "string", "flat value %s is a %s", k, type(v))
end
same(msg, codec.decode(flat), "msg")

-- kopt.mpi without a launcher: not launched here, and nothing to send to
T.eq(mpi.launched(), false, "kopt.mpi.launched() outside mpirun")
T.eq(type(mpi.built()), "boolean", "kopt.mpi.built()")
local ok, err = mpi.send(1, codec.encode({ op = "quit" }))
T.eq(ok, nil, "send before init")
T.check(type(err) == "string" and err:find("MPI") ~= nil, "send before init: the sentence: %s", tostring(err))
T.eq(mpi.pending(), 0, "pending before init")
-- Regression: a NaN timeout was converted to int (undefined behaviour)
-- rather than refused as a bad argument.
local rok, rerr = pcall(mpi.recv, 0 / 0)
T.check(not rok and tostring(rerr):find("NaN", 1, true) ~= nil, "recv(NaN) is a bad argument: %s", tostring(rerr))

os.exit(T.done())
