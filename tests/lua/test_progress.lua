-- The progress line (kopt.progress) on a terminal:
-- * evaluations read back from a resumed run's log (or served by the
--   experience database) took no time here; counted in the rate, they made
--   the ETA 0:00 for the whole remainder of a resumed run;
-- * past the budget (a resume with a smaller one) the ETA went negative,
--   and the count read "[120/100]";
-- * an engine note written while the line was drawn landed on it
--   ("ETA 0:04kopt: 1200 evaluations on record ...").
local T = require("testlib")
local progress = require("kopt.progress")
local sys = require("kopt.sys")

local written = {}
local real_stderr = io.stderr
-- luacheck: push ignore 122 (the module writes to io.stderr: captured here)
io.stderr = { write = function(_, ...) for _, s in ipairs({ ... }) do written[#written + 1] = s end end,
              flush = function() end }
-- luacheck: pop
local function take()
  local s = table.concat(written)
  written = {}
  return s
end

local ok, err = pcall(function()
  local p = progress.new({ budget = 100 })
  p.tty, p.start = true, sys.now() - 10  -- (ten seconds into the run)
  -- 50 read from the log, none measured yet: no rate, no ETA
  p:update({ evaluations = 50, not_measured = 50, failures = 0 }, true)
  local line = take()
  T.check(line:find("0.0 eval/s | ETA --:--", 1, true), "nothing measured yet: %q", line)
  -- 10 measured in 10 s: 1 eval/s, 40 left -> 0:40
  p:update({ evaluations = 60, not_measured = 50, failures = 0 }, true)
  line = take()
  T.check(line:find("1.0 eval/s | ETA 0:40", 1, true), "the rate of the measured ones: %q", line)
  -- past the budget: 0:00, not a negative time, and no count over the budget
  p:update({ evaluations = 120, not_measured = 50, failures = 0 }, true)
  line = take()
  T.check(line:find("ETA 0:00", 1, true) and not line:find("ETA -", 1, true), "past the budget: %q", line)
  T.check(line:find("[120, past the budget of 100]", 1, true) and not line:find("120/100", 1, true),
          "past the budget, said so: %q", line)
  -- a note clears the drawn line first
  p:message("a note")
  line = take()
  T.eq(line, "\r\27[Kkopt: a note\n", "a message after the live line")
  p:update({ evaluations = 121, not_measured = 50, failures = 0 }, true)
  take()
  p:clear()
  T.eq(take(), "\r\27[K", "clear() before the engine's own notes")
  T.eq(p.drawn, false, "cleared: nothing drawn")
end)
io.stderr = real_stderr -- luacheck: ignore 122
T.check(ok, "%s", tostring(err))
return T.done()
