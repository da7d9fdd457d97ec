#!/bin/sh
# kopt's CUPTI counters against Nsight Compute on the same kernel, config and
# inputs. Run on a GPU machine from the repo root with kopt built in BUILD
# (default build/); results go to OUT (default .).
#   compare NAME SPEC KERNEL_REGEX KNOB=VALUE...
# 1. kopt script tools/profile_config.lua: the config measured, then one
#    launch profiled by kopt's worker (CUPTI range profiler, auto-range,
#    user replay, a cold L2 before every pass) -> OUT/kopt_NAME.json,
#    OUT/runs/NAME/best/REPORT.md
# 2. the same without profiling under ncu, which profiles the first launch of
#    the candidate kernel (the first correctness trial: the same inputs as
#    kopt's profiled launch) with the same metric names; clocks unlocked
#    (--clock-control none) as under CUPTI, caches flushed -> OUT/ncu_NAME.csv
# Then the end-to-end check: MCGS with --profile top-k on both specs.
BUILD=${BUILD:-build}
OUT=${OUT:-.}
K="$BUILD/kopt"
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)}
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
"$K" devices > /dev/null || { echo "no GPU: this script measures on one" >&2; exit 1; }
echo "ncu: $NCU ($("$NCU" --version | tail -1))"
grep RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null
compare() {
	name=$1 spec=$2 regex=$3
	shift 3
	echo "== $name: kopt profile ($*)"
	t0=$(date +%s%N)
	"$K" script tools/profile_config.lua "$spec" "$@" --metrics "$METRICS" --out "$OUT/runs/$name" \
		>"$OUT/kopt_$name.json"
	echo "kopt rc=$? wall=$(ms "$t0") ms"
	head -c 1500 "$OUT/kopt_$name.json"
	echo
	echo "== $name: ncu"
	t0=$(date +%s%N)
	"$NCU" --target-processes all --kernel-name "regex:$regex" --launch-count 1 \
		--clock-control none --cache-control all --print-units base --csv \
		--metrics "$METRICS" --log-file "$OUT/ncu_$name.csv" \
		"$K" script tools/profile_config.lua "$spec" "$@" --no-profile >"$OUT/ncu_run_$name.json"
	echo "ncu rc=$? wall=$(ms "$t0") ms"
	grep -c '"' "$OUT/ncu_$name.csv"
}
compare matmul specs/matmul_f16.json '^matmul$' BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 WARPS=4 STAGES=3
compare softmax specs/softmax.json '^softmax$' BLOCK_SIZE=512 ROWS_PER_BLOCK=1 VEC=4
for s in softmax matmul_f16; do
	echo "== mcgs $s --profile top-k"
	t0=$(date +%s%N)
	"$K" mcgs "specs/$s.json" --budget "${MCGS_BUDGET:-8}" --profile top-k --out "$OUT/runs/mcgs_$s" >"$OUT/mcgs_$s.log" 2>&1
	echo "mcgs rc=$? wall=$(ms "$t0") ms"
	grep -v '^kopt: \[' "$OUT/mcgs_$s.log" | tail -8
	grep -c '"event":"profile"' "$OUT/runs/mcgs_$s/events.jsonl"
done
