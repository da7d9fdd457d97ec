-- A shipped strategy under a policy of your own: some configs are never
-- measured, and the search stops once it is close enough to a target.
--
--   kopt examples/policy.lua SPEC --opt forbid=use_method=2 --opt target_ms=0.5 --opt within=2
--
-- The wrapper takes the shipped strategy's options as its own (so `--opt`
-- sets them and their defaults fill ctx.options, which the strategy reads),
-- passes its candidates through a filter, and tells it every result in the
-- order it asked: a candidate the policy refused comes back `invalid`, as a
-- config that breaks a constraint would, so the strategy learns to avoid it.
-- Everything else a strategy may declare is passed on: its budget defaults,
-- its finish (MCGS writes its graph snapshot there) and its stats (what
-- kopt compare reports of it).
local strategy_mod = require("kopt.strategy")

local INNER = "mcgs"  -- the strategy wrapped: a built-in name or a file's path
local inner = strategy_mod.load(INNER)

local S = {
  name = "policy",
  description = "a shipped strategy (" .. INNER .. ") under a user policy",
  plans_with_budget = inner.plans_with_budget,
  default_budget = inner.default_budget,
  finish = inner.finish,
  stats = inner.stats,
  options = {},
}
for k, o in pairs(inner.options or {}) do S.options[k] = o end
S.options.forbid = { default = "", help = "KNOB=VALUE: configs with that value are never measured (empty: none)" }
S.options.target_ms = { default = 0.0, min = 0, help = "stop once the best is within `within` percent of this (0: never)" }
S.options.within = { default = 1.0, min = 0, help = "percent above target_ms that counts as reached" }

function S.init(ctx)
  local o = ctx.options
  local knob, value = o.forbid:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
  if o.forbid ~= "" and not (knob and ctx.space.index[knob]) then
    error(string.format("--opt forbid=%s: expected KNOB=VALUE with a knob of the spec", o.forbid))
  end
  ctx.policy = { knob = knob, value = tonumber(value) or value, refused = 0 }
  if inner.init then inner.init(ctx) end
end

local function refused(ctx, config)
  local p = ctx.policy
  return p.knob ~= nil and config[p.knob] == p.value
end

function S.ask(ctx, n)
  local o, p = ctx.options, ctx.policy
  -- (the best's time: its cost is the objective's, 1 / GB/s under a metric
  -- to maximise, which a target in ms does not compare with)
  local best = ctx.best and ctx.best.result.time_ms
  if o.target_ms > 0 and best and best <= o.target_ms * (1 + o.within / 100) then
    ctx:log("policy: %.4g ms is within %g %% of the target %.4g ms: stopping", best, o.within, o.target_ms)
    return {}
  end
  -- (a strategy whose every candidate is refused is asked again; each
  -- refusal is told back to it, so it moves on)
  for _ = 1, 1000 do
    local asked = inner.ask(ctx, n)
    if #asked == 0 then return {} end
    local keep, slots = {}, {}
    for i, c in ipairs(asked) do
      if refused(ctx, c.config) then
        slots[i] = { status = "invalid", key = ctx:key(c.config), log = "refused by the policy (--opt forbid)" }
        p.refused = p.refused + 1
      else
        keep[#keep + 1] = c
      end
    end
    if #keep > 0 then
      p.slots, p.asked = slots, #asked
      return keep
    end
    ctx:status("policy: %d configs refused", p.refused)
    if inner.tell then inner.tell(ctx, slots) end
  end
  return {}
end

function S.tell(ctx, results)
  local p = ctx.policy
  -- the inner strategy hears of every candidate it asked for, in its order
  local all, j = {}, 1
  for i = 1, p.asked do
    if p.slots[i] then
      all[i] = p.slots[i]
    else
      all[i], j = results[j], j + 1
    end
  end
  if inner.tell then inner.tell(ctx, all) end
end

return S
