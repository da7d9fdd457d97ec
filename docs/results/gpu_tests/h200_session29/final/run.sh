#!/bin/bash
# the final worker build: the cheats (three new), the range probe (probe_spin), the honest kernels
export KOPT_DB=off KOPT_METHODS=off KOPT_EXPERIENCE= XDG_CACHE_HOME=/tmp/xc XDG_DATA_HOME=/tmp/xd
bash build-rel/gpu_tests.sh $OUT/s29d test_gpu_cheats test_gpu_range_probe test_gpu_honest
