#!/usr/bin/env python3
"""Checks that every JSON file under the given folders (or the given files)
parses under a strict JSON parser: Python's json module with NaN, Infinity
and -Infinity refused. *.json files hold one document; *.jsonl files one per
line, each line ending in a newline. Prints one line per bad file and exits 1
if there is any; 0 and a count otherwise.

    tools/check_strict_json.py runs/matmul_f16 [more folders or files]
"""
import json
import os
import sys


def reject(token):
    raise ValueError("non-standard number %s" % token)


def check_text(text):
    json.loads(text, parse_constant=reject)


def check_file(path):
    """Returns a list of problems (empty when the file is strict JSON)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return ["%s: %s" % (path, e)]
    if text.startswith("\ufeff"):
        return ["%s: starts with a byte order mark" % path]
    if path.endswith(".jsonl"):
        problems = []
        if text and not text.endswith("\n"):
            problems.append("%s: the last line is not ended (a torn line)" % path)
        for n, line in enumerate(text.split("\n")[:-1] if text else [], 1):
            try:
                check_text(line)
            except ValueError as e:
                problems.append("%s:%d: %s" % (path, n, e))
        return problems
    try:
        check_text(text)
    except ValueError as e:
        return ["%s: %s" % (path, e)]
    return []


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    files = []
    for arg in argv[1:]:
        if os.path.isdir(arg):
            for root, _, names in os.walk(arg):
                files.extend(os.path.join(root, n) for n in names if n.endswith((".json", ".jsonl")))
        else:
            files.append(arg)
    problems = []
    for path in sorted(files):
        problems.extend(check_file(path))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("%d JSON files, all strict" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
