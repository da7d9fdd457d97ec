#!/bin/bash
# the range probe on a GPU, second pass (relative tolerances only): the cheat
# test again, the f16 matmul specs that the absolute bound falsely flagged,
# and the suite problems the first pass did not reach (sanitizer off to save
# time; the event log of one spec kept for the probe's timing)
export KOPT_LUA_DEV=$PWD KOPT_DB=off KOPT_METHODS=off KOPT_SOURCE_DIR=$PWD
B=$PWD/build-rel/kopt
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
$B script tests/lua/test_gpu_range_probe.lua > $OUT/test_gpu_range_probe.txt 2>&1; echo "test_gpu_range_probe rc=$?"
for s in matmul_f16 matmul_f16_wide matmul_f16_sm90 transpose; do
  timeout 150 $B random specs/$s.json --budget 5 --out /tmp/s_$s --no-db -q --sanitize none > /tmp/o_$s.txt 2>&1
  echo "$s rc=$?: $(grep -h 'range probe' /tmp/o_$s.txt | head -3)"
done | tee $OUT/specs.txt
echo "elapsed $(( $(date +%s) - t0 )) s"
timeout $(( 560 - ($(date +%s) - t0) )) $B suite random --budget 3 --no-db -q --sanitize none --out /tmp/suite \
  --only log_softmax,matmul_batched,matmul_square,matmul_tall_skinny,matmul_transposed_b,max_dim,mean_dim,min_dim,relu,rmsnorm,silu,softmax,sum_dim,swiglu \
  > $OUT/suite.txt 2>&1; echo "suite rc=$?"
grep -h "range probe\|^kopt: random on" $OUT/suite.txt | cut -c1-300 | head -80
for d in /tmp/suite/*/; do echo "$d $(grep -c range_probe $d/events.jsonl 2>/dev/null)"; done > $OUT/suite_dirs.txt
cp /tmp/s_matmul_f16/events.jsonl $OUT/events_matmul_f16.jsonl 2>/dev/null
echo "elapsed $(( $(date +%s) - t0 )) s"
