#!/bin/sh
# The five examples for Kernel Tuner users (examples/kt/, docs/KERNEL_TUNER.md)
# on a GPU machine, from the repo root, with kopt in KOPT (default
# build/kopt); each tuned by the random strategy with a small budget, so the
# whole script takes under three minutes. Per example: OUT/kt_<name>.txt (the
# summary) and one line in OUT/kt_summary.txt: the winner, its time, whether
# it is correct (its status, checked against the reference in the worker),
# and the spec's metrics.
#   KOPT=.carry/kopt-new OUT=/tmp/kt sh tools/device_kt.sh
KOPT=${KOPT:-build/kopt}
OUT=${OUT:-.}
R=${R:-/tmp/kopt-kt}
BUDGET=${BUDGET:-24}
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT"
"$KOPT" devices || exit 1
: >"$OUT/kt_summary.txt"
for e in stencil:examples/kt/stencil/stencil.json reduce:examples/kt/reduce/reduce2.json \
	spmv:examples/kt/spmv/spmv.json template:examples/kt/template/axpy.json \
	filter:examples/kt/filter/conv1d.json; do
	name=${e%%:*}
	spec=${e#*:}
	t0=$(date +%s)
	"$KOPT" random "$spec" --budget "$BUDGET" --seed 1 --no-db -q --out "$R/$name" >"$OUT/kt_$name.txt" 2>&1
	rc=$?
	t1=$(date +%s)
	"$KOPT" script /dev/stdin "$R/$name" "$name" "$rc" "$((t1 - t0))" >>"$OUT/kt_summary.txt" <<'LUA'
local dir, name, rc, wall = arg[1], arg[2], arg[3], arg[4]
local json = require("kopt.json")
local best = json.read_file(dir .. "/best/result.json")
local config = json.read_file(dir .. "/best/config.json")
if not best or not config then
  print(string.format("%-8s rc=%s no winner (%ss)", name, rc, wall))
  return 0
end
local r, parts, keys = best.result, {}, {}
for k in pairs(config) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(config[k]) end
local metrics = {}
for k, v in pairs(r.user_metrics or {}) do metrics[#metrics + 1] = string.format("%s %.4g", k, v) end
table.sort(metrics)
print(string.format("%-8s rc=%s winner %s  time %.4g ms  correct %s (rel_l2 %.2g)  %s  (%ss)", name, rc,
  table.concat(parts, ","), r.time_ms or -1, r.status == "ok" and "yes" or "no (" .. tostring(r.status) .. ")",
  r.err and r.err.rel_l2 or -1, table.concat(metrics, ", "), wall))
return 0
LUA
done
cat "$OUT/kt_summary.txt"
