#!/bin/sh
# Every GPU figure of the cuda backend in docs/PERFORMANCE.md, in one run on a
# GPU machine, from the repo root, with kopt and bench_ref built in BUILD:
# planted faults, a random sample of the convolution space, exhaustive sweeps of the matmul / softmax / transpose specs
# (throughput, best configs), repeatability (best configs timed again in two
# separate processes), cuBLAS and device-to-device copy ceilings.
# Writes faults.json, sweeps.jsonl, repeat.jsonl, ceilings.jsonl to OUT.
BUILD=${BUILD:-build}
OUT=${OUT:-.}
K="$BUILD/kopt"
RUNS=${RUNS:-/tmp/kopt-runs}
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$RUNS"
mkdir -p "$RUNS"
: >"$OUT/sweeps.jsonl"
: >"$OUT/repeat.jsonl"
: >"$OUT/ceilings.jsonl"
now() { date +%s.%N; }
echo "== devices"
"$K" devices || { echo "no GPU: this script measures on one (the replay backend would answer in its place)" >&2; exit 1; }
echo "== ceilings (before)"
"$BUILD/bench_ref" copy 1073741824 | tee -a "$OUT/ceilings.jsonl"
"$BUILD/bench_ref" gemm 4096 4096 4096 | tee -a "$OUT/ceilings.jsonl"
echo "== planted faults"
KOPT_FAULTS_OUT="$OUT/faults.json" "$K" script tests/lua/test_gpu_faults.lua
echo "faults rc=$?"
echo "== random sample of the convolution space (Kernel Tuner kernel, __constant__ filter)"
t0=$(now)
"$K" random specs/convolution.json --out "$RUNS/convolution" -q --budget 80 --seed 5
t1=$(now)
"$K" script tools/sweep_summary.lua "$RUNS/convolution" "$(awk "BEGIN{print $t1 - $t0}")" | tee -a "$OUT/sweeps.jsonl"
for s in matmul_f16 softmax transpose; do
	echo "== sweep $s"
	t0=$(now)
	"$K" exhaustive "specs/$s.json" --out "$RUNS/$s" -q --budget 1000
	t1=$(now)
	wall=$(awk "BEGIN{print $t1 - $t0}")
	"$K" script tools/sweep_summary.lua "$RUNS/$s" "$wall" | tee -a "$OUT/sweeps.jsonl"
done
echo "== repeatability (two processes per config)"
for s in matmul_f16 softmax transpose; do
	if [ -f "$RUNS/$s/best/config.json" ]; then
		for i in 1 2; do
			"$K" script tools/time_config.lua "specs/$s.json" --config "$RUNS/$s/best/config.json" | tee -a "$OUT/repeat.jsonl"
		done
	fi
done
for i in 1 2; do
	"$K" script tools/time_config.lua kernels/faults/faults.json FAULT=0 BLOCK=256 | tee -a "$OUT/repeat.jsonl"
done
echo "== the same with CUDA events as the timer (cross-check of the CUPTI timer)"
for s in matmul_f16 softmax transpose; do
	[ -f "$RUNS/$s/best/config.json" ] &&
		KOPT_TIMER=events "$K" script tools/time_config.lua "specs/$s.json" --config "$RUNS/$s/best/config.json" | tee -a "$OUT/repeat.jsonl"
done
KOPT_TIMER=events "$K" script tools/time_config.lua kernels/faults/faults.json FAULT=0 BLOCK=256 | tee -a "$OUT/repeat.jsonl"
echo "== ceilings (after)"
"$BUILD/bench_ref" copy 1073741824 | tee -a "$OUT/ceilings.jsonl"
"$BUILD/bench_ref" gemm 4096 4096 4096 | tee -a "$OUT/ceilings.jsonl"
