-- Progress on stderr: a live line redrawn in place when stderr is a terminal,
-- plain log lines otherwise (a new best, and every tenth of the budget).
local sys = require("kopt.sys")

local M = {}
M.__index = M

function M.new(opts)
  return setmetatable({ quiet = opts.quiet, tty = sys.isatty(2), budget = opts.budget,
                        start = sys.now(), last_draw = 0, next_mark = 0, label = opts.label or "" }, M)
end

local function clock(s)
  if s == nil or s ~= s or s == math.huge then return "--:--" end
  -- (a recording may give any finite cost: past a million hours the
  -- seconds are no integer to format)
  if s >= 3.6e9 then return string.format("%.3g h", s / 3600) end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%d:%02d:%02d", s // 3600, s % 3600 // 60, s % 60) end
  return string.format("%d:%02d", s // 60, s % 60)
end

-- (under a spec's objective metric the best is quoted in it: its time may
-- rise as the objective improves)
local function best_text(best, objective)
  if not best then return "best -" end
  local v = best.result.objective
  if objective and type(v) == "number" then
    return string.format("best %s %.4g (%.4g ms)", objective.metric, v, best.result.time_ms)
  end
  return string.format("best %.4g ms", best.result.time_ms)
end

-- state: the engine ({evaluations, failures, best})
function M:update(state, improved)
  if self.quiet then return end
  local wall = sys.now() - self.start
  -- measured here only: evaluations read back from a resumed run's log or
  -- served by the database took no time, and an ETA counting them said 0:00
  -- for the whole remainder
  local measured = state.evaluations - (state.not_measured or 0)
  local rate = measured / math.max(wall, 1e-9)
  local eta = measured > 0 and math.max(0, self.budget - state.evaluations) / rate or nil
  if self.budget == math.huge then eta = nil end
  -- (past the budget, as a resume with a smaller one keeps what is on
  -- record: said so, not "[55/50]")
  local count = string.format("%d/%s", state.evaluations, self.budget == math.huge and "-" or tostring(self.budget))
  if state.evaluations > self.budget then count = string.format("%d, past the budget of %d", state.evaluations, self.budget) end
  local line = string.format("[%s%s] %s | %d failed | %.1f eval/s | ETA %s", self.label, count,
                             best_text(state.best, state.spec and state.spec.objective), state.failures, rate, clock(eta))
  if self.waiting then line = line .. " | " .. self.waiting end
  if self.tty then
    local now = sys.now()
    if improved or now - self.last_draw > 0.1 or state.evaluations == self.budget then
      io.stderr:write("\r\27[K" .. line)
      io.stderr:flush()
      self.last_draw = now
      self.drawn = true
    end
  else
    local mark = self.budget ~= math.huge and math.max(1, self.budget // 10) or 50
    if improved or state.evaluations >= self.next_mark then
      io.stderr:write("kopt: " .. line .. (improved and "  (new best)" or "") .. "\n")
      while self.next_mark <= state.evaluations do self.next_mark = self.next_mark + mark end
    end
  end
end

-- A state the live line shows until cleared (msg nil): on a terminal the
-- line is redrawn with it at once; otherwise it is printed when `verbose`.
function M:status(state, msg, verbose)
  self.waiting = msg
  if self.quiet then return end
  if self.tty then
    self.last_draw = 0
    self:update(state, true)
  elseif msg and verbose then
    io.stderr:write("kopt: " .. msg .. "\n")
  end
end

-- Ends the live line so later output starts on its own line.
function M:finish()
  if self.tty and self.drawn and not self.quiet then io.stderr:write("\n") end
  self.drawn = false
end

function M:message(fmt, ...)
  if self.quiet then return end
  self:clear()
  io.stderr:write("kopt: " .. string.format(fmt, ...) .. "\n")
end

-- Clears the live line before other output on stderr (it is drawn again at
-- the next update).
function M:clear()
  if self.tty and self.drawn then io.stderr:write("\r\27[K") end
  self.drawn = false
end

M.clock = clock
return M
