-- Helpers for the experts' heuristics (kopt.experts re-exports them: X.pos,
-- X.step, X.knobs_in, X.combine, X.finish). A view is kopt.experts.view's:
-- { knobs = { {name=, values=, family=}, ... }, config = {...}, ... }.
local H = {}

-- Position of a value in its knob's list (the first, should a list repeat
-- one). The positions are kept per value list: heuristics ask for them on
-- every state.
local positions_of = setmetatable({}, { __mode = "k" })
function H.pos(knob, v)
  local values = knob.values
  local at = positions_of[values]
  if not at then
    at = {}
    for j = #values, 1, -1 do
      local x = values[j]
      if x == x then at[x] = j end  -- (a NaN is no key; it matches nothing, as ==)
    end
    positions_of[values] = at
  end
  if v == nil then return nil end
  return at[v]
end

-- A move that steps knob k by `step` positions from the view's config, or nil
-- at the end of the list.
function H.step(view, k, step, method)
  local p = H.pos(k, view.config[k.name])
  if not p then return nil end
  local q = p + step
  if q < 1 or q > #k.values then return nil end
  return { changes = { [k.name] = k.values[q] }, method = method }
end

-- Knobs of the given families, in knob order (a new list each call, read
-- from view.knobs as it is now: an expert may have sorted or changed it).
function H.knobs_in(view, families)
  local out = {}
  if #families == 1 then
    -- the common call: no set of the wanted families to build
    local want = families[1]
    for _, k in ipairs(view.knobs) do if k.family == want then out[#out + 1] = k end end
    return out
  end
  local want = {}
  for _, f in ipairs(families) do want[f] = true end
  for _, k in ipairs(view.knobs) do if want[k.family] then out[#out + 1] = k end end
  return out
end

-- Merges moves' changes (a combined move), nil on conflicts.
function H.combine(a, b, method)
  local c = {}
  for k, v in pairs(a.changes) do c[k] = v end
  for k, v in pairs(b.changes) do
    if c[k] ~= nil and c[k] ~= v then return nil end
    c[k] = v
  end
  return { changes = c, method = method or a.method }
end

-- Numbered priors in list order and the expert's name on each move.
function H.finish(moves, name)
  for i, m in ipairs(moves) do
    m.prior = m.prior or 1 / i
    m.expert = name
  end
  return moves
end

-- A heuristic's moves, checked as an LLM's proposals are: a custom
-- expert's move that is not a table, whose changes are not a table of
-- knobs to their values, or that names an unknown knob or value, is
-- rejected with its reason (it stopped the run, or vanished without one).
-- Returns the moves kept and the rejections ({index=, why=}).
function H.check_moves(moves, view)
  if type(moves) ~= "table" then return {}, { { index = 0, why = "the heuristic returned " .. type(moves) .. ", not a list of moves" } } end
  local by_name = {}
  for _, k in ipairs(view.knobs) do by_name[k.name] = k end
  local kept, rejected = {}, {}
  for i, m in ipairs(moves) do
    local why
    if type(m) ~= "table" then
      why = "not a table ({changes = {...}, method = ...})"
    elseif m.changes ~= nil and type(m.changes) ~= "table" then
      why = "changes: expected a table of knob = value, got " .. type(m.changes)
    elseif m.changes == nil and m.edit == nil and m.patch == nil then
      why = "no changes and no edit"
    else
      for name, v in pairs(m.changes or {}) do
        local k = by_name[name]
        if not k then why = why or string.format("'%s' is not a knob", tostring(name))
        else
          local found = false
          for _, x in ipairs(k.values) do found = found or x == v end
          if not found then why = why or string.format("%s=%s is not one of the knob's values", name, tostring(v)) end
        end
      end
    end
    if why then rejected[#rejected + 1] = { index = i, why = why } else kept[#kept + 1] = m end
  end
  return kept, rejected
end

return H
