-- Rank 0's MPI backend (kopt.backends.mpi) in one process, no mpirun (one
-- rank, MPI's receive stubbed):
-- * the per-rank counts of the summary count evaluations only: a free
--   result (a config the recording lacks, never measured) is none;
-- * the digest of the space a rank replays (its hello's `space_digest`) is
--   the same for two GPUs' recordings of one space, and differs for part of
--   its configurations or another kernel's recording; a spec's digest
--   (`spec_digest`) differs for a spec with another constraint.
local T = require("testlib")
local mpi = require("kopt.mpi")
local mpi_backend = require("kopt.backends.mpi")
local replay = require("kopt.backends.replay")

mpi.recv = function() return nil, "timeout" end

-- counts: a local backend whose every second answer is free
do
  local fake = { name = "replay", slots = 4 }
  function fake.describe() return { device = "fake" } end
  function fake.evaluate(_, jobs)
    local out = {}
    for i = 1, #jobs do
      out[i] = i % 2 == 0 and { status = "invalid", free = true, log = "not in the recorded space" }
        or { status = "ok", time_ms = 1, cost_s = 1 }
    end
    return out
  end
  function fake.elapsed() return 0 end
  local b = mpi_backend.open(fake, { comm = { rank = 0, size = 1, lost = {} }, quiet = true })
  local jobs = {}
  for i = 1, 4 do jobs[i] = { key = tostring(i), config = { x = i }, candidate = { config = { x = i } } } end
  local results = b:evaluate(jobs)
  T.eq(#results, 4, "every job has a result")
  T.eq(b.counts[0], 2, "rank 0's count: its evaluations, not its free results")
  T.check(b:summary():find("rank 0 2;", 1, true) ~= nil, "the summary: %s", b:summary())
end

-- the problem digest of a recording
do
  local cjson = require("cjson")
  local tmp = T.tmpdir("mpi-backend")
  local file = "tests/data/convolution_A100.json"
  local doc = cjson.decode(T.slurp(file))
  local function digest(path)
    return select(2, mpi_backend.problem_digest(replay.open(nil, { file = path, quiet = true })))
  end
  local mine = digest(file)
  T.eq(digest(file), mine, "the same recording: the same digest")
  -- another GPU's recording of the same space
  T.eq(digest("tests/data/convolution_A4000.json"), mine, "another GPU's recording of the same space")
  local keys, half = {}, {}
  for k in pairs(doc.cache) do keys[#keys + 1] = k end
  table.sort(keys)
  for i = 1, #keys, 2 do half[keys[i]] = doc.cache[keys[i]] end
  doc.cache = half
  T.write(tmp .. "/half.json", cjson.encode(doc))
  T.check(digest(tmp .. "/half.json") ~= mine, "half of the configurations: another digest")
  T.check(digest("tests/data/pnpoly_RTX_3090.json") ~= mine, "another kernel: another digest")
  -- a spec with one more constraint
  local spec_mod = require("kopt.spec")
  local raw = cjson.decode(T.slurp("specs/convolution.json"))
  raw.constraints[#raw.constraints + 1] = "block_size_x >= 32"
  local root = os.getenv("KOPT_SOURCE_DIR") or "."
  raw.kernel.source, raw.reference.source = root .. "/kernels/convolution.cu", root .. "/kernels/convolution_ref.cu"
  raw.recording = root .. "/" .. file
  T.write(tmp .. "/conv.json", cjson.encode(raw))
  local ok, other = pcall(spec_mod.load, tmp .. "/conv.json")
  local rec = replay.open(nil, { file = file, quiet = true })
  T.check(ok, "the edited spec loads: %s", tostring(other))
  T.eq(mpi_backend.problem_digest(rec, spec_mod.load("specs/convolution.json")),
       mpi_backend.problem_digest(rec, spec_mod.load("specs/convolution.json")), "one spec: one digest")
  T.check(ok and mpi_backend.problem_digest(rec, spec_mod.load("specs/convolution.json"))
          ~= mpi_backend.problem_digest(rec, other), "another constraint: another spec digest")
  os.execute("rm -rf '" .. tmp .. "'")
end

os.exit(T.done())
