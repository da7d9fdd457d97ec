-- Helpers for Lua tests run through the real binary (`kopt script FILE`):
-- run kopt as a child process, capture stdout/stderr/exit code, assert.
local T = { failures = 0, count = 0 }

T.kopt = os.getenv("KOPT") or "./build/kopt"
local tmp_root = os.getenv("TMPDIR") or "/tmp"

function T.tmpdir(tag)
  local dir = string.format("%s/kopt-test-%s-%d-%d", tmp_root, tag or "t", require("kopt.sys").getpid(),
                            math.random(1, 1e9))
  assert(os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'"))
  return dir
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end
T.slurp = slurp

function T.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

T.source_dir = os.getenv("KOPT_SOURCE_DIR") or "."

-- Runs `kopt ARGS` (a shell-quoted string) with `env` ("VAR=x ...") in the
-- folder `cwd` (default: the current one); returns code, stdout, stderr.
-- The experience database is off (KOPT_DB=off) unless env names one, so no
-- test reads or writes the user's, and no run is answered by another's.
function T.run(args, env, cwd)
  if not (env or ""):find("KOPT_DB=", 1, true) then env = "KOPT_DB=off " .. (env or "") end
  local out, err = os.tmpname(), os.tmpname()
  local kopt = T.kopt
  if cwd and kopt:sub(1, 1) ~= "/" then kopt = require("kopt.sys").realpath(kopt) or kopt end
  -- (a user's shared experience dataset is no test's input: a test names
  -- KOPT_EXPERIENCE itself when it wants one)
  local unset = env:find("KOPT_EXPERIENCE=", 1, true) and "" or "unset KOPT_EXPERIENCE; "
  local cmd = string.format("%s%s%s %s %s >%s 2>%s", unset, cwd and ("cd '" .. cwd .. "' && ") or "", env or "", kopt,
                            args, out, err)
  local _, _, code = os.execute(cmd)
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  return code, o, e
end

function T.check(cond, fmt, ...)
  T.count = T.count + 1
  if not cond then
    T.failures = T.failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
  return cond
end

function T.eq(got, want, what)
  return T.check(got == want, "%s: expected %s, got %s", what, tostring(want), tostring(got))
end

-- A run directory's evaluations (in order) and its stop event, read with
-- plain cjson (not kopt's own reader).
function T.events(dir)
  local cjson = require("cjson")
  local evals, stop = {}, nil
  for line in io.lines(dir .. "/events.jsonl") do
    local ev = cjson.decode(line)
    if ev.event == "eval" then evals[#evals + 1] = ev end
    if ev.event == "stop" then stop = ev end
  end
  return evals, stop
end

-- A recorded space in Kernel Tuner's cache format, written to path: knobs
-- { { name, n }, ... } each take the values 1..n, and time_of(v1, v2, ...)
-- (in the knobs' order) gives every config's time. Returns path.
function T.grid_space(path, knobs, time_of)
  local names, params, cache, v = {}, {}, {}, {}
  for i, k in ipairs(knobs) do
    names[i], params[k[1]] = k[1], {}
    for x = 1, k[2] do params[k[1]][x] = x end
  end
  local function fill(i)
    if i > #knobs then
      local entry, parts = { time = time_of(table.unpack(v)) }, {}
      for j, name in ipairs(names) do entry[name], parts[j] = v[j], tostring(v[j]) end
      cache[table.concat(parts, ",")] = entry
      return
    end
    for x = 1, knobs[i][2] do v[i] = x fill(i + 1) end
  end
  fill(1)
  T.write(path, require("kopt.json").encode({ tune_params_keys = names, tune_params = params,
                                              objective = "time", cache = cache }))
  return path
end

-- `kopt mcgs` on a replay of a recorded space (budget, seed, more CLI
-- options) into a fresh directory under tmp; checks the exit code and
-- returns the run's evaluations.
function T.mcgs_replay(tmp, space, budget, seed, opts)
  local dir = string.format("%s/s%d-%s", tmp, seed, opts:gsub("[^%w]", "_"))
  local code, _, err = T.run(string.format("mcgs --backend replay:%s --budget %d --seed %d -q %s --out %s",
                                           space, budget, seed, opts, dir))
  T.eq(code, 0, "exit code (" .. err .. ")")
  return (T.events(dir))
end

-- An MCGS option checked on a replay (T.mcgs_replay): two runs with `opts`
-- and the same seed measure the same states in the same order, `budget` of
-- them, and not the default's. The runs go to tmp/a, tmp/b and tmp; returns
-- the option's events and the default's.
function T.option_changes_run(tmp, space, budget, seed, opts, what)
  local a = T.mcgs_replay(tmp .. "/a", space, budget, seed, opts)
  local b = T.mcgs_replay(tmp .. "/b", space, budget, seed, opts)
  local c = T.mcgs_replay(tmp, space, budget, seed, "")
  local same, differ = #a == #b, false
  for i = 1, #a do
    if a[i].key ~= (b[i] and b[i].key) then same = false end
    if a[i].key ~= (c[i] and c[i].key) then differ = true end
  end
  T.eq(#a, budget, what .. ": evaluations")
  T.check(same, "%s: the same seed gives the same evaluations", what)
  T.check(differ, "%s: the run differs from the default's", what)
  return a, c
end

-- Of `seeds` seeds, those where hit(seed, off) is false (trapped) and of
-- them those where hit(seed, on) is true (freed): the count of each.
function T.trapped_and_freed(seeds, hit, off, on)
  local trapped, freed = 0, 0
  for seed = 1, seeds do
    if not hit(seed, off) then
      trapped = trapped + 1
      if hit(seed, on) then freed = freed + 1 end
    end
  end
  return trapped, freed
end

-- stderr of a failed command: exactly one line, "kopt: " and a sentence,
-- with no traceback and no "internal error". Progress lines (a carriage
-- return before them) are not counted. Returns the sentence.
function T.one_sentence(err, what)
  local lines = {}
  for line in err:gmatch("[^\n]+") do
    line = line:match("[^\r]*$")
    if line ~= "" then lines[#lines + 1] = line end
  end
  T.check(#lines == 1, "%s: expected one line on stderr, got %d:\n%s", what, #lines, err)
  T.check(not err:lower():find("traceback", 1, true), "%s: a traceback on stderr:\n%s", what, err)
  T.check(not err:lower():find("internal error", 1, true), "%s: an internal error on stderr:\n%s", what, err)
  local line = lines[#lines] or ""
  T.check(line:match("^kopt: [^\n]+$") ~= nil, "%s: not a kopt sentence: %s", what, line)
  return line
end

-- Every JSON file under `dir` parses under a strict parser
-- (tools/check_strict_json.py: no NaN, no Infinity, no torn lines).
function T.strict_json(dir, what)
  local out = os.tmpname()
  local _, _, code = os.execute(string.format("python3 '%s/tools/check_strict_json.py' '%s' >%s 2>&1",
                                              T.source_dir, dir, out))
  local text = T.slurp(out)
  os.remove(out)
  T.check(code == 0, "%s: files that are not strict JSON (or no python3):\n%s", what or dir, text)
  return code == 0
end

-- The eval events of a run folder, as a list of keys in order.
function T.keys(dir)
  local keys = {}
  for _, ev in ipairs((T.events(dir))) do keys[#keys + 1] = ev.key end
  return keys
end

function T.same_list(a, b, what)
  local n = math.max(#a, #b)
  for i = 1, n do
    if a[i] ~= b[i] then
      return T.check(false, "%s: item %d differs: %s vs %s (%d vs %d items)", what, i, tostring(a[i]),
                     tostring(b[i]), #a, #b)
    end
  end
  return T.check(true, "")
end

function T.exists(path)
  return require("kopt.sys").stat(path) ~= nil
end

-- A decoded report without its timings (seconds, cpu_s), which differ
-- from run to run.
function T.untimed(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if k ~= "seconds" and k ~= "cpu_s" then out[k] = T.untimed(x) end
  end
  return out
end

-- Checks two decoded JSON values equal, field by field (a check per leaf,
-- named by its path from `where`).
function T.same_tree(a, b, where)
  if type(a) ~= type(b) then return T.check(false, "%s: %s against %s", where, tostring(a), tostring(b)) end
  if type(a) ~= "table" then return T.check(a == b, "%s: %s against %s", where, tostring(a), tostring(b)) end
  for k, x in pairs(a) do T.same_tree(x, b[k], where .. "." .. tostring(k)) end
  for k, x in pairs(b) do if a[k] == nil then T.same_tree(nil, x, where .. "." .. tostring(k)) end end
end

-- Ends the test: exit code 0 when every check passed.
-- Ends a test file: 0 when every check passed. A failure exits 1 here, so
-- a file that ends with a bare `T.done()` (no `return`) still fails.
function T.done()
  io.stdout:write(string.format("%d checks, %d failed\n", T.count, T.failures))
  if T.failures > 0 then
    io.stdout:flush()
    os.exit(1, true)
  end
  return 0
end

function T.skip(reason)
  io.stdout:write("SKIPPED: ", reason, "\n")
  os.exit(77)
end

return T
