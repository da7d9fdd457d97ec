#!/bin/bash
# the GPU tests not run by gpu1.sh, on the session's later build
export KOPT_DB=off KOPT_METHODS=off KOPT_EXPERIENCE= XDG_CACHE_HOME=/tmp/xc XDG_DATA_HOME=/tmp/xd
bash build-rel/gpu_tests.sh $OUT/s29b test_gpu_launch test_gpu_faults test_gpu_upload test_gpu_sanitize test_gpu_range_probe test_gpu_signals test_gpu_byok test_gpu_trivial test_gpu_kt
