-- MCGS's code moves (strategies/mcgs.lua with expert moves): the repair
-- turn of a failed LLM edit, and the frontier, which keeps a small space's
-- search going into the experts once every knob state is measured. `ops`
-- carries the search's own steps: node_for, expand, add_moves,
-- start_pending, idle(st, id) (neither measured nor in flight) and skip
-- (the flags of children that cannot be chosen).
local graph_mod = require("kopt.graph")
local moves_mod = require("kopt.moves")

local M = {}

-- path plus edge e, as a new list
function M.extend(path, e)
  local p = {}
  for i, x in ipairs(path) do p[i] = x end
  p[#p + 1] = e
  return p
end

-- A repair turn for a failed LLM edit (p, queued by MCGS's tell): the fixed
-- edit, as a new always-selectable move of the failed state's parent,
-- measured next. Nil when the expert gave no usable fix or the fix is a
-- state already seen.
function M.repair_rec(ctx, st, p, ops)
  local gen = st.gen_by_name[p.gen]
  if not (gen and gen.repair) then return nil end
  local ch = p.chain
  -- the same broken source, failed in another state, is fixed once: the
  -- fix is reused there without asking again
  local moves, note
  local cached = p.failed_patch and st.fixes[p.failed_patch] or nil
  if cached then
    moves, note = cached, "the fix of the same broken source, reused"
  else
    moves, note = gen.repair(ctx, ch, p.feedback, p.failed_patch)
    if p.failed_patch and #moves > 0 then st.fixes[p.failed_patch] = moves end
  end
  local _, parent = st.g:ends(p.path[#p.path])
  local props = #moves > 0 and moves_mod.propose(ctx, { config = st.cfg[parent], key = st.g:key(parent) },
                                                  { { name = p.gen, propose = function() return moves end } }) or {}
  local m = props[1]
  local child = m and ops.node_for(ctx, st, m.config, m.patch, m.key)
  if child and not cached and p.failed_patch then
    -- (the fix's own state, by node: a rule move's child of it carries the
    -- same patch and may fail for its own reasons)
    st.fix_of = st.fix_of or {}
    st.fix_of[child] = p.failed_patch
  end
  if m and not ops.idle(st, child) then
    note, m = "the fix is a state already measured or in flight", nil
  end
  local attempt = cached and cached[1].repair or ch.attempt
  ctx:log("repair %d of %s/%s: %s", attempt, ch.expert, tostring(ch.method), note)
  if not m then
    if not cached and ch.attempt < ctx.options.repairs then
      st.repairs[#st.repairs + 1] = { chain = ch, gen = p.gen, path = p.path, failed_patch = p.failed_patch,
                                      feedback = "It was not tried: " .. note .. "." }
    end
    return nil
  end
  local e = st.g:link(parent, m.action, child, st.g:edge(p.path[#p.path]).prior)
  st.g:set_edge_flags(e, graph_mod.edge_always)
  st.expert_edge[e] = true
  local chain = cached and cached[1].chain or ch
  st.edge_method[e], st.edge_expert[e], st.edge_chain[e], st.edge_gen[e] = ch.method, ch.expert, chain, p.gen
  st.method_in[child] = st.method_in[child] or ch.method
  return { path = M.extend(p.path, e), leaf = child, repair = attempt }
end

-- A measured state failed: when it was the fix of another broken source,
-- that fix is not reused for it again (it was, and the same broken fix
-- measured in every state that failed the same way).
function M.fix_failed(st, node)
  local orig = node and st.fix_of and st.fix_of[node]
  if orig then st.fixes[orig] = false end
end

-- When no descent finds a new state (a small space, every state measured),
-- the search is not over while a good state can still be moved from: the
-- fastest measured states get their cheap moves and, up to expert_max, a
-- call of the expensive generators (an LLM's edits), and their idle moves
-- are measured, best prior first.
local FRONTIER_STATES = 4
function M.frontier(ctx, st, n, ops)
  local ids = {}
  for id in pairs(st.time) do
    if st.path_to[id] then ids[#ids + 1] = id end
  end
  table.sort(ids, function(a, b)
    if st.time[a] ~= st.time[b] then return st.time[a] < st.time[b] end
    return a < b
  end)
  local recs, g = {}, st.g
  for i = 1, math.min(#ids, FRONTIER_STATES) do
    local id, path = ids[i], st.path_to[ids[i]]
    ops.expand(ctx, st, id, #path)
    local idle = g:eligible(id, ops.skip)
    local done = st.expert_calls[id] or 0
    if #idle == 0 and #st.expensive > 0 and done < ctx.options.expert_max then
      st.expert_calls[id] = done + 1
      st.expensive_calls = st.expensive_calls + 1
      ops.add_moves(ctx, st, id, st.expensive, false, true)
      idle = g:eligible(id, ops.skip)
    end
    table.sort(idle, function(a, b)
      local pa, pb = g:edge(a).prior, g:edge(b).prior
      if pa ~= pb then return pa > pb end
      return a < b
    end)
    for _, e in ipairs(idle) do
      if #recs >= n then return recs end
      local rec = { path = M.extend(path, e), leaf = (g:ends(e)) }
      ops.start_pending(st, rec)
      recs[#recs + 1] = rec
    end
  end
  return recs
end

return M
