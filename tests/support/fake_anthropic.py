"""A small HTTP server on 127.0.0.1 that speaks the Anthropic Messages API (plain and SSE).

It plays a script: each POST /v1/messages takes the next step, either an error
({"status": 429}) or an answer ({"text": "...", "stop_reason": "end_turn"}). Every request
body it receives is kept in `requests` so tests can read what the client sent.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}


class FakeAnthropic:
    def __init__(self, script: list[dict]):
        self.script, self.requests, self.lock = list(script), [], threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with server.lock:
                    server.requests.append({"body": body, "headers": dict(self.headers)})
                    step = server.script.pop(0) if server.script else {
                        "status": 500, "message": "fake server: script exhausted"}
                if "status" in step:
                    return self.error(step)
                if body.get("stream"):
                    return self.stream(body, step)
                self.send_json(200, message(body, step))

            def error(self, step):
                status = step["status"]
                payload = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                                      "message": step.get("message", "scripted")}}
                self.send_json(status, payload, {"retry-after-ms": "10", "retry-after": "0"})

            def send_json(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def stream(self, body, step):
                full = message(body, step)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                start = {**full, "content": [], "stop_reason": None,
                         "usage": {"input_tokens": full["usage"]["input_tokens"],
                                   "output_tokens": 1}}
                text = step["text"]
                chunks = [text[i:i + 200] for i in range(0, len(text), 200)] or [""]
                events = [("message_start", {"type": "message_start", "message": start}),
                          ("content_block_start", {"type": "content_block_start", "index": 0,
                                                   "content_block": {"type": "text", "text": ""}})]
                events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                     "delta": {"type": "text_delta", "text": c}})
                           for c in chunks]
                events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                           ("message_delta", {"type": "message_delta",
                                              "delta": {"stop_reason": full["stop_reason"],
                                                        "stop_sequence": None},
                                              "usage": {"output_tokens":
                                                        full["usage"]["output_tokens"]}}),
                           ("message_stop", {"type": "message_stop"})]
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def user_prompts(self) -> list[str]:
        return [r["body"]["messages"][-1]["content"] for r in self.requests]


def message(body: dict, step: dict) -> dict:
    text = step["text"]
    prompt = json.dumps(body.get("messages", []))
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": step.get("stop_reason", "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": step.get("input_tokens", len(prompt) // 4),
                      "output_tokens": step.get("output_tokens", max(1, len(text) // 4))}}
