#!/bin/bash
# check 3 with kept inputs: honest mandelbrot cases on the old and new build, then the cheats and the honest suite
export KOPT_DB=off KOPT_METHODS=off KOPT_EXPERIENCE= KOPT_SOURCE_DIR=$PWD KOPT_LUA_DEV=$PWD LUA_PATH="tests/lua/?.lua;;" XDG_CACHE_HOME=/tmp/xc XDG_DATA_HOME=/tmp/xd
o=$OUT/s29; mkdir -p $o
for b in exp/kopt_old kopt; do
  s=$(date +%s)
  HONEST_CASES=mandelbrot_mc,mandelbrot_axis HONEST_PROBE=0 ./build-rel/$b script tests/honest/run.lua > $o/honest_mandel_$(basename $b).txt 2>&1
  echo "honest mandel $b rc=$? $(( $(date +%s) - s )) s" | tee -a $o/summary.txt
done
bash build-rel/gpu_tests.sh $o test_gpu_cheats test_gpu_honest
