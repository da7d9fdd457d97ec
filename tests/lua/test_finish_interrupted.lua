-- A signal that comes while a stopped run writes its files (Ctrl-C pressed
-- twice, the second raising the interruption in the middle of the writes):
-- kopt.run calls finish.finish again, and the run folder must still hold one
-- stop event and one "## Stopped" section of trace.md, not two.
local T = require("testlib")
local engine_mod = require("kopt.engine")
local finish = require("kopt.finish")
local space_mod = require("kopt.space")
local sys = require("kopt.sys")

local space = space_mod.new({ knobs = { { name = "X", values = { 1, 2, 3, 4 } } } })
local backend = { name = "stub", slots = 1 }
function backend:evaluate(jobs)
  local out = {}
  for i, job in ipairs(jobs) do out[i] = { status = "ok", time_ms = job.config.X } end
  return out
end
function backend:elapsed() return 0 end
function backend:describe() return { backend = "stub" } end

local engine = engine_mod.run({ strategy = require("strategies.exhaustive"), strategy_name = "exhaustive",
                                space = space, backend = backend, budget = 4, seed = 1, quiet = true })
-- a run folder that counts what is written to it
local dir = T.tmpdir("finish-interrupted")
local stops, sections = 0, 0
engine.rundir = { dir = dir }
function engine.rundir.event(_, ev) if ev.event == "stop" then stops = stops + 1 end end
function engine.rundir.trace(_, fmt) if fmt:find("## Stopped", 1, true) then sections = sections + 1 end end
engine.stop_reason = "interrupted"

-- the interruption raised in the last of the writes, the first time only
local raised = false
local meta = { t4 = {}, after_finish = function()
  if not raised then
    raised = true
    error(sys.interrupt_error, 0)
  end
end }
local ok, err = pcall(finish.finish, engine, meta)
T.check(not ok and rawequal(err, sys.interrupt_error), "the first call is interrupted")
ok, err = pcall(finish.finish, engine, meta)
T.check(ok, "the second call writes the rest: %s", tostring(err))
T.eq(stops, 1, "one stop event")
T.eq(sections, 1, "one '## Stopped' section in trace.md")
T.check(io.open(dir .. "/results.json") ~= nil, "results.json written")
T.done()
