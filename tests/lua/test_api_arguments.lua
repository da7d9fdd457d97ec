-- kopt's Lua API called with arguments a strategy author could pass by
-- mistake. Each case crashed, hung or answered wrongly before its fix:
-- * graph.new(2^61) wrote past its key table (segfault) and graph.new of
--   math.maxinteger never returned (the slot count wrapped to 0);
-- * nvrtc.parse_log with a register count near 2^59 died of SIGFPE;
-- * a __len on job.options or on http.request_many's list overflowed a heap
--   buffer (the length read honoured __len, the loop filled it);
-- * rng:random over a span of 2^63 or more hung, raised "divide by zero" or
--   returned values below m;
-- * a NaN timeout made Worker:recv and gpu.wait_any wait forever;
-- * a NaN backed up (or given as a prior) won every PUCT comparison;
-- * sys.sleep(math.huge / NaN / -1) returned at once;
-- * a graph key over 16 MiB was reported as "out of memory";
-- * g:set{flags = -1} stored 4294967295, g:visit counts wrapped at 2^32,
--   add_children{n = -1} said "too many moves", neighbours{span = -1} gave
--   no neighbours, ctx:key(nil) and space:sample(nil) failed inside kopt.
local T = require("testlib")
local graph = require("kopt.graph")
local nvrtc = require("kopt.nvrtc")
local http = require("kopt.http")
local gpu = require("kopt.gpu")
local sys = require("kopt.sys")
local rng_mod = require("kopt.rng")
local cpool = require("kopt.cpool")

local function refused(what, pattern, f, ...)
  local ok, err = pcall(f, ...)
  T.check(not ok, "%s: accepted", what)
  T.check(ok or tostring(err):find(pattern), "%s: the error does not say %q: %s", what, pattern, tostring(err))
end

-- graph sizes and strings
refused("graph.new(2^61)", "count of nodes", graph.new, 1 << 61)
refused("graph.new(maxinteger)", "count of nodes", graph.new, math.maxinteger)
local g = graph.new(1000)
T.check(g:add("a"), "a graph reserved for 1000 nodes takes a key")
local big = string.rep("k", 1 << 24)
refused("a 16 MiB key", "16 MiB", g.add, g, big)
refused("a 16 MiB action", "16 MiB", g.link, g, 1, big, 1)
refused("a 16 MiB config", "16 MiB", g.set, g, 1, { config = big })
T.check(g:add(string.rep("k", 1000)), "a 1000-byte key is taken")

-- NaN and infinities where the search compares numbers
local p, a, b = g:add("p"), g:add("x"), g:add("y")
local e1, e2 = g:link(p, "to x", a), g:link(p, "to y", b)
refused("backup(NaN)", "finite", g.backup, g, e1, 0 / 0)
refused("backup(inf)", "finite", g.backup, g, e1, math.huge)
refused("backup_path(NaN)", "finite", g.backup_path, g, { e1 }, 0 / 0)
refused("link prior NaN", "finite", g.link, g, p, "to x again", a, 0 / 0)
refused("set_prior(NaN)", "finite", g.set_prior, g, e2, 0 / 0)
g:backup(e1, 0.5)
for _ = 1, 10 do g:backup(e2, 1.0) end
T.eq(g:greedy(p, 0, 0, 0), e2, "greedy after finite backups")
refused("set{flags = -1}", "32%-bit flags", g.set, g, p, { flags = -1 })
for _ = 1, 5000 do g:visit(a, 1000000) end
T.eq(g:node(a).visits, 4294967295, "a visit count past 2^32 saturates")
refused("add_children n = -1", "n must be a count", g.add_children, g, p,
  { n = -1, key = {}, action = {}, prior = {} }, {})

-- the register count in a compile log
local log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n" ..
            "ptxas info    : Used 576460752303423488 registers\n"
local ok, info = pcall(nvrtc.parse_log, log, "k", "x")
T.check(ok, "parse_log with a huge register count: %s", tostring(info))

-- lengths from __len: the raw length is what is read
local opts = setmetatable({ "-a", "-b" }, { __len = function() return (1 << 61) + 1 end })
local ok_key, key = pcall(nvrtc.cache_key, { source = "x", options = opts })
local ok_plain, plain = pcall(nvrtc.cache_key, { source = "x", options = { "-a", "-b" } })
T.check(ok_key and ok_plain and key == plain, "a __len on job.options changes nothing: %s / %s",
  tostring(key), tostring(plain))
local reqs = setmetatable({}, { __len = function() return (1 << 60) + 1 end })
local ok_http, answers = pcall(http.request_many, reqs)
T.check(ok_http and #answers == 0, "request_many of an empty list with a __len: %s", tostring(answers))

-- the generator over wide spans
local r = rng_mod.new(1)
for _ = 1, 200 do
  local x = r:random(-1, math.maxinteger)
  T.check(x >= -1, "rng:random(-1, maxinteger) gave %d", x)
  local y = r:random(0, math.maxinteger)
  T.check(y >= 0, "rng:random(0, maxinteger) gave %d", y)
  r:random(math.mininteger, math.maxinteger)
end
T.eq(rng_mod.new(7):random(1, 10), rng_mod.new(7):random(1, 10), "a small range's draw")
refused("an empty interval", "empty interval", r.random, r, 5, 4)

-- timeouts and sleeps
local w = assert(gpu.spawn(0, { "/bin/sh", "-c", "sleep 30" }))
refused("recv(NaN)", "NaN", w.recv, w, 0 / 0)
refused("wait_any(NaN)", "NaN", gpu.wait_any, { w }, 0 / 0)
local t0 = sys.now()
T.check(w:recv(0.2) == nil and sys.now() - t0 < 5, "recv(0.2) times out")
refused("stop(NaN)", "grace", w.stop, w, 0 / 0)
w:stop(0)
for _, s in ipairs({ math.huge, 1e19, 0 / 0, -1 }) do refused("sleep(" .. tostring(s) .. ")", "seconds", sys.sleep, s) end
refused("cpool timeout NaN", "NaN", cpool.new, 1, { timeout_s = 0 / 0 })

-- space helpers named by their arguments
local space = require("kopt.space").new({ knobs = { { name = "a", values = { 1, 2, 3, 4, 5, 6, 7, 8 } },
                                                  { name = "b", values = { 1, 2 } } } })
refused("key(nil)", "config table", space.key, space, nil)
refused("sample(nil)", "generator", space.sample, space, nil)
refused("span = -1", "span must be", space.neighbours, space, { a = 1, b = 1 }, "hamming", { span = -1, rng = r })
T.check(#space:neighbours({ a = 1, b = 1 }, "hamming", { span = 1, rng = r }) > 0, "span = 1 gives neighbours")

T.done()
