#!/bin/sh
# ReGraph online, measured on replay (docs/SEARCH.md, "ReGraph online"):
# MCGS with expert moves (the heuristic experts: no LLM, no GPU) learns a
# transition graph from a few runs, then runs with it (as the expert moves'
# priors; and with regraph_filter=on) and without it on the same budgets and
# seeds, through `kopt compare`.
#
#   sh tools/regraph_experiment.sh            # KOPT=build/kopt OUT=regraph-experiment
#
# Learning: LEARN_SPACES x seeds 1001..1000+LEARN_SEEDS, budget LEARN_BUDGET,
# every transition appended to $OUT/experience.jsonl (the KOPT_EXPERIENCE a
# user would have). Evaluation, twice: on the learned spaces with other seeds
# (same kernels), and on HELD_OUT spaces the graph never saw (other kernels).
set -eu
KOPT=${KOPT:-build/kopt}
OUT=${OUT:-regraph-experiment}
LEARN_SPACES=${LEARN_SPACES:-tests/data/convolution_A100.json,tests/data/pnpoly_RTX_3090.json,tests/data/dedispersion_A100.json}
HELD_OUT=${HELD_OUT:-tests/data/convolution_A4000.json,tests/data/coulomb_2080.json,tests/data/matmul_f16_wide_h200.t4.json,tests/data/reduce_h200.t4.json}
LEARN_SEEDS=${LEARN_SEEDS:-3}
LEARN_BUDGET=${LEARN_BUDGET:-200}
SEEDS=${SEEDS:-30}
BUDGETS=${BUDGETS:-25,50,100,200}
export KOPT_METHODS=off KOPT_DB=off
unset KOPT_EXPERIENCE || true
mkdir -p "$OUT"
rm -f "$OUT/experience.jsonl"

echo "== learning: MCGS with expert moves, seeds 1001..$((1000 + LEARN_SEEDS)), budget $LEARN_BUDGET"
for space in $(echo "$LEARN_SPACES" | tr ',' ' '); do
  s=1
  while [ "$s" -le "$LEARN_SEEDS" ]; do
    name=$(basename "$space" .json)
    KOPT_EXPERIENCE="$OUT/experience.jsonl" "$KOPT" mcgs --backend "replay:$space" --budget "$LEARN_BUDGET" \
      --seed $((1000 + s)) -q --opt moves=rules,experts --opt regraph=off --out "$OUT/learn/$name-$s" > /dev/null
    s=$((s + 1))
  done
done
"$KOPT" regraph "$OUT/experience.jsonl" -o "$OUT/regraph.json"

EXP=$OUT/experience.jsonl
STRATS="mcgs@regraph=off,mcgs@regraph=$EXP,mcgs@regraph=$EXP+regraph_filter=on"
echo "== same kernels, other seeds"
"$KOPT" compare --strategies "$STRATS" --spaces "$LEARN_SPACES" --seeds "$SEEDS" --budgets "$BUDGETS" \
  --opt mcgs.moves=rules,experts --out "$OUT/same" -q
echo "== held-out kernels"
"$KOPT" compare --strategies "$STRATS" --spaces "$HELD_OUT" --seeds "$SEEDS" --budgets "$BUDGETS" \
  --opt mcgs.moves=rules,experts --out "$OUT/held_out" -q
echo "results: $OUT/same/benchmark.md $OUT/held_out/benchmark.md $OUT/regraph.json"
