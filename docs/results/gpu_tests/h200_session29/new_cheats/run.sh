#!/bin/bash
# four new cheats on the session-start build and on the build with the fixes; then cheats, honest, kt, range probe
export KOPT_DB=off KOPT_METHODS=off KOPT_EXPERIENCE= KOPT_SOURCE_DIR=$PWD KOPT_LUA_DEV=$PWD LUA_PATH="tests/lua/?.lua;;" XDG_CACHE_HOME=/tmp/xc XDG_DATA_HOME=/tmp/xd H7_DIR=$PWD/build-rel/exp/h7
o=$OUT/s29c; mkdir -p $o
for b in exp/kopt_old kopt; do
  s=$(date +%s)
  ./build-rel/$b script build-rel/exp/h7/run.lua > $o/new_cheats_$(basename $b).txt 2>&1
  echo "new cheats $b rc=$? $(( $(date +%s) - s )) s" | tee -a $o/summary.txt
done
bash build-rel/gpu_tests.sh $o test_gpu_honest test_gpu_cheats test_gpu_range_probe test_gpu_kt
