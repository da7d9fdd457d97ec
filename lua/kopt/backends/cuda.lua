-- The GPU backend: candidates compiled by the NVRTC pool (kopt.compile),
-- evaluated by one worker process per GPU (core/worker/ through kopt.gpu).
--
-- Compiles for the whole batch are submitted at once; each candidate goes to
-- an idle GPU worker as soon as its CUBIN is ready, so the GPUs time while
-- NVRTC compiles the rest. A worker that crashes (sticky CUDA error) or whose
-- kernel hangs is ended and restarted; the candidate is recorded as `crash`
-- or `timeout` and the search goes on.
--
-- Correctness (in the worker): every candidate that passes its first check is
-- checked a second time, on another seed and another input distribution,
-- before its result is returned, so any `ok` may become the best. The input
-- seed of the first check changes every `reseed_every` evaluations (default
-- 64), which bounds how often the reference kernel runs.
local compile = require("kopt.compile")
local device_only = require("kopt.device_only")
local errors = require("kopt.errors")
local gpu = require("kopt.gpu")
local hostdata = require("kopt.hostdata")
local lightspeed = require("kopt.lightspeed")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")
local trivial = require("kopt.trivial")
local wire = require("kopt.backends.worker_wire")

local M = {}
local Cuda = {}
Cuda.__index = Cuda

local READY_TIMEOUT_S = 120

-- Whether a GPU can be used here; false plus the one sentence otherwise.
function M.available()
  local devices, err = gpu.devices()
  if not devices then return false, err end
  if #devices == 0 then
    return false, "the NVIDIA driver reports no GPU: GPU commands are unavailable here; use --backend replay:FILE to run on recorded measurements"
  end
  return true
end

local function now() return sys.now() end

-- Starts the worker of slot s and waits for its "ready"; returns the seconds it took.
function Cuda:start_worker(s)
  local t0 = now()
  local w, err = gpu.spawn(s.device)
  if not w then error("cannot start the GPU worker: " .. tostring(err), 0) end
  local msg, why, detail = w:recv(READY_TIMEOUT_S)
  if not msg or msg.op ~= "ready" then
    local how = w:stop()
    error(string.format("GPU worker for GPU %d did not start: %s", s.device,
                        msg and msg.log or (tostring(why) .. " " .. tostring(detail) .. " " .. how)), 0)
  end
  s.worker, s.info, s.busy, s.ref_key, s.ran = w, msg, nil, nil, nil
  if self.ref0 then self:load_reference(s, self.ref_key0, self.ref0) end
  local dt = now() - t0
  self.restart_s[#self.restart_s + 1] = dt
  return dt
end

-- The reference for a config: compiled once per value of the knobs it
-- declares (spec.reference.knobs; without them, one for the whole run).
-- The second result is the key a worker holds it under: the compile's,
-- and the values of the scalar arguments at config, which knobs may set
-- (a worker keeps its reference outputs while the key stays: one config's
-- would have been compared with another's scalar).
function Cuda:reference_for(config)
  local key = self.spec:reference_key(config or {})
  local load_key = key .. "|" .. self.spec:scalars_key(config or {})
  local ref = self.refs[key]
  if ref then return ref, load_key end
  local rjob = compile.reference_job(self.spec, self.arch, config)
  local rres = compile.compile(rjob)
  if not rres.ok then
    local clash = compile.define_clash(rres.log, self.spec)
    errors.usage("%s: the reference kernel does not compile%s:\n%s", self.spec.path,
                 key ~= "" and (" with " .. key) or "", clash and (clash .. "\n" .. (rres.log or "")) or rres.log or "")
  end
  ref = { cubin = rres.cubin, entry = rres.lowered or rjob.entry }
  self.refs[key] = ref
  return ref, load_key
end

-- Loads reference ref (its load key: Cuda:reference_for) into slot s's
-- worker when it holds another (the worker then recomputes its reference
-- outputs).
function Cuda:load_reference(s, key, ref)
  if s.ref_key == key then return end
  assert(s.worker:send(wire.set_ref(ref.cubin, ref.entry)))
  local r = s.worker:recv(READY_TIMEOUT_S)
  if not r or r.op ~= "ok" then
    error("the reference kernel cannot be loaded: " .. tostring(r and r.log), 0)
  end
  s.ref_key = key
end

-- A number from the system's random source (a time-based one where there is
-- none): the secret of set B's generated arrays.
local function random_secret()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(4)
  if f then f:close() end
  if bytes and #bytes == 4 then return string.unpack("<I4", bytes) & 0x7fffffff end
  return math.floor(sys.now() * 1e6) & 0x7fffffff
end

-- A config for compiling the reference before any candidate: every knob at
-- its default or first value (only the knobs the reference declares matter).
local function first_config(spec)
  local c = {}
  for _, k in ipairs(spec.knobs) do
    if k.default ~= nil then c[k.name] = k.default else c[k.name] = k.values[1] end
  end
  return c
end

-- opts: gpus = {indices} (default all), seed, timing = {min_samples=, max_samples=,
-- max_time_s=, max_noise=}, compile_workers, reseed_every, timeout_floor_ms, arch.
function M.open(spec, opts)
  opts = opts or {}
  if not spec then errors.usage("the cuda backend needs a SPEC") end
  local devices, err = gpu.devices()
  if not devices then errors.usage("%s", err) end
  if #devices == 0 then errors.usage("the NVIDIA driver reports no GPU; use --backend replay:FILE") end
  local chosen = {}
  for _, g in ipairs(opts.gpus or {}) do
    if not devices[g + 1] then
      errors.usage("--gpus: there is no GPU %d (this machine has %d: 0..%d)", g, #devices, #devices - 1)
    end
    chosen[#chosen + 1] = g
  end
  if #chosen == 0 then for i = 1, #devices do chosen[i] = i - 1 end end
  local dev = devices[chosen[1] + 1]
  for _, field in ipairs({ "kernel", "reference" }) do
    local want = spec[field] and spec[field].arch
    if want and want:match("^sm_(%d+)") ~= tostring(dev.arch):match("^sm_(%d+)") then
      local digits = want:match("^sm_(%d+)")  -- (sm_90a: 9.0; sm_100a: 10.0)
      errors.usage("%s: %s.arch: the %s is built for %s, which runs only on compute capability %s.%s; " ..
                   "GPU %d (%s) is %s: use a spec written for it", spec.path, field, field, want, digits:sub(1, -2),
                   digits:sub(-1), chosen[1], dev.name, dev.arch)
    end
  end
  local self = setmetatable({
    name = "cuda", spec = spec, device = dev, devices = devices, arch = opts.arch or dev.arch,
    seed = opts.seed or 1, timing = opts.timing or {}, reseed_every = opts.reseed_every or 64,
    timeout_floor_ms = opts.timeout_floor_ms or 2000, evaluated = 0, clock = 0,
    slots_state = {}, restart_s = {}, restarts = 0, verbose = opts.verbose,
  }, Cuda)
  if spec.set_device then spec:set_device(dev) end

  -- The reference: compiled here, so a broken one stops the run early.
  if not spec.reference then errors.usage("%s: reference: missing (the cuda backend checks every candidate against it)", spec.path) end
  self.refs = {}
  self.secret = random_secret()
  local ref, key = self:reference_for(first_config(spec))
  self.ref0, self.ref_key0 = ref, key  -- (loaded into every worker as it starts)
  if spec.verify and spec.verify.check then
    self.dump_root = string.format("%s/kopt-check-%d", os.getenv("TMPDIR") or "/tmp", sys.getpid())
    sys.mkdir_p(self.dump_root)
  end
  self.data_dir = hostdata.data_dir(compile.cache_dir())

  self.pool = compile.pool(opts.compile_workers, { timeout_s = opts.compile_timeout_s })
  for _, g in ipairs(chosen) do
    local s = { device = g }
    self.slots_state[#self.slots_state + 1] = s
    self:start_worker(s)
  end
  -- Twice the compile pool: the second half compiles while the first is timed.
  self.slots = opts.slots or math.max(2 * self.pool:size(), 2 * #self.slots_state)
  return self
end
function Cuda:check_request(msg) return wire.check_request(msg) end
local launch_fields, reply_view = wire.launch_fields, wire.reply_view
M.reply_view = reply_view

-- The file holding a generated array's bytes (content-addressed, written
-- once), or nil and why. Second draws (other = true) change with the input
-- set's seed, so only the latest few are remembered.
function Cuda:data_path(bytes, other)
  local key = other and "data_paths_b" or "data_paths"
  local known = self[key] or {}
  self[key] = known
  local path = known[bytes]
  if path then return path end
  local why
  path, why = hostdata.store(self.data_dir or hostdata.data_dir(nil), bytes)
  if not path then return nil, why end
  if other then
    self.data_paths_b_count = (self.data_paths_b_count or 0) + 1
    if self.data_paths_b_count > 8 then
      known, self.data_paths_b_count = {}, 1
      self[key] = known
    end
  end
  known[bytes] = path
  return path
end

-- The request for one candidate (a flat table for kopt.gpu), checked against
-- the worker's field list.
function Cuda:request(id, config, cubin, entry, is_reference)
  local spec = self.spec
  local msg = { op = "run", id = id, cubin = cubin, entry = entry,
                seed = self.seed + self.evaluated // self.reseed_every,
                verify2 = not is_reference, time = true,
                timeout_ms = self:timeout_ms(),
                state = table.concat(spec.kernel.state or {}, ","),
                nudge = (self.timing.nudge == false or os.getenv("KOPT_NUDGE") == "0") and 0 or 1 }
  -- the reference, when timed as a candidate, runs with its own launch
  local ref_launch = spec:reference_launch(config)
  local own = not is_reference and self.launches and self.launches[id]
  local ok, err = launch_fields(msg, "", is_reference and ref_launch or own or spec:launch(config))
  if not ok then return nil, err end
  ok, err = launch_fields(msg, "ref_", ref_launch)
  if not ok then return nil, err end
  -- (set B's generated arrays: drawn from the request's seed mixed with a
  -- secret of this process, as the worker draws its own set B, so a kernel
  -- that reads set A cannot regenerate them)
  local args = spec:args(config, msg.seed ~ self.secret)
  msg.nargs = #args
  for i, a in ipairs(args) do
    local p = "a" .. i .. "."
    msg[p .. "name"], msg[p .. "type"], msg[p .. "kind"] = a.name, a.type, a.kind
    if a.kind == "scalar" then
      msg[p .. "value"] = a.value
    elseif a.kind == "tensormap" then
      msg[p .. "count"], msg[p .. "of"], msg[p .. "swizzle"] = 1, math.tointeger(a.of), a.swizzle
      msg[p .. "tmap_dims"], msg[p .. "box"] = table.concat(a.dims, ","), table.concat(a.box, ",")
    else
      local n = math.tointeger(a.count)
      if not n then return nil, "argument " .. a.name .. ": element count is not an integer" end
      msg[p .. "count"] = n
      msg[p .. "output"] = a.output and 1 or 0
      if a.param == false then msg[p .. "param"] = 0 end
      local init = a.init or { dist = "normal" }
      if init.dist == "copy" then
        msg[p .. "init"], msg[p .. "copy"] = "zeros", math.tointeger(init.index)
      elseif init.dist == "file" or init.dist == "generate" then
        local path = init.path
        if a.data then
          local why
          path, why = self:data_path(a.data)
          if not path then return nil, "argument " .. a.name .. ": " .. why end
        end
        msg[p .. "init"], msg[p .. "file"] = "zeros", sys.realpath(path) or path
        msg[p .. "file_offset"] = math.tointeger(a.data and 0 or init.offset)
        if a.data_b then
          -- check 2's draw of a generator (docs/TRUST.md)
          local why
          path, why = self:data_path(a.data_b, true)
          if not path then return nil, "argument " .. a.name .. ": " .. why end
          msg[p .. "file_b"] = sys.realpath(path) or path
        end
      else
        msg[p .. "init"] = init.dist
        if init.value then msg[p .. "init_value"] = init.value + 0.0 end
        if init.fixed then msg[p .. "fixed"] = 1 end
      end
      local v = a.verify
      if v then
        msg[p .. "compare"] = v.compare and 1 or 0
        if v.rel_l2 then msg[p .. "tol_rel_l2"] = v.rel_l2 + 0.0 end
        if v.max_abs then msg[p .. "tol_max_abs"] = v.max_abs + 0.0 end
        if v.dims then
          local box = {}
          for d = 1, #v.dims do box[d] = string.format("%d:%d", v.lo[d], v.hi[d]) end
          msg[p .. "dims"] = table.concat(v.dims, ",")
          msg[p .. "region"] = table.concat(box, ",")
        end
      end
    end
  end
  local pl = not is_reference and spec.pipeline_fields and spec:pipeline_fields(config)
  if pl then msg.args1, msg.stages = pl.args1, pl.stages end
  if spec.reference and spec.reference.args then
    msg.ref_args = table.concat(spec.reference.args, ",")
    if is_reference then msg.args1 = msg.ref_args end
  end
  if self.dump_root and not is_reference then
    msg.dump = string.format("%s/%d", self.dump_root, math.tointeger(id) or 0)
    sys.mkdir_p(msg.dump)
  end
  local tol = spec.tolerance or {}
  if tol.rel_l2 then msg.tol_rel_l2 = tol.rel_l2 + 0.0 end
  if tol.max_abs then msg.tol_max_abs = tol.max_abs + 0.0 end
  local t = self.timing
  msg.min_samples = t.min_samples or 10
  msg.max_samples = t.max_samples or 100
  msg.max_time_s = (t.max_time_s or 0.3) + 0.0
  msg.max_noise = (t.max_noise or 0.005) + 0.0
  return self:check_request(msg)
end

-- Per-launch watchdog: 50x the reference's time, at least the floor.
function Cuda:timeout_ms()
  local ms = self.timeout_floor_ms
  if self.ref_ms then ms = math.max(ms, math.ceil(50 * self.ref_ms)) end
  return math.tointeger(ms) or ms // 1
end

local function num(v) return type(v) == "number" and v or nil end

-- Worker reply -> DESIGN.md result table.
function Cuda:result(reply, job, cres)
  reply = reply_view(reply)
  local r = {
    status = reply.status, log = reply.log ~= "" and reply.log or nil,
    time_ms = num(reply.time_ms), p90_ms = num(reply.p90_ms), p10_ms = num(reply.p10_ms),
    median_ms = num(reply.time_ms), mean_ms = num(reply.mean_ms), min_ms = num(reply.min_ms),
    noise = num(reply.noise), samples = reply.samples, clock_mhz = num(reply.clock_mhz),
    timer = reply.timer, events_ms = num(reply.events_ms), check2_ms = num(reply.check2_ms),
    check3_ms = num(reply.check3_ms),
    -- (the timed launches ran far faster than check 2's on new inputs: the
    -- time is check 2's, and the log says so)
    charged_check2 = reply.charged_check2 == 1 or nil,
    err = reply.err_rel_l2 and { rel_l2 = reply.err_rel_l2, max_abs = reply.err_max_abs,
                                 unwritten = reply.err_unwritten, nonfinite = reply.err_nonfinite } or nil,
    err2 = reply.err2_rel_l2 and { rel_l2 = reply.err2_rel_l2, max_abs = reply.err2_max_abs } or nil,
    resources = {
      regs = reply.regs or (cres and cres.regs), smem_static = reply.smem_static,
      smem_dynamic = reply.smem_dynamic,
      smem = (reply.smem_static or 0) + (reply.smem_dynamic or 0),
      local_bytes = reply.local_bytes, spills = cres and cres.spills,
      occupancy = num(reply.occupancy), blocks_per_sm = reply.blocks_per_sm,
      max_threads = reply.max_threads,
    },
    compile_s = cres and cres.compile_s, cached_compile = cres and cres.cached,
    measure_s = num(reply.t_total_s) or num(reply.t_check_s),
    scrub_ms = num(reply.scrub_ms),  -- (local and shared memory cleared before check 1)
  }
  if r.status == "error" then r.status = "launch_error" end
  -- outputs a trivial kernel would match in both checks (kopt.trivial): the
  -- first reply past check 2 names them, once per run
  if reply.trivial and not self.spec_warnings then
    self.spec_warnings = trivial.describe(reply.trivial, self.spec)
    for _, line in ipairs(self.spec_warnings) do io.stderr:write("kopt: " .. self.spec.path .. ": " .. line .. "\n") end
  end
  if self.dump_root and math.tointeger(reply.id) then
    self:custom_check(r, job, string.format("%s/%d", self.dump_root, math.tointeger(reply.id)))
  end
  if r.status == "ok" and r.time_ms then
    local w = self.spec:work(job.config)
    lightspeed.check(r, w, self.device)
    if r.status == "ok" and r.time_ms > 0 then
      if w.flops then r.tflops = w.flops / (r.time_ms * 1e-3) / 1e12 end
      if w.bytes then r.gbps = w.bytes / (r.time_ms * 1e-3) / 1e9 end
      r.user_metrics = self.spec.metrics and self.spec:metrics(job.config, r.time_ms) or nil
      local obj = self.spec.objective
      if obj and r.user_metrics then r.objective = r.user_metrics[obj.metric] end
    end
  end
  return r
end

-- The spec's own check (verify.check) on what the worker dumped for checks
-- 1 and 2 and for the last timed launch (its inputs the nudged ones it read,
-- its refs set A's): function(outputs, refs, inputs, sizes) -> true, or
-- false/nil and why. A failure, or an error in the check, makes the
-- candidate wrong. (Without the timed dump, an output left to the spec's
-- check was never checked where the kernel is timed: a kernel that computed
-- a third of it on every timed launch passed.)
function Cuda:custom_check(r, job, dir)
  local args = self.spec:args(job.config)
  local sizes = setmetatable({}, { __index = function(_, k)
    local v = job.config[k]
    if v == nil then v = self.spec.problem[k] end
    return v
  end })
  local LABEL = { c1 = "check 1", c2 = "check 2", c3 = "check 3", timed = "the last timed launch" }
  for _, tag in ipairs({ "c1", "c2", "c3", "timed" }) do
    local out, ref, inp = hostdata.read_dump(dir, tag, args, r.status ~= "ok")
    if r.status == "ok" and next(out) then
      local ok, pass, why = pcall(self.spec.verify.check, out, ref, inp, sizes)
      if not ok or not pass then
        r.status = "wrong"
        r.log = string.format("%s: verify.check %s: %s", LABEL[tag],
                              ok and "failed" or "raised an error", tostring(ok and (why or "returned false") or pass))
      end
    end
  end
  os.remove(dir)
end

-- The first evaluation times the reference (it sets the watchdog and checks
-- that the reference runs at all: a failing reference is a spec error).
function Cuda:time_reference(config)
  local s = self.slots_state[1]
  local ref, key = self:reference_for(config)
  self:load_reference(s, key, ref)
  local msg, err = self:request(0, config, ref.cubin, ref.entry, true)
  if not msg then errors.usage("%s: %s", self.spec.path, err) end
  msg.timeout_ms = 60000
  assert(s.worker:send(msg))
  local reply, why, detail = s.worker:recv(600)
  if not reply then
    local how = s.worker:stop()
    errors.usage("%s: the reference kernel did not finish (%s %s, worker %s)", self.spec.path, tostring(why), tostring(detail), how)
  end
  reply = reply_view(reply)
  if reply.status ~= "ok" then
    if reply.status == "crash" or reply.status == "timeout" then s.worker:stop() end
    errors.usage("%s: the reference kernel fails on the GPU (%s): %s", self.spec.path, reply.status, reply.log or "")
  end
  self.ref_ms = reply.time_ms
  self.ref_result = self:result(reply, { config = config })
end

-- Ends a slot's worker after a crash/timeout and starts a new one.
function Cuda:restart(s)
  local how = s.worker:stop()
  self.restarts = self.restarts + 1
  local dt = self:start_worker(s)
  return how, dt
end

-- The compile job of a candidate, noting what request `id` will need: a
-- candidate that carries its own kernel (a synthesized one: `entry`, `name`
-- for the compiler's messages, and `launch` = { grid = {x, y, z}, block =
-- {x, y, z}, smem = n }) is compiled for its entry and launched with its own
-- geometry, not the spec's.
-- Device code that allocates on the device heap (malloc, free, new): the
-- heap is the context's, not the module's, so what one candidate leaves
-- there the next one finds, across evaluations (tests/cheats/heap_xeval: a
-- cache of answers keyed on the inputs, exact in every check and 15x
-- faster from the second config on). Such a candidate runs in a worker of
-- its own, started for it (a restart, about 0.2 s, and set A drawn again).
local function uses_heap(source)
  local code = device_only.strip_comments(source or "")
  return (code:find("%f[%w_]malloc%s*%(") or code:find("%f[%w_]free%s*%(") or code:find("%f[%w_]new%s+[%a_:]")
          or code:find("%f[%w_]operator%s+new") or code:find("__nv_aligned_device_malloc", 1, true)) ~= nil
end
M.uses_heap = uses_heap

-- The same read off the compiled CUBIN: the heap's functions are symbols
-- its string table names, however the source spelt the call (through a
-- macro, or in an included header, which the source's text does not show:
-- tests/cheats/heap_hidden).
-- (__nv_aligned_device_malloc compiles to a system call of its own.)
local HEAP_SYMBOLS = { "malloc", "free", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv" }
local function cubin_uses_heap(cubin)
  if type(cubin) ~= "string" then return false end
  for _, name in ipairs(HEAP_SYMBOLS) do
    if cubin:find("\0" .. name .. "\0", 1, true) then return true end
  end
  -- (the device runtime's allocators, whatever the call: __cuda_syscall_malloc,
  -- __cuda_syscall_aligned_malloc, __cuda_syscall_free)
  return cubin:find("\0__cuda_syscall_[%w_]*malloc\0") ~= nil or cubin:find("\0__cuda_syscall_[%w_]*free\0") ~= nil
end
M.cubin_uses_heap = cubin_uses_heap

function Cuda:prepare(job, id)
  local cjob = compile.job_for(self.spec, job.config, self.arch, job.source)
  self.heap = self.heap or {}
  self.heap[id] = uses_heap(cjob.source)
  local cand = job.candidate or {}
  if cand.entry then cjob.entry, cjob.name = cand.entry, cand.name or cjob.name end
  self.launches = self.launches or {}
  self.launches[id] = cand.launch
  return cjob
end

function Cuda:evaluate(jobs)
  local t_start = now()
  if not self.ref_ms and #jobs > 0 then self:time_reference(jobs[1].config) end
  local results, by_compile, ready = {}, {}, {}
  local pending_compiles, finished = 0, 0
  for i, job in ipairs(jobs) do
    local cjob = self:prepare(job, i)
    by_compile[self.pool:submit(cjob)] = i
    pending_compiles = pending_compiles + 1
  end

  local function take_compile(id, res)
    local i = by_compile[id]
    by_compile[id] = nil
    pending_compiles = pending_compiles - 1
    if not res.ok then
      -- (a knob's define that breaks a CUDA header: said first, ahead of
      -- the header's errors)
      local clash = compile.define_clash(res.log, self.spec)
      results[i] = { status = "compile_error", log = clash and (clash .. "\n" .. (res.log or "")) or res.log,
                     compile_s = res.compile_s }
      finished = finished + 1
    else
      ready[#ready + 1] = { i = i, res = res }
    end
  end

  local function dispatch()
    for _, s in ipairs(self.slots_state) do
      if not s.busy and #ready > 0 then
        local item = table.remove(ready, 1)
        local job = jobs[item.i]
        self.heap[item.i] = self.heap[item.i] or cubin_uses_heap(item.res.cubin)
        if self.heap[item.i] and s.ran then self:restart(s) end
        s.ran = true
        local rref, rkey = self:reference_for(job.config)
        self:load_reference(s, rkey, rref)
        -- (a spec expression that fails for this config alone, a grid of 0
        -- or a shape that is not whole: the config is invalid, with the
        -- sentence that says why; the search goes on)
        local rok, msg, err = pcall(function()
          return self:request(item.i, job.config, item.res.cubin, item.res.lowered or self.spec:entry(job.config))
        end)
        if not rok then
          if not errors.is_user_error(msg) then error(msg, 0) end
          msg, err = nil, errors.describe(msg)
        end
        if not msg then
          results[item.i] = { status = "invalid", log = err }
          finished = finished + 1
        else
          self.evaluated = self.evaluated + 1
          local ok, serr = s.worker:send(msg)
          s.busy = { i = item.i, res = item.res, t0 = now(),
                     deadline = now() + 60 + msg.timeout_ms / 1000 * 4 + msg.max_time_s * 4 }
          if not ok then s.busy.send_error = serr end
        end
      end
    end
  end

  local function complete(s, reply, failure)
    local b = s.busy
    s.busy = nil
    local r
    if reply then
      r = self:result(reply, jobs[b.i], b.res)
    else
      r = { status = failure.status, log = failure.log, compile_s = b.res.compile_s }
    end
    if r.status == "crash" or r.status == "timeout" or not reply then
      local how, dt = self:restart(s)
      r.log = string.format("%s [worker %s; restarted in %.2f s]", r.log or "", how, dt)
      r.worker_restart_s = dt
    end
    r.gpu = s.device
    results[b.i] = r
    finished = finished + 1
  end

  while finished < #jobs do
    -- a caller that waits with us (the MPI transport: kopt.backends.mpi) keeps its own work moving
    if self.on_idle then self.on_idle() end
    while pending_compiles > 0 do
      local id, res = self.pool:wait_any(0)
      if not id then break end
      take_compile(id, res)
    end
    dispatch()
    local busy, busy_slots = {}, {}
    for _, s in ipairs(self.slots_state) do
      if s.busy then busy[#busy + 1] = s.worker; busy_slots[#busy_slots + 1] = s end
    end
    if #busy > 0 then
      local k = gpu.wait_any(busy, pending_compiles > 0 and 0.005 or 0.1)
      if k then
        local s = busy_slots[k]
        local reply, why, detail = s.worker:recv(0)
        if reply and reply.op == "result" then
          complete(s, reply)
        elseif reply then
          complete(s, { op = "result", status = "launch_error", log = reply.log or "unexpected worker reply" })
        else
          complete(s, nil, { status = "crash", log = "the GPU worker exited without a result (" .. tostring(detail or why) .. ")" })
        end
      end
      -- the worker enforces each launch's deadline itself; this catches a
      -- worker that stopped answering altogether
      for _, s in ipairs(busy_slots) do
        if s.busy and now() > s.busy.deadline then
          complete(s, nil, { status = "timeout", log = "the GPU worker stopped answering" })
        end
      end
    elseif pending_compiles > 0 then
      local id, res = self.pool:wait_any()
      if id then
        take_compile(id, res)
      else
        -- the pool has nothing left although we wait for results: fail them
        for cid, i in pairs(by_compile) do
          results[i] = { status = "compile_error", log = "the compile pool lost this job" }
          by_compile[cid] = nil
          finished = finished + 1
        end
        pending_compiles = 0
      end
    elseif #ready == 0 then
      break
    end
  end
  for i = 1, #jobs do
    results[i] = results[i] or { status = "launch_error", log = "not evaluated (internal)" }
  end
  self.clock = self.clock + (now() - t_start)
  return results
end

-- Hardware counters of one candidate (CUPTI in the worker; kopt.profiling
-- decides whom and which metrics): recompiles (a compile-cache hit), then one
-- "run" request with profile=1 and no timing to the first worker, never
-- inside a timing window. Returns { [metric] = value }, or nil, reason,
-- { kind = ... }: "unavailable" (CUPTI cannot work here: stop trying) or
-- "candidate" (this kernel failed under the profiler).
function Cuda:profile(job, metrics)
  local slot = self.slots_state[1]
  if not slot or not slot.worker then return nil, "no GPU worker", { kind = "unavailable" } end
  local res = compile.compile(self:prepare(job, 0))
  if not res or not res.ok then return nil, "the candidate did not compile again", { kind = "candidate" } end
  local rref, rkey = self:reference_for(job.config)
  self:load_reference(slot, rkey, rref)
  local msg, err = self:request(0, job.config, res.cubin, res.lowered or self.spec:entry(job.config))
  if not msg then return nil, err, { kind = "candidate" } end
  msg.dump = nil
  msg.time, msg.verify2, msg.profile = false, false, 1
  if metrics and #metrics > 0 then msg.profile_metrics = table.concat(metrics, ",") end
  msg.profile_matrix = spec_mod.is_matrix(self.spec.kernel.source) and 1 or 0
  local ok, serr = slot.worker:send(self:check_request(msg))
  if not ok then return nil, serr, { kind = "candidate" } end
  local raw, why, detail = slot.worker:recv(300)
  local reply = raw and reply_view(raw)
  if not reply or reply.status == "crash" or reply.status == "timeout" then
    self:restart(slot)
    return nil, "the kernel failed under the profiler: " .. tostring(reply and reply.log or detail or why),
      { kind = "candidate" }
  end
  if reply.profile_error then return nil, reply.profile_error, { kind = "unavailable" } end
  if reply.status ~= "ok" then return nil, reply.log or reply.status, { kind = "candidate" } end
  local out = {}
  for k, v in pairs(raw) do
    local name = type(k) == "string" and k:match("^m%.(.+)$")
    if name then out[name] = v end
  end
  if not next(out) then return nil, "the profiler returned no values", { kind = "unavailable" } end
  return out, nil, reply.profile_warning and { warning = reply.profile_warning } or nil
end

-- A run request whose inputs `scales` ({ [arg index] = factor }) are drawn
-- as in check 1 and multiplied by the factor (the worker's a<i>.scale: a
-- float input's normal and uniform draws only).
function M.with_scales(req, scales)
  for a, scale in pairs(scales or {}) do
    -- (a number: every element; { scale =, every = }: one element in
    -- `every`, or one alone with every = -1: kopt_check_fill_sparse)
    if type(scale) == "table" then
      req["a" .. a .. ".scale"] = scale.scale + 0.0
      req["a" .. a .. ".scale_every"] = math.tointeger(scale.every)
    else
      req["a" .. a .. ".scale"] = scale + 0.0
    end
  end
  return req
end

-- The request with no absolute error bound (the spec's tolerance.max_abs
-- and each output's verify.max_abs): such a bound is set for the spec's own
-- input ranges, and an output grown 100x by larger inputs breaks it by
-- rounding alone. The relative L2 tolerance and the worker's per-element
-- bound relative to each value (numerics.h, KOPT_CHECK_ELEMENT_FACTOR),
-- which replaces the absolute one, hold at any scale.
function M.relative_only(req)
  local drop = {}
  for k in pairs(req) do
    if k == "tol_max_abs" or k:match("^a%d+%.tol_max_abs$") then drop[#drop + 1] = k end
  end
  for _, k in ipairs(drop) do req[k] = nil end
  return req
end

-- Check-1-only requests for one candidate in a worker of its own (started
-- under `wrap` when given: kopt.sanitize's compute sanitizer). Each entry of
-- `variants` is one request: { scales = { [i] = factor } } draws input i
-- times the factor (kopt.range_probe, M.with_scales), reference = true runs the
-- reference as the candidate, relative_only = true drops the absolute error
-- bounds (M.relative_only), timed = true times the candidate after check 1,
-- every timed launch's output compared as in an evaluation (a kernel exact
-- only on a module's first launch is seen on the others; no check 2). The worker is let exit after the last one, so
-- a tool writes its summary. Returns { {status=, log=}, ... }, how the worker
-- ended and the candidate's lowered name, or nil, why.
function Cuda:check_variants(job, variants, limit_s, wrap)
  local res = compile.compile(self:prepare(job, 0))
  if not res or not res.ok then return nil, "the candidate did not compile again" end
  local label = wrap and ("the worker under " .. wrap[1]) or "the worker"
  local w, err = gpu.spawn(self.slots_state[1].device, wrap)
  if not w then return nil, err end
  local msg, why = w:recv(READY_TIMEOUT_S)
  if not msg or msg.op ~= "ready" then
    return nil, label .. " did not start (" .. tostring(msg and msg.log or why) ..
      ", " .. w:stop(5) .. ")"
  end
  local ref = self:reference_for(job.config)
  local sent, serr = w:send(wire.set_ref(ref.cubin, ref.entry))
  local r = sent and w:recv(limit_s)
  if not r or r.op ~= "ok" then
    return nil, "the reference did not load in " .. label .. ": " .. tostring(r and r.log or serr) ..
      " (" .. w:stop(5) .. ")"
  end
  local out = {}
  for i, v in ipairs(variants) do
    local req, rerr
    if v.reference then
      req, rerr = self:request(0, job.config, ref.cubin, ref.entry, true)
    else
      req, rerr = self:request(0, job.config, res.cubin, res.lowered or self.spec:entry(job.config))
    end
    if not req then w:stop(); return nil, rerr end
    M.with_scales(req, v.scales)
    if v.relative_only then M.relative_only(req) end
    req.dump = nil
    req.time, req.verify2 = v.timed == true, false
    req.timeout_ms = math.tointeger(limit_s * 1000)
    sent, serr = w:send(self:check_request(req))
    if not sent then
      return nil, label .. " is gone: " .. tostring(serr) .. " (" .. w:stop(5) .. ")"
    end
    local raw, rwhy = w:recv(limit_s + 30)
    local reply = raw and reply_view(raw)
    out[i] = reply and { status = reply.status, log = reply.log } or { status = "no reply", log = tostring(rwhy) }
    if not reply or reply.status == "crash" or reply.status == "timeout" then break end  -- (the worker ends)
  end
  pcall(w.send, w, { op = "quit" })
  local how = w:stop(30)  -- a tool writes its report as the worker exits
  return out, how, res.lowered
end

-- One check of a candidate in a worker run under a tool (kopt.sanitize: the
-- compute sanitizer): `wrap` is the command that starts the worker, writing
-- its report where the caller reads it. One "run" request, check 1 only (no
-- timing: the tool slows kernels by 10-100x). Returns { status=, log=, how=,
-- lowered= } or nil, why.
function Cuda:check_under(job, wrap, limit_s)
  local out, how, lowered = self:check_variants(job, { {} }, limit_s, wrap)
  if not out then return nil, how end
  local r = out[1]
  return { status = r.status, log = r.log, how = how, lowered = lowered }
end

-- For tests without a GPU: an object that builds requests but has no workers.
function M._offline(spec, opts)
  opts = opts or {}
  return setmetatable({ name = "cuda", spec = spec, seed = opts.seed or 1, timing = opts.timing or {},
                        reseed_every = 64, timeout_floor_ms = 2000, evaluated = 0, clock = 0,
                        slots_state = {}, restart_s = {}, restarts = 0, refs = {}, secret = 0 }, Cuda)
end

function Cuda:elapsed() return self.clock end

function Cuda:describe()
  local d = self.device
  local gpus = {}
  for i, s in ipairs(self.slots_state) do gpus[i] = s.device end
  local restart = nil
  if #self.restart_s > 1 then
    local sum = 0
    for i = 2, #self.restart_s do sum = sum + self.restart_s[i] end
    restart = sum / (#self.restart_s - 1)
  end
  return {
    backend = "cuda", device = d.name, gpus = gpus, arch = self.arch,
    cc = string.format("%d.%d", d.cc_major, d.cc_minor), sm_count = d.sm_count,
    mem_bytes = d.mem_bytes, l2_bytes = d.l2_bytes, clock_mhz = d.clock_khz // 1000,
    driver = string.format("%d.%d", d.driver_version // 1000, d.driver_version % 1000 // 10),
    nvrtc = compile.version and compile.version() or nil, kopt = sys.version,
    reference_ms = self.ref_ms, worker_start_s = self.restart_s[1], worker_restarts = self.restarts,
    timer = self.slots_state[1] and self.slots_state[1].info and self.slots_state[1].info.timer,
    timer_note = self.slots_state[1] and self.slots_state[1].info and self.slots_state[1].info.timer_note,
    worker_restart_s = restart,
  }
end

function Cuda:close()
  for _, s in ipairs(self.slots_state) do
    if s.worker then
      pcall(s.worker.send, s.worker, { op = "quit" })
      s.worker:stop()
    end
  end
  if self.pool then self.pool:close() end
  self.pool = nil
  if self.dump_root then os.remove(self.dump_root) end
end

return M
