-- A run stopped by a signal to its whole process group, as a terminal's
-- Ctrl-C, `timeout`, systemd and Slurm send it: the GPU and compile workers
-- got it too and died, and the candidates they were measuring or compiling
-- were recorded as crashes and failed compiles (a resume replayed them as
-- measured). Now the workers leave the signal to kopt, which stops between
-- evaluations. For each signal: exit 130, an "interrupted" stop, and no
-- evaluation on record that crashed or failed to compile; a resume then
-- completes the budget. Needs a GPU: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local sys = require("kopt.sys")

local tmp = T.tmpdir("gpu-signals")
for _, sig in ipairs({ "INT", "TERM" }) do
  local dir = tmp .. "/" .. sig
  local pidfile = tmp .. "/" .. sig .. ".pid"
  -- (setsid: the run leads a process group of its own, which the signal is sent to)
  os.execute(string.format("KOPT_DB=off setsid %s random specs/gemm_f32.json --budget 400 --seed 3 --out %s -q " ..
                           "> %s/%s.out 2>&1 & echo $! > %s", T.kopt, dir, tmp, sig, pidfile))
  local pid = tonumber(T.slurp(pidfile):match("%d+"))
  -- until a few evaluations are on record: the workers are busy then
  local t0 = sys.now()
  while sys.now() - t0 < 120 do
    local ev = io.open(dir .. "/events.jsonl")
    local n = ev and select(2, ev:read("a"):gsub('"event":"eval"', "")) or 0
    if ev then ev:close() end
    if n >= 5 then break end
    sys.sleep(0.2)
  end
  sys.sleep(0.5)
  os.execute(string.format("bash -c 'kill -%s -- -%d'", sig, pid))
  local alive = true
  t0 = sys.now()
  while alive and sys.now() - t0 < 120 do
    alive = os.execute(string.format("kill -0 %d 2>/dev/null", pid)) == true
    if alive then sys.sleep(0.2) end
  end
  T.check(not alive, "SIG%s: the run did not stop within 120 s", sig)
  local out = T.slurp(tmp .. "/" .. sig .. ".out")
  T.check(out:find("interrupted after", 1, true), "SIG%s: no 'interrupted' line:\n%s", sig, out)
  local evals, stop = T.events(dir)
  T.check(stop and stop.reason == "interrupted", "SIG%s: stop reason %s", sig, stop and tostring(stop.reason))
  local bad = {}
  for _, e in ipairs(evals) do
    local st = e.result and e.result.status
    if st == "crash" or st == "compile_error" then bad[#bad + 1] = st .. " " .. tostring(e.key) end
  end
  T.check(#bad == 0, "SIG%s: %d evaluations recorded as %s", sig, #bad, table.concat(bad, ", "))
  print(string.format("SIG%s: stopped after %d evaluations, none crashed", sig, #evals))
  local code, rout, rerr = T.run(string.format("random specs/gemm_f32.json --budget %d --seed 3 --out %s -q --resume",
                                               #evals + 5, dir))
  T.eq(code, 0, "SIG" .. sig .. ": the resume\n" .. rout .. rerr)
end
return T.done()
