#!/bin/sh
# One GPU call for the verifier figures (docs/TRUST.md). From the repo root
# on a GPU machine, with the kopt under test in NEW and, for the side-by-side
# rate and winners, a kopt built from the commit before the verifier in OLD;
# everything lands in OUT (default .):
#  1. the planted-fault suite, and again with the module-variable check off
#     (KOPT_VERIFY_OFF=globals), so the defences behind it are seen alone
#  2. exhaustive matmul_f16: OLD, NEW, NEW with guards, module-variable check
#     and nudging off (what those cost), interleaved twice, compile cache warm
#  3. the shipped specs' winners, OLD against NEW
# Skip part 1 with FAULTS=0. Per-run figures: OUT/summary.jsonl.
NEW=${NEW:-build/kopt}
OLD=${OLD:-}
OUT=${OUT:-.}
R=/tmp/kopt-verify
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT"
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
"$NEW" devices || { echo "no GPU: this script measures on one" >&2; exit 1; }
if [ "${FAULTS:-1}" != 0 ]; then
echo "== planted faults"
KOPT_FAULTS_OUT="$OUT/faults.json" "$NEW" script tests/lua/test_gpu_faults.lua
echo "faults rc=$?"
echo "== planted faults, module-variable check off"
KOPT_VERIFY_OFF=globals KOPT_FAULTS_OUT="$OUT/faults_globals_off.json" "$NEW" script tests/lua/test_gpu_faults.lua
echo "faults (globals off) rc=$?"
fi
run() { # label binary spec [env...]
	label=$1 bin=$2 spec=$3
	shift 3
	t0=$(date +%s%N)
	env "$@" "$bin" exhaustive "specs/$spec.json" -q --out "$R/$label" >"$OUT/$label.txt" 2>&1
	echo "== $label rc=$? wall=$(ms "$t0") ms: $(grep -m1 'best' "$OUT/$label.txt")"
	grep -m1 -E 'evaluations|configs' "$OUT/$label.txt"
}
[ -n "$OLD" ] && run warm_old "$OLD" matmul_f16 X=1
for i in 1 2; do
	[ -n "$OLD" ] && run "matmul_old_$i" "$OLD" matmul_f16 X=1
	run "matmul_new_$i" "$NEW" matmul_f16 X=1
	run "matmul_new_off_$i" "$NEW" matmul_f16 KOPT_VERIFY_OFF=globals,guards KOPT_NUDGE=0
	run "matmul_new_nonudge_$i" "$NEW" matmul_f16 KOPT_NUDGE=0
done
for s in softmax transpose reduce; do
	[ -n "$OLD" ] && run "${s}_old" "$OLD" "$s" X=1
	run "${s}_new" "$NEW" "$s" X=1
	run "${s}_new_off" "$NEW" "$s" KOPT_VERIFY_OFF=globals,guards KOPT_NUDGE=0
done
# per run: evaluations, worker seconds per evaluation, best time and config
python3 tools/events_summary.py "$R"/*/events.jsonl >"$OUT/summary.jsonl"
python3 tools/check_strict_json.py "$R" | tee "$OUT/strict_json.txt"
