-- The experts as one move generator for kopt.moves (`--opt moves=rules,experts`):
-- each call asks every expert about the state, through the LLM when one is
-- configured (ctx.llm, else KOPT_LLM_* / OPENAI_* in the environment, with the
-- transcript in the run directory), else through their heuristics. Expensive:
-- MCGS calls it only when progressive widening lets a node grow.
-- KOPT_EXPERTS picks the experts (default throughput,memory,robustness).
local X = require("kopt.experts")
local llm = require("kopt.llm")

local G = { name = "experts", expensive = true }
-- ctx -> { client, gen }: one LLM client (its transcript, usage and breaker)
-- and one generator per run, never shared by the runs of one process (a
-- suite runs its problems in one)
local per_run = setmetatable({}, { __mode = "k" })

local function run_state(ctx)
  local r = per_run[ctx]
  if r == nil then
    r = {}
    per_run[ctx] = r
  end
  return r
end

local function llm_client(ctx)
  if ctx.llm then return ctx.llm end
  local r = run_state(ctx)
  if r.client == nil then
    -- (as the experts strategy's: the run folder's transcript, which a
    -- resumed run answers from first, so it asks what it asked before and
    -- is not charged twice for it)
    r.client = llm.for_run(ctx, {}, "mcgs moves=experts") or false
  end
  return r.client or nil
end

local function generator(ctx)
  local r = run_state(ctx)
  r.gen = r.gen or X.generator(os.getenv("KOPT_EXPERTS") or X.DEFAULT, { client = llm_client(ctx) })
  return r.gen
end

-- (the run's summary and results.json say what the LLM did, or why it
-- went off, as the experts strategy's do)
local function record(ctx)
  local c = llm_client(ctx)
  if c and c.usage.requests > 0 then
    -- (tokens per expert, as the experts strategy's line has them)
    local names = {}
    for i, e in ipairs(X.resolve(os.getenv("KOPT_EXPERTS") or X.DEFAULT)) do names[i] = e.name end
    llm.record_usage(ctx, c, names)
  end
end

-- Called by kopt.moves.resolve when a strategy names this generator: the
-- experts KOPT_EXPERTS names must exist and the KOPT_LLM_* settings must
-- hold, said before the run starts (found only at the first expert call,
-- either cost every expert its moves, heuristic ones too).
function G.check()
  X.resolve(os.getenv("KOPT_EXPERTS") or X.DEFAULT)
  llm.config({})
end

function G.propose(ctx, state)
  local moves = generator(ctx).propose(ctx, state)
  record(ctx)
  return moves
end

-- A failed edit's repair turn (kopt.experts generator.repair).
function G.repair(ctx, chain, feedback, failed_source)
  local a, b = generator(ctx).repair(ctx, chain, feedback, failed_source)
  record(ctx)
  return a, b
end

return G
