#!/bin/sh
# The cuda backend on several GPUs (one worker process each): the planted-
# fault suite (crashes and hangs on one GPU while the others keep working) and
# the matmul sweep. From the repo root, kopt built in BUILD; results to OUT.
BUILD=${BUILD:-build}
OUT=${OUT:-.}
K="$BUILD/kopt"
RUNS=${RUNS:-/tmp/kopt-runs}
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$RUNS"
mkdir -p "$RUNS"
now() { date +%s.%N; }
"$K" devices || { echo "no GPU: this script measures on one (the replay backend would answer in its place)" >&2; exit 1; }
KOPT_FAULTS_OUT="$OUT/faults_multi.json" "$K" script tests/lua/test_gpu_faults.lua
echo "faults rc=$?"
t0=$(now)
"$K" exhaustive specs/matmul_f16.json --out "$RUNS/mm" -q
t1=$(now)
"$K" script tools/sweep_summary.lua "$RUNS/mm" "$(awk "BEGIN{print $t1 - $t0}")" | tee "$OUT/sweep_multi.jsonl"
python3 - "$RUNS/mm/events.jsonl" <<'PY' 2>/dev/null || true
import json, sys, collections
c = collections.Counter()
for line in open(sys.argv[1]):
    ev = json.loads(line)
    r = ev.get("result") or {}
    if "gpu" in r: c[r["gpu"]] += 1
print("evaluations per GPU:", dict(c))
PY
