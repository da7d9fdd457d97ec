#!/usr/bin/env bash
# The README's first command: installs what is missing, builds kopt in build/
# and tunes the tensor-core matmul for 100 evaluations (on the GPU, or on its
# recorded measurements when there is none). Each call writes a new run
# folder, runs/<spec>-<time>, so it can be run again and in any order
# with tools/run_tests.sh. Extra arguments go to kopt (e.g. --budget 300).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install_deps.sh
kopt_install_deps
cmake -S . -B build
cmake --build build -j"$(nproc)"
# The Hopper kernel (wgmma, TMA: specs/matmul_f16_sm90.json) where it runs,
# or where no GPU is attached (then on its H200 recording); the portable
# mma.sync kernel on any other GPU.
spec=specs/matmul_f16_sm90.json
if devices=$(./build/kopt devices 2>/dev/null) && ! grep -q 'cc 9\.0' <<<"$devices"; then
	spec=specs/matmul_f16.json
fi
name=$(basename "$spec" .json)
./build/kopt mcgs "$spec" --budget 100 --out "runs/$name-$(date +%Y%m%d-%H%M%S)" "$@"
