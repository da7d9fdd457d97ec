-- The experts' heuristics as one move generator (`--opt moves=rules,heuristics`,
-- MCGS's default): the same experts as `experts` (KOPT_EXPERTS, default
-- throughput,memory,robustness), answered by their heuristics only. It never
-- asks an LLM, whatever the environment configures, so a default run starts
-- no paid requests; `experts` is the generator that does. Its moves are knob
-- moves (no edits, so no repair turns). Expensive, as `experts`: MCGS calls
-- it only when progressive widening lets a node grow.
local X = require("kopt.experts")

local G = { name = "heuristics", expensive = true }
local inner

function G.propose(ctx, state)
  inner = inner or X.generator(os.getenv("KOPT_EXPERTS") or X.DEFAULT, { offline = true, edits = false })
  return inner.propose(ctx, state)
end

return G
