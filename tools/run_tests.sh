#!/usr/bin/env bash
# The README's second command: installs what is missing, builds kopt and its
# tests in build/ and runs every test (GPU tests report "skipped" on a
# machine without a GPU). Extra arguments go to the CMake configure step;
# CI (.ci/run) passes -DKOPT_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/install_deps.sh
kopt_install_deps
cmake -S . -B build "$@"
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
