#!/bin/sh
# kopt's CUPTI counters against Nsight Compute on the same kernel, same
# config, same inputs. Run on a GPU machine from the repo root with a kopt
# built in BUILD (default build/). For each SPEC, two runs of the spec's
# default config (the rules strategy starts there; --budget 1):
#   1. kopt with --profile top-1: counters collected by kopt's worker (CUPTI
#      range profiler, auto-range, kernel replay);
#   2. kopt without profiling under ncu, which profiles the first launch of
#      the candidate kernel (the first correctness trial: same inputs as
#      kopt's profile launch) with the same metric names; clocks are not
#      locked (--clock-control none), as with CUPTI.
# Results go to OUT (default .): runs/<name>/ and ncu_<name>.csv.
# usage: tools/device_cupti_compare.sh SPEC KERNEL_REGEX [SPEC KERNEL_REGEX ...]
BUILD=${BUILD:-build}
OUT=${OUT:-.}
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)}
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
set -u
echo "ncu: $NCU"
"$NCU" --version | tail -1
grep RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null
while [ $# -ge 2 ]; do
	spec=$1
	regex=$2
	shift 2
	name=$(basename "$spec" .json)
	echo "== $name: kopt --profile top-1"
	t0=$(date +%s%N)
	"$BUILD/kopt" rules "$spec" --budget 1 --profile top-1 --out "$OUT/runs/$name" -q
	echo "kopt rc=$? wall=$((($(date +%s%N) - t0) / 1000000)) ms"
	echo "== $name: ncu"
	t0=$(date +%s%N)
	"$NCU" --target-processes all --kernel-name "regex:$regex" --launch-count 1 \
		--clock-control none --cache-control all --print-units base --csv \
		--metrics "$METRICS" --log-file "$OUT/ncu_$name.csv" \
		"$BUILD/kopt" rules "$spec" --budget 1 --out "$OUT/runs/${name}_ncu" -q
	echo "ncu rc=$? wall=$((($(date +%s%N) - t0) / 1000000)) ms"
	tail -n +1 "$OUT/ncu_$name.csv" | head -40
	grep -h '"event":"profile' "$OUT/runs/$name/events.jsonl" | head -3
done
