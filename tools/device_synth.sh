#!/bin/sh
# One GPU call for the synthesis figures of docs/SYNTHESIS.md. From the repo
# root on a machine with an NVIDIA GPU, with kopt built in KOPT (default
# build/kopt); everything lands in OUT (default .). Under two minutes:
#  1. the scripted server (tests/llm_server.py) on loopback
#  2. kopt synthesize on examples/synth/row_softmax.json (no kernel, a naive
#     one-thread-per-row reference): s_flow writes a kernel that does not
#     compile, then one that computes the wrong answer, then a correct one,
#     then (told its speed) a faster one; the best is tuned exhaustively
#  3. s_never: every attempt fails to compile; the reference stands
#  4. offline (no LLM): the templates chosen by the problem's shape, on the
#     row softmax and on examples/synth/gelu.json (the coarsened reference)
# Per run: OUT/<label>.log (kopt's summary and its -v progress), and
# OUT/synth_summary.txt: the attempts with their statuses, the hints of
# trace.md, the winner (its origin and knobs) and its time against the
# reference's.
KOPT=${KOPT:-build/kopt}
OUT=${OUT:-.}
R=${R:-/tmp/kopt-synth}
set -u
rm -rf "$R"; mkdir -p "$R" "$OUT"
export KOPT_DB=off
"$KOPT" devices || exit 1
. tools/scripted_server.sh
start_scripted_server "$R" 600 || exit 1
summary() { # label
	d=$R/$1
	{
		echo "== $1"
		grep -m1 -E '^  best' "$OUT/$1.log"
		grep -E '^  (synthesis|winner|tuning|no attempt|LLM)' "$OUT/$1.log"
		python3 - "$d/events.jsonl" <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [e for e in ev if e.get("event") == "eval"]
ref = next((e for e in evals if (e.get("origin") or {}).get("method") == "reference"), None)
ref_ms = ref and ref["result"].get("time_ms")
print("  reference: %s ms" % ref_ms)
for e in evals:
    o = e.get("origin") or {}
    if o.get("attempt") and o.get("expert") != "tune":
        r = e["result"]
        print("  attempt %s (%s/%s): %s%s  [%s]" % (o["attempt"], o.get("expert"), o.get("method"), r["status"],
              " %.4g ms" % r["time_ms"] if r.get("time_ms") else "", o.get("knobs")))
tuned = [e for e in evals if (e.get("origin") or {}).get("expert") == "tune"]
ok = [e for e in evals if e["result"]["status"] == "ok" and e["result"].get("time_ms")]
if tuned:
    print("  tuning: %d evaluations" % len(tuned))
if ok:
    b = min(ok, key=lambda e: e["result"]["time_ms"])
    o = b.get("origin") or {}
    t = b["result"]["time_ms"]
    print("  winner: %s/%s [%s] %.4g ms%s" % (o.get("expert"), o.get("method"), o.get("knobs"), t,
          ", %.2fx the reference" % (ref_ms / t) if ref_ms else ""))
EOF
		# each hint with its first lines (NVRTC's log, the verifier's message)
		awk '/^- \[/ { p = /hint for attempt|hears \(no attempt follows\)|no attempt was correct/ ? 5 : 0 }
			!/^(- \[|    )/ { p = 0 }
			p > 0 { print substr($0, 1, 300); p-- }' "$d/trace.md"
	} >>"$OUT/synth_summary.txt"
}
: >"$OUT/synth_summary.txt"
SPEC=examples/synth/row_softmax.json
for sc in s_flow s_never; do
	KOPT_LLM_BASE_URL=$(base "$sc") KOPT_LLM_MODEL=scripted \
		"$KOPT" synthesize "$SPEC" --out "$R/$sc" --budget 40 -v \
		--opt attempts=4 --opt improve=1 --opt tune=exhaustive >"$OUT/$sc.log" 2>&1
	echo "$sc rc=$?"
	summary "$sc"
done
"$KOPT" synthesize "$SPEC" --out "$R/templates_softmax" --budget 20 -v --opt llm=off \
	>"$OUT/templates_softmax.log" 2>&1
echo "templates_softmax rc=$?"
summary templates_softmax
"$KOPT" synthesize examples/synth/gelu.json --out "$R/templates_gelu" --budget 40 -v --opt llm=off \
	>"$OUT/templates_gelu.log" 2>&1
echo "templates_gelu rc=$?"
summary templates_gelu
cp "$R/s_flow/trace.md" "$OUT/s_flow.trace.md" 2>/dev/null
kill "$SERVER" 2>/dev/null
cat "$OUT/synth_summary.txt"
