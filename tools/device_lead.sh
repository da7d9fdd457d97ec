#!/bin/sh
# One GPU call for the end-to-end figures. From the repo root on a GPU machine,
# kopt built in BUILD (default build/); everything lands in OUT (default .):
#  1. recordings: exhaustive runs of the shipped specs, kept as T4 files for
#     replay (tests/data/<spec>_<gpu>.t4.json) — the README's no-GPU fallback
#  2. the README's main command, end to end on the GPU
#  3. strategies side by side on the same GPU, same budget and seed
#  4. kopt's CUPTI counters against Nsight Compute (tools/device_cupti_compare.sh)
BUILD=${BUILD:-build}
OUT=${OUT:-.}
K="$BUILD/kopt"
R=/tmp/kopt-lead
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT/rec"
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
"$K" devices || { echo "no GPU: this script measures on one (the replay backend would answer in its place)" >&2; exit 1; }
for s in matmul_f16 softmax transpose matmul_f16_wide; do
	t0=$(date +%s%N)
	"$K" exhaustive "specs/$s.json" -q --out "$R/rec_$s" >"$OUT/rec/$s.summary.txt" 2>&1
	echo "== exhaustive $s rc=$? wall=$(ms "$t0") ms"
	head -4 "$OUT/rec/$s.summary.txt"
	cp "$R/rec_$s/results.json" "$OUT/rec/$s.t4.json"
done
echo "== README main command"
t0=$(date +%s%N)
"$K" mcgs specs/matmul_f16.json --budget 100 --out "$R/main" 2>"$OUT/main.err" | tee "$OUT/main.txt"
echo "main rc=$? wall=$(ms "$t0") ms"
tail -3 "$OUT/main.err"
for st in random mcgs rules experts; do
	for s in matmul_f16_wide; do
		t0=$(date +%s%N)
		"$K" "$st" "specs/$s.json" --budget 60 --seed 1 -q --out "$R/cmp_${st}_$s" >"$OUT/rec/cmp_${st}_$s.txt" 2>&1
		echo "== $st $s rc=$? wall=$(ms "$t0") ms: $(grep -m1 'best:' "$OUT/rec/cmp_${st}_$s.txt")"
	done
done
if [ -x tools/device_cupti_compare.sh ] || [ -f tools/device_cupti_compare.sh ]; then
	mkdir -p "$OUT/cupti"
	BUILD="$BUILD" OUT="$OUT/cupti" sh tools/device_cupti_compare.sh >"$OUT/cupti/log.txt" 2>&1
	echo "== cupti compare rc=$?"; tail -20 "$OUT/cupti/log.txt"
fi
