#!/usr/bin/env python3
"""One line of JSON per events.jsonl given: evaluations, statuses, the median
and total worker time per evaluation (result.measure_s), wall time from the
first to the last evaluation, and the best ok result (time and config).

    tools/events_summary.py runs/a/events.jsonl runs/b/events.jsonl
"""
import datetime
import json
import statistics
import sys


def seconds(stamp):
    """An event's timestamp as seconds: a number, or the ISO 8601 UTC text
    kopt writes ("2026-11-29T07:33:22Z"); None for anything else."""
    if isinstance(stamp, (int, float)):
        return float(stamp)
    if isinstance(stamp, str):
        try:
            return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def summary(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                # runs written before strict JSON may hold a bare inf
                rows.append(json.loads(line.replace(":inf", ":null").replace(":-inf", ":null")))
    evals = [r for r in rows if isinstance(r.get("result"), dict)]
    measure = [r["result"]["measure_s"] for r in evals if isinstance(r["result"].get("measure_s"), (int, float))]
    stamps = [t for t in (seconds(r.get("timestamp")) for r in evals) if t is not None]
    statuses = {}
    for r in evals:
        s = r["result"].get("status")
        statuses[s] = statuses.get(s, 0) + 1
    ok = [r for r in evals if r["result"].get("status") == "ok" and isinstance(r["result"].get("time_ms"), (int, float))]
    best = min(ok, key=lambda r: r["result"]["time_ms"]) if ok else None
    return {
        "file": path, "evaluations": len(evals), "statuses": statuses,
        "measure_s_median": statistics.median(measure) if measure else None,
        "measure_s_total": sum(measure) if measure else None,
        "span_s": (max(stamps) - min(stamps)) if len(stamps) > 1 else None,
        "best_ms": best["result"]["time_ms"] if best else None,
        "best_config": best.get("config") if best else None,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    for p in sys.argv[1:]:
        try:
            print(json.dumps(summary(p), sort_keys=True))
        except OSError as e:
            sys.exit(f"events_summary: {p}: {e.strerror}")
        except json.JSONDecodeError as e:
            sys.exit(f"events_summary: {p}: not an events.jsonl ({e})")
