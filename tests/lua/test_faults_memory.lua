-- Fault injection: memory. A strategy that keeps allocating used to grow
-- kopt until the machine swapped and the kernel killed it, leaving only the
-- event log. Under the Lua memory ceiling (KOPT_MEMORY_LIMIT,
-- core/memlimit.h) it gets an error of its own: one line naming the limit,
-- exit code 1, and the run written (summary, results.json, best/) with every
-- evaluation made before it. A bad KOPT_MEMORY_LIMIT is a usage error.
local T = require("testlib")

local tmp = T.tmpdir("memory")
local replay = "tests/data/pnpoly_RTX_3090.json"
T.write(tmp .. "/hog.lua", [[
local S = { name = "hog", options = {} }
local keep, asked = {}, 0
function S.ask(ctx, n)
  asked = asked + 1
  if asked > 3 then
    for i = 1, 1e9 do keep[#keep + 1] = string.rep("x", 100) .. i end
  end
  local out = {}
  for i = 1, n do out[i] = { config = ctx.space:sample(ctx.rng) } end
  return out
end
return S
]])

local dir = tmp .. "/run"
local code, _, err = T.run(string.format("%s/hog.lua --backend replay:%s --budget 50 --out %s -q", tmp, replay, dir),
                           "KOPT_MEMORY_LIMIT=200M")
T.eq(code, 1, "a strategy past the memory limit: exit code")
local line = T.one_sentence(err, "memory limit")
T.check(line:find("strategy 'hog' failed in ask(): not enough memory (kopt's Lua memory reached its limit of 0.195 GiB",
                  1, true), "the message names the strategy and the limit: %s", line)
local evals = 0
for _, e in ipairs(T.events(dir)) do if e.event == "eval" then evals = evals + 1 end end
T.check(evals >= 3, "the evaluations before the error are on record (%d)", evals)
T.check(T.exists(dir .. "/results.json") and T.exists(dir .. "/best/config.json"),
        "results.json and best/ are written after the error")
T.strict_json(dir, "the run folder after the memory error")

-- Live data that grows at the limit while new strings are made (a memo of
-- keys): Lua's string table could not grow there, and each new string
-- retried that growth after a full collection while its own small request
-- still fit, so kopt spun for minutes instead of raising the error.
T.write(tmp .. "/memo.lua", [[
local S = { name = "memo", options = {} }
function S.ask(ctx, n)
  if ctx.evaluations >= 5 then
    local t, i = {}, 0
    while true do i = i + 1 t[i] = { i, tostring(i) } end
  end
  return { { config = ctx.space:sample(ctx.rng) } }
end
return S
]])
do
  local t0 = os.time()
  local mcode, _, merr = T.run(string.format("%s/memo.lua --backend replay:%s --budget 50 --out %s/memo -q", tmp,
                                             replay, tmp), "KOPT_MEMORY_LIMIT=300M timeout 60")
  T.eq(mcode, 1, "a memo of keys past the limit: exit code (124: still spinning after 60 s)")
  T.check(merr:find("strategy 'memo' failed in ask(): not enough memory (kopt's Lua memory reached its limit", 1, true),
          "the memo's message: %s", merr)
  T.check(os.time() - t0 < 30, "the memo's error came after %d s", os.time() - t0)
end

-- Two runs in one process (as a suite makes them), both past the limit:
-- the second gets its own reserve once the first's data is collected, so
-- both are written, and both messages name the limit asked for.
T.write(tmp .. "/two.lua", string.format([[
local cli, run = require("kopt.cli"), require("kopt.run")
for i = 1, 2 do
  local opts, pos = cli.parse({ "%s/hog.lua", "--backend", "replay:%s", "--budget", "50", "--out", "%s/two_" .. i, "-q" })
  local ok, err = pcall(run.main, opts, pos)
  io.stderr:write(string.format("run %%d: %%s\n", i, ok and "returned" or tostring(type(err) == "table" and err.msg or err)))
end
]], tmp, replay, tmp))
code, _, err = T.run("script " .. tmp .. "/two.lua", "KOPT_MEMORY_LIMIT=200M")
T.eq(code, 0, "two runs past the limit in one process: exit code\n" .. err)
for i = 1, 2 do
  T.check(T.exists(tmp .. "/two_" .. i .. "/results.json") and T.exists(tmp .. "/two_" .. i .. "/best/config.json"),
          "run %d of two past the limit is written\n%s", i, err)
  T.check(err:find("run " .. i .. ": strategy 'hog' failed in ask(): not enough memory (kopt's Lua memory reached its limit of 0.195 GiB",
                   1, true), "run %d names the limit asked for:\n%s", i, err)
end

for _, bad in ipairs({ "12X", "-5", "G", "1.5Q" }) do
  code, _, err = T.run("--version", "KOPT_MEMORY_LIMIT=" .. bad)
  T.eq(code, 2, "KOPT_MEMORY_LIMIT=" .. bad .. ": exit code")
  T.eq(T.one_sentence(err, bad), "kopt: KOPT_MEMORY_LIMIT: expected a size such as 8G, 512M or 65536 (bytes), or 0 "
       .. "for none; got '" .. bad .. "'", "KOPT_MEMORY_LIMIT=" .. bad .. ": message")
end
for _, good in ipairs({ "0", "off", "64G", "8GiB", "1.5g", "1000000" }) do
  code = T.run("--version", "KOPT_MEMORY_LIMIT=" .. good)
  T.eq(code, 0, "KOPT_MEMORY_LIMIT=" .. good .. " is accepted")
end
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
