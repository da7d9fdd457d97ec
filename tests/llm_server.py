#!/usr/bin/env python3
"""A chat-completions server for kopt's tests, on loopback, standard library only.

    python3 tests/llm_server.py [--port 0] [--key KEY] [--max-life 300]

Prints "PORT <n>" on stdout once listening. Clients use the base URL
http://127.0.0.1:<n>/s/<scenario>/v1 ; the scenario name picks the behaviour
(text after a '-' is an id that gives the scenario its own hit counter):

  ok         proposals drawn from the request (see below), as bare JSON
  prose      the same JSON wrapped in prose
  fence      the same JSON inside a ```json code fence
  429        first hit: 429 with retry-after: 1; then ok
  500        first hit: 500; then ok
  slow       answers after 3 s
  delay      answers after 1 s
  truncated  announces a longer body than it sends
  badschema  valid JSON that violates the proposal schema
  outofrange proposals with values outside the allowed sets
  baddiff    a proposal carrying a diff whose context matches nothing
  gooddiff   a proposal editing the last statement of the ```cuda source in the prompt
  noschema   400 on response_format json_schema (like older servers); ok otherwise
  ctx400     400 "context_length_exceeded" on the first request; ok after
  garbage    prose without any JSON
  length     finish_reason "length" with cut-off JSON
  filtered   finish_reason "content_filter" after a whole first proposal
  quota      429 insufficient_quota
  ratelimit  ok, with x-ratelimit-remaining-requests: 0 and a 1 s reset
  echokey    echoes the Authorization header back (the transcript must redact it)
  partial    proposals naming only the knobs they change, with an unknown key and an unknown knob
  nested     200 KB of nested brackets and no JSON at all
  stall      sends half of its body, then stalls for 30 s
  keyerr     401 whose message quotes the Authorization header's key
  down503    503 on every hit (an endpoint that is down)
  nomodel404 404 "model not found" on every hit
  keyslash   ok, with the key echoed inside the content (a key with '/' is escaped by JSON)
  wait429    429 with retry-after: 30 on every hit
  nototal    ok, with usage lacking total_tokens and counts sent as strings
  error200   200 with an error object instead of a completion
  html200    200 with an HTML page
  sse        ok, sent as server-sent events (chunks with deltas, then [DONE])
  sse_framed the same, opened by a keep-alive comment and with event:/id: fields
  sse_cut    the same stream cut halfway: no finish_reason, no usage, no [DONE]
  sse_error  a first content delta, then an error event ({"error": {"message"}})
  nofinish   ok cut at two thirds, finish_reason null
  usageother ok, with usage as input_tokens / output_tokens
  nousage    ok, with no usage at all
  ratelimit20  ok, with x-ratelimit-remaining-requests: 0 and a 20 s reset
  latin1     ok, with a Latin-1 byte in the analysis (not UTF-8)
  moved      307 with a Location header

Edits, made against the ```cuda source in the prompt: the statement with
"a[i] + b[i]" (the vector_add test kernel) becomes "__fadd_rn(a[i], b[i])"
(the "fast" edit), shaped the way models answer:

  e_wronglines  a unified diff whose @@ line numbers are wrong
  e_noheader    +/- lines without --- / +++ / @@ headers
  e_fenced      a unified diff inside a ```diff fence, inside the JSON string
  e_crlf        a unified diff with CRLF line ends
  e_nonewline   a unified diff without its last newline ("\\ No newline at end of file")
  e_dup_indent  the same search/replace edit twice, the second re-indented
  e_blankend    a diff made against the source followed by a blank line, removing it
  e_searchreplace  a <<<<<<< SEARCH / ======= / >>>>>>> REPLACE block
  e_source      the whole new kernel in "source"
  e_host        the whole kernel with a main() smuggled in (must be refused)
  e_prose       the JSON in prose with trailing commas, the diff fenced

Repairs (the first turn is broken; a follow-up turn, recognised by an
assistant message in the conversation, gets the fix):

  r_compile  an undefined identifier, then the fast edit
  r_wrong    a subtraction instead of the addition, then the fast edit
  r_never    a new compile error on every turn
  r_noapply  a compile error, then on every repair turn a diff that does not apply
  r_same     the subtraction again on every turn (a source already measured)
  r_compose  the fast edit; once the source in the prompt has it, a knob change
             and a second edit of the edited line (edits compose)

The row_sum demonstration (examples/edits/row_sum.cu, tools/device_edits.sh):
g_<format>_<flow> rewrites the kernel as a warp per row with a shuffle
reduction. <format>: diff, nohdr (diff without headers), fenced (diff in a
```diff fence), crlf, sr (search/replace), source (whole kernel). <flow>: ok
(right the first time), compile (a compile error first, fixed on the repair
turn), wrong (no cross-lane reduction first: a wrong result, fixed on the
repair turn), never (a new compile error on every turn). Once the source in
the prompt is the fast one, it proposes a knob change on it and a second
edit of it (an unroll pragma on the row loop).

Synthesis (kopt synthesize on examples/synth/row_softmax.json: a whole
kernel with its knobs and launch, written from the reference; a follow-up
turn is recognised by the assistant messages in the conversation):

  s_flow   a compile error, then a wrong result (no normalisation), then a
           correct warp-per-row kernel; later turns: float4 loads
  s_never  a new compile error on every turn
  s_quoteref  the source string holds the kernel's fence, then the reference
           quoted in another, and the reply names no entry
  s_named  the entry named; its fence first, an unrelated kernel's after it
  s_big    a first reply over 200 KB, then s_flow's correct kernel
  s_slow   a correct kernel the stub times slower than the reference
  s_constexpr  a knob declared as a constexpr variable, not a #define
  s_prose  the JSON in prose and a fence, knobs as an object, the source
           fenced inside its string, no entry; later turns: float4 loads

Tool calls (function calling: the request's "tools"; kopt.tools):

  t_tools     calls overview() and metrics() first, then region(k) of the
              first hot region the overview names, then proposes, citing in
              "analysis" and "reason" the numbers the tools answered; without
              "tools" in the request it proposes citing the overview inlined
              in the prompt
  t_notools   400 "tools are not supported" whenever the request has "tools";
              otherwise as t_tools without tools
  t_badcalls  calls an unknown tool, region with arguments that are not JSON
              and region with a string id, then proposes quoting the errors
  t_forever   calls overview() on every turn, tool_choice "none" or not
  t_textcall  answers a request with "tools" by writing the call as text
              ({"name": "overview", "arguments": {}}); otherwise as t_tools

Proposals: the server reads "Allowed values (JSON): {...}" and "Current best
(JSON): {...}" lines in the user message and answers with up to "Proposals
wanted: N" proposals, each changing one or two knobs of the current best to
another allowed value, chosen by a generator seeded from the request, so a
given request always gets the same answer. POST /shutdown stops the server;
so does closing its stdout (the server writes a newline every 0.3 s).
"""
import argparse
import hashlib
import os
import json
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llm_server_synth import synth_reply  # (the s_* scenarios)

HITS = {}
HITS_LOCK = threading.Lock()
KEY = None


def hit(name):
    with HITS_LOCK:
        n = HITS.get(name, 0)
        HITS[name] = n + 1
        return n


def find_json_line(text, label):
    m = re.search(re.escape(label) + r"\s*(\{.*\})", text)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def current_of(user):
    """The state the prompt asks about: "Current best (JSON): {...}", or
    "Current state (not the best measured) (JSON): {...}" (MCGS)."""
    return (find_json_line(user, "Current best (JSON):")
            or find_json_line(user, "Current state (not the best measured) (JSON):"))


def proposals_for(req, scenario):
    user = "\n".join(m.get("content") or "" for m in req.get("messages", []) if m.get("role") == "user")
    allowed = find_json_line(user, "Allowed values (JSON):") or {}
    best = current_of(user) or {}
    m = re.search(r"Proposals wanted:\s*(\d+)", user)
    wanted = int(m.group(1)) if m else 2
    digest = hashlib.sha256(json.dumps(req.get("messages"), sort_keys=True).encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    names = sorted(allowed)
    out = []
    for _ in range(wanted):
        changes = {n: None for n in names}
        for name in rng.sample(names, min(len(names), rng.choice([1, 2]))):
            values = [v for v in allowed[name] if v != best.get(name)] or allowed[name]
            changes[name] = rng.choice(values)
        if scenario == "outofrange" and names:
            changes[names[0]] = 123457
        out.append({"method": "tile_up", "changes": changes,
                    "reason": "test server proposal", "patch": None})
    if scenario == "baddiff":
        out = [{"method": "vectorize_loads", "changes": {n: None for n in names}, "reason": "edit",
                "patch": "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,2 +1,2 @@\n"
                         " this line is not in the kernel\n-nor this one\n+replacement\n"}]
    if scenario == "gooddiff":
        m = re.search(r"```cuda\n(.*?)\n```", user, re.S)
        lines = m.group(1).split("\n") if m else []
        idx = max([i for i, l in enumerate(lines) if l.rstrip().endswith(";")] or [-1])
        if idx >= 0:
            lo = max(0, idx - 1)
            hunk = ["@@ -%d,%d +%d,%d @@" % (lo + 1, idx - lo + 1, lo + 1, idx - lo + 1)]
            hunk += [" " + l for l in lines[lo:idx]]
            # (an empty statement and a comment: a change of code, which a
            # comment alone is not)
            hunk += ["-" + lines[idx], "+" + lines[idx] + " ; // tuned"]
            out = [{"method": "strength_reduction", "changes": {n: None for n in names}, "reason": "edit",
                    "patch": "--- a/kernel.cu\n+++ b/kernel.cu\n" + "\n".join(hunk) + "\n"}]
    return {"analysis": "scenario " + scenario, "proposals": out}


def source_in(user):
    m = re.search(r"```cuda\n(.*?)\n```", user, re.S)
    return (m.group(1) + "\n") if m else ""


def diff_of(src, old, new, header=True, lo_shift=0):
    """A unified diff replacing the line containing `old` by one with `new`."""
    lines = src.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    idx = next((i for i, l in enumerate(lines) if old in l), None)
    if idx is None:
        return "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,1 +1,1 @@\n-" + old + "\n+" + new + "\n"
    lo, hi = max(0, idx - 2), min(len(lines), idx + 3)
    body = [" " + l for l in lines[lo:idx]] + ["-" + lines[idx], "+" + lines[idx].replace(old, new)]
    body += [" " + l for l in lines[idx + 1:hi]]
    out = []
    if header:
        out += ["--- a/kernel.cu", "+++ b/kernel.cu",
                "@@ -%d,%d +%d,%d @@" % (lo + 1 + lo_shift, hi - lo, lo + 1 + lo_shift, hi - lo)]
    return "\n".join(out + body) + "\n"


FAST = "__fadd_rn(a[i], b[i])"


def edit_reply(req, scenario):
    msgs = req.get("messages", [])
    user = "\n".join(m.get("content") or "" for m in msgs if m.get("role") == "user")
    turn = sum(1 for m in msgs if m.get("role") == "assistant")
    src = source_in(msgs[1].get("content") if len(msgs) > 1 else user)
    names = sorted(find_json_line(user, "Allowed values (JSON):") or {})
    prop = {"method": "strength_reduction", "changes": {n: None for n in names}, "reason": "edit " + scenario,
            "patch": None}
    old = "a[i] + b[i]"
    if scenario == "e_wronglines":
        prop["patch"] = diff_of(src, old, FAST, lo_shift=37)
    elif scenario == "e_noheader":
        prop["patch"] = diff_of(src, old, FAST, header=False)
    elif scenario == "e_fenced":
        prop["patch"] = "```diff\n" + diff_of(src, old, FAST) + "```\n"
    elif scenario == "e_crlf":
        prop["patch"] = diff_of(src, old, FAST).replace("\n", "\r\n")
    elif scenario == "e_nonewline":
        prop["patch"] = diff_of(src, old, FAST).rstrip("\n") + "\n\\ No newline at end of file"
    elif scenario == "e_blankend":
        lines = src.rstrip("\n").split("\n") + [""]
        idx = next(i for i, l in enumerate(lines) if old in l)
        body = [" " + l for l in lines[idx - 1:idx]] + ["-" + lines[idx], "+" + lines[idx].replace(old, FAST)]
        body += [" " + l for l in lines[idx + 1:-1]] + ["-"]
        n_old = len(lines) - idx + 1
        prop["patch"] = "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -%d,%d +%d,%d @@\n" % (
            idx, n_old, idx, n_old - 1) + "\n".join(body) + "\n"
    elif scenario == "e_searchreplace":
        line = next(l for l in src.split("\n") if old in l)
        prop["patch"] = "<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE\n" % (line, line.replace(old, FAST))
    elif scenario == "e_dup_indent":
        # the same edit twice, the second re-indented (tabs for spaces)
        line = next(l for l in src.split("\n") if old in l)
        new = line.replace(old, FAST)
        again = "\t" + new.lstrip() if new.startswith(" ") else "    " + new.lstrip()
        return json.dumps({"analysis": "scenario " + scenario, "proposals": [
            dict(prop, patch="<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE\n" % (line, new)),
            dict(prop, patch="<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE\n" % (line, again))]})
    elif scenario == "e_source":
        del prop["patch"]
        prop["source"] = src.replace(old, FAST)
    elif scenario == "e_host":
        del prop["patch"]
        prop["source"] = src.replace(old, FAST) + "\nint main() { return 0; }\n"
    elif scenario == "e_prose":
        patch = "```diff\n" + diff_of(src, old, FAST) + "```"
        doc = json.dumps({"analysis": "fast add", "proposals": [dict(prop, patch=patch)]})
        return "Sure! Here is my proposal:\n\n" + doc[:-2] + ",],}" + "\n\nLet me know how it goes."
    elif scenario == "e_think":
        # a draft inside the reasoning block (a wrong edit), then the answer
        draft = json.dumps({"analysis": "draft", "proposals": [dict(prop, patch=diff_of(src, old, "a[i] - b[i]"))]})
        final = json.dumps({"analysis": "final", "proposals": [dict(prop, patch=diff_of(src, old, FAST))]})
        return "<think>First idea: " + draft + " no, that subtracts.</think>\n" + final
    elif scenario == "e_rawnl":
        # a multi-line patch with raw newlines in the JSON string, after prose
        doc = json.dumps({"analysis": "fast add", "proposals": [dict(prop, patch="@@PATCH@@")]})
        return "Answer:\n" + doc.replace('"@@PATCH@@"', '"' + diff_of(src, old, FAST).replace('"', '\\"') + '"')
    elif scenario == "e_twofence":
        # the whole source twice: the old one quoted, then the new one (~~~)
        del prop["patch"]
        prop["source"] = "Before:\n```cuda\n" + src + "```\nAfter:\n~~~cuda\n" + src.replace(old, FAST) + "~~~\n"
    elif scenario == "e_listfence":
        # a diff in a fence indented inside a list item
        body = "".join("   " + l + "\n" for l in ("```diff\n" + diff_of(src, old, FAST) + "```").split("\n"))
        prop["patch"] = "1. Replace the add:\n" + body
    elif scenario == "e_edits_alias":
        del prop["patch"]
        line = next(l for l in src.split("\n") if old in l)
        prop["edits"] = [{"old_str": line, "new_str": line.replace(old, FAST)}]
    elif scenario == "e_nopatch_word":
        # "None" in the patch field: a knob move, not a failed edit
        allowed = find_json_line(user, "Allowed values (JSON):") or {}
        best = current_of(user) or {}
        prop["changes"] = {n: next(v for v in reversed(allowed[n]) if v != best.get(n)) for n in names[:1]}
        prop["patch"], prop["reason"] = "None", "knob only"
    elif scenario == "e_noproposals":
        return "I would raise the block size, see [1]."
    elif scenario == "r_compile":
        prop["patch"] = diff_of(src, old, FAST if turn else "a[i] + b[i] + undefined_symbol")
    elif scenario == "r_wrong":
        prop["patch"] = diff_of(src, old, FAST if turn else "a[i] - b[i]")
    elif scenario == "r_never":
        prop["patch"] = diff_of(src, old, "a[i] + b[i] + undefined_%d" % turn)
    elif scenario == "r_noapply":
        prop["patch"] = diff_of(src, old, "a[i] + b[i] + undefined_symbol") if not turn else \
            "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,1 +1,1 @@\n-no such line here\n+x\n"
    elif scenario == "r_compose":
        if FAST not in src:
            prop["patch"] = diff_of(src, old, FAST)
        else:
            best = current_of(user) or {}
            allowed = find_json_line(user, "Allowed values (JSON):") or {}
            knob = {n: next(v for v in reversed(allowed[n]) if v != best.get(n)) for n in names[:1]}
            # (a change of code, not only a comment: kopt measures no comment-only edit)
            two = dict(prop, patch=diff_of(src, FAST, FAST + " * 1.0f; // composed").replace(";; //", "; //"))
            return json.dumps({"analysis": "compose", "proposals": [
                {"method": "more_threads", "changes": knob, "reason": "knob on the edit", "patch": None}, two]})
    elif scenario == "r_same":
        prop["patch"] = diff_of(src, old, "a[i] - b[i]")
    return json.dumps({"analysis": "scenario " + scenario, "proposals": [prop]})


ROW_SUM_FAST = """extern "C" __global__ void row_sum(const float *x, float *y, int M, int N)
{
    int lane = threadIdx.x & 31;
    int warps = (gridDim.x * blockDim.x) >> 5;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < M; row += warps) {
        float acc = 0.0f;
        for (int c = lane; c < N; c += 32)
            acc += x[(size_t)row * N + c];
        for (int o = 16; o > 0; o >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0)
            y[row] = acc;
    }
}
"""


def row_sum_reply(req, scenario):
    import difflib
    msgs = req.get("messages", [])
    user = "\n".join(m.get("content") or "" for m in msgs if m.get("role") == "user")
    turn = sum(1 for m in msgs if m.get("role") == "assistant")
    src = source_in(msgs[1].get("content") if len(msgs) > 1 else user)
    _, fmt, flow = scenario.split("_", 2)
    names = sorted(find_json_line(user, "Allowed values (JSON):") or {})
    if "__shfl_down_sync" in src or "extern \"C\"" not in src:
        best = current_of(user) or {}
        allowed = find_json_line(user, "Allowed values (JSON):") or {}
        knob = {n: next((v for v in allowed[n] if v != best.get(n)), best.get(n)) for n in names[:1]}
        props = [{"method": "more_threads", "changes": knob, "reason": "block size on the warp-per-row kernel"}]
        loop = "        for (int c = lane; c < N; c += 32)\n"
        if loop in src and "#pragma unroll 4" not in src:
            again = src.replace(loop, "#pragma unroll 4\n" + loop)
            d = "".join(difflib.unified_diff(src.splitlines(True), again.splitlines(True), "a/row_sum.cu",
                                             "b/row_sum.cu"))
            props.append({"method": "loop_unrolling", "changes": {}, "reason": "unroll the row loop", "patch": d})
        return json.dumps({"analysis": "tune the block", "proposals": props})
    fast = ROW_SUM_FAST
    if flow == "compile" and turn == 0 or flow == "never":
        fast = fast.replace("int lane = threadIdx.x & 31;", "int lane = threadIdx.x & 31")
        fast = fast.replace("warps)", "warps_%d)" % turn) if flow == "never" else fast
    elif flow == "wrong" and turn == 0:
        fast = fast.replace("            acc += __shfl_down_sync(0xffffffffu, acc, o);\n", "            ;\n")
    head = src[: src.index("extern \"C\"")]
    new = head + fast
    if fmt == "source":
        edit = {"source": new}
    elif fmt == "sr":
        old_fn = src[src.index("extern \"C\""):].rstrip("\n")
        edit = {"patch": "<<<<<<< SEARCH\n%s\n=======\n%s\n>>>>>>> REPLACE\n" % (old_fn, fast.rstrip("\n"))}
    else:
        d = "".join(difflib.unified_diff(src.splitlines(True), new.splitlines(True), "a/row_sum.cu", "b/row_sum.cu"))
        if fmt == "nohdr":
            d = "".join(l for l in d.splitlines(True) if not l.startswith(("---", "+++", "@@")))
        elif fmt == "fenced":
            d = "```diff\n" + d + "```\n"
        elif fmt == "crlf":
            d = d.replace("\n", "\r\n")
        edit = {"patch": d}
    prop = {"method": "coalesce_accesses", "changes": {}, "reason": "a warp per row: coalesced loads"}
    prop.update(edit)
    return json.dumps({"analysis": "one thread per row reads 32 rows at once: uncoalesced", "proposals": [prop]})


def tool_answers(req):
    """The tool messages of a conversation: {name: content}, by the calls' ids."""
    names = {}
    for m in req.get("messages", []):
        for c in m.get("tool_calls") or []:
            names[c.get("id")] = (c.get("function") or {}).get("name")
    out = {}
    for m in req.get("messages", []):
        if m.get("role") == "tool":
            out.setdefault(names.get(m.get("tool_call_id"), "?"), []).append(m.get("content") or "")
    return out


def first_line(text, prefix):
    for line in (text or "").split("\n"):
        if line.strip().startswith(prefix):
            return line.strip()
    return None


def tool_reply(req, scenario):
    """(calls, content): the next tool calls, or the final answer's JSON text."""
    has_tools = bool(req.get("tools"))
    answers = tool_answers(req)
    turn = sum(1 for m in req.get("messages", []) if m.get("role") == "assistant")
    if scenario == "t_forever" and has_tools:
        return [("overview", "{}")], None
    if scenario == "t_badcalls" and has_tools and not answers:
        return [("no_such_tool", "{}"), ("region", "{id: 4"), ("region", '{"id": "four"}')], None
    if scenario in ("t_tools", "t_notools", "t_textcall") and has_tools:
        if not answers:
            return [("overview", "{}"), ("metrics", "{}")], None
        if "region" not in answers:
            m = re.search(r"Hot regions[^:]*:\s*#(\d+)", (answers.get("overview") or [""])[0])
            return [("region", json.dumps({"id": int(m.group(1)) if m else 1}))], None
    doc = proposals_for(req, scenario)
    cites = []
    if answers:
        reg = (answers.get("region") or [""])[0]
        work = first_line(reg, "work per thread")
        head = first_line(reg, "region #")
        if head:
            cites.append("region(): " + head)
        if work:
            cites.append("region(): " + work)
        met = (answers.get("metrics") or [""])[0]
        m = first_line(met, "measured:")
        if m:
            cites.append("metrics(): " + m)
        sym = first_line(met, "- ")
        if sym:
            cites.append("metrics(): " + sym)
        for name, texts in sorted(answers.items()):
            for t in texts:
                if t.startswith("error:"):
                    cites.append(name + "(): " + t.split("\n")[0])
    else:
        user = "\n".join(m.get("content") or "" for m in req.get("messages", []) if m.get("role") == "user")
        m = re.search(r"Hot regions[^:]*:\s*#(\d+)", user)
        if m:
            cites.append("inlined overview: hot region #" + m.group(1))
            lines = user.split("\n")
            for i, line in enumerate(lines):
                if re.match(r"\s*#%s " % m.group(1), line) and i + 1 < len(lines):
                    cites.append("inlined overview: " + line.strip() + " " + lines[i + 1].strip())
                    break
        else:
            cites.append("no tool data")
    doc["analysis"] = "; ".join(cites) + " (turn %d)" % turn
    for p in doc["proposals"]:
        p["reason"] = "from the tool data: " + (cites[-1] if cites else "none")
    return None, json.dumps(doc)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, obj=None, raw=None, headers=()):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-request-id", "req-%d" % hit("__ids__"))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def completion(self, req, content, finish="stop"):
        self.send(200, {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})

    def completion_calls(self, req, calls):
        n = hit("__calls__")
        self.send(200, {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_%d_%d" % (n, i), "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(calls)]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/shutdown":
            self.send(200, {"ok": True})
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        m = re.match(r"^/s/([A-Za-z0-9_]+)(-[A-Za-z0-9_]+)?/v1/chat/completions$", self.path)
        if not m:
            return self.send(404, {"error": {"message": "no such path " + self.path}})
        if KEY is not None and self.headers.get("Authorization") != "Bearer " + KEY:
            return self.send(401, {"error": {"message": "bad key", "code": "invalid_api_key"}})
        scenario = m.group(1)
        n = hit(m.group(0))
        try:
            req = json.loads(raw)
        except ValueError:
            return self.send(400, {"error": {"message": "body is not JSON"}})
        rf = req.get("response_format") or {}
        if scenario == "429" and n == 0:
            return self.send(429, {"error": {"code": "rate_limit_exceeded"}}, headers=[("retry-after", "1")])
        if scenario == "500" and n == 0:
            return self.send(500, {"error": {"message": "boom"}})
        if scenario == "quota":
            return self.send(429, {"error": {"code": "insufficient_quota", "message": "no money"}})
        if scenario == "ctx400" and n == 0:
            return self.send(400, {"error": {"message": "This model's maximum context length is 8192 tokens",
                                             "code": "context_length_exceeded"}})
        if scenario == "noschema" and rf.get("type") == "json_schema":
            return self.send(400, {"error": {"message": "response_format json_schema is not supported"}})
        if scenario == "t_notools" and req.get("tools"):
            return self.send(400, {"error": {"message": "tools are not supported by this server", "type": "invalid_request_error"}})
        if scenario == "t_textcall" and req.get("tools"):
            return self.completion(req, json.dumps({"name": "overview", "arguments": {}}))
        if scenario.startswith("t_"):
            calls, content = tool_reply(req, scenario)
            if calls:
                return self.completion_calls(req, calls)
            return self.completion(req, content)
        if scenario == "slow":
            time.sleep(3)
        if scenario == "delay":
            time.sleep(1)
        if scenario == "truncated":
            body = b'{"id": "chatcmpl-test", "choices": ['
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + 500))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True
            return
        if scenario in ("ratelimit", "ratelimit20"):
            doc = json.dumps(proposals_for(req, scenario))
            return self.send(200, {
                "id": "chatcmpl-test", "object": "chat.completion", "model": "test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": doc}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
                headers=[("x-ratelimit-remaining-requests", "0"),
                         ("x-ratelimit-reset-requests", "20s" if scenario == "ratelimit20" else "1s")])
        auth = (self.headers.get("Authorization") or "")[len("Bearer "):]
        if scenario == "down503":
            return self.send(503, {"error": {"message": "upstream unavailable"}})
        if scenario == "nomodel404":
            return self.send(404, {"error": {"message": "The model `test` does not exist"}})
        if scenario == "keyerr":
            return self.send(401, {"error": {"message": "Incorrect API key provided: " + auth + "."}})
        if scenario == "wait429":
            return self.send(429, {"error": {"message": "slow down"}}, headers=[("retry-after", "30")])
        if scenario == "moved":
            return self.send(307, {"error": {"message": "moved"}}, headers=[("Location", "http://example.invalid/v2/chat/completions")])
        if scenario == "error200":
            return self.send(200, {"error": {"message": "Provider returned error: model overloaded"}})
        if scenario == "html200":
            return self.send(200, raw=b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        if scenario in ("sse_cut", "sse_error", "nofinish", "usageother", "nousage"):
            content = json.dumps(proposals_for(req, scenario))
            cut = content[: len(content) // 2]
            if scenario == "sse_cut":
                body = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": cut}}]}) + "\n\n"
                return self.send(200, raw=body.encode())
            if scenario == "sse_error":
                body = "".join("data: " + json.dumps(c) + "\n\n" for c in [
                    {"choices": [{"index": 0, "delta": {"content": cut}}]},
                    {"error": {"message": "Provider returned error: upstream overloaded", "code": 502}}])
                return self.send(200, raw=body.encode())
            usage = {"input_tokens": 100, "output_tokens": 20} if scenario == "usageother" else None
            return self.send(200, {
                "choices": [{"index": 0, "message": {"role": "assistant",
                                                     "content": content[: len(content) * 2 // 3]
                                                     if scenario == "nofinish" else content},
                             "finish_reason": None if scenario == "nofinish" else "stop"}],
                **({"usage": usage} if usage else {})})
        if scenario in ("keyslash", "nototal", "sse", "sse_framed", "latin1"):
            doc = proposals_for(req, scenario)
            if scenario == "keyslash":
                doc["analysis"] = "your key is " + auth
            if scenario == "latin1":
                doc["analysis"] = "caf\u00e9"
            content = json.dumps(doc, ensure_ascii=False)
            if scenario == "latin1":
                content = content.encode("utf-8").replace("\u00e9".encode("utf-8"), b"\xe9")
                body = (b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": ' +
                        json.dumps(content.decode("latin-1"), ensure_ascii=False).encode("latin-1") +
                        b'}, "finish_reason": "stop"}]}')
                return self.send(200, raw=body)
            if scenario in ("sse", "sse_framed"):
                half = len(content) // 2
                chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": content[:half]}}]},
                          {"choices": [{"index": 0, "delta": {"content": content[half:]}, "finish_reason": "stop"}]},
                          {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}}]
                body = "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"
                if scenario == "sse_framed":
                    body = ": OPENROUTER PROCESSING\n\n" + "".join(
                        "event: message\nid: %d\ndata: %s\n\n" % (i, json.dumps(c)) for i, c in enumerate(chunks)) + \
                        "data: [DONE]\n\n"
                return self.send(200, raw=body.encode())
            return self.send(200, {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": "1000", "completion_tokens": 500} if scenario == "nototal" else
                         {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        if scenario == "echokey":
            return self.completion(req, "You sent: " + (self.headers.get("Authorization") or ""))
        if scenario == "garbage":
            return self.completion(req, "I would make the tiles bigger, but I cannot say by how much.")
        if scenario.startswith("g_"):
            return self.completion(req, row_sum_reply(req, scenario))
        if scenario.startswith("s_"):
            return self.completion(req, synth_reply(req, scenario))
        if scenario.startswith("e_") or scenario.startswith("r_"):
            return self.completion(req, edit_reply(req, scenario))
        if scenario == "nested":
            return self.completion(req, "[" * 100000 + "{" * 100000)
        if scenario == "stall":
            body = json.dumps({"id": "chatcmpl-test", "choices": [{"message": {"content": "x" * 1000}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            time.sleep(30)
            return
        if scenario == "partial":
            doc = proposals_for(req, scenario)
            for p in doc["proposals"]:
                p["changes"] = {k: v for k, v in p["changes"].items() if v is not None}
                p["changes"]["NOT_A_KNOB"] = 3
                p["confidence"] = 0.8
                del p["patch"]
            return self.completion(req, json.dumps(doc))
        if scenario == "badschema":
            return self.completion(req, json.dumps({"analysis": "x", "proposals": "bigger tiles"}))
        doc = json.dumps(proposals_for(req, scenario))
        if scenario == "length":
            return self.completion(req, doc[: len(doc) // 2], finish="length")
        if scenario == "filtered":
            return self.completion(req, doc[: len(doc) * 3 // 4], finish="content_filter")
        if scenario == "prose":
            return self.completion(req, "Looking at the results, here is my answer:\n" + doc +
                                   "\nThese should help with occupancy.")
        if scenario == "fence":
            return self.completion(req, "My proposals:\n\n```json\n" + doc + "\n```\n")
        return self.completion(req, doc)


def heartbeat():
    """Exits once the test that started the server stops reading its output
    (it finished or died), so no server outlives its test."""
    while True:
        time.sleep(0.3)
        try:
            sys.stdout.write("\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            os._exit(0)


def main():
    global KEY
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--key")
    ap.add_argument("--max-life", type=float, default=300)
    args = ap.parse_args()
    KEY = args.key
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    timer = threading.Timer(args.max_life, server.shutdown)
    timer.daemon = True
    timer.start()
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Thread(target=heartbeat, daemon=True).start()
    server.serve_forever(poll_interval=0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
