"""Sandbox escapes, through the real CLI in a subprocess with a real credential in its
environment: a correct ReLU that also hunts for the key, writes outside its folder and phones a
listener on 127.0.0.1. With the sandbox on, the verdict stays `correct` and none of it works;
with `--no-sandbox` the same probes succeed (so they are real probes) and the verdict says so."""
from __future__ import annotations

import ast
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
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


# --- the second round: privilege, mounts, sockets, shared memory, what is visible ------------


class UnixListeners:
    """A Unix socket file and an abstract Unix socket, each counting what connects."""

    def __init__(self, folder: Path, token: str):
        self.path = folder / "listener.sock"
        self.abstract = f"{token}-abstract"
        self.connections: list[str] = []
        self.socks = []
        for address, label in ((str(self.path), "file"), ("\0" + self.abstract, "abstract")):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(address)
            sock.listen(8)
            sock.settimeout(0.2)
            self.socks.append((sock, label))
        os.chmod(self.path, 0o777)              # any user could connect, were it reachable
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            for sock, label in self.socks:
                try:
                    conn, _ = sock.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                with conn:
                    conn.settimeout(2)
                    try:
                        conn.recv(1024)
                    except OSError:
                        pass
                self.connections.append(label)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        for sock, _ in self.socks:
            sock.close()


class Scene:
    """What the probes look for, planted in `root`: a project folder (cwd) with a `.env`,
    another run's folder beside this one's, the user's HOME with a key, the shared cache."""

    def __init__(self, root: Path, port: int):
        self.root, self.port = root, port
        self.token = f"kforge-probe-{secrets.token_hex(6)}"
        self.secret = f"sk-ant-test-{secrets.token_hex(16)}"
        self.project = root / "project"
        self.home = root / "home"
        self.cache = root / "cache"
        self.runs = self.project / "runs"
        self.outside = root / "outside" / "escaped.txt"
        self.sibling = self.runs / "20200101-000000-relu-cpp" / "candidate.py"
        for folder in (self.project, self.home / ".ssh", self.cache / "baselines",
                       self.cache / "locks", self.outside.parent, self.sibling.parent):
            folder.mkdir(parents=True, exist_ok=True)
        (self.project / ".env").write_text(f"ANTHROPIC_API_KEY={self.secret}\n")
        (self.home / ".ssh" / "id_rsa").write_text(f"PRIVATE KEY {self.secret}\n")
        self.sibling.write_text(f"# another run's candidate {self.secret}\n")
        self.unix = UnixListeners(root, self.token)

    def candidate(self, isolate: int, big_mb: int) -> Path:
        text = source("cpp_relu_sandbox_probes")
        values = {"ISOLATE": isolate, "BIG_MB": big_mb, "PORT": self.port,
                  "TOKEN": self.token, "OUTSIDE_PATH": str(self.outside),
                  "UNIX_SOCKET": str(self.unix.path), "ABSTRACT_SOCKET": self.unix.abstract,
                  "PROJECT_ENV": str(self.project / ".env"), "SIBLING_FILE": str(self.sibling),
                  "RUNS_DIR": str(self.runs), "PARENT_HOME_FILE": str(self.home / ".ssh" /
                                                                      "id_rsa"),
                  "SHARED_CACHE": str(self.cache)}
        tree = ast.parse(text)
        lines = text.splitlines()
        for node in tree.body:      # module-level assignments only, never the docstring
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                    node.targets[0].id in values:
                lines[node.lineno - 1] = f"{node.targets[0].id} = {values[node.targets[0].id]!r}"
        text = "\n".join(lines) + "\n"
        assigned = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(text).body
                    if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and
                    n.targets[0].id in values}
        assert assigned == values, assigned     # ISOLATE above all: 0 runs on the host's mounts
        path = self.root / "cpp_relu_sandbox_probes.py"
        path.write_text(text)
        return path

    def eval(self, candidate: Path, *extra: str, prefix: tuple = ()) -> dict:
        pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": pythonpath, "ANTHROPIC_API_KEY": self.secret,
               "HOME": str(self.home), "KFORGE_CACHE": str(self.cache)}
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "kforge_nb.cli", "eval", str(problem_file("relu")),
             str(candidate), "--target", "cpp", "--json", "--no-compile-baseline",
             "--out", str(self.runs), *extra],
            cwd=self.project, env=env, capture_output=True, text=True, timeout=600)
        assert proc.stdout.strip(), proc.stderr[-3000:]
        return json.loads(proc.stdout)

    def leftovers(self) -> list[str]:
        """Notes and the big file, where the host would keep them."""
        return [str(p) for folder in (Path("/dev/shm"), Path("/tmp"))
                for p in folder.glob(f"{self.token}*")]

    def close(self) -> None:
        self.unix.close()
        for path in self.leftovers():
            Path(path).unlink()


@pytest.fixture
def scene(tmp_path, listener):
    made = Scene(tmp_path, listener.port)
    yield made
    made.close()


def refused(value) -> bool:
    return isinstance(value, str) and value.startswith("refused")


def assert_all_refused(probes: dict, scene: Scene, listener: Listener) -> None:
    assert refused(probes["umount_proc"]["umount"]), probes["umount_proc"]
    assert probes["umount_proc"]["secrets"] == "0"
    assert refused(probes["remount_root"]["remount"]), probes["remount_root"]
    assert refused(probes["remount_root"]["write"]) and not scene.outside.exists()
    assert refused(probes["setns"]["setns"]), probes["setns"]
    assert refused(probes["setns"]["connect"]) and listener.connections == []
    assert refused(probes["user_namespace"]["unshare"]), probes["user_namespace"]
    assert refused(probes["user_namespace"]["clone"]), probes["user_namespace"]
    assert refused(probes["unix_socket"]) and refused(probes["abstract_socket"])
    assert scene.unix.connections == []
    for key in ("project_env", "sibling_run", "parent_home", "cache_baseline", "cache_lock"):
        assert refused(probes[key]), (key, probes[key])
    assert probes["runs_listed"] == [] or all(not name.startswith("2020")
                                              for name in probes["runs_listed"])
    assert list(scene.cache.rglob("planted*")) == []        # (the parent's own locks are there)
    assert probes["note_shm"] == probes["note_tmp"] == "written"   # its own, private ones


def test_the_sandbox_refuses_privileged_and_filesystem_escapes(scene, listener):
    """As root (CI): no capabilities left to mount, unmount or enter a namespace; nothing of the
    host's file system but what the worker needs; /tmp and /dev/shm its own."""
    candidate = scene.candidate(isolate=0, big_mb=300)
    first = scene.eval(candidate)
    assert first["state"] == "correct", first["message"]
    probes = json.loads((Path(first["artifacts"]) / "sandbox" / "probes.json").read_text())
    assert_all_refused(probes, scene, listener)
    assert probes["notes_found"] == []
    assert probes["big_shm"].startswith(("written", "refused"))    # capped, and then gone:
    assert scene.leftovers() == []                                 # nothing on the host's
    box = first["sandbox"]
    assert box["filesystem"].startswith("read-only outside its folder")
    assert box["privileges"].startswith("dropped") and box["syscalls"].startswith("filtered")
    assert box["tmp"].startswith("private")
    if os.geteuid() == 0:
        assert probes["uid"] == 65534 and "uid 65534" in box["privileges"]
    assert "not isolated here" not in first["message"]

    second = scene.eval(candidate)           # a second candidate finds nothing the first left
    assert second["state"] == "correct", second["message"]
    again = json.loads((Path(second["artifacts"]) / "sandbox" / "probes.json").read_text())
    assert again["notes_found"] == []
    assert files_containing(scene.runs, scene.secret) == [str(scene.sibling)]


def test_without_the_sandbox_the_second_round_of_probes_succeeds(scene, listener):
    """The same probes are real: with --no-sandbox (as root) they work. The mount probes run
    in a child's private mount namespace (ISOLATE), so the host's mounts stay as they are."""
    if os.geteuid() != 0:
        pytest.skip("the mount and namespace probes need root to succeed without the sandbox")
    candidate = scene.candidate(isolate=1, big_mb=0)
    first = scene.eval(candidate, "--no-sandbox")
    assert first["state"] == "correct", first["message"]
    probes = json.loads((scene.home / "probes.json").read_text())
    assert probes["umount_proc"]["umount"] == "ok", probes["umount_proc"]
    assert probes["remount_root"] == {"remount": "ok", "write": "ok"}
    assert scene.outside.read_text() == "escaped\n"
    assert probes["setns"] == {"setns": "ok", "connect": "ok"}
    assert probes["user_namespace"] == {"unshare": "ok", "clone": "ok"}
    assert probes["unix_socket"].startswith("connected"), probes["unix_socket"]
    assert probes["abstract_socket"].startswith("connected"), probes["abstract_socket"]
    for key in ("project_env", "sibling_run", "parent_home"):
        assert probes[key].startswith("read"), (key, probes[key])
    assert probes["cache_baseline"] == probes["cache_lock"] == "written"
    second = scene.eval(candidate, "--no-sandbox")
    assert second["state"] == "correct", second["message"]
    again = json.loads((scene.home / "probes.json").read_text())
    assert sorted(again["notes_found"]) == sorted(scene.leftovers())   # the first one's notes
    assert again["notes_found"]
    for _ in range(50):                      # the listener thread counts them as they come
        if len(listener.connections) >= 2 and len(scene.unix.connections) >= 4:
            break
        threading.Event().wait(0.1)
    assert listener.connections.count(b"hello via setns\n") == 2
    assert sorted(scene.unix.connections) == ["abstract", "abstract", "file", "file"]


def unprivileged_prefix(workdir: Path) -> list[str]:
    """`unshare --mount` + `setpriv` to uid 65534, with the interpreter made reachable: a
    folder on its way that others may not enter (here /root, mode 700) gets a mode-755 tmpfs
    over it in that private mount namespace, with what lies below it bound back."""
    needed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                             sys.executable, str(REPO))}
    blocked: dict[str, set[str]] = {}
    for path in needed:
        parts = Path(path).parts
        for i in range(1, len(parts) - 1):
            folder = Path(*parts[:i + 1])
            if not os.stat(folder).st_mode & 0o001:
                blocked.setdefault(str(folder), set()).add(parts[i + 1])
                break
    lines, n = ["set -e"], 0
    for folder, children in blocked.items():
        held = []
        for child in sorted(children):
            holder = workdir / f".held-{n}"
            n += 1
            holder.mkdir()
            lines.append(f"mount --bind '{folder}/{child}' '{holder}'")
            held.append((child, holder))
        lines.append(f"mount -t tmpfs -o mode=755 tmpfs '{folder}'")
        for child, holder in held:
            lines += [f"mkdir '{folder}/{child}'", f"mount --move '{holder}' '{folder}/{child}'"]
    lines.append('exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines), "sh"]


@pytest.mark.slow
def test_as_an_unprivileged_user_the_same_escapes_fail(listener):
    """CI runs as root; a user runs kforge as themself. Then the sandbox builds itself in a
    user namespace, where a native mount(MS_REMOUNT|MS_BIND) would otherwise work."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the tests above ran the sandbox this way")
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("util-linux's unshare and setpriv are needed to run as uid 65534")
    workdir = Path(tempfile.mkdtemp(prefix="kforge-unprivileged-", dir="/tmp"))
    scene = None
    try:
        os.chmod(workdir, 0o755)
        scene = Scene(workdir, listener.port)
        candidate = scene.candidate(isolate=0, big_mb=300)
        for path in [workdir, *workdir.rglob("*")]:
            if path != scene.unix.path:
                os.chown(path, 65534, 65534, follow_symlinks=False)
        prefix = unprivileged_prefix(workdir)
        result = scene.eval(candidate, prefix=prefix)
        box = result["sandbox"]
        if not box.get("user_namespace", "").startswith("created"):
            pytest.skip(f"uid 65534 gets no user namespace here: {box.get('user_namespace')}")
        assert result["state"] == "correct", result["message"]
        probes = json.loads((Path(result["artifacts"]) / "sandbox" / "probes.json").read_text())
        assert probes["uid"] == 65534
        assert_all_refused(probes, scene, listener)
        assert probes["notes_found"] == [] and scene.leftovers() == []
        assert box["filesystem"].startswith("read-only outside its folder")
        assert box["privileges"].startswith("dropped") and "user namespace" in box["privileges"]
        assert box["syscalls"].startswith("filtered") and box["tmp"].startswith("private")
        assert "not isolated here" not in result["message"]
        second = scene.eval(candidate, prefix=prefix)
        again = json.loads((Path(second["artifacts"]) / "sandbox" / "probes.json").read_text())
        assert second["state"] == "correct" and again["notes_found"] == []
    finally:
        if scene is not None:
            scene.close()
        shutil.rmtree(workdir, ignore_errors=True)
