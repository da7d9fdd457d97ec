-- The C bindings at their edges; each case failed before its fix:
-- * http.request_many read a body, url or ca_file that was a number (or an
--   __index's string) after its only reference was gone: the server got
--   another request's bytes (a use after free under ASan);
-- * pool:wait_any(0) never collected a finished compile (its deadline
--   check came before the poll), so idle GPUs waited for busy ones;
-- * nvrtc.compile(job) without a cache folder read the job's options array
--   as the folder and failed;
-- * a Worker closed by an error (`local w <close>`) took the error as its
--   grace period: the error was lost, and a number made it wait that long;
-- * sys.mkdir_p("") read past its buffer's end;
-- * strings with a NUL byte were cut silently: write_atomic("a\0b") wrote
--   a, db:run ran the SQL before the NUL (passing the one-statement check),
--   an option "-DX=1\0 --more" compiled as -DX=1, and an LLM's edit
--   holding one would have been compiled cut;
-- * graph.load followed a loop in an edge list for ever, and allocated what
--   a 56-byte file's header claimed (gigabytes) before finding it short;
-- * a SIGTERM to the process group (timeout, systemd, Slurm) killed the
--   compile workers, and SIGINT or SIGTERM the GPU worker: the candidates
--   in flight were recorded as a failed compile or a crash.
local T = require("testlib")
local http = require("kopt.http")
local cpool = require("kopt.cpool")
local nvrtc = require("kopt.nvrtc")
local sys = require("kopt.sys")
local graph = require("kopt.graph")

local tmp = T.tmpdir("binding-edges")

-- http: a body that is no string is refused, not read after its release
do
  local ok, err = pcall(http.request_many, { { url = "http://127.0.0.1:9/", body = 1000001 } }, { timeout_s = 1 })
  T.check(not ok and tostring(err):find("request 1: body must be a string", 1, true), "a number body: %s", tostring(err))
  ok, err = pcall(http.request_many, { { url = "http://127.0.0.1:9/" } }, { timeout_s = 1, ca_file = 5 })
  T.check(not ok and tostring(err):find("ca_file must be a string", 1, true), "a number ca_file: %s", tostring(err))
  -- a url an __index makes is kept alive while curl reads it (the request
  -- fails to connect: port 9 is closed; what matters is that it names it)
  local req = setmetatable({}, { __index = function(_, k)
    collectgarbage()
    if k == "url" then return "http://127.0.0.1:9/x" .. string.rep("y", 40) end
  end })
  local res = http.request_many({ req }, { timeout_s = 2, max_retries = 0 })
  T.check(type(res) == "table" and res[1] and not res[1].ok, "a request whose url comes from __index: %s",
          res and res[1] and tostring(res[1].error) or "no result")
end

local SRC = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n'

-- pool:wait_any(0) collects a compile that has finished
do
  local pool = cpool.new(1, { timeout_s = 60 })
  local id = pool:submit({ source = SRC, entry = "k", arch = "sm_90", name = "k.cu", options = {} })
  local got
  for _ = 1, 100 do
    sys.sleep(0.1)
    got = pool:wait_any(0)
    if got then break end
  end
  T.eq(got, id, "wait_any(0) after the compile finished")
  pool:close()
end

-- nvrtc.compile with the job alone
do
  local ok, res = pcall(nvrtc.compile, { source = SRC, entry = "k", arch = "sm_90", name = "k.cu", options = {} })
  T.check(ok and res.ok, "nvrtc.compile(job) without a cache folder: %s", tostring(ok and res.log or res))
end

-- NUL bytes
do
  local ok, err = pcall(sys.write_atomic, tmp .. "/a\0b", "x")
  T.check(not ok and tostring(err):find("NUL", 1, true), "write_atomic to a path with a NUL: %s", tostring(err))
  T.check(not T.exists(tmp .. "/a"), "write_atomic wrote the path's part before the NUL")
  ok, err = pcall(nvrtc.compile, { source = SRC, entry = "k", arch = "sm_90", name = "k.cu",
                                   options = { "-DX=1\0 --no-such-option" } })
  T.check(not ok and tostring(err):find("job.options[1] holds a NUL byte", 1, true), "an option with a NUL: %s",
          tostring(err))
  local db = require("kopt.db")
  local d = assert(db.open(tmp .. "/t.db"))
  d:exec("CREATE TABLE t (x INTEGER)")
  ok, err = pcall(d.exec, d, "INSERT INTO t VALUES (3)\0; DROP TABLE t")
  T.check(not ok and tostring(err):find("NUL", 1, true), "SQL with a NUL: %s", tostring(err))
  d:close()
end

-- an edit or a written kernel with a NUL byte is refused before it is compiled
do
  local patch = require("kopt.patch")
  local new, why = patch.apply_edit(SRC, { kind = "source", text = SRC:gsub("%*= 2.0f", "*= 2.0f;\0 x[0] = 1") },
                                    { entry = "k" })
  T.check(not new and tostring(why):find("NUL", 1, true), "an edit with a NUL byte: %s", tostring(why))
  local ok, perr = patch.check_kernel_only(patch.diff("", "a\0b"), { knobs = {}, base = "", new = "a\0b" })
  T.check(not ok and tostring(perr):find("NUL", 1, true), "a written kernel with a NUL byte: %s", tostring(perr))
end

-- mkdir_p("")
do
  local ok, err = sys.mkdir_p("")
  T.check(not ok and tostring(err):find("empty path", 1, true), "mkdir_p(''): %s %s", tostring(ok), tostring(err))
end

-- graph.load: a loop in an edge list, a header larger than its file
do
  local g = graph.new(16)
  local a, b, c = g:add("a"), g:add("b"), g:add("c")
  g:link(a, "a-b", b, 0.5)
  g:link(a, "a-c", c, 0.5)
  local path = tmp .. "/g.kgr"
  assert(g:save(path))
  local good = T.slurp(path)
  T.check(graph.load(path) ~= nil, "the snapshot itself loads")
  -- (header: magic 8, version, endian, node size, edge size, nodes, edges, arena)
  local node_size, edge_size, nodes = string.unpack("<I4I4I8", good, 8 + 4 + 4 + 1)
  local e0 = 48 + nodes * node_size
  -- edge 0's next is 1 and edge 1's is none: that field, found by its values
  local next_at
  for off = 0, edge_size - 4, 4 do
    if string.unpack("<I4", good, e0 + off + 1) == 1 and string.unpack("<I4", good, e0 + edge_size + off + 1) == 0xFFFFFFFF then
      next_at = off
      break
    end
  end
  T.check(next_at, "no next field found in the snapshot's edges")
  if next_at then
    local at = e0 + edge_size + next_at
    local body = good:sub(1, at) .. string.pack("<I4", 0) .. good:sub(at + 5, -9)
    local h = -3750763034362895579  -- FNV-1a 64: offset basis, prime 1099511628211
    for i = 1, #body do h = (h ~ body:byte(i)) * 1099511628211 end
    T.write(tmp .. "/loop.kgr", body .. string.pack("<i8", h))
    local t0 = sys.now()
    local l, lerr = graph.load(tmp .. "/loop.kgr")
    T.check(not l and tostring(lerr):find("corrupt", 1, true) and sys.now() - t0 < 1, "an edge list that loops: %s",
            tostring(lerr))
  end
    local huge = good:sub(1, 24) .. string.pack("<I8", 1 << 26) .. good:sub(33, 56)
  T.write(tmp .. "/huge.kgr", huge)
  local t0 = sys.now()
  local hg, herr = graph.load(tmp .. "/huge.kgr")
  T.check(not hg and tostring(herr):find("truncated", 1, true) and sys.now() - t0 < 1,
          "a header claiming 2^26 nodes in a 56-byte file: %s in %.2f s", tostring(herr), sys.now() - t0)
end

-- signals: the workers leave SIGINT and SIGTERM to the main process
local function ignored(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return nil end
  local mask = tonumber(f:read("a"):match("SigIgn:%s*(%x+)") or "0", 16)
  f:close()
  return (mask >> 1) & 1 == 1 and (mask >> 14) & 1 == 1  -- SIGINT 2, SIGTERM 15
end

local function children()
  local out, me = {}, sys.getpid()
  for _, name in ipairs(sys.list_dir("/proc") or {}) do
    if name:match("^%d+$") then
      local f = io.open("/proc/" .. name .. "/stat")
      local stat = f and f:read("a")
      if f then f:close() end
      local ppid = stat and stat:match("^%d+ %b() %S+ (%d+)")
      if ppid and tonumber(ppid) == me then out[#out + 1] = tonumber(name) end
    end
  end
  return out
end

do
  local pool = cpool.new(2, { timeout_s = 60 })
  sys.sleep(0.2)
  local kids = children()
  T.check(#kids >= 2, "the compile workers are not this process's children (%d found)", #kids)
  for _, pid in ipairs(kids) do T.check(ignored(pid), "compile worker %d does not ignore SIGINT and SIGTERM", pid) end
  pool:close()
end

-- the GPU worker, kept alive by a driver whose cuInit blocks
local cc = os.execute("command -v cc > /dev/null 2>&1")
if cc then
  T.write(tmp .. "/fakecuda.c", [[
#include <string.h>
#include <unistd.h>
static int stub(void) { return 0; }
static int slow_init(unsigned flags) { (void)flags; sleep(30); return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuGetProcAddress_v2(const char *name, void **fn, int ver, unsigned long long flags, int *status)
{
	(void)ver; (void)flags;
	*fn = strcmp(name, "cuInit") == 0 ? (void *)slow_init : (void *)stub;
	if (status) *status = 0;
	return 0;
}
]])
  assert(os.execute(string.format("cc -shared -fPIC -o '%s/libcuda.so.1' '%s/fakecuda.c'", tmp, tmp)))
  T.write(tmp .. "/worker.lua", [[
local sys = require("kopt.sys")
local gpu = require("kopt.gpu")
local w = assert(gpu.spawn(0))
sys.sleep(0.3)
local f = assert(io.open("/proc/" .. w:pid() .. "/status"))
print("SigIgn " .. f:read("a"):match("SigIgn:%s*(%x+)"))
f:close()
local ok, err = pcall(function()
  local closing <close> = w
  error(7200, 0)
end)
print("close kept the error: " .. tostring(not ok and err == 7200))
]])
  local code, out, err = T.run("script " .. tmp .. "/worker.lua", "LD_LIBRARY_PATH=" .. tmp)
  T.eq(code, 0, "the stand-in GPU worker script: " .. out .. err)
  local mask = tonumber(out:match("SigIgn (%x+)") or "0", 16)
  T.check((mask >> 1) & 1 == 1 and (mask >> 14) & 1 == 1, "the GPU worker does not ignore SIGINT and SIGTERM: %s", out)
  T.check(out:find("close kept the error: true", 1, true), "a Worker closed by an error: %s%s", out, err)
else
  print("note: no C compiler (cc): the GPU worker's signal check is skipped")
end

T.done()
