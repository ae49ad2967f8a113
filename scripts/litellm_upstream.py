#!/usr/bin/env python3
"""An OpenAI-compatible upstream for scripts/interop_litellm.sh (standard library only).

    python3 scripts/litellm_upstream.py PORT

The first path segment picks the mode (any segment starting with the mode's name, each with
its own counters: /r429a and /r429b are two separate rate-limited upstreams):

  /tool/v1/chat/completions   a call of the game tool `interact_many` (actions cycle)
  /text/v1/chat/completions   plain text ending in "ACTION: <name>"
  /r429/v1/chat/completions   every 3rd call: 429 with `Retry-After: 1`; else as /tool
  /down/v1/chat/completions   always 503 (with `Retry-After: 0`)

Every answer carries usage (prompt tokens = request bytes // 100, completion tokens 7).
GET /stats answers {mode: {"hits": n, "times": [unix seconds of each hit], "codes": [...],
"probe": hits that carried an `X-Vlm-Eval-Probe` header}}, which the script uses to check who
retried and when, and which headers came through. Answers are written in one send with
TCP_NODELAY, so no Nagle stall muddies the timings.
"""

import http.server
import json
import socket
import socketserver
import sys
import threading
import time

ACTIONS = ["move_left", "do", "move_up", "noop", "move_right", "do"]
TEXT_ACTIONS = ["Move West", "Do", "Move North", "Noop"]

LOCK = threading.Lock()
STATS = {}


def record(mode, probe, code_of=lambda n: 200):
    """Count a hit; `code_of(n)` picks the status of hit n (1-based). Returns (n, status)."""
    with LOCK:
        s = STATS.setdefault(mode, {"hits": 0, "times": [], "codes": [], "probe": 0})
        s["hits"] += 1
        s["probe"] += int(probe)
        n = s["hits"]
        code = code_of(n)
        s["times"].append(time.time())
        s["codes"].append(code)
        return n, code


def completion(message, prompt_tokens):
    return {
        "id": "chatcmpl-upstream",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "upstream",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7,
                  "total_tokens": prompt_tokens + 7},
    }


def tool_message(n):
    args = {"actions": [ACTIONS[n % len(ACTIONS)]], "reasoning": "keep exploring"}
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call_{n}", "type": "function",
        "function": {"name": "interact_many", "arguments": json.dumps(args)}}]}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, code, body, headers=()):
        data = json.dumps(body).encode()
        head = f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}\r\n"
        head += "content-type: application/json\r\n"
        head += f"content-length: {len(data)}\r\n"
        for k, v in headers:
            head += f"{k}: {v}\r\n"
        self.wfile.write(head.encode() + b"\r\n" + data)

    def do_GET(self):
        if self.path.rstrip("/") == "/stats":
            with LOCK:
                self.send(200, STATS)
        else:
            self.send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = self.rfile.read(length)
        mode = self.path.strip("/").split("/")[0]
        prompt_tokens = max(1, len(body) // 100)
        probe = self.headers.get("x-vlm-eval-probe") is not None
        kind = next((k for k in ("tool", "text", "r429", "down") if mode.startswith(k)), None)
        if kind is None:
            self.send(404, {"error": {"message": f"unknown mode {mode!r}"}})
            return
        if kind == "down":
            record(mode, probe, lambda n: 503)
            self.send(503, {"error": {"message": "upstream is down", "type": "server_error"}},
                      [("retry-after", "0")])
            return
        n, code = record(mode, probe, lambda n: 429 if kind == "r429" and n % 3 == 0 else 200)
        if code == 429:
            self.send(429, {"error": {"message": "rate limited, retry in 1 s",
                                          "type": "rate_limit_error", "code": "rate_limit_exceeded"}},
                      [("retry-after", "1")])
            return
        if kind == "text":
            message = {"role": "assistant",
                       "content": f"I look around first.\nACTION: {TEXT_ACTIONS[n % len(TEXT_ACTIONS)]}"}
        else:
            message = tool_message(n)
        self.send(200, completion(message, prompt_tokens))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
