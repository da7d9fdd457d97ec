-- Evaluation spread over the ranks of an MPI job (docs/MPI.md). Rank 0 runs
-- the engine and the strategy as in one process; its backend is this one, a
-- transport around the local backend (replay or cuda) that every rank opened
-- from the same command line. Batches go out in chunks, each to the rank
-- with the most free slots (rank 0 itself too, unless --mpi-root engine);
-- results come back in the jobs' order, so the engine records and tells
-- exactly as it does with one process.
--
-- What travels is a core/wire.h payload (kopt.mpi): nested Lua tables are
-- flattened into typed fields (integers, doubles, strings, booleans) without
-- any text conversion, so a result read on rank 0 is bit for bit the one the
-- serving rank produced.
--
-- Faults: a serving rank that sends nothing (no result, no heartbeat) for
-- --mpi-timeout seconds while it holds work, or whose process is gone (same
-- host), is lost: its chunks in flight go back to the queue and are evaluated
-- elsewhere; nothing is sent to it again. kopt.cluster ends such a job with
-- MPI_Abort once the run is written, since MPI_Finalize would wait for the
-- lost rank for ever.
local errors = require("kopt.errors")
local expdb = require("kopt.expdb")
local mpi = require("kopt.mpi")
local sys = require("kopt.sys")

local M = {}
local Mpi = {}
Mpi.__index = Mpi

M.TIMEOUT_S = 120       -- default --mpi-timeout: silence that loses a rank
M.HEARTBEAT_S = 2       -- a serving rank busy evaluating says it is alive this often
-- A rank that has not said hello by then is lost at the start: twice
-- --mpi-timeout, at least HELLO_MIN_S (a rank on another host may take a
-- while to load CUDA), so a rank killed while it started is not waited
-- for 10 minutes whatever --mpi-timeout said.
M.HELLO_MIN_S = 30

-- --- codec: nested tables <-> one flat table of typed fields -----------------
--
-- A flat key is a type mark and a path: "=" a number or string, "?" a
-- boolean (0/1), "{" an empty table; path parts are joined by \31, an integer
-- key is "#<n>", a string key starting with '#' or '\' gets a '\' before it.

local SEP = "\31"

local function part(k)
  if math.type(k) == "integer" then return "#" .. k end
  if type(k) ~= "string" then error("MPI message: a key of type " .. type(k), 3) end
  local c = k:sub(1, 1)
  if c == "#" or c == "\\" then return "\\" .. k end
  return k
end

local function flatten(prefix, t, out)
  for k, v in pairs(t) do
    local path = prefix .. part(k)
    local tv = type(v)
    if tv == "table" then
      if next(v) == nil then out["{" .. path] = 1 else flatten(path .. SEP, v, out) end
    elseif tv == "boolean" then
      out["?" .. path] = v and 1 or 0
    elseif tv == "number" or tv == "string" then
      out["=" .. path] = v
    else
      error("MPI message: " .. path:gsub(SEP, ".") .. " is a " .. tv, 3)
    end
  end
  return out
end

function M.encode(t) return flatten("", t, {}) end

function M.decode(flat)
  local root = {}
  for fk, v in pairs(flat) do
    local mark, path = fk:sub(1, 1), fk:sub(2)
    local node, keys = root, {}
    for p in (path .. SEP):gmatch("(.-)" .. SEP) do
      local c = p:sub(1, 1)
      if c == "#" then keys[#keys + 1] = math.tointeger(tonumber(p:sub(2)))
      elseif c == "\\" then keys[#keys + 1] = p:sub(2)
      else keys[#keys + 1] = p end
    end
    for i = 1, #keys - 1 do
      local k = keys[i]
      node[k] = node[k] or {}
      node = node[k]
    end
    local last = keys[#keys]
    if mark == "?" then node[last] = v ~= 0
    elseif mark == "{" then node[last] = node[last] or {}
    else node[last] = v end
  end
  return root
end

local function send(dest, t)
  return mpi.send(dest, M.encode(t))
end

-- One message from any rank: src, decoded table; nil on timeout.
local function recv(timeout_s)
  local src, flat, msg = mpi.recv(timeout_s)
  if not src then
    if flat == "timeout" then return nil end
    error("MPI receive failed: " .. tostring(msg), 0)
  end
  return src, M.decode(flat)
end

local function now() return sys.now() end

-- --- what a job carries between ranks -----------------------------------------

-- The fields of a candidate that a backend reads: its edit (source or
-- patch: without a spec, replay.lua sees an edited kernel only there),
-- origin, and a synthesized kernel's entry, name and launch (cuda.lua's
-- prepare).
local CANDIDATE_FIELDS = { "source", "patch", "origin", "entry", "name", "launch" }

-- The fields of an engine job a serving rank needs: its own spec gives the
-- source unless the job carries another one.
local function job_message(job, spec)
  local m = { key = job.key, config = job.config }
  if job.source and not (spec and job.source == spec.kernel.source) then m.source = job.source end
  local c, cand = job.candidate or {}, {}
  for _, k in ipairs(CANDIDATE_FIELDS) do cand[k] = c[k] end
  -- (a candidate's source that is the job's travels once)
  if cand.source ~= nil and cand.source == m.source then cand.source, m.source_is_candidates = nil, true end
  m.candidate = cand
  return m
end

local function job_from_message(m, spec)
  local cand = m.candidate or {}
  cand.config = m.config
  if m.source_is_candidates then cand.source = m.source end
  return { key = m.key, config = m.config, source = m.source or (spec and spec.kernel.source), candidate = cand }
end

-- --- serving ranks ---------------------------------------------------------------

-- Test hook (docs/MPI.md, tests/lua/test_mpi.lua): KOPT_TEST_MPI_FAULT=
-- "RANK:CHUNK:kill|hang" makes that rank die by SIGKILL, or stop answering,
-- when its CHUNK-th chunk arrives, before it evaluates it.
local function planted_fault(rank)
  local r, n, how = (os.getenv("KOPT_TEST_MPI_FAULT") or ""):match("^(%d+):(%d+):(%a+)$")
  if r and tonumber(r) == rank then return tonumber(n), how end
end

-- A knob value as text, every bit of a float kept.
local function value_text(v)
  if math.type(v) == "float" then return string.format("%.17g", v) end
  return tostring(v)
end

-- What a rank answers for, as two digests: its spec (kernel, knobs and
-- constraints; "none" without one) and, under replay, its recording's space
-- (the kernel the recording names and every configuration it holds,
-- whatever the knobs' order; nil on a GPU). Ranks that differ in either
-- answer other questions than rank 0 asks (a config missing from a
-- recording comes back invalid and unmeasured), whichever their devices.
function M.problem_digest(backend, spec)
  local of_spec = spec and expdb.problem_digest(spec, { knobs = spec.knobs }) or "none"
  local rec = backend.name == "replay" and backend.rec
  if not rec then return of_spec, nil end
  local names = {}
  for i, k in ipairs(backend.space.knobs) do names[i] = k.name end
  table.sort(names)
  local configs = {}
  for i, c in ipairs(backend.space.list) do
    local pairs_text = {}
    for j, name in ipairs(names) do pairs_text[j] = name .. "=" .. value_text(c[name]) end
    configs[i] = table.concat(pairs_text, ",")
  end
  table.sort(configs)
  return of_spec, sys.sha256(tostring(rec.kernel) .. "\n" .. table.concat(configs, "\n")):sub(1, 16)
end

local function hello(backend, comm, spec)
  local d = backend:describe()
  local m = { op = "hello", rank = comm.rank, host = sys.hostname(), pid = sys.getpid(),
              slots = backend.slots or 1, name = backend.name, device = d and d.device,
              arch = d and d.arch, describe = d }
  m.spec_digest, m.space_digest = M.problem_digest(backend, spec)
  return m
end

-- The loop of a serving rank: hello, then chunks until rank 0 says quit.
-- Returns when told to quit; a message it cannot read is an internal error.
function M.serve(backend, comm, spec)
  assert(send(0, hello(backend, comm, spec)))
  local fault_at, fault_how = planted_fault(comm.rank)
  local chunks, last_beat = 0, now()
  -- a long local evaluation (the cuda backend waiting on NVRTC or a GPU)
  -- tells rank 0 that this rank is alive
  backend.on_idle = function()
    if now() - last_beat >= M.HEARTBEAT_S then
      send(0, { op = "alive" })
      last_beat = now()
    end
  end
  while true do
    local src, msg = recv(-1)
    if src == 0 and msg.op == "quit" then
      M.aborting = msg.abort and true or nil  -- (rank 0 ends the job with MPI_Abort: no MPI_Finalize here)
      return
    end
    if src == 0 and msg.op == "eval" then
      chunks = chunks + 1
      if fault_at == chunks then
        if fault_how == "kill" then sys.kill_self() end
        while true do sys.sleep(1) end
      end
      local jobs = {}
      for i, m in ipairs(msg.jobs or {}) do jobs[i] = job_from_message(m, spec) end
      local before = backend:elapsed()
      local results = backend:evaluate(jobs)
      assert(send(0, { op = "results", chunk = msg.chunk, results = results,
                       elapsed = backend:elapsed() - before }))
      last_beat = now()
    end
  end
end

-- --- rank 0 ---------------------------------------------------------------------

-- Waits for every serving rank's hello; a rank that failed to start stops
-- the run (one sentence, nothing written), as does a rank with another GPU
-- model unless --allow-mixed.
local function gather(self, local_backend)
  local wait_s = self.hello_timeout or math.max(M.HELLO_MIN_S, 2 * self.timeout_s)
  local want, deadline = 0, now() + wait_s
  for r = 1, self.comm.size - 1 do
    self.ranks[r] = { rank = r, load = 0, chunks = {}, heard = now() }
    want = want + 1
  end
  local mine = local_backend:describe() or {}
  local got = 0
  while got < want do
    local src, msg = recv(math.max(0, deadline - now()))
    if not src then break end
    local r = self.ranks[src]
    if r and not r.slots then
      if msg.op == "fail" then
        errors.usage("rank %d (%s) cannot serve this run: %s", src, tostring(msg.host), tostring(msg.msg))
      elseif msg.op == "hello" then
        r.slots, r.host, r.pid, r.device, r.describe = math.max(1, msg.slots or 1), msg.host, msg.pid, msg.device,
          msg.describe
        r.heard = now()
        got = got + 1
        if msg.name ~= local_backend.name then
          errors.usage("rank %d (%s) evaluates with the %s backend, rank 0 with %s: every rank must use the same",
                       src, tostring(msg.host), tostring(msg.name), local_backend.name)
        end
        -- another problem is refused whatever the devices: --allow-mixed
        -- is about devices
        if msg.spec_digest ~= self.spec_digest then
          errors.usage("rank %d (%s) runs another spec than rank 0 (another kernel, knobs or constraints): every " ..
                       "rank must run the same problem", src, tostring(msg.host))
        end
        if msg.space_digest ~= self.space_digest then
          local theirs_d = type(msg.describe) == "table" and msg.describe or {}
          errors.usage("rank %d (%s) replays %s (kernel %s), which records another space than rank 0's %s " ..
                       "(kernel %s): other knobs, values or configurations; every rank must replay the same " ..
                       "space (--allow-mixed accepts other devices, not other spaces)", src, tostring(msg.host),
                       tostring(theirs_d.file), tostring(theirs_d.kernel), tostring(mine.file), tostring(mine.kernel))
        end
        -- a recording with other contents under the same GPU's name (a
        -- stale copy on another host) would mix two sets of times
        local theirs = type(msg.describe) == "table" and msg.describe.recording
        if local_backend.name == "replay" and theirs ~= mine.recording and msg.device == mine.device
           and not self.allow_mixed then
          errors.usage("rank %d (%s) replays a recording of %s other than rank 0's (contents %s, rank 0's %s): " ..
                       "mixing them corrupts timings; give --allow-mixed to run anyway", src, tostring(msg.host),
                       tostring(mine.device), tostring(theirs):sub(1, 12), tostring(mine.recording):sub(1, 12))
        end
        if msg.device ~= mine.device and not self.allow_mixed then
          errors.usage("rank %d (%s) has %s, rank 0 has %s: mixing devices corrupts timings; "
                       .. "give --allow-mixed to run anyway (each result records its rank)", src,
                       tostring(msg.host), tostring(msg.device or "no device"), tostring(mine.device or "no device"))
        end
      end
    end
  end
  for r = 1, self.comm.size - 1 do
    if not self.ranks[r].slots then
      self:lose(self.ranks[r], string.format("it did not say hello within %.0f s", wait_s))
    end
  end
end

-- opts: comm = kopt.cluster object (rank, size, lost), spec, root_evaluates
-- (default true), timeout_s, allow_mixed, quiet.
function M.open(local_backend, opts)
  local self = setmetatable({
    name = local_backend.name, space = local_backend.space, device = local_backend.device,
    local_backend = local_backend, comm = opts.comm, spec = opts.spec, ranks = {},
    root_evaluates = opts.root_evaluates ~= false, timeout_s = opts.timeout_s or M.TIMEOUT_S,
    allow_mixed = opts.allow_mixed, quiet = opts.quiet, clock = 0, next_chunk = 0,
    counts = { [0] = 0 }, requeued = 0, hello_timeout = opts.hello_timeout,
    simulated = local_backend.name == "replay",
  }, Mpi)
  self.spec_digest, self.space_digest = M.problem_digest(local_backend, opts.spec)
  gather(self, local_backend)
  local slots = self.root_evaluates and (local_backend.slots or 1) or 0
  for _, r in pairs(self.ranks) do
    if not r.lost then slots = slots + r.slots end
    self.counts[r.rank] = 0
  end
  self.slots = math.max(1, slots)
  if local_backend.profile then
    self.profile = function(_, job, metrics) return local_backend:profile(job, metrics) end
  end
  return self
end

function Mpi:note(fmt, ...)
  if not self.quiet then io.stderr:write("kopt: " .. string.format(fmt, ...) .. "\n") end
end

-- A rank is lost: nothing more is sent to it and its chunks in flight go
-- back to the front of the queue (in their order).
function Mpi:lose(r, why)
  if r.lost then return end
  r.lost = why
  self.comm.lost[#self.comm.lost + 1] = { rank = r.rank, host = r.host, why = why }
  local back = {}
  for id, c in pairs(r.chunks) do
    if self.inflight then self.inflight[id] = nil end
    for _, i in ipairs(c.idx) do back[#back + 1] = i end
  end
  r.chunks, r.load = {}, 0
  table.sort(back)
  if self.queue then
    for k = #back, 1, -1 do table.insert(self.queue, 1, back[k]) end
  end
  self.requeued = self.requeued + #back
  self:note("rank %d (%s) is lost: %s; %d candidate%s in flight evaluated elsewhere", r.rank, r.host or "?", why,
            #back, #back == 1 and "" or "s")
end

function Mpi:live_ranks()
  local out = {}
  for r = 1, self.comm.size - 1 do
    local x = self.ranks[r]
    if x and not x.lost and x.slots then out[#out + 1] = x end
  end
  return out
end

-- Sends chunks to the serving ranks with free slots, the freest first. A
-- rank takes at most its slots in flight, in chunks of half of them, so the
-- next chunk waits in its queue while it evaluates one.
function Mpi:dispatch(jobs)
  while #self.queue > 0 do
    local best
    for _, r in ipairs(self:live_ranks()) do
      local free = r.slots - r.load
      if free > 0 and (not best or free > best.slots - best.load) then best = r end
    end
    if not best then return end
    local size = math.min(best.slots - best.load, math.max(1, (best.slots + 1) // 2), #self.queue)
    local idx, msgs = {}, {}
    for k = 1, size do
      idx[k] = table.remove(self.queue, 1)
      msgs[k] = job_message(jobs[idx[k]], self.spec)
    end
    self.next_chunk = self.next_chunk + 1
    local id = self.next_chunk
    local ok, err = send(best.rank, { op = "eval", chunk = id, jobs = msgs })
    local c = { id = id, idx = idx, rank = best.rank, sent = now() }
    best.chunks[id], self.inflight[id] = c, c
    best.load = best.load + size
    if #idx > 0 and best.load == size then best.heard = now() end -- its clock starts with work
    if not ok then self:lose(best, "sending failed: " .. tostring(err)) end
  end
end

-- Reads what has arrived (waiting up to wait_s for the first message), then
-- loses the ranks that went silent with work in hand.
function Mpi:service(wait_s)
  local src, msg = recv(wait_s)
  while src do
    local r = self.ranks[src]
    if r and not r.lost then
      r.heard = now()
      if msg.op == "results" then
        local c = r.chunks[msg.chunk]
        if c then
          r.chunks[msg.chunk], self.inflight[msg.chunk] = nil, nil
          r.load = r.load - #c.idx
          for k, i in ipairs(c.idx) do
            local res = (msg.results or {})[k] or { status = "crash", log = "rank " .. src .. " returned no result" }
            res.rank = src
            self.results[i] = res
            self.done = self.done + 1
            -- (a free result, never measured, is no evaluation)
            if not res.free then self.counts[src] = (self.counts[src] or 0) + 1 end
          end
        end
      elseif msg.op == "fail" then
        self:lose(r, "it failed: " .. tostring(msg.msg))
      end
    end
    src, msg = recv(0)
  end
  local t = now()
  for _, r in ipairs(self:live_ranks()) do
    if r.load > 0 then
      if r.pid and r.host == sys.hostname() and not mpi.alive(r.pid) then
        self:lose(r, "its process is gone")
      elseif t - r.heard > self.timeout_s then
        self:lose(r, string.format("no word from it for %.0f s", t - r.heard))
      end
    end
  end
end

-- Rank 0's own share: a chunk of its slots, evaluated here while the
-- serving ranks work on theirs (a local backend that waits calls on_idle,
-- which keeps reading their results).
function Mpi:evaluate_here(jobs, size)
  local idx, sub = {}, {}
  for k = 1, math.min(size, #self.queue) do
    idx[k] = table.remove(self.queue, 1)
    sub[k] = jobs[idx[k]]
  end
  local lb = self.local_backend
  lb.on_idle = function()
    self:service(0)
    self:dispatch(jobs)
  end
  local out = lb:evaluate(sub)
  lb.on_idle = nil
  for k, i in ipairs(idx) do
    local res = out[k] or { status = "crash", log = "backend returned no result" }
    res.rank = 0
    self.results[i] = res
    self.done = self.done + 1
    if not res.free then self.counts[0] = self.counts[0] + 1 end
  end
end

function Mpi:evaluate(jobs)
  local t0 = now()
  self.queue, self.results, self.done, self.inflight = {}, {}, 0, {}
  for i = 1, #jobs do self.queue[i] = i end
  while self.done < #jobs do
    self:dispatch(jobs)
    local live = #self:live_ranks()
    if #self.queue > 0 and (self.root_evaluates or live == 0) then
      if live == 0 and not self.root_evaluates and not self.alone then
        self.alone = true
        self:note("no serving rank is left: rank 0 evaluates the rest itself")
      end
      self:evaluate_here(jobs, self.local_backend.slots or 1)
      self:service(0)
    else
      self:service(0.05)
    end
  end
  local results = self.results
  self.queue, self.results, self.inflight = nil, nil, nil
  -- Evaluation time as one process counts it: under replay the recorded cost
  -- of each config, summed in the jobs' order (the same sum, to the last
  -- bit, as a single-process replay); otherwise the wall clock of the batch.
  if self.simulated then
    for i = 1, #jobs do
      local r = results[i]
      if r and not r.free then self.clock = self.clock + (r.cost_s or 0) end
    end
  else
    self.clock = self.clock + (now() - t0)
  end
  return results
end

-- Re-measurements that must happen in one process (kopt.finalists): rank 0's
-- own backend.
function Mpi:one_place() return self.local_backend end

function Mpi:elapsed() return self.clock end

function Mpi:describe()
  local d = {}
  for k, v in pairs(self.local_backend:describe() or {}) do d[k] = v end
  local ranks = { { rank = 0, host = sys.hostname(), device = d.device, evaluates = self.root_evaluates,
                    slots = self.root_evaluates and (self.local_backend.slots or 1) or 0 } }
  for r = 1, self.comm.size - 1 do
    local x = self.ranks[r]
    ranks[#ranks + 1] = { rank = r, host = x.host, device = x.device, slots = x.slots }
  end
  d.mpi = { ranks = ranks }
  return d
end

-- One line for the end of the run: who evaluated how much, what was lost.
function Mpi:summary()
  local parts = {}
  for r = 0, self.comm.size - 1 do
    local x = self.ranks[r]
    parts[#parts + 1] = string.format("rank %d %d%s", r, self.counts[r] or 0, x and x.lost and " (lost)" or "")
  end
  return string.format("evaluations by rank: %s; %d re-queued from lost ranks", table.concat(parts, ", "),
                       self.requeued)
end

function Mpi:close()
  self.local_backend:close()
end

return M
