-- Profile-guided rule priors on the KTT CoulombSum3d space: on a config
-- whose counters show local-memory spills, the rule moves that reduce work
-- per thread or unrolling get larger priors than without symptoms, and the
-- moves that increase them smaller ones.
local replay = require("kopt.backends.replay")
local profiling = require("kopt.profiling")
local rules = require("kopt.moves.rules")

local failures = 0
local function check(cond, fmt, ...)
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
end

local be = replay.open(nil, { file = "tests/data/coulomb_2080.json" })
local ctx = { space = be.space }
local prof = profiling.new({ mode = "none", backend = be, quiet = true })

-- The slowest config that spills (local-memory traffic in its counters).
local worst
for _, e in ipairs(be.rec.entries) do
  local lt = e.metrics["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"] or 0
  if e.status == "ok" and lt > 0 and e.config.Z_ITERATIONS > 1 and e.config.INNER_UNROLL_FACTOR > 0
     and (not worst or e.time_ms > worst.time_ms) then worst = e end
end
assert(worst, "the recording has spilling configs")
local result = be:evaluate({ { config = worst.config } })[1]
prof:annotate(worst.config, result)
check(result.symptoms and result.symptoms[1], "symptoms computed")
local names = {}
for _, s in ipairs(result.symptoms) do names[s.name] = true end
check(names.register_spills, "spilling config diagnosed with register_spills")

local state = { config = worst.config, key = be.space:key(worst.config), result = result }
local function priors(use)
  rules.use_symptoms = use
  local out = {}
  for _, m in ipairs(rules.propose(ctx, state)) do
    local knob, v = next(m.changes)
    out[knob .. ":" .. tostring(v)] = { prior = m.prior, method = m.method, up = v > worst.config[knob] }
  end
  return out
end
local plain, guided = priors(false), priors(true)
rules.use_symptoms = true
local n_up, n_down = 0, 0
for k, g in pairs(guided) do
  local p = plain[k]
  local knob = k:match("^(.-):")
  if knob == "Z_ITERATIONS" or knob == "INNER_UNROLL_FACTOR" then
    if g.up then
      check(g.prior < p.prior, "%s (%s) should lose prior: %.3f vs %.3f", k, g.method, g.prior, p.prior)
      n_up = n_up + 1
    else
      check(g.prior > p.prior, "%s (%s) should gain prior: %.3f vs %.3f", k, g.method, g.prior, p.prior)
      n_down = n_down + 1
    end
  end
end
check(n_up > 0 and n_down > 0, "moves in both directions were compared (%d up, %d down)", n_up, n_down)

-- Without symptoms on the state, priors are unchanged.
state.result = { status = "ok", time_ms = 1 }
local a, b = priors(true), plain
for k, g in pairs(a) do check(g.prior == b[k].prior, "no symptoms, same prior for %s", k) end

if failures > 0 then
  io.stderr:write(failures, " check(s) failed\n")
  return 1
end
print(string.format("test_rules_symptoms: ok (%d up and %d down moves on %s)", n_up, n_down,
                    be.space:key(worst.config)))
return 0
