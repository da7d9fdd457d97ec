-- Artifacts per source variant, in the run folder, content-addressed by the
-- hash of the materialised source, so two configs of one source share them:
--
--   variants/<sha256[1..16]>/
--     <kernel file name>     the source (the knobs' defines head it when compiled)
--     source.diff            its difference from the spec's kernel (none for the original)
--     origin.json            who made it first: expert, method, reason, repair attempt, evaluation
--     results.jsonl          one line per evaluated config of this source: key, config, status, time, error
--     log-<n>.txt            the compiler's or verifier's log of evaluation n, when it failed
--     <config>.cubin, .ptx, .sass, .nvrtc.log   the compiled code (see `compiled` below)
--
-- Modes (`--artifacts`): none; best (the default): every variant's folder,
-- and the compiled code of the run's best; all: the compiled code of every
-- variant's first config too. Compiled code is made after the search by one
-- more NVRTC compile (its disk cache usually answers); with the CUDA
-- toolkit's tools on PATH or in $CUDA_HOME/bin, nvcc writes the PTX and
-- cuobjdump or nvdisasm the SASS.
-- Artifacts are a record, not state: a failed write is reported once and
-- turns them off; the run goes on.
local compile = require("kopt.compile")
local json = require("kopt.json")
local patch = require("kopt.patch")
local sys = require("kopt.sys")

local M = {}
M.MODES = { none = true, best = true, all = true }
M.DEFAULT = "best"

local A = {}
A.__index = A

-- opts: dir (run folder), spec, mode, compile (bool: make compiled code;
-- default: true unless the backend replays recordings), arch.
function M.new(opts)
  local self = setmetatable({ dir = opts.dir, spec = opts.spec, mode = opts.mode or M.DEFAULT, seen = {},
                              compile = opts.compile ~= false, arch = opts.arch }, A)
  if not M.MODES[self.mode] then error("artifacts mode must be none, best or all", 2) end
  if self.mode == "none" or not (self.spec and self.spec.kernel) then self.off = true end
  return self
end

local function write(path, text, append)
  local f, err = io.open(path, append and "a" or "w")
  if not f then error(err, 0) end
  local ok, werr = f:write(text)
  f:close()
  if not ok then error(werr, 0) end
end

function A:guard(fn, ...)
  if self.off then return end
  local ok, err = pcall(fn, self, ...)
  if not ok then
    self.off = true
    io.stderr:write("kopt: artifacts turned off: ", tostring(err), "\n")
  end
end

function A:kernel_name() return (self.spec.kernel.path or "kernel.cu"):match("([^/]+)$") end

-- The folder of a source, made (with source, diff and origin) on first use.
function A:folder(source, rec, n)
  local hash = sys.sha256(source):sub(1, 16)
  local dir = self.dir .. "/variants/" .. hash
  local f = self.seen[hash]
  if f then return f end
  f = { dir = dir, hash = hash, keys = {} }
  self.seen[hash] = f
  if sys.stat(dir .. "/results.jsonl") then   -- a resumed run: what is on record stays
    for line in io.lines(dir .. "/results.jsonl") do
      local r = json.decode(line)
      if type(r) == "table" and r.key then f.keys[r.key] = true end
    end
    return f
  end
  local made, merr = sys.mkdir_p(dir)
  if not made then error(merr, 0) end  -- (said by guard without kopt's own line)
  write(dir .. "/" .. self:kernel_name(), source)
  local orig = self.spec.kernel.source
  if source ~= orig then
    write(dir .. "/source.diff", patch.diff(orig, source, self:kernel_name()))
  end
  local o = rec.origin or {}
  write(dir .. "/origin.json", json.pretty({ expert = o.expert, method = o.method, reason = o.reason,
                                             repair = o.repair, iteration = o.iteration, evaluation = n,
                                             original = source == orig }))
  return f
end

-- on_eval: one evaluated state (an engine record).
function A:record(engine, rec)
  self:guard(function()
    local source = engine:source_of(rec.candidate)
    if not source then return end
    local f = self:folder(source, rec, rec.n)
    if f.keys[rec.key] then return end
    f.keys[rec.key] = true
    f.first = f.first or rec
    local r = rec.result
    write(f.dir .. "/results.jsonl", json.encode({
      key = rec.key, n = rec.n, config = rec.config, status = r.status, time_ms = r.time_ms, err = r.err,
      expert = rec.origin and rec.origin.expert, method = rec.origin and rec.origin.method,
      repair = rec.origin and rec.origin.repair }) .. "\n", true)
    if r.status ~= "ok" and type(r.log) == "string" and r.log ~= "" then
      write(string.format("%s/log-%d.txt", f.dir, rec.n), r.log)
    end
  end)
end

local function tool(name)
  local home = os.getenv("CUDA_HOME") or os.getenv("CUDA_PATH") or "/usr/local/cuda"
  for _, p in ipairs({ home .. "/bin/" .. name }) do
    if sys.stat(p) then return p end
  end
  local h = io.popen("command -v " .. name .. " 2>/dev/null")
  local path = h and h:read("l")
  if h then h:close() end
  return path ~= "" and path or nil
end

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Compiled code of one config of a source: the CUBIN, NVRTC's log and, when
-- the toolkit has them, the PTX (nvcc) and the SASS (cuobjdump or nvdisasm).
function A:compiled(source, config, key)
  local f = self:folder(source, { origin = {} }, nil)
  local base = key:gsub("#.*$", ""):gsub("[^%w_=.-]", "_"):sub(1, 80)
  local job = compile.job_for(self.spec, config, self.arch, source)
  local ok, res = pcall(compile.compile, job)
  if not ok or type(res) ~= "table" then
    write(f.dir .. "/" .. base .. ".nvrtc.log", "compile failed: " .. tostring(res) .. "\n")
    return
  end
  write(f.dir .. "/" .. base .. ".nvrtc.log", res.log or "")
  if not res.cubin then return end
  local cubin = f.dir .. "/" .. base .. ".cubin"
  write(cubin, res.cubin)
  -- PTX: kopt compiles to CUBIN directly, so nvcc writes it from the same
  -- source and defines, when the toolkit has it.
  local nvcc = tool("nvcc")
  if nvcc then
    local args = { shq(nvcc), "-ptx", "-arch=" .. shq(job.arch or "sm_90") }
    -- (the source as compiled, its knobs' defines ahead of it: as -D
    -- options they would come before nvcc's own headers, which a knob
    -- named width or mode breaks)
    local compiled = f.dir .. "/" .. base .. ".compiled.cu"
    write(compiled, job.source)
    for _, o in ipairs(job.options or {}) do
      if o:match("^%-D") or o:match("^%-I") or o:match("^%-%-?std=") or o == "--use_fast_math" then
        args[#args + 1] = shq(o)
      end
    end
    for _, d in ipairs({ self.spec.dir, (self.spec.kernel.path or ""):match("^(.*)/[^/]*$") }) do
      if d then args[#args + 1] = "-I" .. shq(d) end
    end
    args[#args + 1] = "-o " .. shq(f.dir .. "/" .. base .. ".ptx")
    args[#args + 1] = shq(compiled)
    os.execute(table.concat(args, " ") .. " > " .. shq(f.dir .. "/" .. base .. ".ptx.log") .. " 2>&1")
  end
  local cuobjdump, nvdisasm = tool("cuobjdump"), tool("nvdisasm")
  local cmd = cuobjdump and (shq(cuobjdump) .. " -sass " .. shq(cubin))
    or nvdisasm and (shq(nvdisasm) .. " " .. shq(cubin))
  if cmd then os.execute(cmd .. " > " .. shq(f.dir .. "/" .. base .. ".sass") .. " 2>&1") end
end

-- After the search: best/<kernel>.diff against the spec's kernel, and the
-- compiled code the mode asks for.
function A:finish(engine)
  local best = engine.best
  local spec = self.spec
  if best and spec and spec.kernel and best.source and best.source ~= spec.kernel.source then
    self:guard(function()
      local made, merr = sys.mkdir_p(self.dir .. "/best")
      if not made then error(merr, 0) end
      write(self.dir .. "/best/" .. self:kernel_name() .. ".diff",
            patch.diff(spec.kernel.source, best.source, self:kernel_name()))
    end)
  end
  if not self.compile then return end
  if best and best.source then self:guard(self.compiled, best.source, best.config, best.key) end
  if self.mode == "all" then
    local hashes = {}
    for h in pairs(self.seen) do hashes[#hashes + 1] = h end
    table.sort(hashes)
    for _, h in ipairs(hashes) do
      local first = self.seen[h].first
      if first and not (best and first.key == best.key) then
        local source = engine:source_of(first.candidate)
        if source then self:guard(self.compiled, source, first.config, first.key) end
      end
    end
  end
end

return M
