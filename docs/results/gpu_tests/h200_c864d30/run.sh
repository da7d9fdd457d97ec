#!/bin/bash
# GPU checks of the session's changes: the GPU tests, a real run, a kill -9 and its resume
export KOPT=$PWD/build-rel/kopt KOPT_SOURCE_DIR=$PWD KOPT_DB=off KOPT_METHODS=off
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in tests/lua/test_gpu_*.lua; do
  s=$(date +%s)
  timeout 400 $KOPT script $t > $OUT/$(basename $t .lua).log 2>&1; rc=$?
  echo "$(basename $t) rc=$rc $(( $(date +%s) - s ))s $(tail -1 $OUT/$(basename $t .lua).log)"
done
$KOPT mcgs specs/softmax.json --budget 40 --out $OUT/softmax -q 2>&1 | tail -4
KOPT_TEST_SIGKILL_AFTER=12 $KOPT mcgs specs/transpose.json --budget 30 --seed 4 --out $OUT/tr -q > /dev/null 2>&1; echo "killed rc=$?"
$KOPT mcgs specs/transpose.json --budget 30 --seed 4 --out $OUT/tr --resume -q 2>&1 | tail -3
python3 - <<'PY'
import json,os
ev=[json.loads(l) for l in open(os.environ['OUT']+'/tr/events.jsonl') if l.strip()]
ns=[e['n'] for e in ev if e.get('event')=='eval']
print('resumed transpose: evals', len(ns), 'unique n', len(set(ns)), 'max n', max(ns))
PY
