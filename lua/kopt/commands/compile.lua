-- `kopt compile SPEC`: compiles a spec's kernel for some of its configs (and
-- its reference) with NVRTC, no GPU needed, and prints what ptxas reports:
-- registers, shared memory, spills, the largest block that can launch. Exit
-- code 1 when a config the spec allows fails to compile or cannot launch.
local compile = require("kopt.compile")
local errors = require("kopt.errors")
local json = require("kopt.json")
local nvrtc = require("kopt.nvrtc")
local rng_mod = require("kopt.rng")
local run_mod = require("kopt.run")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")

local M = { summary = "compile a spec's kernel for some configs (no GPU): registers, shared memory, spills" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--all", "--no-cache", "--log", "--help" }

local USAGE = [[
usage: kopt compile SPEC [--config K=V,...] [--sample N | --all] [--seed N]
                         [--arch sm_90] [--workers N] [--timeout S] [--no-cache] [--log] [--cubin DIR]
  (no selection)  the knobs' defaults (a knob without one: its first value), or the first valid config
  --config        one config; knobs not named keep their default, or their first value (repeatable)
  --sample N      N random valid configs (seeded by --seed, default 1)
  --all           every valid config
  --arch          target architecture (default sm_90; a spec's kernel.arch, e.g. sm_90a, wins)
  --workers       compile processes (default: one per CPU)
  --timeout S     a config whose compile takes longer than S seconds fails (default 600)
  --no-cache      compile even what the CUBIN cache holds
  --log           print the compiler log of every config, not only of failures
  --cubin DIR     write each CUBIN to DIR/<name>-<n>.cubin (the reference's: <name>-ref, -ref-2, ...)
]]

local function parse(argv)
  local o = { configs = {}, seed = 1, arch = "sm_90" }
  local i = 1
  local function value(flag)
    i = i + 1
    if argv[i] == nil then errors.usage("compile: %s needs a value", flag) end
    return argv[i]
  end
  local function count(flag)
    local n = math.tointeger(tonumber(value(flag)))
    if not n or n < 1 then errors.usage("compile: %s: expected a positive integer, got '%s'", flag, argv[i]) end
    return n
  end
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--config" then o.configs[#o.configs + 1] = value(a)
    elseif a == "--sample" then o.sample = count(a)
    elseif a == "--all" then o.all = true
    elseif a == "--seed" then o.seed = count(a)
    elseif a == "--arch" then
      o.arch = value(a)
      if not o.arch:match("^sm_%d+a?$") then errors.usage("compile: --arch: expected sm_NN or sm_NNa, got '%s'", o.arch) end
    elseif a == "--workers" then o.workers = count(a)
    elseif a == "--timeout" then  -- seconds, as the run's --compile-timeout
      local v = value(a)
      o.timeout = tonumber(v)
      if not o.timeout or o.timeout ~= o.timeout or o.timeout <= 0 or o.timeout == math.huge then
        errors.usage("compile: --timeout: expected a positive number of seconds, got '%s'", v)
      end
    elseif a == "--no-cache" then o.no_cache = true
    elseif a == "--log" then o.log = true
    elseif a == "--cubin" then o.cubin = value(a)
    elseif a:sub(1, 1) == "-" then errors.usage("compile: unknown option '%s' (see kopt compile --help)", a)
    elseif o.spec then errors.usage("compile: one SPEC only, got '%s' and '%s'", o.spec, a)
    else o.spec = a end
    i = i + 1
  end
  if o.all and (o.sample or #o.configs > 0) then
    errors.usage("compile: --all compiles every config: not with %s", o.sample and "--sample" or "--config")
  end
  return o
end

-- The configs to compile, each checked against the space.
-- first: a valid config build_space found.
local function select(o, spec, space, first)
  -- every knob at its default, a knob without one at its first value (the
  -- first valid config had changed them all when one knob had no default)
  local defaults = {}
  for _, k in ipairs(space.knobs) do
    if k.default ~= nil then defaults[k.name] = k.default else defaults[k.name] = k.values[1] end
  end
  local base = space:is_valid(defaults) and defaults or first
  if o.all then
    local ok, list = pcall(space.enumerate, space)
    if not ok then
      -- (a space too large to list is what --sample is for; a spec error is not)
      local msg = tostring(list)
      local too_many = msg:find("too many to enumerate", 1, true) ~= nil
      errors.usage("compile: --all: %s (%s)%s", msg, spec.path, too_many and "; use --sample N" or "")
    end
    return list
  end
  local out = {}
  if o.sample then
    -- distinct samples, as many as found in a bounded number of draws (a
    -- small space runs out of new ones; counting it first would walk it all)
    -- (it stops after 1000 draws in a row found nothing new: a --sample far
    -- past the space's size ran for 50 draws per config asked)
    local rng, seen = rng_mod.new(o.seed), {}
    local misses = 0
    while #out < o.sample and misses < 1000 do
      local c = space:sample(rng)
      if not c then break end
      if not seen[space:key(c)] then
        seen[space:key(c)] = true
        out[#out + 1] = c
        misses = 0
      else
        misses = misses + 1
      end
    end
  end
  for _, text in ipairs(o.configs) do
    -- (from the defaults even when they are no valid config: --config may
    -- name the knob that makes them one)
    local c, why = space:with(defaults, text)
    if not c then errors.usage("compile: --config %s: %s (%s)", text, why, spec.path) end
    out[#out + 1] = c
  end
  if #out == 0 then out[1] = base end
  return out
end

local function indent(text, n)
  local lines, out = 0, {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lines = lines + 1
    if lines <= n then out[#out + 1] = "    " .. line end
  end
  if lines > n then out[#out + 1] = string.format("    ... (%d more lines; --log for all)", lines - n) end
  return table.concat(out, "\n")
end

-- A pipeline's later kernels, checked in the module compiled for config
-- as the first is: there at all, their block within what their launch
-- bounds and registers allow, their shared memory within the device's.
-- nil when every one can launch, else what is wrong.
local function pipeline_problem(spec, config, r)
  for i = 2, #spec.pipeline do
    local st = spec.pipeline[i]
    local rep = nvrtc.parse_log(r.log or "", st.entry, r.cubin)
    if not rep.ok then
      return string.format("pipeline[%d]: no kernel '%s' in the module (an extern \"C\" __global__ of the source)",
                           i, st.entry)
    end
    -- (an expression that fails at this config fails this config only)
    local lok, l = pcall(spec.launch_for, spec, st.launch, config)
    if not lok then
      if not errors.is_user_error(l) then error(l, 0) end
      return (tostring(l):gsub("^" .. spec.path:gsub("%p", "%%%0") .. ": ", ""))
    end
    local threads = l.block[1] * l.block[2] * l.block[3]
    if l.grid[1] > 2147483647 or l.grid[2] > 65535 or l.grid[3] > 65535 then
      return string.format("pipeline[%d] (%s) cannot launch: grid %d x %d x %d (at most 2147483647 x 65535 x 65535)",
                           i, st.entry, l.grid[1], l.grid[2], l.grid[3])
    elseif l.block[1] > 1024 or l.block[2] > 1024 or l.block[3] > 64 or threads > 1024 then
      return string.format("pipeline[%d] (%s) cannot launch: block %d x %d x %d (at most 1024 threads, z at most 64)",
                           i, st.entry, l.block[1], l.block[2], l.block[3])
    end
    if rep.max_threads and rep.max_threads > 0 and rep.max_threads < threads then
      return string.format("pipeline[%d] (%s) cannot launch: block of %d threads, at most %d", i, st.entry, threads,
                           rep.max_threads)
    end
    local smem = (rep.smem_static or 0) + l.smem
    if smem > spec.device.max_smem_optin then
      return string.format("pipeline[%d] (%s): shared memory %d > %d", i, st.entry, smem, spec.device.max_smem_optin)
    end
  end
end

function M.main(argv)
  local o = parse(argv)
  if o.help then
    io.write(USAGE)
    return 0
  end
  if not o.spec then errors.usage("compile: missing SPEC (see kopt compile --help)") end
  local spec = spec_mod.load(o.spec)
  for _, note in ipairs(spec.notes or {}) do io.stderr:write("kopt: ", spec.path, ": note: ", note, "\n") end
  -- (the same checks as a run: constraints that fail, values of the first
  -- configs, as one sentence naming the config)
  local space, first = run_mod.build_space(spec)
  local selected, configs = pcall(select, o, spec, space, first)
  if not selected then
    if errors.is_user_error(configs) or errors.is_interrupt(configs) then error(configs, 0) end
    errors.usage("%s: %s", spec.path, (tostring(configs):gsub("^(constraints%[%d+%]):%d+:", "%1:")))
  end
  if o.cubin then
    local ok, err = sys.mkdir_p(o.cubin)
    if not ok then errors.usage("compile: --cubin: %s", err) end
  end

  local pool = compile.pool(math.min(o.workers or sys.cpu_count(), #configs + 1),
                            { cache = not o.no_cache, timeout_s = o.timeout })
  local jobs, order = {}, {}
  -- the reference once per value of the knobs it declares (reference.knobs)
  local ref_seen, n_refs = {}, 0
  for _, c in ipairs(configs) do
    local key = spec:reference_key(c)
    local ref = not ref_seen[key] and compile.reference_job(spec, o.arch, c)
    if ref then
      ref_seen[key] = true
      n_refs = n_refs + 1
      local id = pool:submit(ref)
      local defs = table.concat(spec:reference_defines(c), " ")
      -- (one CUBIN file per reference build: ref, ref-2, ...)
      jobs[id] = { what = "reference " .. ref.entry .. (defs ~= "" and (" " .. defs) or ""),
                   file = n_refs == 1 and "ref" or ("ref-" .. n_refs),
                   arch_from = spec.reference.arch and "reference.arch" or spec.kernel.arch and "kernel.arch" or nil,
                   arch = ref.arch }
      order[#order + 1] = id
    end
  end
  for n, c in ipairs(configs) do
    local job = compile.job_for(spec, c, o.arch)
    local id = pool:submit(job)
    local entry = spec:entry(c)
    jobs[id] = { what = space:describe(c) .. (entry ~= spec.kernel.entry and (" (" .. entry .. ")") or ""),
                 config = c, n = n, arch_from = spec.kernel.arch and "kernel.arch" or nil, arch = job.arch }
    order[#order + 1] = id
  end
  local results = {}
  while true do
    local id, r = pool:wait_any()
    if not id then break end
    results[id] = r
  end
  pool:close()

  -- a spec's own architecture-specific target (kernel.arch) wins over --arch
  local target = spec.kernel.arch or o.arch
  print(string.format("%s: %s for %s, NVRTC %s, %d config%s", spec.path, spec.kernel.entry, target,
                      compile.version(), #configs, #configs == 1 and "" or "s"))
  -- (the device limits are those of the GPU attached, or of the H100 kopt
  -- assumes: another architecture's shared memory is not theirs)
  local device_limits = target:gsub("a$", "") == spec.device.arch
  if not device_limits then
    print(string.format("  note: shared memory is not checked: kopt knows the limits of %s (%s), not of %s",
                        spec.device.arch, spec.device.name, target))
  end
  -- (a spec for replay may leave the launch out; a run on a GPU refuses it)
  if not spec.launch_exprs then
    print("  note: the spec has no launch: blocks and grids are not checked, and a run on a GPU needs one")
  end
  local failed, shown_logs = 0, {}
  for _, id in ipairs(order) do
    local job, r = jobs[id], results[id]
    local why
    local smem_dyn, threads, grid, block, cluster, ref_launch = 0, nil, nil, nil, nil, nil
    -- (a launch or a shape that fails for this config alone, a grid of 0 or
    -- a scratch array of 0 elements: that config fails, with the sentence;
    -- the others are still reported)
    local bad_expr
    if job.config then
      local eok, eerr = pcall(function()
        if spec.launch_exprs then
          local l = spec:launch(job.config)
          smem_dyn, threads, grid = l.smem, l.block[1] * l.block[2] * l.block[3], l.grid
          block, cluster = l.block, l.cluster
        end
        if spec.reference and spec.reference.launch then ref_launch = spec:reference_launch(job.config) end
        spec:args(job.config)
      end)
      if not eok then
        if not errors.is_user_error(eerr) then error(eerr, 0) end
        bad_expr = tostring(eerr):gsub("^" .. spec.path:gsub("%p", "%%%0") .. ": ", "")
      end
    end
    if not r.ok and (r.log or ""):find("invalid value for --gpu-architecture", 1, true) then
      -- (the architecture, not the kernel: every config would fail the same
      -- way; named where it was set, the spec's field or --arch)
      if job.arch_from then
        errors.usage("compile: %s: %s: %s: NVRTC %s does not compile for it", spec.path, job.arch_from, job.arch,
                     compile.version())
      end
      errors.usage("compile: --arch %s: NVRTC %s does not compile for it", job.arch, compile.version())
    end
    if not r.ok then
      why = "compile error"
    elseif bad_expr then
      why = bad_expr
    elseif grid and (grid[1] > 2147483647 or grid[2] > 65535 or grid[3] > 65535) then
      why = string.format("cannot launch: grid %d x %d x %d (at most 2147483647 x 65535 x 65535)", grid[1], grid[2],
                          grid[3])
    elseif block and (block[1] > 1024 or block[2] > 1024 or block[3] > 64) then
      why = string.format("cannot launch: block %d x %d x %d (at most 1024 x 1024 x 64)", block[1], block[2], block[3])
    elseif cluster and (grid[1] % cluster[1] ~= 0 or grid[2] % cluster[2] ~= 0 or grid[3] % cluster[3] ~= 0) then
      why = string.format("invalid: grid %d x %d x %d is not a whole number of clusters %d x %d x %d", grid[1],
                          grid[2], grid[3], cluster[1], cluster[2], cluster[3])
    elseif ref_launch and (ref_launch.block[1] * ref_launch.block[2] * ref_launch.block[3] > 1024 or
                           ref_launch.block[3] > 64 or ref_launch.grid[1] > 2147483647 or
                           ref_launch.grid[2] > 65535 or ref_launch.grid[3] > 65535) then
      why = string.format("the reference cannot launch: grid %d x %d x %d, block %d x %d x %d", ref_launch.grid[1],
                          ref_launch.grid[2], ref_launch.grid[3], ref_launch.block[1], ref_launch.block[2],
                          ref_launch.block[3])
    elseif threads and r.max_threads and r.max_threads < threads then
      why = string.format("cannot launch: block of %d threads, at most %d", threads, r.max_threads)
    elseif device_limits and job.config and (r.smem_static or 0) + smem_dyn > spec.device.max_smem_optin then
      why = string.format("shared memory %d > %d", (r.smem_static or 0) + smem_dyn, spec.device.max_smem_optin)
    elseif job.config and spec.pipeline then
      why = pipeline_problem(spec, job.config, r)
    end
    if r.ok then
      -- (local memory: the stack frame of local arrays indexed at run time
      -- and of spills, shown when there is one)
      print(string.format("  %-4s regs %3d  smem %6d+%-6d  spills %4d  max_threads %4d  %5.2f s%s  %s%s",
                          why and "FAIL" or "ok", r.regs or -1, r.smem_static or 0, smem_dyn, r.spills or 0,
                          r.max_threads or 0, r.compile_s, r.cached and " (cached)" or "", job.what,
                          (r.local_bytes or 0) > 0 and string.format("  [local %d B]", r.local_bytes) or ""))
    else
      print(string.format("  FAIL compile error  %s", job.what))
      local clash = compile.define_clash(r.log, spec)
      if clash then print("    " .. clash) end
    end
    if why then
      failed = failed + 1
      if r.ok then print("    " .. why) end
    end
    if (why and not r.ok) or o.log then
      -- (an error in code every config shares is shown once, then named)
      local seen = not o.log and r.log and shown_logs[r.log]
      if seen then
        print("    the same compiler log as " .. seen)
      else
        print(indent(r.log, o.log and math.huge or 20))
        if r.log then shown_logs[r.log] = job.what end
      end
    end
    if o.cubin and r.cubin then
      local name = string.format("%s/%s-%s.cubin", o.cubin, spec.name, job.n or job.file)
      json.write_file(name, r.cubin, true)
    end
  end
  if failed > 0 then print(string.format("%d of %d failed", failed, #order)) end
  return failed > 0 and 1 or 0
end

return M
