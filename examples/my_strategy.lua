-- A user strategy: hill climbing over kopt's move generators. The current
-- state's moves are measured best prior first, n at a time (n: the free
-- evaluation slots); the best of a batch that beats the current state becomes
-- it at once (first improvement, not steepest ascent: the rest of its moves
-- are not measured). A state with no untried move left is a local optimum,
-- and the climb restarts from a random state.
--
--   kopt examples/my_strategy.lua SPEC [--opt moves=rules,examples/my_moves.lua]
--
-- A strategy is a table with option declarations (data: `--help` lists them,
-- `--opt k=v` sets them) and three callbacks. The engine owns the loop: it
-- asks for up to n candidates, measures the new ones (or answers repeats from
-- its cache), and tells the results back in the same order. Returning no
-- candidates ends the run.
local moves = require("kopt.moves")

local S = {
  name = "my_strategy",
  description = "first-improvement hill climbing from random starts",
  options = {
    moves = { default = "rules", help = "move generators, comma-separated" },
  },
}

function S.init(ctx)
  ctx.my = { gens = moves.resolve(ctx.options.moves), asked = {}, cur = nil }
end

-- (cost: the time, or the spec's objective as a time when it declares one)
local function time_of(r) return r.status == "ok" and (r.cost or r.time_ms) or math.huge end

function S.ask(ctx, n)
  local my = ctx.my
  if not my.cur then  -- (re)start from a random state
    for _ = 1, 100 do
      local c = ctx.space:sample(ctx.rng)
      if c and not my.asked[ctx:key(c)] then
        my.asked[ctx:key(c)] = true
        my.batch = { { config = c, start = true } }
        return { { config = c, origin = { method = "start" } } }
      end
    end
    return {}  -- nothing new to try: done
  end
  -- all untried moves of the current state, best prior first
  local props = moves.propose(ctx, { config = my.cur.config, key = my.cur.key }, my.gens)
  table.sort(props, function(a, b) return a.prior > b.prior end)
  local out = {}
  my.batch = {}
  for _, m in ipairs(props) do
    if not my.asked[m.key] and #out < n then
      my.asked[m.key] = true
      out[#out + 1] = { config = m.config, origin = { method = m.method } }
      my.batch[#my.batch + 1] = { config = m.config }
    end
  end
  if #out == 0 then  -- local optimum: restart
    my.cur = nil
    return S.ask(ctx, n)
  end
  return out
end

function S.tell(ctx, results)
  local my = ctx.my
  for i, r in ipairs(results) do
    local b = my.batch[i]
    if b.start or time_of(r) < my.cur.time then
      my.cur = { config = b.config, key = r.key, time = time_of(r) }
    end
  end
end

return S
