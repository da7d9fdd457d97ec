#!/bin/bash
# the range probe on a GPU, third pass: the worker draws the scaled inputs
# itself (a<i>.scale). The cheat test, the sanitizer test (same
# check_variants), whole runs on the cheat, shipped specs with the probe's
# seconds, and all 22 suite problems (sanitizer off to save time).
export KOPT_LUA_DEV=$PWD KOPT_DB=off KOPT_METHODS=off KOPT_SOURCE_DIR=$PWD
B=$PWD/build-rel/kopt
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$EPOCHREALTIME
$B script tests/lua/test_gpu_range_probe.lua > $OUT/test_gpu_range_probe.txt 2>&1; echo "test_gpu_range_probe rc=$?"
$B script tests/lua/test_gpu_sanitize.lua > $OUT/test_gpu_sanitize.txt 2>&1; echo "test_gpu_sanitize rc=$?"
$B exhaustive tests/cheats/fastmath_range.json --out /tmp/r1 --no-db --sanitize none > $OUT/run_note.txt 2>&1; echo "note rc=$? $(cat /tmp/r1/best/config.json)"
$B exhaustive tests/cheats/fastmath_range.json --out /tmp/r2 --no-db --sanitize none --range-probe strict > $OUT/run_strict.txt 2>&1; echo "strict rc=$? $(cat /tmp/r2/best/config.json)"
# each spec twice, probe off and on: the difference is the probe's time
for s in matmul_f16 matmul_f16_sm90 transpose softmax reduce gemm_f32 convolution; do
  a=$EPOCHREALTIME
  timeout 120 $B random specs/$s.json --budget 3 --out /tmp/off_$s --no-db -q --sanitize none --range-probe off > /dev/null 2>&1
  b=$EPOCHREALTIME
  timeout 120 $B random specs/$s.json --budget 3 --out /tmp/on_$s --no-db -q --sanitize none > /tmp/o_$s.txt 2>&1
  rc=$?; c=$EPOCHREALTIME
  python3 -c "import sys; a,b,c=map(float,sys.argv[1:4]); print('%-16s rc=%s  run %.1f s, with the probe %.1f s (+%.1f s)' % (sys.argv[4], sys.argv[5], b-a, c-b, (c-b)-(b-a)))" $a $b $c $s $rc
  grep -h 'range probe' /tmp/o_$s.txt | head -3
done | tee $OUT/specs.txt
timeout 300 $B suite random --budget 2 --no-db -q --sanitize none --out /tmp/suite > $OUT/suite.txt 2>&1; echo "suite rc=$?"
grep -h "range probe\|^kopt: random on" $OUT/suite.txt | cut -c1-300 | head -80
python3 -c "import sys,time; print('elapsed %.0f s' % (float(sys.argv[2]) - float(sys.argv[1])))" $t0 $EPOCHREALTIME
