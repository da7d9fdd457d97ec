#!/bin/bash
# The L2 flush before and after it swept with evict_last (kopt 4-something):
# the same short runs (seed 1, 6 configs each, no finalists, sanitizer or
# probe) with the binary before the change (build-rel/old/kopt) and after
# (build-rel/kopt), alternated twice; per config, the median time of each.
export KOPT_SOURCE_DIR=$PWD KOPT_DB=off KOPT_METHODS=off
for spec in ${SPECS:-specs/transpose.json specs/softmax.json specs/reduce.json specs/matmul_f16_sm90.json tests/cheats/l2_pin.json}; do
  for round in 1 2; do
    for which in old new; do
      bin=build-rel/kopt; [ $which = old ] && bin=build-rel/old/kopt
      out=$OUT/flush/$(basename $spec .json)_${which}_$round
      KOPT_LUA_DEV=$PWD $bin random $spec --budget 6 --seed 1 --out $out -q --no-db --finalists 1 --sanitize none --range-probe off > /dev/null 2>&1
    done
  done
done
python3 - <<'PY'
import json, os, glob, statistics
root = os.environ['OUT'] + '/flush'
rows = {}
for d in sorted(glob.glob(root + '/*')):
    name, which, rnd = os.path.basename(d).rsplit('_', 2)
    for l in open(d + '/events.jsonl'):
        e = json.loads(l)
        if e.get('event') == 'eval' and e['result'].get('status') == 'ok':
            rows.setdefault((name, e['key']), {}).setdefault(which, []).append(e['result']['time_ms'])
print('%-16s %-40s %10s %10s %7s' % ('spec', 'config', 'old ms', 'new ms', 'new/old'))
ratios = []
for (name, key), v in sorted(rows.items()):
    if 'old' in v and 'new' in v:
        o, n = statistics.median(v['old']), statistics.median(v['new'])
        ratios.append(n / o)
        print('%-16s %-40s %10.5f %10.5f %7.3f' % (name, key[:40], o, n, n / o))
print('median new/old over %d configs: %.3f' % (len(ratios), statistics.median(ratios)))
PY
