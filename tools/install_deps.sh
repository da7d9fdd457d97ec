#!/usr/bin/env bash
# Installs the Debian 12 packages kopt is built and tested with, only those
# that are missing: with sudo when not root, plainly when root. The CUDA
# toolkit is not a Debian package: it must be there already (/usr/local/cuda,
# or nvcc on PATH). Sourced by tools/main_job.sh and tools/run_tests.sh; may
# also be run by itself.
set -euo pipefail

KOPT_PACKAGES=(build-essential cmake pkg-config liblua5.4-dev lua-cjson-dev check libsubunit-dev
               libcurl4-openssl-dev libsqlite3-dev python3 lua-check
               libopenmpi-dev openmpi-bin)  # MPI: optional feature (docs/MPI.md), built and tested when present

kopt_install_deps() {
  local missing=() p
  for p in "${KOPT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      if ! command -v sudo >/dev/null; then
        echo "kopt: these packages are missing and sudo is not installed: ${missing[*]} (install them as root)" >&2
        return 1
      fi
      sudo=(sudo)
    fi
    echo "kopt: installing ${missing[*]}" >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
  # CMake finds the toolkit through nvcc; a fresh shell may not have it on PATH.
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if ! command -v nvcc >/dev/null && [ ! -d /usr/local/cuda ] && [ -z "${CUDAToolkit_ROOT:-}" ]; then
    echo "kopt: the CUDA toolkit is missing (no nvcc on PATH, no /usr/local/cuda, no CUDAToolkit_ROOT); install it from NVIDIA's Debian 12 repository" >&2
    return 1
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  kopt_install_deps
fi
