#!/bin/sh
# One GPU call for the memory-bound figures (docs/PERFORMANCE.md,
# "Memory-bound kernels"): the device-to-device copy bandwidth, PyTorch eager
# and torch.compile on each spec's own shapes (tools/suite_baselines.py), and
# kopt over the whole space of each spec, in the same session. From the repo
# root on a GPU machine with KOPT (default build/kopt) and BENCH_REF (default
# build/bench_ref, tools/build_bench_ref.sh):
#
#   KOPT=build/kopt BENCH_REF=build/bench_ref OUT=/tmp/mem sh tools/device_memory.sh
#
# Writes OUT/copy.jsonl, OUT/baselines_*.json, OUT/<spec>.txt (kopt's summary
# of each run) and OUT/summary.txt: per spec the best kopt time, torch eager
# and torch.compile, kopt's GB/s (the spec's work.bytes) and its fraction of
# the copy bandwidth.
KOPT=${KOPT:-build/kopt}
BENCH_REF=${BENCH_REF:-build/bench_ref}
OUT=${OUT:-.}
R=${R:-/tmp/kopt-memory}
# specs/suite/.softmax_8192.json: the suite's softmax kernel (rowwise.cu, the
# row kept in registers with CACHE=1) on specs/softmax.json's 8192 x 8192,
# written here from specs/suite/softmax.json and removed at the end.
SPECS=${SPECS:-"specs/softmax.json specs/suite/.softmax_8192.json specs/transpose.json specs/suite/softmax.json specs/suite/rmsnorm.json specs/suite/layernorm.json"}
set -u
sed -e 's/"B": 4096, "D": 16384/"B": 8192, "D": 8192/' -e 's/-DNCOLS=16384/-DNCOLS=8192/' \
	-e 's/"name": "softmax"/"name": "softmax_rowwise_8192"/' specs/suite/softmax.json >specs/suite/.softmax_8192.json
trap 'rm -f specs/suite/.softmax_8192.json' EXIT
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT"
"$KOPT" devices || exit 1
"$BENCH_REF" copy 1073741824 | tee "$OUT/copy.jsonl"
# torch baselines, grouped by the folder each spec lives in
for dir in $(for s in $SPECS; do dirname "$s"; done | sort -u); do
	names=$(for s in $SPECS; do [ "$(dirname "$s")" = "$dir" ] && python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$s"; done | paste -sd, -)
	PYTHONUNBUFFERED=1 python3 tools/suite_baselines.py --specs "$dir" --only "$names" \
		--out "$OUT/baselines_$(echo "$dir" | tr / _).json"
done
for s in $SPECS; do
	name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$s")
	t0=$(date +%s)
	"$KOPT" exhaustive "$s" --out "$R/$name" -q >"$OUT/$name.txt" 2>&1
	echo "exhaustive $name rc=$? wall=$(($(date +%s) - t0)) s"
done
python3 - "$OUT" "$R" $SPECS <<'PY' | tee "$OUT/summary.txt"
import collections, glob, json, math, os, sys
out, runs, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
copy = json.load(open(os.path.join(out, "copy.jsonl")))["gbps"]
base = {}
for f in glob.glob(os.path.join(out, "baselines_*.json")):
    base.update(json.load(open(f))["problems"])
helpers = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}
print("copy bandwidth %.0f GB/s" % copy)
print("%-20s %10s %10s %10s %8s %8s %7s  %s" % ("spec", "kopt ms", "eager ms", "compile ms", "x eager", "x compile", "of copy", "statuses, best config"))
for path in specs:
    spec = json.load(open(path))
    name = spec["name"]
    bytes_ = eval(spec["work"]["bytes"], helpers, dict(spec.get("problem", {})))
    ev = [json.loads(l) for l in open(os.path.join(runs, name, "events.jsonl")) if l.strip()]
    ev = [e for e in ev if e.get("event") == "eval"]
    res = lambda e: e.get("result") or {}
    ok = sorted(((res(e)["time_ms"], e.get("config")) for e in ev if res(e).get("status") == "ok"), key=lambda p: p[0])
    st = dict(collections.Counter(res(e).get("status") for e in ev))
    b = base.get(name, {})
    t = ok[0][0] if ok else float("nan")
    fmt = lambda v: "%10.4f" % v if v else "%10s" % "-"
    ratio = lambda v: "%8.2f" % (v / t) if v and ok else "%8s" % "-"
    gbps = bytes_ / (t * 1e-3) / 1e9 if ok else float("nan")
    print("%-20s %10.4f %s %s %s %s %7.2f  %s %s" % (name, t, fmt(b.get("eager_ms")), fmt(b.get("compile_ms")),
          ratio(b.get("eager_ms")), ratio(b.get("compile_ms")), gbps / copy, st, json.dumps(ok[0][1] if ok else None, sort_keys=True)))
PY
