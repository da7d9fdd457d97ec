-- Command line: `kopt [options] STRATEGY [SPEC]` and the subcommands found in
-- lua/kopt/commands/<name>.lua. Everything is validated before anything is
-- written; bad input is one sentence on stderr and exit code 2.
local errors = require("kopt.errors")
local recording = require("kopt.recording")
local range_probe = require("kopt.range_probe")
local sanitize = require("kopt.sanitize")
local strategy = require("kopt.strategy")
local sys = require("kopt.sys")

local M = {}

-- Flag table: drives parsing and --help. kind: "flag" (no value), or the
-- name of a converter in `convert` below.
M.flags = {
  { "--budget", "count", "N", "stop after N evaluations (failures count; default 200, or the strategy's own)" },
  { "--time-limit", "seconds", "S", "stop after S seconds of evaluation time (simulated time under replay)" },
  { "--out", "string", "DIR", "run directory (default runs/<spec name>/)" },
  { "--resume", "flag", nil, "continue the run in --out without re-measuring anything it recorded" },
  { "--backend", "backend", "B", "cuda (default when a GPU is present) or replay:FILE (a recorded search space)" },
  { "--seed", "integer", "N", "random seed (default 1); logged in the run" },
  { "--gpus", "gpu_list", "LIST", "GPUs to use, e.g. 0,1 (default: all)" },
  { "--profile", "profile", "P", "whom to profile with CUPTI: none (default), top-k (the current best 3, as they appear), top-N (the best N), every-N (every N-th valid result)" },
  { "--finalists", "count", "K", "re-measure the K best configs, interleaved, before naming the winner (GPU; default 3, 1 = off)" },
  { "--sanitize", "sanitize", "TOOLS", "check the winner under compute-sanitizer: racecheck (the default on a GPU), none, or a list of racecheck,memcheck,synccheck,initcheck (docs/TRUST.md)" },
  { "--range-probe", "range_probe", "MODE", "check the winner on inputs scaled 10-1000x against the reference: note (the default on a GPU: say when it is wrong there), strict (then name the next config that passes), off (docs/TRUST.md)" },
  { "--db", "string", "PATH", "the experience database (default $KOPT_DB, else $XDG_DATA_HOME/kopt/experience.db, else ~/.local/share/kopt/experience.db; docs/DATABASE.md)" },
  { "--no-db", "flag", nil, "no experience database and no learned method names: nothing read or written outside the run folder but the compiled-kernel cache" },
  { "--fresh", "flag", nil, "search again: no known best, no results served from the experience database" },
  { "--replay-check", "replay_check", "MODE", "strict (default): a bad entry in a replay file is an error; lenient: skipped and counted" },
  { "--artifacts", "artifacts", "MODE", "per-variant files in <out>/variants/: none, best (default: every source variant, compiled code of the best), all" },
  { "--compile-timeout", "seconds", "S", "a kernel whose compile takes longer is a compile error (default 600)" },
  { "--mpi-root", "mpi_root", "MODE", "under mpirun/srun: eval (default) or engine (rank 0 only runs the engine); docs/MPI.md" },
  { "--mpi-timeout", "seconds", "S", "under mpirun/srun: a rank silent this long with work in hand is lost, its work re-queued (default 120)" },
  { "--allow-mixed", "flag", nil, "under mpirun/srun: accept ranks whose device differs from rank 0's" },
  { "--opt", "keyvalue", "K=V", "strategy option (repeatable); `kopt STRATEGY --help` lists them" },
  { "-q", "flag", nil, "quiet: only errors and the final summary" },
  { "-v", "flag", nil, "verbose: strategy events and tracebacks" },
  { "--lua-dev", "string", "DIR", "read lua/ and strategies/ from DIR instead of the built-in copies" },
  { "--help", "flag", nil, "this help, or a strategy's options with STRATEGY --help" },
  { "--version", "flag", nil, "print the version" },
}

local convert = {}
function convert.string(v) return v end
function convert.count(v, flag)
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then errors.usage("%s: expected a positive integer, got '%s'", flag, v) end
  return n
end
-- (at most 2^53: the run's files keep it as a JSON number, which reads back
-- exactly only up to there, and --resume compares it)
function convert.integer(v, flag)
  local n = math.tointeger(tonumber(v))
  if not n or n < 0 then errors.usage("%s: expected a non-negative integer, got '%s'", flag, v) end
  if n > 2^53 then errors.usage("%s: %s is larger than 2^53 (9007199254740992), the largest kopt keeps exactly", flag, v) end
  return n
end
function convert.seconds(v, flag)
  local n = tonumber(v)
  if not n or n <= 0 or n ~= n or n == math.huge then
    errors.usage("%s: expected a positive number of seconds, got '%s'", flag, v)
  end
  return n
end
function convert.backend(v, flag)
  if v == "cuda" then return { kind = "cuda" } end
  local file = v:match("^replay:(.+)$")
  if file then return { kind = "replay", file = file } end
  errors.usage("%s: expected 'cuda' or 'replay:FILE', got '%s'", flag, v)
end
function convert.gpu_list(v, flag)
  local list, seen = {}, {}
  for item in (v .. ","):gmatch("([^,]*),") do
    local n = math.tointeger(tonumber(item))
    if not n or n < 0 then errors.usage("%s: expected a comma-separated list of GPU indices, got '%s'", flag, v) end
    -- (two workers timing on one GPU would each measure the other's load)
    if seen[n] then errors.usage("%s: GPU %d is given twice", flag, n) end
    seen[n] = true
    list[#list + 1] = n
  end
  return list
end
function convert.artifacts(v, flag)
  if v ~= "none" and v ~= "best" and v ~= "all" then
    errors.usage("%s: expected none, best or all, got '%s'", flag, v)
  end
  return v
end
function convert.profile(v, flag)
  local n = v:match("^every%-(%d+)$") or v:match("^top%-(%d+)$")
  if n and not (math.tointeger(tonumber(n)) and tonumber(n) >= 1) then
    errors.usage("%s: N must be a whole number from 1 to 2^63 - 1, got '%s'", flag, v)
  end
  if v == "none" or v == "top-k" or n then return v end
  errors.usage("%s: expected none, top-k, top-N or every-N, got '%s'", flag, v)
end
function convert.sanitize(v, flag)
  local list, why = sanitize.parse_tools(v)
  if not list then errors.usage("%s: %s", flag, why) end
  return list
end
function convert.range_probe(v, flag)
  local mode, why = range_probe.parse_mode(v)
  if not mode then errors.usage("%s: %s", flag, why) end
  return mode
end
function convert.replay_check(v, flag) return recording.check_mode(v, flag) end
function convert.mpi_root(v, flag)
  if v == "eval" or v == "engine" then return v end
  errors.usage("%s: expected eval or engine, got '%s'", flag, v)
end
function convert.keyvalue(v, flag)
  local k, val = v:match("^([%w_%-]+)=(.*)$")
  if not k then errors.usage("%s: expected key=value, got '%s'", flag, v) end
  return { k, val }
end

local by_name = {}
for _, f in ipairs(M.flags) do by_name[f[1]] = f end

-- Parses argv into options and positional arguments.
function M.parse(argv)
  local opts, pos = { opt = {} }, {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    local f = by_name[name]
    if a == "--" then
      for j = i + 1, #argv do pos[#pos + 1] = argv[j] end
      break
    elseif f then
      local key = f[1]:gsub("^%-+", ""):gsub("%-", "_")
      if f[2] == "flag" then
        if inline then errors.usage("%s takes no value", f[1]) end
        opts[key] = true
      else
        local v = inline
        if not v then
          i = i + 1
          v = argv[i]
          if v == nil then errors.usage("%s needs a value (%s)", f[1], f[3]) end
        end
        v = convert[f[2]](v, f[1])
        if key == "opt" then opts.opt[#opts.opt + 1] = v else opts[key] = v end
      end
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      errors.usage("unknown option '%s' (see kopt --help)", a)
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  if opts.q and opts.v then errors.usage("-q and -v cannot be used together") end
  return opts, pos
end

function M.help()
  local lines = {
    "usage: kopt [options] STRATEGY [SPEC]",
    "       kopt COMMAND ...   (script, devices, compare, regraph, ...)",
    "",
    "Tunes the GPU kernel described by SPEC (a JSON file) with the search strategy",
    "STRATEGY (a Lua file, or a built-in name: " .. table.concat(strategy.builtins(), ", ") .. ").",
    "With --backend replay:FILE, SPEC may be left out: the space comes from the file.",
    "",
    "options:",
  }
  for _, f in ipairs(M.flags) do
    local left = f[1] .. (f[3] and (" " .. f[3]) or "")
    lines[#lines + 1] = string.format("  %-20s %s", left, f[4])
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "commands:"
  for _, c in ipairs(M.commands()) do
    local ok, mod = pcall(require, "kopt.commands." .. c)
    lines[#lines + 1] = string.format("  %-20s %s", c, ok and mod.summary or "")
  end
  return table.concat(lines, "\n") .. "\n"
end

function M.commands()
  local names = {}
  for _, p in ipairs(package.builtin.list("lua/kopt/commands/")) do
    names[#names + 1] = p:match("([%w_]+)%.lua$")
  end
  table.sort(names)
  return names
end

-- A subcommand's arguments from argv[from], with "--flag=value" given as
-- "--flag", "value", as the run's own parser takes it (the subcommands'
-- parsers read the two-word form); nothing after "--" is split. A flag the
-- command lists in `flags_without_value` given a value is refused here (its
-- parser would read the value as the next argument, and name that).
local function split_flags(argv, from, name, flags_without_value)
  local out, rest = {}, false
  local bare = {}
  for _, f in ipairs(flags_without_value or {}) do bare[f] = true end
  for i = from, #argv do
    local a = argv[i]
    local flag, value = a:match("^(%-%-[%a][%w%-]*)=(.*)$")
    if rest or not flag then
      out[#out + 1] = a
    elseif bare[flag] then
      errors.usage("%s: %s takes no value (got '%s')", name, flag, a)
    else
      out[#out + 1], out[#out + 2] = flag, value
    end
    if a == "--" then rest = true end
  end
  return out
end

local function run(argv)
  local first = argv[1]
  if first == "--devices" then first = "devices" end
  if first and not first:find("[/.]") and first:sub(1, 1) ~= "-" then
    -- (each rank would run the whole of it, into the same folder)
    local size = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE") or os.getenv("SLURM_NTASKS") or "")
    -- lazy: kopt.mpi is asked only for these two commands, under a launcher
    if (first == "suite" or first == "compare") and size and size > 1 and require("kopt.mpi").launched() then
      errors.usage("%s does not run under mpirun or srun (each of the %d ranks would run all of it, into the " ..
                   "same folder): run it without them", first, size)
    end
    local ok, cmd = pcall(require, "kopt.commands." .. first)
    if ok then
      return cmd.main(first == "script" and { table.unpack(argv, 2) } or
                      split_flags(argv, 2, first, cmd.flags_without_value)) or 0
    end
    if not tostring(cmd):find("module 'kopt.commands." .. first .. "' not found", 1, true) then error(cmd, 0) end
  end
  local opts, pos = M.parse(argv)
  if opts.version then
    io.stdout:write("kopt ", sys.version, "\n")
    return 0
  end
  if opts.help and #pos == 0 then
    io.stdout:write(M.help())
    return 0
  end
  -- lazy: MPI's lifecycle only under mpirun / srun (docs/MPI.md)
  if require("kopt.mpi").launched() then return require("kopt.cluster").main(opts, pos) end
  -- lazy: the run command loads (engine, backends, reports) only when chosen, like the others
  return require("kopt.run").main(opts, pos)
end

-- Entry point called from C. Returns the exit code.
function M.main(argv)
  local verbose = false
  for _, a in ipairs(argv) do if a == "-v" then verbose = true end end
  local ok, result = xpcall(run, function(e)
    if errors.is_user_error(e) then return e end
    if errors.is_interrupt(e) then return { interrupt = true } end
    return { internal = true, msg = debug.traceback(errors.describe(e), 2) }
  end, argv)
  if ok then return result end
  -- Lua calls no message handler for a memory error: the value is the bare string.
  if type(result) ~= "table" then result = { internal = true, msg = tostring(result) } end
  if result.interrupt then
    io.stderr:write("kopt: interrupted\n")
    return errors.INTERRUPTED
  end
  if result.internal then
    local _, limit, hit = sys.memory()
    if hit and tostring(result.msg):find("not enough memory", 1, true) then
      io.stderr:write(string.format("kopt: out of memory: kopt's Lua memory reached its limit of %.3g GiB "
        .. "(KOPT_MEMORY_LIMIT; the default is three quarters of the machine's memory); a run folder keeps "
        .. "every evaluation it recorded, and --resume continues it under a higher limit\n", limit / 2 ^ 30))
      return errors.RUNTIME
    end
    io.stderr:write("kopt: internal error: " .. tostring(result.msg) .. "\n")
    return errors.RUNTIME
  end
  io.stderr:write("kopt: " .. tostring(result.msg) .. "\n")
  if verbose and result.traceback then io.stderr:write(result.traceback .. "\n") end
  return result.code
end

return M
