#!/bin/sh
# One GPU call for the LLM-edit figures of docs/EXPERTS.md ("Kernel edits on
# a GPU"). From the repo root on a machine with an NVIDIA GPU, with kopt built
# in KOPT (default build/kopt); everything lands in OUT (default .):
#  1. the scripted server (tests/llm_server.py) on loopback
#  2. kopt experts on examples/edits/row_sum.json (one thread per row,
#     uncoalesced: the fast version needs a code edit), once per reply format
#     and flow: the edit found first time, a compile error repaired, a wrong
#     result repaired, a repair that never converges; --artifacts all
#  3. the knob-only baseline (exhaustive over the block size), for the speedup
#  4. MCGS with expert moves (--opt moves=rules,experts): edits as graph nodes
#     whose children edit again
# Per run: OUT/<label>.txt (summary), and OUT/edits_summary.txt with the best
# time, the winner's origin (expert, method, repair), the repair lines of the
# trace and the variant folders.
KOPT=${KOPT:-build/kopt}
OUT=${OUT:-.}
R=${R:-/tmp/kopt-edits}
SPEC=examples/edits/row_sum.json
set -u
# Measurements, not memories: no run here is answered by the experience database.
export KOPT_DB=${KOPT_DB:-off}
rm -rf "$R"; mkdir -p "$R" "$OUT"
"$KOPT" devices || exit 1
. tools/scripted_server.sh
start_scripted_server "$R" 3000 || exit 1
summary() { # label
	d=$R/$1
	{
		echo "== $1"
		grep -m1 -E '^  best' "$OUT/$1.txt"
		grep -m1 -E 'evaluations' "$OUT/$1.txt"
		grep -m1 -E '^  LLM' "$OUT/$1.txt"
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("  winner origin:", json.dumps(r.get("origin")))' \
			"$d/best/result.json" 2>/dev/null
		grep -E 'repair|edit does not apply|edit rejected' "$d/trace.md" | head -20
		ls "$d/variants" 2>/dev/null | sed 's/^/  variant /'
	} >>"$OUT/edits_summary.txt"
}
: >"$OUT/edits_summary.txt"
# 2. every format, and every flow with the diff format (ONLY=mcgs: step 4 alone)
[ "${ONLY:-}" = mcgs ] || for sc in g_diff_ok g_nohdr_ok g_fenced_ok g_crlf_ok g_sr_ok g_source_ok \
	g_diff_compile g_diff_wrong g_sr_compile g_source_wrong g_diff_never; do
	KOPT_LLM_BASE_URL=$(base "$sc") KOPT_LLM_MODEL=scripted \
		"$KOPT" experts "$SPEC" --out "$R/$sc" --artifacts all -v \
		--opt iterations=4 --opt per_expert=1 --opt repairs=2 >"$OUT/$sc.txt" 2>"$OUT/$sc.err"
	echo "$sc rc=$?"
	summary "$sc"
done
# 3. knobs only
if [ "${ONLY:-}" != mcgs ]; then
	"$KOPT" exhaustive "$SPEC" --out "$R/knobs_only" -q >"$OUT/knobs_only.txt" 2>&1
	echo "knobs_only rc=$?"
	summary knobs_only
fi
# 4. MCGS with expert moves: edits are nodes, their children may edit again;
# a broken edit (g_diff_compile) gets its repair turn
for sc in g_diff_ok g_diff_compile; do
	label=mcgs_experts
	[ "$sc" = g_diff_ok ] || label=mcgs_$sc
	KOPT_LLM_BASE_URL=$(base "$sc") KOPT_LLM_MODEL=scripted KOPT_EXPERTS=throughput \
		"$KOPT" mcgs "$SPEC" --out "$R/$label" --budget 30 --opt moves=rules,experts --artifacts all -v \
		>"$OUT/$label.txt" 2>"$OUT/$label.err"
	echo "$label rc=$?"
	summary "$label"
	python3 - "$R/$label/events.jsonl" >>"$OUT/edits_summary.txt" <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev = [e for e in ev if e.get("event") == "eval"]
patched = [e for e in ev if e.get("patch")]
st = {}
for e in patched:
    s = (e.get("result") or {}).get("status")
    st[s] = st.get(s, 0) + 1
print("  mcgs: %d evaluations, %d with an edited source (%s), %d distinct sources" % (
    len(ev), len(patched), st, len({e["key"].split("#")[1] for e in patched})))
EOF
done
kill "$SERVER" 2>/dev/null
cat "$OUT/edits_summary.txt"
