-- Every kernel in kernels/ compiles for sm_90 across a sample of its spec's
-- space (no GPU needed): each spec under specs/ gets its reference and
-- KOPT_COMPILE_SAMPLE (default 6) random valid configs, compiled through the
-- compile pool without the cache. A config the constraints allow must compile,
-- must be launchable with its block size (max_threads from launch bounds and
-- registers) and must fit its shared memory; configs that spill are listed.
--   KOPT_COMPILE_SAMPLE=all   compiles whole spaces (slow: thousands)
--   KOPT_COMPILE_SEED=N       another sample (default 1)
--   KOPT_COMPILE_SPECS=a,b    only specs/a.json and specs/b.json
local compile = require("kopt.compile")
local rng_mod = require("kopt.rng")
local space_mod = require("kopt.space")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")

local sample = os.getenv("KOPT_COMPILE_SAMPLE") or "6"
local seed = math.tointeger(tonumber(os.getenv("KOPT_COMPILE_SEED") or "1")) or 1
local arch = "sm_90"

local function space_of(spec)
  local scope = { device = spec.device }
  for k, v in pairs(spec.problem) do scope[k] = v end
  return space_mod.new({ knobs = spec.knobs, constraints = spec.constraints, scope = scope })
end

local function config_text(spec, config)
  local parts = {}
  for _, k in ipairs(spec.knobs) do parts[#parts + 1] = k.name .. "=" .. tostring(config[k.name]) end
  return table.concat(parts, " ")
end

local only
if os.getenv("KOPT_COMPILE_SPECS") then
  only = {}
  for name in os.getenv("KOPT_COMPILE_SPECS"):gmatch("[^,]+") do only[name .. ".json"] = true end
end
local files = {}
for _, f in ipairs(assert(sys.list_dir("specs"))) do
  if f:match("%.json$") and (not only or only[f]) then files[#files + 1] = "specs/" .. f end
end
table.sort(files)
assert(#files > 0, "no specs under specs/")

local pool = compile.pool(nil, { cache = false })
local jobs, kernels_seen = {}, {}
for _, path in ipairs(files) do
  local spec = spec_mod.load(path)
  kernels_seen[spec.kernel.path:match("([^/]*)$")] = true
  if spec.reference then kernels_seen[spec.reference.path:match("([^/]*)$")] = true end
  local space = space_of(spec)
  local configs, seen = {}, {}
  if sample == "all" then
    configs = space:enumerate()
  else
    local rng = rng_mod.new(seed)
    local want = math.min(math.tointeger(tonumber(sample)) or 6, space:size())
    local tries = 0
    while #configs < want and tries < 100 * want do
      tries = tries + 1
      local c = assert(space:sample(rng), path .. ": empty space")
      local key = space:key(c)
      if not seen[key] then
        seen[key] = true
        configs[#configs + 1] = c
      end
    end
  end
  for _, c in ipairs(configs) do
    local id = pool:submit(compile.job_for(spec, c, arch))
    jobs[id] = { spec = spec, config = c, what = path .. " " .. config_text(spec, c) }
  end
  local ref = compile.reference_job(spec, arch)
  if ref then
    jobs[pool:submit(ref)] = { spec = spec, what = path .. " reference " .. spec.reference.entry }
  end
end

-- Every .cu under kernels/ is used by some spec: a kernel nobody compiles
-- would rot unnoticed.
for _, f in ipairs(only and {} or assert(sys.list_dir("kernels"))) do
  if f:match("%.cu$") then assert(kernels_seen[f], "kernels/" .. f .. " is not used by any spec") end
end

local failures, spilling, n, t0 = {}, {}, 0, sys.now()
while true do
  local id, r = pool:wait_any()
  if not id then break end
  n = n + 1
  local job = jobs[id]
  local why
  if not r.ok then
    why = "compile error:\n" .. r.log
  elseif job.config then
    local launch = job.spec:launch(job.config)
    local threads = launch.block[1] * launch.block[2] * launch.block[3]
    local dev = job.spec.device
    if r.max_threads < threads then
      why = string.format("block of %d threads but at most %d can launch (%d registers)",
                          threads, r.max_threads, r.regs)
    elseif r.smem_static + launch.smem > dev.max_smem_optin then
      why = string.format("%d bytes of shared memory (static %d + dynamic %d) exceed %d",
                          r.smem_static + launch.smem, r.smem_static, launch.smem, dev.max_smem_optin)
    end
    -- Spilling is slow, not invalid: reported, never a failure.
    if (r.spills or 0) > 0 then
      spilling[#spilling + 1] = string.format("%s: %d bytes of spills (%d registers)", job.what, r.spills, r.regs)
    end
  end
  if why then failures[#failures + 1] = job.what .. ": " .. why end
  if os.getenv("KOPT_VERBOSE") then
    print(string.format("%-70s regs %3s smem %6s %5.2f s %s", job.what, tostring(r.regs),
                        tostring(r.smem_static), r.compile_s, r.ok and "" or "FAILED"))
  end
end
pool:close()
print(string.format("compiled %d kernels from %d specs in %.1f s (%d failed)", n, #files,
                    sys.now() - t0, #failures))
for _, f in ipairs(spilling) do print("note: " .. f) end
for _, f in ipairs(failures) do print("FAIL " .. f) end
return #failures == 0 and 0 or 1
