-- MCGS's stall with pair moves (--opt stall=N --opt stall_move=pair,
-- kopt.mcgs_portfolio): two-knob moves of the best state once the search makes
-- no progress.
-- A hand-made trap of 864 configs: knob B = 2 is best everywhere except at
-- A = 8, B = 1 (any C, D), where the time drops to 0.6 of the trap's best.
-- From the trap's optimum (A = 3, B = 2) every one-knob move is slower, so a
-- local descent cannot leave it, and the value model, which has seen B = 1
-- only where it is slow, ranks the pair low. For seeds where MCGS without
-- stall stays in the trap for 100 evaluations, MCGS with stall = 15 must find
-- the needle within the same budget; both runs are deterministic.
local T = require("testlib")

local tmp = T.tmpdir("mcgs_stall")
local base = { 1.8, 1.0, 1.4 }
local space = T.grid_space(tmp .. "/trap.json", { { "A", 8 }, { "B", 3 }, { "C", 6 }, { "D", 6 } },
  function(a, b, c, d)
    if a == 8 and b == 1 then return 0.6 * (1 + 0.01 * c) * (1 + 0.01 * d) end
    return base[b] * (1 + 0.05 * (a - 3) ^ 2) * (1 + 0.01 * c) * (1 + 0.01 * d)
  end)

-- the evaluation at which the needle (B = 1, A = 8) was first measured, or nil
local function needle_at(seed, opts)
  for i, e in ipairs(T.mcgs_replay(tmp, space, 100, seed, opts)) do
    if e.config and e.config.A == 8 and e.config.B == 1 then return i end
  end
  return nil
end

-- (model_kind=forest: the trap is built for a forest, which splits B = 1
-- off as slow; the GP of the default model_kind=auto, smooth along A, leaves
-- it by itself; moves=rules: the trap is for the rule moves alone)
local PLAIN = "--opt model_kind=forest --opt moves=rules"
local trapped, escaped = T.trapped_and_freed(6, needle_at, "--opt stall=0 " .. PLAIN,
                                             "--opt stall=15 --opt stall_move=pair " .. PLAIN)
T.check(trapped >= 2, "without stall some seeds stay in the trap for 100 evaluations: %d of 6", trapped)
T.eq(escaped, trapped, "with stall = 15 each of them finds the needle")

return T.done()
