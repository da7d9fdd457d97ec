-- The options of MCGS (strategies/mcgs.lua), with their defaults and help:
-- `kopt mcgs --help` lists them, `--opt key=value` sets them. docs/SEARCH.md
-- says how the defaults were chosen.
local OPTIONS = {
  moves = { default = "rules,heuristics",
            help = "move generators, comma-separated (names or .lua files): rules, heuristics (the experts' " ..
                   "heuristics, never an LLM), experts (the LLM when one is configured), a .lua file" },
  expert_c = { default = 0.5, help = "expensive generators: the n-th call on a state once expert_c * (visits+1)^pw_alpha >= n" },
  expert_max = { default = 3, help = "expensive generators: most calls per state" },
  repairs = { default = 2, help = "expert edits: follow-up turns in which the expert may fix an edit that failed " ..
                                  "to compile or verify (0: none)" },
  c_puct = { default = 0.15, help = "exploration weight of the PUCT term" },
  beta_max = { default = 0.7, help = "weight of the max backup in Q (0 = mean only, 1 = max only)" },
  fpu_reduction = { default = 0.2, help = "an unvisited move is valued at its parent's reward minus this" },
  pw_c = { default = 2.0, help = "progressive widening: a node considers ceil(pw_c * (N+1)^pw_alpha) moves" },
  pw_alpha = { default = 0.6, help = "progressive widening exponent" },
  dirichlet_alpha = { default = 0.3, help = "Dirichlet noise concentration on the priors of start states" },
  dirichlet_eps = { default = 0.25, help = "weight of the Dirichlet noise (0 = none)" },
  rollout_depth = { default = 16, help = "most states one rollout may add after a new leaf (0 = no rollouts)" },
  rollout_misses = { default = 5, help = "rollout: consecutive steps without improving its best state before it ends" },
  rollout_eps = { default = 0.1, help = "rollout: probability of a random move instead of the greedy one" },
  rollout_lambda = { default = 0.05, help = "rollout: visit penalty in Q - lambda * N" },
  rollout_improving = { default = true, help = "rollout: start one only from a leaf faster than its parent (or a restart)" },
  patience = { default = 30, help = "evaluations without a new best after which a restart is forced (0 = never)" },
  p_perturb = { default = 0.5, help = "probability that a restart perturbs the best state instead of sampling" },
  perturb = { default = 3, help = "random moves applied to the best state for a perturbation restart" },
  restart_prior = { default = 0.25, help = "prior of a random restart move at the virtual root (start = 1)" },
  p_sample = { default = 0.15, help = "probability that an iteration measures a fresh random sample (descending from it only when it comes within sample_margin of the best)" },
  sample_margin = { default = 0.1, help = "log-speedup margin to the best within which a random sample starts a descent" },
  init_samples = { default = 10, help = "the first N states are the start state and random samples (then PUCT)" },
  restart_c = { default = 1.0, help = "root widening: ceil(restart_c * (N+1)^pw_alpha) start/restart moves" },
  clip_lo = { default = -2.0, help = "lower clip of the log-speedup reward" },
  clip_hi = { default = 2.3, help = "upper clip of the log-speedup reward (log 10)" },
  fail_invalid = { default = -0.5, help = "reward of an invalid state" },
  fail_compile = { default = -0.6, help = "reward of a compile error" },
  fail_launch = { default = -0.8, help = "reward of a launch error" },
  fail_wrong = { default = -1.2, help = "reward of a wrong result" },
  fail_crash = { default = -1.2, help = "reward of a crash" },
  fail_timeout = { default = -1.0, help = "reward of a timeout" },
  vl_value = { default = -1.0, help = "value of a virtual loss (pending evaluation) in Q" },
  learn = { default = 1.0, help = "weight of this run's per-method gains in new priors (0 = off)" },
  learn_floor = { default = -0.1, help = "lowest mean gain a method's learned prior counts (a floor on the penalty: moves that rarely help alone, such as toggles, stay in play)" },
  priors = { default = "", help = "method statistics from `kopt regraph` (JSON) to weight move priors" },
  regraph = { default = "auto", help = "ReGraph for expert moves: the transition graph of earlier runs as their " ..
              "priors (auto: built at the start from $KOPT_EXPERIENCE; off; or a transitions file, run directory " ..
              "or `kopt regraph` file)" },
  regraph_filter = { default = "off", choices = { "off", "on" },
                     help = "on: a state's moves are only those whose method has followed its own method with a " ..
                       "speedup in the ReGraph (all of them when it knows none)" },
  tool_rounds = { default = 4, help = "LLM expert moves: rounds of tool calls before an answer (0: none)" },
  tools = { default = "", help = "LLM expert moves: a .lua file registering more tools (kopt.tools.register)" },
  start = { default = "default", choices = { "default", "random" },
            help = "start state: the spec's default config (when it has one) or a random sample" },
  model = { default = true, help = "learned value model (model_kind): a random forest or a Gaussian process of log(time) (kopt.classic) and a failure classifier guide rollouts and pick the fresh samples (docs/SEARCH.md)" },
  model_features = { default = "ordinal", choices = { "ordinal", "bits" },
                     help = "model: the columns its trees split on: each knob's value index (ordinal), plus, for a knob of positive integers, power of two or not and trailing zero bits (bits; kopt.model_features)" },
  model_kind = { default = "auto", choices = { "forest", "gp", "gp_iso", "mix", "auto" },
                 help = "model: a random forest of log(time), failures priced by fail_penalty (forest), or a Gaussian process over the knobs' value indices scaled to [0,1], Matern 5/2, a length scale per knob and the noise by marginal likelihood (gp), or one length scale for every knob (gp_iso), or the equal mixture of gp and forest (mix; kopt.classic.gp), or whichever of forest and gp (successes only, with the failure classifier) ordered the fast ones of the last 32 successes better before they were measured (auto; kopt.mcgs_model); past 64 varying knobs a Gaussian process cannot be fitted and the forest is used" },
  model_trees = { default = 12, help = "model: trees in the forest" },
  model_min = { default = 8, help = "model: successful measurements before the first fit" },
  model_refit = { default = 0.1, help = "model: refit once the measured set grew by this fraction" },
  model_rollout = { default = true, help = "model: a rollout step measures the child the model expects fastest (instead of the highest prior)" },
  rollout_prior = { default = 0.0, help = "model: a rollout step's predicted log-time is charged rollout_prior * -log(prior of the move), so unlikely moves (set-any-value) need a larger predicted gain" },
  model_prior = { default = false, help = "model: new moves' priors are weighted by the model (model_tau, min_pred_gain, prune_factor) and the failure classifier (off: it cost more on one space than it gained on another, docs/SEARCH.md)" },
  model_tau = { default = 1.0, help = "model: a move's prior is multiplied by exp(predicted log-gain / model_tau)" },
  model_kappa = { default = 0.5, help = "model: optimism, the predicted log-time is mu - model_kappa * spread of the trees" },
  model_pool = { default = 64, help = "model: a fresh sample is the best by expected improvement of this many random configs" },
  min_pred_gain = { default = 0.02, help = "weak-move pruning: a move predicted to gain less than this fraction over its parent keeps only prune_factor of its prior (so it waits behind better ones)" },
  prune_factor = { default = 0.05, help = "weak-move pruning: prior factor of a weak move (1 = no pruning)" },
  fail_model = { default = false, help = "model: a classifier (forest on failed / ok) weighs the model's choices by their chance of success" },
  fail_penalty = { default = 1.0, help = "model: failures join the regression of log(time) as the slowest success plus this many log-units (0: the regression sees successes only)" },
  portfolio = { default = "tree ei cross", help = "arms that share the free iterations, chosen by a bandit (kopt.mcgs_portfolio): " ..
                "tree (MCGS's descent), ei (the model's expected improvement over random configs and one-knob " ..
                "neighbours of the best), cross (crossover of the best states), jump (one knob of the best far away), sample (a uniform random config); " ..
                "space- or comma-separated; tree alone: plain MCGS" },
  rollout_bandit = { default = true, help = "portfolio: a bandit chooses, per rollout step, between the model's child and the highest prior's (model_rollout)" },
  rollout_gain = { default = 0.005, help = "a rollout step that beats its anchor by less than this fraction (measurement noise on a GPU) moves the anchor but counts as a miss" },
  init_design = { default = "uniform", choices = { "uniform", "maximin" },
                  help = "initial samples: uniform, or each the farthest of design_pool uniform samples from those drawn before" },
  design_pool = { default = 16, help = "init_design=maximin: uniform candidates per initial sample" },
  arm_c = { default = 0.6, help = "portfolio: exploration weight of the UCB term of its bandits (the arms, the rollout choice, the stall moves)" },
  arm_power = { default = 4, help = "portfolio: an evaluation pays its rank quantile among the successes to this power" },
  arm_discount = { default = 0.99, help = "portfolio: the bandit's statistics decay by this factor per evaluation" },
  arm_top = { default = 10, help = "portfolio ei: the one-knob neighbours of this many best states join the pool" },
  arm_population = { default = 20, help = "portfolio cross: parents are drawn from this many best states" },
  arm_xi = { default = 0.05, help = "portfolio ei: expected-improvement margin in log-time units" },
  stall = { default = 15, help = "portfolio: evaluations without progress after which the free iterations go to " ..
            "stall_move (0 = never)" },
  stall_move = { default = "adaptive", choices = { "adaptive", "region", "ei", "pair" },
                 help = "stall: descents with one knob of the best state set to another value and held (region), the ei arm's proposals (ei), the two chosen by a bandit of their own paid like the portfolio's (adaptive), or two-knob moves of the best state (pair)" },
  region_steps = { default = 0, help = "region descents (stall_move=region, adaptive): a region descent still slower than the best by more than sample_margin after this many steps ends there (0 = no limit)" },
  region_repair = { default = false, help = "region descents: one whose start fails still goes on from there, over the neighbours that keep the held knob's value" },
  stall_sweep = { default = 6, help = "region descents: before the descents, the best state's other settings of each knob with at most this many values are measured alone (0 = none)" },
  sweep_at = { default = 5, help = "region descents: the sweep (stall_sweep) already after this many evaluations without progress, when no expensive move generator is in use (moves=rules: the default's heuristics are one; 0: at the stall; an earlier sweep would leave the tree, which asks those generators, few iterations)" },
  region_order = { default = "turns", choices = { "knob", "turns" },
                   help = "region descents: every value of a knob before the next knob's (knob), or the knobs by turns, each one's value the model expects fastest first (turns)" },
  region_score = { default = "reach", choices = { "start", "reach" }, help = "region_order=turns: a region's promise is the model's time of its start (start) or of the best state one step into it (reach)" },
  region_memory = { default = true, help = "region descents: a region (or sweep setting) tried since the last progress is not tried again after a smaller new best" },
  stall_share = { default = 1.0, help = "stall: the fraction of a stalled search's free iterations given to stall_move (the bandit keeps the rest)" },
  stall_gain = { default = 0.01, help = "stall: a new best is progress when it gains this much log-speedup" },
  max_depth = { default = 500, help = "longest selection path" },
  snapshot_every = { default = 50, help = "write the graph snapshot every N evaluations (0 = only at the end)" },
}

-- The range of each numeric option (--opt outside it is refused at the
-- start, not met as a crash or a silent no-op mid-run): { min, max }
-- inclusive, gt = an exclusive lower bound.
local RANGES = {
  unit = { min = 0, max = 1 },
  count = { min = 0 },
  positive = { gt = 0 },
  nonneg = { min = 0 },
}
for kind, names in pairs({
  unit = { "dirichlet_eps", "rollout_eps", "p_perturb", "p_sample", "beta_max", "stall_share", "pw_alpha",
           "prune_factor" },
  count = { "expert_max", "repairs", "rollout_depth", "rollout_misses", "patience", "perturb", "init_samples",
            "tool_rounds", "model_min", "model_pool", "design_pool", "arm_top", "arm_population", "stall",
            "region_steps", "stall_sweep", "sweep_at", "snapshot_every" },
  positive = { "dirichlet_alpha", "pw_c", "model_tau", "arm_power", "restart_c", "model_trees", "max_depth",
               "arm_discount" },
  nonneg = { "c_puct", "expert_c", "fpu_reduction", "rollout_lambda", "sample_margin", "restart_prior", "learn",
             "arm_c", "arm_xi", "stall_gain", "min_pred_gain", "model_kappa", "rollout_prior", "model_refit",
             "fail_penalty", "rollout_gain" },
}) do
  for _, name in ipairs(names) do
    local o = assert(OPTIONS[name], name)
    for k, v in pairs(RANGES[kind]) do o[k] = v end
  end
end
OPTIONS.arm_discount.max = 1
-- (counts a loop runs that many times: past these it would not end)
OPTIONS.model_pool.max, OPTIONS.design_pool.max, OPTIONS.model_trees.max = 1000000, 100000, 1000
-- (a pool of no candidates picks nothing: every initial sample after the
-- first was abandoned, and a failing first one ended the search)
OPTIONS.design_pool.min = 1

return OPTIONS
