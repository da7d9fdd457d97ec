#!/bin/sh
# One GPU call for tool-calling experts (docs/EXPERTS.md, "Tools"): the
# scripted server (tests/llm_server.py) plays a model that calls overview()
# and metrics(), then region(k) of the hottest region, then proposes citing
# the numbers the tools answered (scenario t_tools); and a server that
# rejects `tools` with a 400 (t_notools), which must fall back to the
# single-shot prompt with the overview inlined. Both on the shipped matmul
# (tensor cores, compute) and on softmax (memory-bound), with the experts
# strategy and a small budget. From the repo root on a GPU machine:
#
#   KOPT=.carry/kopt-new OUT=/tmp/tools sh tools/device_tools.sh
#
# Prints (and writes to OUT/tools_summary.txt) per run: the tools called,
# the region and counter data they answered, and whether the reply cited
# it; the run folders (transcripts included) are under OUT/runs. Under 90 s
# on an H100/H200 (a fresh NVRTC cache). DRY=1 runs the same on the H200
# recordings of the two spaces (tests/data/*_h200.t4.json), without a GPU:
# the PTX tools still compile with NVRTC; the counters come from nowhere.
DRY=${DRY:-}
KOPT=${KOPT:-build/kopt}
OUT=${OUT:-.}
set -u
export KOPT_DB=${KOPT_DB:-off} KOPT_METHODS=${KOPT_METHODS:-off}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
R=$OUT/runs
rm -rf "$R"; mkdir -p "$R"
T0=$(date +%s)
if [ -z "$DRY" ]; then
	"$KOPT" devices > "$OUT/devices.txt" 2>&1 || { cat "$OUT/devices.txt"; exit 1; }
fi
. tools/scripted_server.sh
start_scripted_server "$R" 600 || exit 1

run() { # spec scenario
	name=$(basename "$1" .json)-$2
	backend=""
	[ -n "$DRY" ] && backend="--backend replay:tests/data/$(basename "$1" .json)_h200.t4.json"
	KOPT_LLM_BASE_URL=http://127.0.0.1:$PORT/s/$2/v1 KOPT_LLM_MODEL=scripted \
		"$KOPT" experts "$1" $backend --out "$R/$name" --budget 6 -v --opt experts=throughput --opt iterations=1 \
		--opt per_expert=1 --opt init=2 --opt edits=off > "$R/$name.log" 2>&1
	echo "$name exit $?" >> "$R/exits.txt"
}
for spec in specs/matmul_f16.json specs/softmax.json; do
	run "$spec" t_tools
	run "$spec" t_notools
done
kill $SERVER 2>/dev/null

python3 - "$R" > "$OUT/tools_summary.txt" <<'EOF'
import json, os, sys
R = sys.argv[1]
ok_all = True
for name in sorted(os.listdir(R)):
    tr = os.path.join(R, name, "llm_transcript.jsonl")
    if not os.path.isfile(tr):
        continue
    recs = [json.loads(l) for l in open(tr) if l.strip()]
    calls = [r for r in recs if r.get("kind") == "tool"]
    notes = [r["msg"] for r in recs if r.get("kind") == "note"]
    finals = [r for r in recs if r.get("kind") == "reply" and r.get("content")]
    analysis = ""
    if finals:
        try:
            analysis = json.loads(finals[0]["content"]).get("analysis", "")
        except ValueError:
            analysis = ""
    print("== " + name)
    print("tools called: " + (", ".join("%s(%s)%s" % (c["name"], c.get("arguments") or "", "" if c.get("ok") else " ERROR")
                                         for c in calls) or "none"))
    answers = "\n".join(c.get("answer") or "" for c in calls)
    for c in calls:
        first = next((l for l in (c.get("answer") or "").split("\n") if l.startswith(("work per thread", "measured:", "counters", "no hardware", "Hot regions"))), None)
        if first:
            print("  %s answered: %s" % (c["name"], first))
        if c["name"] == "metrics":
            for l in (c.get("answer") or "").split("\n"):
                if l.startswith("  - ") or " = " in l:
                    print("    " + l.strip())
    for n in notes:
        print("note: " + n)
    print("reply analysis: " + analysis)
    if "notools" in name:
        inlined = any(r.get("kind") == "request" and "Static analysis of the current best's compiled PTX" in json.dumps(r.get("body", {}))
                      for r in recs)
        cited = "inlined overview: hot region" in analysis
        ok = inlined and cited and any("rejected tools" in n for n in notes)
        print("fallback: overview inlined %s, reply cites it %s -> %s" % ("yes" if inlined else "no",
              "yes" if cited else "no", "OK" if ok else "FAILED"))
    else:
        parts = [p.split("(): ", 1)[1] for p in analysis.split("; ") if "(): " in p]
        region_cited = any(p.startswith("work per thread") and p in answers for p in parts)
        counters_cited = any(p.startswith(("measured:", "- ")) and p.split(" (turn")[0] in answers for p in parts)
        ok = region_cited and {"overview", "region", "metrics"} <= {c["name"] for c in calls}
        print("reply cites region data: %s; cites measured/counter data: %s -> %s" % (
            "yes" if region_cited else "no", "yes" if counters_cited else "no", "OK" if ok else "FAILED"))
    ok_all = ok_all and ok
print("ALL OK" if ok_all else "SOME FAILED")
EOF
cat "$R/exits.txt" >> "$OUT/tools_summary.txt"
echo "wall: $(( $(date +%s) - T0 )) s" >> "$OUT/tools_summary.txt"
cat "$OUT/tools_summary.txt"
