#!/bin/sh
# Runs kopt's random strategy (12 evaluations, no experience database) on
# each spec of this folder. KOPT: the kopt binary; OUT: a folder for the
# runs (OUT/<name>/) and their logs (OUT/<name>.log).
# Prints one block per spec: its name, kopt's exit code, the summary's
# "best:" line (and its evaluation count line).
set -u
: "${KOPT:?set KOPT to the kopt binary}"
: "${OUT:?set OUT to an output folder}"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
for name in topk_rows scan_lookback tma_transpose dp4a_gemv bgemm_bf16 gemm_bias_gelu spmv_gen softmax1d_pipe; do
	spec="$HERE/$name/$name.json"
	log="$OUT/$name.log"
	"$KOPT" random "$spec" --budget 12 --no-db --out "$OUT/$name" >"$log" 2>&1
	rc=$?
	best=$(grep -m1 '^  best:' "$log" || echo "  best: (none: see $log)")
	evals=$(grep -m1 'evaluations (' "$log" || true)
	printf '%s\texit %d\n%s\n' "$name" "$rc" "$best"
	[ -n "$evals" ] && printf '%s\n' "$evals"
	# the spec's notes and warnings, and the first failure message, if any
	grep -E '^kopt: .*(warning|note):' "$log" | head -3
	[ "$rc" -ne 0 ] && tail -3 "$log"
done
exit 0
