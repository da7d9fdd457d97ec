#!/bin/bash
# the range probe on a GPU: the test, the sanitizer test (check_under now shares check_variants),
# whole runs on the cheat (note and strict), shipped specs and the suite for false alarms
export KOPT_LUA_DEV=$PWD KOPT_DB=off KOPT_METHODS=off KOPT_SOURCE_DIR=$PWD
B=$PWD/build-rel/kopt
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
$B script tests/lua/test_gpu_range_probe.lua > $OUT/test_gpu_range_probe.txt 2>&1; echo "test_gpu_range_probe rc=$?"
$B script tests/lua/test_gpu_sanitize.lua > $OUT/test_gpu_sanitize.txt 2>&1; echo "test_gpu_sanitize rc=$?"
$B exhaustive tests/cheats/fastmath_range.json --out /tmp/r1 --no-db > $OUT/run_note.txt 2>&1; echo "note rc=$? $(cat /tmp/r1/best/config.json)"
$B exhaustive tests/cheats/fastmath_range.json --out /tmp/r2 --no-db --range-probe strict > $OUT/run_strict.txt 2>&1; echo "strict rc=$? $(cat /tmp/r2/best/config.json)"
grep -h range_probe /tmp/r1/events.jsonl /tmp/r2/events.jsonl | cut -c1-400
echo "elapsed $(( $(date +%s) - t0 )) s"
for s in softmax reduce transpose convolution gemm_f32 matmul_f16 matmul_f16_wide matmul_f16_sm90; do
  timeout 100 $B random specs/$s.json --budget 5 --out /tmp/s_$s --no-db -q > /tmp/o_$s.txt 2>&1
  echo "$s rc=$? $(grep -h 'range probe' /tmp/o_$s.txt | head -3)"
done | tee $OUT/specs.txt
echo "elapsed $(( $(date +%s) - t0 )) s"
timeout $(( 520 - ($(date +%s) - t0) )) $B suite random --budget 3 --no-db -q --out /tmp/suite > $OUT/suite.txt 2>&1; echo "suite rc=$?"
grep -h "range probe\|^kopt: random on" $OUT/suite.txt | cut -c1-300 | head -80
echo "elapsed $(( $(date +%s) - t0 )) s"
