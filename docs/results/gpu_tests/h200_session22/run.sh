#!/bin/bash
# GPU checks of the session's changes: every GPU test, then the red-team
# cheats of this session (redteam/run.lua over tests/cheats, one line per
# cheat). Run from the repository root with $OUT set.
export KOPT=$PWD/build-rel/kopt KOPT_SOURCE_DIR=$PWD KOPT_DB=off KOPT_METHODS=off KOPT_LUA_DEV=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in tests/lua/test_gpu_*.lua; do
  s=$(date +%s)
  timeout 300 $KOPT script $t > $OUT/$(basename $t .lua).txt 2>&1; rc=$?
  echo "$(basename $t) rc=$rc $(( $(date +%s) - s ))s $(tail -1 $OUT/$(basename $t .lua).txt)"
done
s=$(date +%s)
timeout 200 $KOPT script docs/results/gpu_tests/h200_session22/redteam/run.lua > $OUT/redteam3_after.txt 2>&1
echo "redteam rc=$? $(( $(date +%s) - s ))s"; tail -32 $OUT/redteam3_after.txt
