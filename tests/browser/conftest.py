"""A real browser over a real JupyterLab: session fixtures for tests/browser/.

- Skips this whole folder, with the reason, when Debian's chromium (/usr/bin/chromium), the
  Python `playwright` package or `jupyterlab` is missing (`bash .ci/browser-deps .venv` installs
  them; Playwright never downloads a browser here, it drives /usr/bin/chromium).
- `jupyter_lab`: `python -m jupyterlab` from this interpreter's environment on 127.0.0.1, a free
  port, a random token, root_dir a tmp folder; JUPYTER_CONFIG_DIR/DATA_DIR/RUNTIME_DIR,
  IPYTHONDIR and KFORGE_CACHE under tmp, so nothing of the user's (~/.jupyter, ~/.local, lab
  workspaces, ~/.cache) leaks in, while the environment's share/jupyter (where pip puts the
  prebuilt labextensions: kforge's, anywidget's, the widget manager's) stays on JUPYTER_PATH.
  The server's log is kept beside the screenshots.
- `browser`: chromium headless, `--no-sandbox` (CI runs as root).
- `lab_page`: a page whose console errors and page errors are collected (`lab_page.errors`), with
  `lab_page.shot(step)` writing kforge-runs/browser/<test>-NN-<step>.png; every test leaves its
  console lines there (<test>-console.txt), and a failing one a last screenshot (NN-FAILED.png)
  and the page's text (<test>-FAILED-page.txt).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("KFORGE_CHROMIUM", "/usr/bin/chromium")
SHOTS = REPO / "kforge-runs" / "browser"          # CI artifacts (kforge-runs/ is git-ignored)
SERVER_START_TIMEOUT = 180.0                      # seconds: a cold `jupyter lab` on a busy 2-core box


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives JupyterLab in a real headless chromium (tests/browser/; "
                   "needs `bash .ci/browser-deps`)")


def _missing() -> list[str]:
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"chromium ({CHROMIUM})")
    for module, name in (("playwright.sync_api", "playwright"), ("jupyterlab", "jupyterlab")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{name} (Python package)")
    return missing


def pytest_collection_modifyitems(config, items):
    missing = _missing()
    if not missing:
        return
    skip = pytest.mark.skip(reason="browser test needs " + ", ".join(missing)
                            + ": run `bash .ci/browser-deps .venv`")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so fixtures can tell a failed test at teardown."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


# ---------------------------------------------------------------------------------------------
# JupyterLab


@dataclass
class Lab:
    url: str                  # http://127.0.0.1:PORT
    token: str
    root: Path                # --ServerApp.root_dir: notebooks go here
    log: Path

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 30.0):
        """A REST call with the token; returns the decoded JSON (None for an empty body)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def page_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _user_settings(config_dir: Path) -> None:
    """Lab settings that keep a test run quiet and its DOM complete:
    no news/update toast (and no request to jupyter.org: there is no network in CI), and every
    cell attached to the DOM (windowingMode none) so the page text holds all outputs."""
    settings = {
        "@jupyterlab/apputils-extension/notification": {
            "fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    }
    for name, value in settings.items():
        path = config_dir / "lab" / "user-settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2))


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("jupyterlab")
    root, home = base / "root", base / "home"
    dirs = {name: base / name for name in ("config", "data", "runtime", "ipython", "cache")}
    for d in (root, home, *dirs.values()):
        d.mkdir()
    _user_settings(dirs["config"])
    # No call out to the internet from the server either (news feed, update check): CI has none.
    (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps(
        {"LabApp": {"news_url": None,
                    "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}, indent=2))
    SHOTS.mkdir(parents=True, exist_ok=True)
    log = SHOTS / "jupyter-server.log"

    env_share = Path(sys.prefix) / "share" / "jupyter"   # pip's labextensions/, kernels/
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "JUPYTER_PATH": str(env_share),
        "IPYTHONDIR": str(dirs["ipython"]),
        "KFORGE_CACHE": str(dirs["cache"]),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    }
    for key in ("JUPYTER_PREFER_ENV_PATH", "JUPYTERLAB_DIR", "JUPYTERLAB_SETTINGS_DIR",
                "JUPYTERLAB_WORKSPACES_DIR", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)

    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
           "--ServerApp.terminals_enabled=False"]
    lab = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, log=log)
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode} before answering:\n"
                            + _tail(log))
            try:
                status = lab.api("GET", "/api/status", timeout=5)
                if isinstance(status, dict) and "started" in status:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer /api/status in "
                            f"{SERVER_START_TIMEOUT:.0f} s:\n" + _tail(log))
            time.sleep(0.25)
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------------------------------------
# Browser


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                               args=["--no-sandbox", "--disable-dev-shm-usage",
                                     "--disable-gpu", "--no-first-run"])
        try:
            yield b
        finally:
            b.close()
    finally:
        pw.stop()


@dataclass
class LabPage:
    """A Playwright page plus what the test keeps of it."""
    page: object
    name: str
    console: list[str] = field(default_factory=list)   # every console line, for the record
    errors: list[str] = field(default_factory=list)    # console errors and uncaught page errors
    shots: list[Path] = field(default_factory=list)

    def shot(self, step: str, focus=None) -> Path:
        """Screenshot the page as NN-step.png; `focus` (a locator) is scrolled to the top of
        the notebook first, so a tall output shows its part that matters."""
        if focus is not None:
            try:
                if focus.count():
                    focus.first.evaluate("e => e.scrollIntoView({block: 'start'})")
            except Exception:  # noqa: BLE001 - a screenshot never fails a test
                pass
        path = SHOTS / f"{self.name}-{len(self.shots) + 1:02d}-{_slug(step)}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.shots.append(path)
        return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "step"


@pytest.fixture
def lab_page(browser, request):
    name = _slug(request.node.name)
    for old in SHOTS.glob(f"{name}-*"):
        old.unlink()
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    lp = LabPage(page=page, name=name)

    def on_console(msg):
        loc = msg.location or {}
        where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
        line = f"[{msg.type}] {msg.text}{where}"
        lp.console.append(line)
        if msg.type == "error":
            lp.errors.append(line)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: lp.errors.append(f"[pageerror] {exc}"))
    yield lp

    report = getattr(request.node, "rep_call", None)
    try:
        if report is None or report.failed:
            try:
                lp.shot("FAILED")
            except Exception as exc:  # noqa: BLE001 - a dead page must not hide the failure
                lp.console.append(f"(no failure screenshot: {exc})")
            try:
                (SHOTS / f"{name}-FAILED-page.txt").write_text(
                    page.evaluate("document.body.innerText"))
            except Exception:  # noqa: BLE001
                pass
        (SHOTS / f"{name}-console.txt").write_text("\n".join(lp.console) + "\n")
    finally:
        context.close()
