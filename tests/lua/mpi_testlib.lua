-- Helpers for the MPI tests (test_mpi*.lua): run kopt under mpirun with
-- replay, and compare run folders with a one-process run. Skips (exit 77)
-- when this kopt was built without MPI or mpirun is not installed.
local T = require("testlib")
local cjson = require("cjson")

local M = {}

function M.require_mpi()
  if not require("kopt.mpi").built() then T.skip("this kopt was built without MPI (-DKOPT_MPI=OFF or no Open MPI)") end
  local h = io.popen("command -v mpirun 2>/dev/null")
  local path = h and h:read("l")
  if h then h:close() end
  if not path or path == "" then T.skip("mpirun is not installed (Debian: openmpi-bin)") end
end

-- Runs `mpirun [mpi_args] -np N kopt ARGS` (CI runs as root: Open MPI wants
-- to be told that is fine). Returns code, stdout, stderr.
--
-- Under AddressSanitizer the ranks run without leak detection: Open MPI
-- unloads its components at MPI_Finalize, so what they keep for the life of
-- the process is reported from "<unknown module>" frames that no
-- suppression can name (and the slow unwinder that could name them makes
-- one mpirun take 25 s). Every other ASan check stays on, and the same code
-- without mpirun is leak-checked by the other tests.
function M.mpirun(np, args, env, mpi_args)
  local out, err = os.tmpname(), os.tmpname()
  local asan = os.getenv("ASAN_OPTIONS")
  local cmd = string.format("%s ASAN_OPTIONS=%s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KOPT_DB=off "
                            .. "timeout 120 mpirun --oversubscribe %s -np %d %s %s >%s 2>%s",
                            env or "", asan and asan ~= "" and (asan .. ":detect_leaks=0") or "detect_leaks=0",
                            mpi_args or "", np, T.kopt, args, out, err)
  local _, _, code = os.execute(cmd)
  local o, e = T.slurp(out), T.slurp(err)
  os.remove(out)
  os.remove(err)
  return code, o, e
end


-- Eval events equal one by one (keys sorted by a canonical re-encode).
local function canonical(v)
  if type(v) ~= "table" then return cjson.encode(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = cjson.encode(tostring(k)) .. ":" .. canonical(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

function M.same_evals(a_dir, b_dir, what)
  local a, b = T.events(a_dir), T.events(b_dir)
  local function norm(list)
    local out = {}
    for i, ev in ipairs(list) do
      ev.timestamp = nil
      if type(ev.result) == "table" then ev.result.rank = nil end
      out[i] = canonical(ev)
    end
    return out
  end
  return T.same_list(norm(a), norm(b), what)
end

-- The ranks that evaluated at least one candidate, from the eval events.
function M.ranks_used(dir)
  local used = {}
  for _, ev in ipairs((T.events(dir))) do
    if type(ev.result) == "table" and ev.result.rank then used[ev.result.rank] = (used[ev.result.rank] or 0) + 1 end
  end
  return used
end

-- The summary's best line ("best: ... ms at evaluation N ...").
function M.best_line(stdout) return stdout:match("\n%s*(best: [^\n]+)") end

return M
