#!/bin/sh
# One GPU call for the Hopper matmul (docs/PERFORMANCE.md, "Hopper matmul"):
# per shape, cuBLAS on the same layout (C = A B^T, B stored N x K) and kopt
# over the whole space of specs/matmul_f16_sm90.json in the same session,
# then MCGS with a budget of BUDGET (default 50) on 4096^3. From the repo
# root on an H100/H200 with KOPT (default build/kopt) and BENCH_REF (default
# build/bench_ref, tools/build_bench_ref.sh). Everything lands in OUT:
# cublas.jsonl, sm90_<shape>.txt, summary.txt.
KOPT=${KOPT:-build/kopt}
BENCH_REF=${BENCH_REF:-build/bench_ref}
OUT=${OUT:-.}
BUDGET=${BUDGET:-50}
SHAPES=${SHAPES:-"4096,4096,4096 8192,8192,8192 4096,4096,1024 8192,1024,8192"}
R=${R:-/tmp/kopt-sm90}
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT"
"$KOPT" devices || exit 1
summary() { # run-folder label cublas-ms
	python3 - "$1/events.jsonl" "$2" "$3" <<'PY'
import json, sys, collections
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev = [e for e in ev if e.get("event") == "eval"]
res = lambda e: e.get("result") or {}
ok = sorted((res(e)["time_ms"], json.dumps(e.get("config"), sort_keys=True)) for e in ev if res(e).get("status") == "ok")
cub = float(sys.argv[3])
st = dict(collections.Counter(res(e).get("status") for e in ev))
print("%s: %d evaluations %s; best %.4f ms, cuBLAS %.4f ms, ratio %.3f; %s" % (
    sys.argv[2], len(ev), st, ok[0][0], cub, cub / ok[0][0], ok[0][1]))
for t, k in ok[1:4]:
    print("   next %.4f ms (%.3f of cuBLAS) %s" % (t, cub / t, k))
PY
}
for shape in $SHAPES; do
	set -- $(echo "$shape" | tr , ' ')
	label="${1}x${2}x${3}"
	cub=$("$BENCH_REF" gemm_nt "$1" "$2" "$3" | tee -a "$OUT/cublas.jsonl" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
	spec=specs/.sm90_$label.json
	sed "s/\"M\": 4096, \"N\": 4096, \"K\": 4096/\"M\": $1, \"N\": $2, \"K\": $3/" specs/matmul_f16_sm90.json >"$spec"
	t0=$(date +%s)
	"$KOPT" exhaustive "$spec" --out "$R/$label" -q >"$OUT/sm90_$label.txt" 2>&1
	echo "exhaustive $label rc=$? wall=$(($(date +%s) - t0)) s"
	summary "$R/$label" "exhaustive $label" "$cub" | tee -a "$OUT/summary.txt"
	if [ "$label" = 4096x4096x4096 ]; then
		"$KOPT" mcgs "$spec" --budget "$BUDGET" --out "$R/mcgs" -q >"$OUT/sm90_mcgs.txt" 2>&1
		summary "$R/mcgs" "mcgs --budget $BUDGET $label" "$cub" | tee -a "$OUT/summary.txt"
	fi
	rm -f "$spec"
done
