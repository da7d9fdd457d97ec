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
  garbage    prose without any JSON
  length     finish_reason "length" with cut-off JSON
  quota      429 insufficient_quota
  ratelimit  ok, with x-ratelimit-remaining-requests: 0 and a 1 s reset
  echokey    echoes the Authorization header back (the transcript must redact it)

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


def proposals_for(req, scenario):
    user = "\n".join(m.get("content") or "" for m in req.get("messages", []) if m.get("role") == "user")
    allowed = find_json_line(user, "Allowed values (JSON):") or {}
    best = find_json_line(user, "Current best (JSON):") or {}
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
            hunk += ["-" + lines[idx], "+" + lines[idx] + " // tuned"]
            out = [{"method": "strength_reduction", "changes": {n: None for n in names}, "reason": "edit",
                    "patch": "--- a/kernel.cu\n+++ b/kernel.cu\n" + "\n".join(hunk) + "\n"}]
    return {"analysis": "scenario " + scenario, "proposals": out}


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
        if scenario == "noschema" and rf.get("type") == "json_schema":
            return self.send(400, {"error": {"message": "response_format json_schema is not supported"}})
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
        if scenario == "ratelimit":
            doc = json.dumps(proposals_for(req, scenario))
            return self.send(200, {
                "id": "chatcmpl-test", "object": "chat.completion", "model": "test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": doc}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
                headers=[("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "1s")])
        if scenario == "echokey":
            return self.completion(req, "You sent: " + (self.headers.get("Authorization") or ""))
        if scenario == "garbage":
            return self.completion(req, "I would make the tiles bigger, but I cannot say by how much.")
        if scenario == "badschema":
            return self.completion(req, json.dumps({"analysis": "x", "proposals": "bigger tiles"}))
        doc = json.dumps(proposals_for(req, scenario))
        if scenario == "length":
            return self.completion(req, doc[: len(doc) // 2], finish="length")
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
