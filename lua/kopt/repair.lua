-- What a failed edit tells its author: the compiler's or the verifier's
-- words, trimmed to the lines that matter, and the follow-up turn of a
-- repair. Used by the experts strategy, by MCGS's expert moves and by
-- synthesis (through kopt.experts, which re-exports these).
local M = {}

local LOG_LINES, LOG_CHARS = 30, 3000

-- A compiler or verifier log, trimmed to the lines that matter: error lines
-- and the line after each, else the first lines.
local function trim_log(log)
  if type(log) ~= "string" or log == "" then return nil end
  local lines = {}
  for l in (log .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local keep, seen = {}, {}
  for i, l in ipairs(lines) do
    if l:lower():find("error", 1, true) or l:find("mismatch", 1, true) or l:find("wrong", 1, true) then
      for j = i, math.min(i + 1, #lines) do
        if not seen[j] then seen[j] = true keep[#keep + 1] = lines[j] end
      end
    end
  end
  if #keep == 0 then for i = 1, math.min(LOG_LINES, #lines) do keep[i] = lines[i] end end
  while #keep > LOG_LINES do keep[#keep] = nil end
  local text = table.concat(keep, "\n")
  if #text > LOG_CHARS then text = text:sub(1, LOG_CHARS) .. "\n[trimmed]" end
  return text
end
M.trim_log = trim_log

local function num_text(v)
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) == "number" then return string.format("%.4g", v) end
  return tostring(v)
end

-- What went wrong with a measured edit, for the model.
local function feedback_of(r)
  local st = tostring(r.status)
  local log = trim_log(r.log)
  if st == "compile_error" then
    return "It did not compile. NVRTC says:\n" .. (log or "(no log)")
  end
  local L = {}
  if st == "wrong" then
    L[1] = "It compiled and ran, but its output is wrong."
    local parts = {}
    for _, e in ipairs({ r.err, r.err2 }) do
      if type(e) == "table" then
        local keys = {}
        for k in pairs(e) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do parts[#parts + 1] = k .. " " .. num_text(e[k]) end
      end
    end
    if #parts > 0 then L[#L + 1] = "Error against the reference: " .. table.concat(parts, ", ") .. "." end
  elseif st == "suspect" then
    L[1] = "The verifier does not trust its result (status suspect)."
  else
    L[1] = string.format("It failed with status %s.", st)
  end
  if log then L[#L + 1] = "The verifier says:\n" .. log end
  return table.concat(L, "\n")
end
M.feedback_of = feedback_of

-- The statuses a repair turn can help with.
M.REPAIRABLE = { compile_error = true, wrong = true, launch_error = true, crash = true, timeout = true,
                 suspect = true }

-- The follow-up turn of a repair: the conversation so far, the model's reply
-- and what happened to its edit. feedback: sentences that say it, measured
-- ("It did not compile. ...", feedback_of) or not ("It was not tried: the
-- edit does not apply ..."), so the turn says one thing, never both.
function M.repair_messages(chain, feedback)
  local msgs = {}
  for _, m in ipairs(chain.messages) do msgs[#msgs + 1] = m end
  msgs[#msgs + 1] = { role = "assistant", content = chain.content }
  feedback = tostring(feedback or "")
  msgs[#msgs + 1] = { role = "user", content = string.format(
    "Your edit (%s): %s\n\nFix it: answer with the same JSON object, with one proposal whose " ..
    "\"patch\" is the corrected edit against the kernel source you were shown.", tostring(chain.method),
    feedback:match("^%u%l") and (feedback:sub(1, 1):lower() .. feedback:sub(2)) or feedback) }
  return msgs
end

---------------------------------------------------------------------------
-- Experts as move generators for kopt.moves / MCGS.

return M
