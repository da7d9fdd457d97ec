#!/usr/bin/env bash
# The README's first command: installs what is missing, builds kopt in build/
# and tunes the tensor-core matmul for 100 evaluations (on the GPU, or on its
# recorded measurements when there is none). Each call writes a new run
# folder, runs/matmul_f16-<time>, so it can be run again and in any order
# with tools/run_tests.sh. Extra arguments go to kopt (e.g. --budget 300).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install_deps.sh
kopt_install_deps
cmake -S . -B build
cmake --build build -j"$(nproc)"
./build/kopt mcgs specs/matmul_f16.json --budget 100 --out "runs/matmul_f16-$(date +%Y%m%d-%H%M%S)" "$@"
