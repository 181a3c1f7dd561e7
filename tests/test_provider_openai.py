"""The OpenAI-compatible provider (vLLM, llama.cpp, Ollama) against a local chat-completions server."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.providers import ProviderError
from kforge_nb.session import Budget, Session
from tests.test_session_anthropic import GOOD, PROBLEM, options

pytestmark = pytest.mark.slow     # sessions through the openai SDK

pytest.importorskip("openai")


class ChatServer:
    """Answers POST /v1/chat/completions with scripted texts, or with an error for a scripted
    status code (saying `retry-after-ms: 10`); keeps the request bodies."""

    def __init__(self, answers: list[str]):
        self.answers, self.requests = list(answers), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.requests.append(body)
                text = server.answers.pop(0)
                if isinstance(text, int):
                    return self.error(text)
                data = json.dumps({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 80,
                              "total_tokens": 200}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def error(self, status):
                data = json.dumps({"error": {"message": "scripted", "type": "server_error",
                                             "code": str(status)}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def test_openai_compatible_endpoint_drives_a_session(monkeypatch, tmp_path):
    server = ChatServer([f"```python\n{GOOD}```"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    session = Session(PROBLEM, "cpp", AgentConfig(provider="openai", model="qwen-coder-local"),
                      Budget(iterations=1), options(tmp_path), out=tmp_path)
    session.run()
    server.httpd.shutdown()
    assert session.history[0].result.state == "correct"
    assert server.requests[0]["model"] == "qwen-coder-local"
    assert server.requests[0]["messages"][0]["role"] == "system"
    summary = session.summary()
    assert (summary["input_tokens"], summary["output_tokens"]) == (120, 80)
    assert summary["unpriced_calls"] == 1     # a local model has no price: no guessed cost


def test_openai_compatible_endpoint_failures_are_retried_then_reported(monkeypatch):
    from kforge_nb.providers.openai import OpenAIProvider
    server = ChatServer([503, 429, "```python\nclass ModelNew: pass\n```", 500, 500, 500, 401])
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-secret-key")
    provider = OpenAIProvider(model="qwen-coder-local", attempts=3)
    waits = []
    provider.sleep = waits.append                     # no real waiting
    prompt = [{"role": "user", "content": "x"}]
    assert "ModelNew" in provider.complete("sys", prompt, 100).text     # 503, 429, then the answer
    assert len(server.requests) == 3 and waits == [0.01, 0.01]   # retry-after-ms honoured
    with pytest.raises(ProviderError, match=r"HTTP 500 .*gave up after 3 attempts: attempts "
                                            r"used up \(3 allowed\)"):
        provider.complete("sys", prompt, 100)                        # 500 thrice: attempts used up
    assert len(server.requests) == 6
    with pytest.raises(ProviderError, match=r"rejected the key \(401\): set OPENAI_API_KEY") \
            as caught:
        provider.complete("sys", prompt, 100)                        # 401: not retried
    assert len(server.requests) == 7 and "sk-local-secret-key" not in str(caught.value)
    server.httpd.shutdown()


def test_a_rounds_samples_are_drawn_at_different_temperatures(monkeypatch, tmp_path):
    """Three samples: asked at 1.0, 0.6 and 0.2 (each recorded with its sample); a recording
    keeps them, and its replay reproduces the run without asking the server again."""
    server = ChatServer([f"```python\n{GOOD}```"] * 3)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    record = tmp_path / "calls.jsonl"
    config = dict(provider="openai", model="qwen-coder-local")
    session = Session(PROBLEM, "cpp", AgentConfig(**config, record=str(record)),
                      Budget(iterations=1, samples=3, patience=None), options(tmp_path),
                      out=tmp_path / "first")
    session.run()
    assert sorted(r["temperature"] for r in server.requests) == [0.2, 0.6, 1.0]
    asked = {a.sample: json.loads((session.folder / "iter-00" / f"sample-{a.sample}" /
                                   "generation.json").read_text())["temperature"]
             for a in session.history}
    assert asked == {0: 1.0, 1: 0.6, 2: 0.2}
    recorded = [json.loads(line)["request"] for line in record.read_text().splitlines()]
    assert sorted(r["temperature"] for r in recorded) == [0.2, 0.6, 1.0]
    server.httpd.shutdown()
    replay = Session(PROBLEM, "cpp", AgentConfig(replay=str(record)),
                     Budget(iterations=1, samples=3, patience=None), options(tmp_path),
                     out=tmp_path / "replay")
    replay.run()
    assert [a.result.state for a in replay.history] == ["correct"] * 3
    assert {a.code for a in replay.history} == {a.code for a in session.history}


def test_chosen_temperatures_are_cycled_over_the_samples(monkeypatch, tmp_path):
    server = ChatServer([f"```python\n{GOOD}```"] * 3)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    session = Session(PROBLEM, "cpp", AgentConfig(provider="openai", model="m",
                                                  temperatures=(0.3, 0.9)),
                      Budget(iterations=1, samples=3, patience=None), options(tmp_path),
                      out=tmp_path)
    session.run()
    server.httpd.shutdown()
    assert sorted(r["temperature"] for r in server.requests) == [0.3, 0.3, 0.9]


def test_one_sample_is_asked_at_the_models_default(monkeypatch, tmp_path):
    server = ChatServer([f"```python\n{GOOD}```"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    Session(PROBLEM, "cpp", AgentConfig(provider="openai", model="m"), Budget(iterations=1),
            options(tmp_path), out=tmp_path).run()
    server.httpd.shutdown()
    assert "temperature" not in server.requests[0]
