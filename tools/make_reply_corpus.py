#!/usr/bin/env python3
"""Writes tests/data/llm_reply_corpus.json: model replies carrying kernel
edits, shaped the way different models and servers answer, for
tests/lua/test_llm_corpus.lua.

    python3 tools/make_reply_corpus.py > tests/data/llm_reply_corpus.json

Each entry: id, habit (what the reply imitates), kernel (path), reply (the
assistant message text), valid (the edit means something that can be
applied to the kernel), expect_norm_sha256 (for valid entries: SHA-256 of
the intended new source with each line's whitespace squashed and trailing
blank lines dropped). The edits are real ones (an unroll pragma before a
loop, a statement rewritten, a helper added, two places at once); the
habits are those seen in replies of hosted and local models: strict JSON,
partial knob sets, prose and fences, trailing commas and comments, a
reasoning block first, wrong or missing hunk headers, lost leading spaces,
re-indented context, CRLF, a blank line after the source, search/replace
blocks (also re-indented), whole sources, edit lists.
"""
import hashlib
import json
import random
import sys

KERNELS = ["tests/data/specs/vector_add.cu", "kernels/transpose.cu", "kernels/reduce.cu", "kernels/softmax.cu"]


def norm_sha(text):
    lines = [" ".join(l.split()) for l in text.split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def edits_for(lines, rng):
    """Edits as (name, [(index, kind, new_line)]): kind 'insert' (before index) or 'replace'."""
    out = []
    fors = [i for i, l in enumerate(lines) if l.strip().startswith("for (")]
    stmts = [i for i, l in enumerate(lines)
             if l.strip().endswith(";") and l.startswith((" ", "\t")) and "return" not in l]
    if fors:
        i = rng.choice(fors)
        ind = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        out.append(("unroll", [(i, "insert", ind + "#pragma unroll 4")]))
    if stmts:
        i = stmts[len(stmts) // 2]
        out.append(("rewrite", [(i, "replace", lines[i].rstrip() + "  // reviewed: keeps the result exact")]))
        j = stmts[-1]
        if j != i:
            out.append(("two_places", [(i, "replace", lines[i].rstrip() + "  // hot"),
                                       (j, "replace", lines[j].rstrip() + "  // store")]))
    first_global = next(i for i, l in enumerate(lines) if "__global__" in l)
    out.append(("helper", [(first_global, "insert",
                            "__device__ __forceinline__ float kopt_twice(float x) { return 2.0f * x; }")]))
    return out


def apply_edit(lines, edit):
    new = list(lines)
    for idx, kind, text in sorted(edit, key=lambda e: -e[0]):
        if kind == "insert":
            new.insert(idx, text)
        else:
            new[idx] = text
    return new


def unified(lines, edit, ctx=3, header=True, shift=0, counts=True):
    """A unified diff of one edit: one hunk per change."""
    hunks = []
    off = 0
    for idx, kind, text in sorted(edit, key=lambda e: e[0]):
        lo = max(0, idx - ctx)
        hi = min(len(lines), idx + ctx + (0 if kind == "insert" else 1))
        body = [" " + l for l in lines[lo:idx]]
        if kind == "insert":
            body.append("+" + text)
        else:
            body += ["-" + lines[idx], "+" + text]
            idx += 1
        body += [" " + l for l in lines[idx:hi]]
        n_old = sum(1 for b in body if b[0] != "+")
        n_new = sum(1 for b in body if b[0] != "-")
        if counts:
            h = "@@ -%d,%d +%d,%d @@" % (lo + 1 + shift, n_old, lo + 1 + off + shift, n_new)
        else:
            h = "@@ ... @@"
        hunks.append(([h] if header else []) + body)
        off += n_new - n_old
    head = ["--- a/kernel.cu", "+++ b/kernel.cu"] if header else []
    return "\n".join(head + [l for h in hunks for l in h]) + "\n"


def search_replace(lines, edit, reindent=False):
    blocks = []
    for idx, kind, text in sorted(edit, key=lambda e: e[0]):
        if kind == "insert":
            anchor = lines[idx]
            s, r = [anchor], [text, anchor]
        else:
            s, r = [lines[idx]], [text]
        if idx + 1 < len(lines) and lines[idx + 1].strip():
            s.append(lines[idx + 1])
            r.append(lines[idx + 1])
        if reindent:
            s = [l.strip() for l in s]
        blocks.append("<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE" % ("\n".join(s), "\n".join(r)))
    return "\n\n".join(blocks) + "\n"


def proposal(patch=None, **extra):
    p = {"method": "loop_unrolling", "changes": {}, "reason": "fewer loop overheads", "patch": patch}
    p.update(extra)
    return p


def doc(*props, analysis="The loop overhead dominates; unrolling helps."):
    return {"analysis": analysis, "proposals": list(props)}


def habits(src, lines, edit, rng):
    """(habit, reply) pairs for one edit."""
    new_src = "\n".join(apply_edit(lines, edit)) + "\n"
    d = unified(lines, edit)
    out = []
    out.append(("strict json_schema, exact diff, every knob null",
                json.dumps(doc(proposal(d, changes={"BLOCK": None})))))
    out.append(("json_object, partial knobs, unknown key 'confidence'",
                json.dumps(doc(proposal(d, changes={}, confidence=0.7)))))
    out.append(("wrong @@ line numbers", json.dumps(doc(proposal(unified(lines, edit, shift=rng.randint(5, 40)))))))
    out.append(("@@ header without numbers", json.dumps(doc(proposal(unified(lines, edit, counts=False))))))
    out.append(("no headers at all, +/- lines only", json.dumps(doc(proposal(unified(lines, edit, header=False))))))
    out.append(("diff in a ```diff fence inside the JSON string",
                json.dumps(doc(proposal("```diff\n" + d + "```")))))
    out.append(("prose then ```json fence",
                "Looking at the kernel, the loop is short and fixed.\n\n```json\n" +
                json.dumps(doc(proposal(d)), indent=2) + "\n```\n\nThis should cut the loop overhead."))
    lax = json.dumps(doc(proposal(d)), indent=2)
    lax = lax.replace('"patch"', '// the edit\n      "patch"', 1)
    lax = lax[: lax.rstrip().rfind("]")].rstrip() + ",\n  ],\n}"
    out.append(("local model: comments and trailing commas", "Here is my answer:\n" + lax))
    out.append(("reasoning block with brackets first",
                "<think>\nThe loop [0, n) runs {few} times; arr[i] is fine. Let me write the diff.\n</think>\n" +
                json.dumps(doc(proposal(d)))))
    lost = "\n".join((l[1:] if l.startswith(" ") and rng.random() < 0.5 and l.strip() in ("{", "}", "") else l)
                     for l in d.split("\n"))
    out.append(("context lines lost their leading space", json.dumps(doc(proposal(lost)))))
    reind = "\n".join((" " + l[1:].replace("    ", "\t") if l.startswith(" ") else l) for l in d.split("\n"))
    out.append(("context re-indented with tabs", json.dumps(doc(proposal(reind)))))
    out.append(("CRLF line ends", json.dumps(doc(proposal(d.replace("\n", "\r\n"))))))
    out.append(("no trailing newline", json.dumps(doc(proposal(d.rstrip("\n") + "\n\\ No newline at end of file")))))
    trail = " \n".join(d.split("\n"))
    out.append(("trailing spaces on every diff line", json.dumps(doc(proposal(trail)))))
    out.append(("search/replace blocks", json.dumps(doc(proposal(search_replace(lines, edit))))))
    out.append(("search/replace blocks, SEARCH re-indented",
                json.dumps(doc(proposal(search_replace(lines, edit, reindent=True))))))
    sr = []
    for idx, kind, text in edit:
        if kind == "insert":
            sr.append({"search": lines[idx], "replace": text + "\n" + lines[idx]})
        else:
            sr.append({"search": lines[idx], "replace": text})
    out.append(("an 'edits' list of {search, replace}",
                json.dumps(doc({"method": "other", "reason": "r", "edits": sr}))))
    out.append(("whole new source in 'source'", json.dumps(doc({"method": "other", "reason": "r",
                                                                  "source": new_src}))))
    out.append(("whole new source in the patch field, fenced",
                json.dumps(doc(proposal("```cuda\n" + new_src + "```")))))
    out.append(("a bare list of proposals", json.dumps([proposal(d)])))
    return new_src, out


def invalid(src, lines, rng):
    """Replies whose edit cannot be applied or must be refused."""
    out = []
    d = "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -3,3 +3,3 @@\n int hallucinated_context = 0;\n" \
        "-    float acc = 0.0f;\n+    double acc = 0.0;\n"
    out.append(("hallucinated context", json.dumps(doc(proposal(d)))))
    out.append(("host code in a whole source",
                json.dumps(doc({"method": "other", "reason": "r",
                                "source": src + "\nint main() { return 0; }\n"}))))
    return out


def main():
    rng = random.Random(12)
    entries = []
    for path in KERNELS:
        src = open(path).read()
        lines = src.rstrip("\n").split("\n")
        for name, edit in edits_for(lines, rng):
            new_src, replies = habits(src, lines, edit, rng)
            for habit, reply in replies:
                entries.append({"id": "%s/%s/%d" % (path.split("/")[-1], name, len(entries)),
                                "habit": habit, "kernel": path, "reply": reply, "valid": True,
                                "expect_norm_sha256": norm_sha(new_src)})
        for habit, reply in invalid(src, lines, rng):
            entries.append({"id": "%s/invalid/%d" % (path.split("/")[-1], len(entries)), "habit": habit,
                            "kernel": path, "reply": reply, "valid": False})
    json.dump({"about": __doc__.strip().split("\n")[0], "entries": entries}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
