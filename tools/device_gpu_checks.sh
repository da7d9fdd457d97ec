#!/bin/sh
# The GPU checks of the cuda backend, run on a GPU machine from the repo root
# with a kopt built in BUILD (default build/): devices, the planted-fault
# suite, and the copy / cuBLAS ceilings. Logs and JSON go to OUT (default .).
BUILD=${BUILD:-build}
OUT=${OUT:-.}
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
echo "== kopt devices"
"$BUILD/kopt" devices || { echo "no GPU: this script measures on one" >&2; exit 1; }
echo "== planted faults"
KOPT_FAULTS_OUT="$OUT/faults.json" "$BUILD/kopt" script tests/lua/test_gpu_faults.lua
echo "faults rc=$?"
echo "== ceilings"
"$BUILD/bench_ref" copy 1073741824 | tee "$OUT/ceilings.jsonl"
"$BUILD/bench_ref" gemm 4096 4096 4096 | tee -a "$OUT/ceilings.jsonl"
