-- Finalists: a winner that owes its place to one lucky measurement loses the
-- interleaved re-measurement. A stub backend plays the GPU: config B is
-- measured 20 % fast the first time only; A is the truly fastest.
local T = require("testlib")
local engine_mod = require("kopt.engine")
local space_mod = require("kopt.space")
local finalists = require("kopt.finalists")

local true_ms = { A = 1.00, B = 1.05, C = 1.10, D = 1.50 }
local knobs = { { name = "X", values = { "A", "B", "C", "D" } } }
local space = space_mod.new({ knobs = knobs })
local seen = {}
local backend = { name = "stub", slots = 4, clock = 0, calls = 0 }
function backend:evaluate(jobs)
  self.calls = self.calls + 1
  local out = {}
  for i, job in ipairs(jobs) do
    local x = job.config.X
    local t = true_ms[x]
    if x == "B" and not seen.B then t = 0.84 end
    seen[x] = true
    out[i] = { status = "ok", time_ms = t }
  end
  return out
end
function backend:elapsed() return self.clock end
function backend:describe() return { backend = "stub" } end

local strategy = require("strategies.exhaustive")
local engine = engine_mod.run({ strategy = strategy, strategy_name = "exhaustive", space = space, backend = backend,
                                budget = 10, seed = 1, quiet = true })
T.eq(engine.stop_reason, "strategy finished", "stop reason")
T.eq(engine.ctx.best.config.X, "B", "the lucky first measurement wins the search")
local verdict = finalists.run(engine, 3, 3)
T.check(verdict ~= nil, "finalists ran")
T.eq(#verdict.rows, 3, "three finalists")
T.eq(verdict.winner.config.X, "A", "the interleaved re-measurement picks the truly fastest")
T.check(verdict.changed, "the verdict says the winner changed")
for _, row in ipairs(verdict.rows) do T.eq(#row.times, 3, "re-measurements of " .. row.config.X) end
local lines = finalists.apply(engine, verdict)
T.eq(engine.ctx.best.config.X, "A", "the run's best after the verdict")
T.eq(engine.ctx.best.result.time_ms, 1.00, "the best's time is the re-measured median")
T.eq(engine.ctx.best.result.first_ms, 1.00, "its first measurement is kept")
T.check(lines[#lines]:find("changed the winner", 1, true) ~= nil, "the summary says so")
T.eq(engine.evaluations, 4, "re-measurements are outside the budget")
-- Alternating order: round 1 A..., round 2 reversed.
T.eq(backend.calls, 1 + 3, "one evaluate call per round")

-- Nothing to decide with a single valid config.
local one = engine_mod.run({ strategy = strategy, strategy_name = "exhaustive",
                             space = space_mod.new({ knobs = { { name = "X", values = { "A" } } } }),
                             backend = backend, budget = 10, seed = 1, quiet = true })
T.eq(finalists.run(one, 3, 3), nil, "no finalists with one config")
return T.done()
