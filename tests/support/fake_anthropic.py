"""A small HTTP server on 127.0.0.1 that speaks the Anthropic Messages API (plain and SSE).

It plays a script: each POST /v1/messages takes the next step. Every request body it receives
is kept in `requests` so tests can read what the client sent. The steps:

    {"text": "...", "stop_reason": "end_turn"}   an answer (JSON, or SSE when the client streams)
    {"status": 429}        an error response (429, 500, 502, 503, 529, 401, ...); it says
                           `retry-after-ms: 10` unless the step gives "headers" of its own
    {"hang": 60}           read the request, then send nothing for that long (or until the
                           server shuts down): the client's timeout must fire
    {"reset": True}        close the connection (a TCP reset) without any response
    {"cut": 40}            stream the first 40 characters of the step's "text" (a default one
                           when it has none), then close the connection: no content_block_stop,
                           message_delta or message_stop. With "chunked": True the body is sent
                           in HTTP/1.1 chunks, as the real API does, and the cut leaves the last
                           chunk unfinished; without it the body simply ends early (EOF).
    {"stream_error": "overloaded_error"}   start a stream, then send an SSE `error` event
"""
from __future__ import annotations

import base64
import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
               502: "api_error", 503: "api_error", 529: "overloaded_error"}
CUT_TEXT = "Here is the kernel. " * 20


class FakeAnthropic:
    def __init__(self, script: list[dict]):
        self.script, self.requests, self.lock = list(script), [], threading.Lock()
        self.closing = threading.Event()     # ends hanging steps at once on shutdown
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
                if "hang" in step:
                    server.closing.wait(step["hang"])
                    self.close_connection = True
                    return
                if step.get("reset"):
                    return self.reset()
                if body.get("stream"):
                    return self.stream(body, step)
                self.send_json(200, message(body, step))

            def error(self, step):
                status = step["status"]
                payload = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                                      "message": step.get("message", "scripted")}}
                self.send_json(status, payload,
                               step.get("headers", {"retry-after-ms": "10", "retry-after": "0"}))

            def reset(self):
                # SO_LINGER with a zero timeout: close() sends RST, not an orderly FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

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
                cut = step.get("cut")
                text = step.get("text", CUT_TEXT if cut is not None else "")
                full = message(body, {**step, "text": text})
                chunked = bool(step.get("chunked"))
                if chunked:
                    self.protocol_version = "HTTP/1.1"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if chunked:
                    self.send_header("transfer-encoding", "chunked")
                    self.send_header("connection", "close")
                self.end_headers()
                start = {**full, "content": [], "stop_reason": None,
                         "usage": {"input_tokens": full["usage"]["input_tokens"],
                                   "output_tokens": 1}}
                sent = text if cut is None else text[:cut]
                chunks = [sent[i:i + 200] for i in range(0, len(sent), 200)] or [""]
                events = [("message_start", {"type": "message_start", "message": start}),
                          ("content_block_start", {"type": "content_block_start", "index": 0,
                                                   "content_block": {"type": "text", "text": ""}})]
                events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                     "delta": {"type": "text_delta", "text": c}})
                           for c in chunks]
                if "stream_error" in step:
                    events.append(("error", {"type": "error", "error": {
                        "type": step["stream_error"], "message": "scripted mid-stream error"}}))
                elif cut is None:
                    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                               ("message_delta", {"type": "message_delta",
                                                  "delta": {"stop_reason": full["stop_reason"],
                                                            "stop_sequence": None},
                                                  "usage": {"output_tokens":
                                                            full["usage"]["output_tokens"]}}),
                               ("message_stop", {"type": "message_stop"})]
                for name, data in events:
                    event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    if chunked:      # one HTTP chunk per event: size line, data, CRLF
                        event = f"{len(event):x}\r\n".encode() + event + b"\r\n"
                    self.wfile.write(event)
                    self.wfile.flush()
                if cut is not None:
                    if chunked:      # a chunk that announces more bytes than ever come
                        self.wfile.write(b"400\r\nevent: content_block_delta\n")
                        self.wfile.flush()
                    self.close_connection = True
                elif chunked:
                    self.wfile.write(b"0\r\n\r\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                       kwargs={"poll_interval": 0.05})  # quick shutdown

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def user_prompts(self) -> list[str]:
        """The last user message's text (its text blocks, where it also holds images)."""
        return [text_of(r["body"]["messages"][-1]["content"]) for r in self.requests]


def text_of(content) -> str:
    return content if isinstance(content, str) else \
        "\n".join(b["text"] for b in content if b.get("type") == "text")


def input_tokens(messages: list[dict]) -> int:
    """Text at ~4 characters a token; each image as Anthropic estimates one, width*height/750
    (the size read from the PNG's header), which the real API counts in input_tokens too."""
    images = [b for m in messages if isinstance(m.get("content"), list)
              for b in m["content"] if b.get("type") == "image"]
    text = [{**m, "content": [b for b in m["content"] if b.get("type") != "image"]}
            if isinstance(m.get("content"), list) else m for m in messages]
    pixels = 0
    for block in images:
        width, height = struct.unpack(">II", base64.b64decode(block["source"]["data"])[16:24])
        pixels += width * height // 750
    return len(json.dumps(text)) // 4 + pixels


def message(body: dict, step: dict) -> dict:
    text = step["text"]
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": step.get("stop_reason", "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": step.get("input_tokens",
                                               input_tokens(body.get("messages", []))),
                      "output_tokens": step.get("output_tokens", max(1, len(text) // 4))}}
