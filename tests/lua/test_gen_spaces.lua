-- tools/gen_spaces.py, the generated spaces of docs/SEARCH.md ("Generated
-- spaces"): the same seed writes the same files, another seed others; every
-- file is a Kernel Tuner cache that `kopt compare` reads (each entry carries
-- every knob and a positive time or a failure, the restriction leaves
-- configurations out); the traits the generator prints are in the files.
-- --rough keeps each space's configurations and failures, changes its times,
-- and makes the spaces harder for a value model (tools/model_quality.lua).
local T = require("testlib")
local cjson = require("cjson")

if not os.execute("python3 -c 'import sys' >/dev/null 2>&1") then
  T.skip("python3 not found: tools/gen_spaces.py is not tested")
end

local tmp = T.tmpdir("gen_spaces")
local gen = T.source_dir .. "/tools/gen_spaces.py"

local function generate(dir, seed, count, flags)
  local p = assert(io.popen(string.format("python3 '%s' '%s' --count %d --seed %d %s 2>&1", gen, dir, count, seed,
                                          flags or "")))
  local lines = {}
  for l in p:lines() do lines[#lines + 1] = l end
  local ok = p:close()
  T.check(ok, "gen_spaces.py --seed %d exits 0 (%s)", seed, table.concat(lines, " | "))
  return lines
end

local a = generate(tmp .. "/a", 7, 12)
generate(tmp .. "/b", 7, 12)
local c = generate(tmp .. "/c", 8, 12)
T.eq(#a, 12, "one line per space")

local same, differ = 0, 0
for i = 0, 11 do
  local name = string.format("/gen_7_%d.json", i)
  if T.slurp(tmp .. "/a" .. name) == T.slurp(tmp .. "/b" .. name) then same = same + 1 end
  local other = io.open(string.format("%s/c/gen_8_%d.json", tmp, i))
  if other then
    if other:read("a") ~= T.slurp(tmp .. "/a" .. name) then differ = differ + 1 end
    other:close()
  end
end
T.eq(same, 12, "seed 7 twice: byte-identical files")
T.eq(differ, 12, "seed 8: every file differs from seed 7's")
T.eq(#c, 12, "seed 8: 12 spaces")

-- Each file: the knobs of every entry, times positive or a failure, the
-- configuration count the printed line gives (fewer than the grid where
-- restricted), and the traits as printed.
local traits = { failures = 0, clean = 0, restricted = 0 }
local files = {}
for i, line in ipairs(a) do
  local path = line:match("^(.-): ")
  files[#files + 1] = path
  local raw = cjson.decode(T.slurp(path))
  local grid = 1
  for _, k in ipairs(raw.tune_params_keys) do grid = grid * #raw.tune_params[k] end
  local n, ok, fails, bad = 0, 0, 0, 0
  for key, e in pairs(raw.cache) do
    n = n + 1
    local parts = {}
    for _, k in ipairs(raw.tune_params_keys) do
      if e[k] == nil then bad = bad + 1 end
      parts[#parts + 1] = tostring(math.tointeger(e[k]) or e[k])
    end
    if table.concat(parts, ",") ~= key then bad = bad + 1 end
    if e.time == "RuntimeFailedConfig" then fails = fails + 1
    elseif type(e.time) == "number" and e.time > 0 then ok = ok + 1
    else bad = bad + 1 end
  end
  T.eq(bad, 0, "space " .. i .. ": malformed entries")
  T.check(line:find(n .. " configs", 1, true) or line:find("restriction", 1, true),
          "space %d: %d configs as printed (%s)", i, n, line)
  T.check(line:find(ok .. " ok", 1, true), "space %d: %d ok as printed (%s)", i, ok, line)
  T.check(ok >= 20, "space %d: at least 20 successes (%d)", i, ok)
  if line:find("restriction", 1, true) then
    traits.restricted = traits.restricted + 1
    T.check(n < grid, "space %d: a restriction leaves configurations out (%d of %d)", i, n, grid)
  else
    T.eq(n, grid, "space " .. i .. ": the whole grid")
  end
  if fails > 0 then traits.failures = traits.failures + 1 else traits.clean = traits.clean + 1 end
end
T.check(traits.failures > 0 and traits.clean > 0 and traits.restricted > 0,
        "seed 7 mixes spaces with and without failures and a restriction (%d, %d, %d)",
        traits.failures, traits.clean, traits.restricted)

-- --rough: the same configurations and failures, other times, and a value
-- model fitted to 20 samples ranks them worse (the median over the spaces)
local rough = generate(tmp .. "/r", 7, 12, "--rough")
T.eq(#rough, 12, "--rough: 12 spaces")
local same_keys, changed, rough_files = 0, 0, {}
for i = 0, 11 do
  local plain = cjson.decode(T.slurp(string.format("%s/a/gen_7_%d.json", tmp, i)))
  local path = string.format("%s/r/genr_7_%d.json", tmp, i)
  rough_files[#rough_files + 1] = path
  local r = cjson.decode(T.slurp(path))
  local keys_match, times_differ = true, false
  for key, e in pairs(plain.cache) do
    local o = r.cache[key]
    if not o or (e.time == "RuntimeFailedConfig") ~= (o.time == "RuntimeFailedConfig") then keys_match = false
    elseif e.time ~= o.time then times_differ = true end
  end
  for key in pairs(r.cache) do if not plain.cache[key] then keys_match = false end end
  if keys_match then same_keys = same_keys + 1 end
  if times_differ then changed = changed + 1 end
end
T.eq(same_keys, 12, "--rough: every space keeps its configurations and failures")
T.eq(changed, 12, "--rough: every space's times change")
local function median_spearman(list)
  local code, out, err = T.run(string.format("script %s/tools/model_quality.lua %s 20 3", T.source_dir,
                                             table.concat(list, ",")))
  T.eq(code, 0, "model_quality exit code (" .. err .. ")")
  local v = {}
  for s in out:gmatch("\n%S+%s+([%d.-]+) /") do v[#v + 1] = tonumber(s) end
  table.sort(v)
  return #v == #list and v[(#v + 1) // 2] or nil
end
local m_plain, m_rough = median_spearman(files), median_spearman(rough_files)
T.check(m_plain and m_rough and m_rough < m_plain - 0.05,
        "--rough: the Gaussian process ranks the rough spaces worse (median Spearman %s against %s)",
        tostring(m_rough), tostring(m_plain))

-- kopt compare reads them
local code, _, err = T.run(string.format("compare --strategies random,rules --spaces %s,%s --seeds 2 --budgets 10,20 --out %s/cmp -q",
                                         files[1], files[2], tmp))
T.eq(code, 0, "kopt compare on two generated spaces (" .. err .. ")")
local bench = cjson.decode(T.slurp(tmp .. "/cmp/benchmark.json"))
T.eq(#bench.spaces, 2, "both spaces in benchmark.json")

return T.done()
