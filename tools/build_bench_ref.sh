#!/bin/sh
# Builds tools/bench_ref (cuBLAS and copy ceilings) into BUILD_DIR (default build/).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build}
cuda=${CUDA_HOME:-/usr/local/cuda}
${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I"$root/core" -I"$root/core/worker" -I"$cuda/include" \
	"$root/tools/bench_ref.c" "$root/core/gpu/cuda_driver.c" -ldl -lm -o "$out/bench_ref"
echo "$out/bench_ref"
