#!/bin/bash
export KOPT=$PWD/build-rel/kopt KOPT_SOURCE_DIR=$PWD KOPT_DB=off KOPT_METHODS=off
for t in tests/lua/test_gpu_faults.lua tests/lua/test_gpu_launch.lua tests/lua/test_gpu_range_probe.lua tests/lua/test_gpu_byok.lua; do
  s=$(date +%s); timeout 300 $KOPT script $t > $OUT/$(basename $t .lua).log 2>&1; rc=$?
  echo "$(basename $t) rc=$rc $(( $(date +%s) - s ))s $(tail -1 $OUT/$(basename $t .lua).log)"
done
$KOPT mcgs specs/convolution.json --budget 40 --out $OUT/conv -q 2>&1 | tail -3
KOPT_TEST_SIGKILL_AFTER=10 $KOPT random specs/reduce.json --budget 20 --out $OUT/red -q > /dev/null 2>&1; echo "killed rc=$?"
$KOPT random specs/reduce.json --out $OUT/red --resume -q 2>&1 | grep -E "evaluations|best:"
