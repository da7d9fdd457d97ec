-- Compilation for the GPU backend: NVRTC options for a spec and a config, a
-- synchronous compile, and a pool of compile worker processes whose results
-- arrive as they finish, all through an on-disk CUBIN cache.
--
--   local compile = require("kopt.compile")
--   local job = compile.job_for(spec, config, "sm_90")
--   local pool = compile.pool()             -- one worker per CPU
--   local id = pool:submit(job)
--   local id, result = pool:wait_any()      -- whichever finishes first
--   local result = pool:wait(id)            -- that one (others are kept)
--   pool:close()
--
-- A job: { source=, entry=, arch=, name=, options={...}, salt= } (salt: a
-- digest of included headers, part of the cache key only).
-- A result: { ok=, cubin=<bytes>|nil, log=, lowered=, regs=, smem_static=,
-- local_bytes=, spill_stores=, spill_loads=, spills=, barriers=,
-- max_threads=, cached=, compile_s= }. A compile error is a result with
-- ok == false and the log; a crashed or hung worker likewise.
local cpool = require("kopt.cpool")
local nvrtc = require("kopt.nvrtc")
local sys = require("kopt.sys")

local M = {}

M.version = nvrtc.version

-- The CUBIN cache directory: $KOPT_CACHE_DIR, else $XDG_CACHE_HOME/kopt/cubin,
-- else ~/.cache/kopt/cubin. KOPT_CACHE_DIR=off (or "none", "") disables it.
function M.cache_dir()
  local dir = os.getenv("KOPT_CACHE_DIR")
  if dir then
    if dir == "" or dir == "off" or dir == "none" then return nil end
    return dir
  end
  local xdg = os.getenv("XDG_CACHE_HOME")
  if xdg and xdg ~= "" then return xdg .. "/kopt/cubin" end
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.cache/kopt/cubin" end
  return nil
end

local function exists(path) return sys.stat(path) ~= nil end

-- The toolkit's include directories: <root>/include (cuda_fp16.h, mma.h)
-- and, from CUDA 13 on, <root>/include/cccl (cuda/pipeline, cub). The root is
-- $CUDA_HOME, $CUDA_PATH, the toolkit kopt was built with, or /usr/local/cuda.
local include_cache
function M.include_dirs()
  if include_cache then return include_cache end
  local roots = { os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), nvrtc.cuda_home, "/usr/local/cuda" }
  for _, root in ipairs(roots) do
    if root and root ~= "" then
      for _, inc in ipairs({ root .. "/include", root .. "/targets/x86_64-linux/include",
                             root .. "/targets/sbsa-linux/include" }) do
        if exists(inc .. "/cuda_fp16.h") then
          include_cache = { inc }
          if exists(inc .. "/cccl") then include_cache[2] = inc .. "/cccl" end
          return include_cache
        end
      end
    end
  end
  include_cache = {}
  return include_cache
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

local function append_unique(out, seen, opt)
  if not seen[opt] then
    seen[opt] = true
    out[#out + 1] = opt
  end
end

-- Options for one kernel of a spec (spec.kernel or spec.reference):
-- its own options (the kernel's: with those its knobs' values add),
-- -lineinfo (free source correlation for profilers; same SASS), the include
-- paths (toolkit, CCCL, the spec's directory, the kernel's directory) and
-- the architecture. The knobs' defines are not options: they head the
-- source (with_defines below).
local function options(spec, kernel, config, arch, is_kernel)
  local out, seen = {}, {}
  local base = is_kernel and spec:knob_options(config) or kernel.options
  local pre_include = false
  for _, o in ipairs(base) do
    out[#out + 1] = o
    pre_include = pre_include or o:match("^%-%-pre%-include") ~= nil or o:match("^%-include") ~= nil
  end
  -- a header pre-included by an option is read before the source, so the
  -- defines that head the source come too late for it: they are options
  -- as well then (the same definition twice is no redefinition)
  if pre_include and config then
    local defs = is_kernel and spec:defines(config) or (spec.reference_defines and spec:reference_defines(config)) or {}
    for _, d in ipairs(defs) do out[#out + 1] = d end
  end
  append_unique(out, seen, "-lineinfo")
  for _, inc in ipairs(M.include_dirs()) do append_unique(out, seen, "-I" .. inc) end
  append_unique(out, seen, "-I" .. spec.dir)
  append_unique(out, seen, "-I" .. dirname(kernel.path))
  out[#out + 1] = "--gpu-architecture=" .. (arch or "sm_90")
  return out
end

-- spec kernel options (and the knobs' per-value options) + include paths +
-- --gpu-architecture=arch (default sm_90).
function M.options_for(spec, config, arch)
  return options(spec, spec.kernel, config, arch, true)
end

-- The source with the knobs' defines ahead of it, as #define lines, and
-- "#line 1" so that messages and line info count the file's own lines.
-- Not -D options: NVRTC reads its built-in header after those, so a knob
-- named as a name there (width, mode, offset) broke every compile; defines
-- written in the source come after it, as Kernel Tuner writes them.
-- defs: "-DNAME=VALUE" strings (Spec:defines); name: the program's name,
-- which the source's own lines keep (the defines' lines are "kopt knob
-- defines": a message about one of them, a knob the source defines again,
-- is not put on a line of the file).
function M.with_defines(source, defs, name)
  if #defs == 0 then return source end
  local lines = { '#line 1 "kopt knob defines"' }
  for _, d in ipairs(defs) do
    local n, value = d:match("^%-D([^=]+)=(.*)$")
    lines[#lines + 1] = "#define " .. (n or d:sub(3)) .. " " .. (value or "")
  end
  -- (a byte-order mark is no longer at the start once the lines are ahead)
  if source:sub(1, 3) == "\239\187\191" then source = source:sub(4) end
  local back = name and string.format('#line 1 "%s"', (name:gsub('[\\"]', "\\%0"))) or "#line 1"
  return table.concat(lines, "\n") .. "\n" .. back .. "\n" .. source
end

-- The program's name NVRTC compiles: the kernel file's real path, so that a
-- quoted #include is looked for next to it (NVRTC looks first in the folder
-- the name names, which for a bare file name is the folder kopt runs in).
-- The compiler's messages name the file alone (core/compile/nvrtc.c).
local function program_name(path)
  if not path then return nil end
  return sys.realpath(path) or path
end

-- (a regular file only: an #include of /dev/zero or a FIFO would read
-- forever; NVRTC refuses those itself)
local function read_file(path)
  if sys.stat(path) ~= "file" then return nil end
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- The cache key covers the source text; a header it includes is covered by
-- this digest of every such header, followed recursively: #include "x"
-- found next to the including file or in `dirs`, and #include <x> found in
-- `dirs` but not in the toolkit's include directories (NVRTC searches
-- those first). nil when the source includes none. Toolkit headers are
-- covered by NVRTC's version in the key.
local function in_toolkit(name)
  for _, d in ipairs(M.include_dirs()) do
    if exists(d .. "/" .. name) then return true end
  end
  return false
end

-- Whether a source may take code from a header of the user's: an
-- #include "...", an #include <...> the toolkit does not hold (a folder of
-- -I), or an #include of a macro's value. What a lint cannot see then may
-- be defined there.
function M.includes_local(source)
  if source:find('#%s*include%s*"') or source:find("#%s*include%s*[%a_]") then return true end
  for name in source:gmatch("#%s*include%s*<([^>]+)>") do
    if not in_toolkit(name) then return true end
  end
  return false
end

-- Why a compile failed inside a header of the toolkit or the system:
-- a knob's define had replaced a name the header uses (a template parameter
-- `Size` in cooperative_groups.h, `N` in cuda_pipeline.h), which breaks
-- every compile of the kernel. NVRTC's log shows an error's line with a
-- caret under the token it stopped at; a knob's name there is the clash.
-- A sentence naming the knob, or nil.
function M.define_clash(log, spec)
  if type(log) ~= "string" then return nil end
  local defined = {}
  for _, k in ipairs(spec.knobs or {}) do
    if k.define ~= false then defined[k.name] = true end
  end
  local dirs = {}
  for _, d in ipairs(M.include_dirs()) do dirs[#dirs + 1] = d .. "/" end
  dirs[#dirs + 1] = "/usr/include/"
  local lines = {}
  for line in (log .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  for i, line in ipairs(lines) do
    local file, at_line = line:match("^(.-)%((%d+)%): error")
    local header
    for _, d in ipairs(file and dirs or {}) do
      if file:sub(1, #d) == d then header = file:sub(#d + 1) break end
    end
    local text, caret = lines[i + 1], lines[i + 2] and lines[i + 2]:match("^( *)%^%s*$")
    if header and text and caret then
      local col = #caret + 1
      for first, name, after in text:gmatch("()([%a_][%w_]*)()") do
        if first <= col and col < after then
          if defined[name] then
            return string.format("knob %s is a define, and <%s> uses %s as a name (line %s): " ..
                                 "rename the knob, or set \"define\": false", name, header, name, at_line)
          end
          break
        end
      end
    end
  end
  return nil
end

-- (an #include of a macro's value, `#include HEADER`, names no file the
-- scan can follow: every header-like file in the folders searched counts)
local HEADER_LIKE = { h = true, hh = true, hpp = true, hxx = true, cuh = true, inc = true, inl = true, cu = true }

function M.include_digest(source, source_dir, dirs)
  local seen, parts, computed = {}, {}, false
  local function scan(text, dir, depth)
    if depth > 32 then return end
    if text:find("#%s*include%s*[%a_]") then computed = true end
    local names = {}
    for name in text:gmatch('#%s*include%s*"([^"]+)"') do names[#names + 1] = { name, true } end
    for name in text:gmatch('#%s*include%s*<([^>]+)>') do
      if name:sub(1, 1) == "/" or not in_toolkit(name) then names[#names + 1] = { name, false } end
    end
    for _, inc in ipairs(names) do
      local name = inc[1]
      local search = {}
      if inc[2] then search[1] = dir end  -- (a quoted name is looked for next to its includer first)
      for _, d in ipairs(dirs) do search[#search + 1] = d end
      for _, d in ipairs(search) do
        local path = name:sub(1, 1) == "/" and name or (d .. "/" .. name)
        local body = not seen[path] and read_file(path)
        if body then
          seen[path] = true
          -- (by the name included, not the folder: a copy of the spec's
          -- folder elsewhere is the same problem)
          parts[#parts + 1] = name .. "\0" .. sys.sha256(body)
          scan(body, dirname(path), depth + 1)
          break
        elseif seen[path] then
          break
        end
      end
    end
  end
  scan(source, source_dir, 0)
  if computed then
    local files = {}
    for _, d in ipairs({ source_dir, table.unpack(dirs) }) do
      for _, f in ipairs(sys.list_dir(d) or {}) do
        local path = d .. "/" .. f
        if HEADER_LIKE[f:match("%.(%w+)$") or ""] and not seen[path] then
          seen[path] = true
          files[#files + 1] = path
        end
      end
    end
    table.sort(files)
    for _, path in ipairs(files) do
      local body = read_file(path)
      if body then parts[#parts + 1] = path:match("[^/]*$") .. "\0" .. sys.sha256(body) end
    end
  end
  if #parts == 0 then return nil end
  return sys.sha256(table.concat(parts, "\n"))
end

-- The include folders compiler options name (-Ipath, -I path,
-- --include-path=path, --include-path path): fn(folder) is called for each,
-- and the options come back with each folder replaced by what fn returns
-- (kept when it returns nil). The one reader of these forms (kopt.spec
-- anchors relative ones to the spec's folder with it).
function M.map_include_dirs(opts, fn)
  local out, next_is_dir = {}, false
  for i, o in ipairs(opts or {}) do
    if next_is_dir then
      o, next_is_dir = fn(o) or o, false
    elseif o == "-I" or o == "--include-path" then
      next_is_dir = true
    else
      local flag, d = o:match("^(%-I)(.+)$")
      if not flag then flag, d = o:match("^(%-%-include%-path=)(.+)$") end
      if flag then o = flag .. (fn(d) or d) end
    end
    out[i] = o
  end
  return out
end

-- The folders a job's #include may come from, toolkit's aside: the spec's
-- and the kernel's, then every include folder of its options (the spec's,
-- its knobs' per value; relative ones are the spec's already).
local function local_dirs(spec, kernel, opts)
  local dirs, toolkit = { spec.dir, dirname(kernel.path) }, {}
  for _, d in ipairs(M.include_dirs()) do toolkit[d] = true end
  M.map_include_dirs(opts, function(d)
    if not toolkit[d] then dirs[#dirs + 1] = d end
  end)
  return dirs
end

-- A header an option pre-includes (--pre-include F, -include F, with or
-- without "=") is read as if the source began by including it: its lines,
-- ahead of the text the include scan reads, so an edit of it misses the cache.
local function pre_included(opts)
  local lines, want = {}, false
  for _, o in ipairs(opts or {}) do
    local name = o:match("^%-%-pre%-include=(.+)$") or o:match("^%-include=(.+)$")
                 or (o:sub(1, 2) ~= "--" and o:match("^%-include(.+)$"))
    if want then name = o end
    want = (o == "--pre-include" or o == "-include")
    if name then lines[#lines + 1] = string.format('#include "%s"\n', name) end
  end
  return table.concat(lines)
end

-- The digest of the headers a spec's kernel (or its reference: `kernel`)
-- includes, through its own options' -I: a header edited is another
-- problem for the experience database and a resumed run. nil when none.
function M.headers_digest(spec, kernel)
  if not (kernel and kernel.source and kernel.path) then return nil end
  return M.include_digest(pre_included(kernel.options) .. kernel.source, dirname(kernel.path),
                          local_dirs(spec, kernel, kernel.options))
end

-- The compile job of a candidate. `source` replaces the spec's kernel text
-- (a patched candidate).
function M.job_for(spec, config, arch, source)
  source = source or spec.kernel.source
  arch = spec.kernel.arch or arch
  local opts = M.options_for(spec, config, arch)
  return { source = M.with_defines(source, spec:defines(config), program_name(spec.kernel.path)),
           entry = spec.entry and spec:entry(config) or spec.kernel.entry,
           name = program_name(spec.kernel.path), arch = arch or "sm_90", options = opts,
           salt = M.include_digest(pre_included(opts) .. source, dirname(spec.kernel.path),
                                   local_dirs(spec, spec.kernel, opts)) }
end

-- The reference kernel's job, or nil when the spec has no reference: no
-- knob defines (a reference does not depend on the candidate) but those of
-- the knobs it declares (reference.knobs: the ones that change the problem),
-- at `config` (needed only when it declares some).
function M.reference_job(spec, arch, config)
  local ref = spec.reference
  if not ref then return nil end
  -- (a reference of its own target, sm_90a for wgmma; else the kernel's)
  arch = ref.arch or spec.kernel.arch or arch
  local opts = options(spec, ref, config, arch, false)
  local defs = config and spec.reference_defines and spec:reference_defines(config) or {}
  return { source = M.with_defines(ref.source, defs, program_name(ref.path)),
           entry = spec.reference_entry and spec:reference_entry(config) or ref.entry,
           name = program_name(ref.path), arch = arch or "sm_90", options = opts,
           salt = M.include_digest(pre_included(opts) .. ref.source, dirname(ref.path), local_dirs(spec, ref, opts)) }
end

-- opts.cache: false disables the cache; opts.cache_dir overrides the default.
local function cache_dir_of(opts)
  if opts and opts.cache == false then return nil end
  local dir = opts and opts.cache_dir or M.cache_dir()
  if dir then sys.mkdir_p(dir) end
  return dir
end

-- Compiles in this process, through the cache.
function M.compile(job, opts)
  return nvrtc.compile(job, cache_dir_of(opts))
end

function M.cache_key(job) return nvrtc.cache_key(job) end

local Pool = {}
Pool.__index = Pool

-- n workers (default: one per CPU). opts: cache=false | cache_dir=DIR,
-- timeout_s (per job; default 600).
function M.pool(n, opts)
  opts = opts or {}
  n = n or sys.cpu_count()
  local dir = cache_dir_of(opts)
  local self = setmetatable({ dir = dir, stash = {}, order = {}, submitted = 0 }, Pool)
  self.c = cpool.new(n, { cache_dir = dir, timeout_s = opts.timeout_s or 600 })
  return self
end

function Pool:submit(job)
  self.submitted = self.submitted + 1
  return self.c:submit(job)
end

-- The next finished job: id, result; nil when nothing is pending or timeout_s
-- (default: none) passed first. Results set aside by wait(id) come first.
function Pool:wait_any(timeout_s)
  while #self.order > 0 do
    local id = table.remove(self.order, 1)
    local r = self.stash[id]
    if r then
      self.stash[id] = nil
      return id, r
    end
  end
  return self.c:wait_any(timeout_s)
end

-- The result of one job, waiting for it; results of other jobs that finish
-- meanwhile are kept for wait_any. Raises when id is not pending.
function Pool:wait(id)
  local r = self.stash[id]
  if r then
    self.stash[id] = nil
    return r
  end
  while true do
    local got, res = self.c:wait_any()
    if got == nil then error(string.format("compile pool: job %s is not pending", tostring(id)), 2) end
    if got == id then return res end
    self.stash[got] = res
    self.order[#self.order + 1] = got
  end
end

function Pool:pending()
  local n = self.c:pending()
  for _ in pairs(self.stash) do n = n + 1 end
  return n
end

function Pool:size() return self.c:size() end

function Pool:close() self.c:close() end
Pool.__close = Pool.close
Pool.__gc = Pool.close

return M
