"""Sandbox escapes, through the real CLI in a subprocess with a real credential in its
environment: a correct ReLU that also hunts for the key, writes outside its folder and phones a
listener on 127.0.0.1. With the sandbox on, the verdict stays `correct` and none of it works;
with `--no-sandbox` the same probes succeed (so they are real probes) and the verdict says so."""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.adversarial.support import REPO, problem_file, source

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="namespaces are Linux-only")


class Listener:
    """A TCP server on 127.0.0.1 in a thread, counting the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.connections.append(conn.recv(1024))
                except OSError:
                    self.connections.append(b"")

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def escape_candidate(tmp_path: Path, port: int) -> tuple[Path, Path]:
    """The escape candidate with this test's outside path and port filled in."""
    outside = tmp_path / "outside" / "escaped.txt"
    outside.parent.mkdir()
    text = source("cpp_relu_sandbox_escape")
    text = text.replace('OUTSIDE_PATH = "/nonexistent/kforge-escape.txt"',
                        f"OUTSIDE_PATH = {str(outside)!r}").replace("PORT = 9", f"PORT = {port}")
    assert str(outside) in text and f"PORT = {port}" in text
    path = tmp_path / "cpp_relu_sandbox_escape.py"
    path.write_text(text)
    return path, outside


def kforge_eval(tmp_path: Path, candidate: Path, secret: str, *extra: str,
                env_extra: dict | None = None) -> dict:
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "ANTHROPIC_API_KEY": secret,
           **(env_extra or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "kforge_nb.cli", "eval", str(problem_file("relu")),
         str(candidate), "--target", "cpp", "--json", "--no-compile-baseline",
         "--out", str(tmp_path / "runs"), *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def files_containing(folder: Path, needle: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and
            needle.encode() in p.read_bytes()]


def test_escape_attempts_fail_and_the_verdict_stays_correct(tmp_path, listener):
    secret = f"sk-ant-test-{secrets.token_hex(16)}"
    candidate, outside = escape_candidate(tmp_path, listener.port)
    result = kforge_eval(tmp_path, candidate, secret)
    assert result["state"] == "correct", result["message"]

    folder = Path(result["artifacts"])
    escape = json.loads((folder / "sandbox" / "escape.json").read_text())
    assert escape["found"] == []                                   # no credential anywhere
    assert "ANTHROPIC_API_KEY" not in escape["env_names"]
    assert "/proc/self/environ" in escape["environ_files_read"]    # it did look
    assert files_containing(tmp_path / "runs", secret) == []       # nor in any artifact
    assert escape["outside_file"].startswith("refused")
    assert not outside.exists()
    assert escape["socket"].startswith("refused")
    assert listener.connections == []

    box = result["sandbox"]
    assert box["enabled"] is True
    assert box["network"].startswith("isolated")
    assert box["processes"].startswith("isolated")
    assert box["filesystem"].startswith("read-only outside its folder")
    assert box["env"].startswith("allow-list")     # (the key never reached the fork server)
    assert "SANDBOX OFF" not in result["message"]


def test_without_the_sandbox_the_same_probes_succeed_and_the_verdict_says_so(tmp_path, listener):
    secret = f"sk-ant-test-{secrets.token_hex(16)}"
    candidate, outside = escape_candidate(tmp_path, listener.port)
    home = tmp_path / "home"          # with no sandbox, $HOME is the user's: keep it in tmp
    home.mkdir()
    result = kforge_eval(tmp_path, candidate, secret, "--no-sandbox",
                         env_extra={"HOME": str(home)})
    assert result["state"] == "correct", result["message"]
    assert "SANDBOX OFF" in result["message"]
    box = result["sandbox"]
    assert box["enabled"] is False
    for layer in ("env", "network", "filesystem", "processes"):
        assert box[layer].startswith("not isolated"), (layer, box[layer])

    escape = json.loads((home / "escape.json").read_text())
    assert escape["outside_file"] == "written" and outside.read_text() == "escaped\n"
    assert escape["socket"] == "connected"
    assert listener.connections == [b"hello from the candidate\n"]
