"""Round four, item 5: the sandbox shares nothing and caps everything.

A red team (as root and as uid 65534) found: a 2 GiB shared anonymous mapping under a 1 GiB
cap judged `correct` (the cap counted resident minus shared pages); the memory exchange a
writable bind of the host's /dev/shm, outside the cap (1.5 GiB written there); HOME and the
kernel cache uncapped and outliving the run; and a FIFO planted as the exchange's `.owner`
that hung another evaluation in open(). Each attack here is a real candidate judged by the
real evaluator with the real sandbox, as root and (for the caps, which read the worker from
outside) as uid 65534 too.

`EXPLOITS` holds the rows whose verdict shows the defence under `kforge eval`'s own options
(benchmarks/redteam.py runs them). The attacks on the memory cap need a cap small enough to
pass on this machine (1 GiB; the CLI's is half the machine's memory), so they are a table of
their own, `CAPPED`, judged in this process and by uid 65534.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from kforge_nb.evaluator import evaluate
from kforge_nb.evaluator.sandbox import layout, usage
from kforge_nb.result import CORRECT, RUNTIME_ERROR
from tests.adversarial.support import REPO, problem, source
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the sandbox's namespaces and tmpfs are Linux-only")

EXPLOITS = {
    "memory in a memfd, written and never mapped": Case(
        "relu", "r4s_memfd", RUNTIME_ERROR,
        says=["[Errno 38] memfd_create: Function not implemented"]),
    "a SysV segment written, detached and left behind": Case(
        "relu", "r4s_sysv_shm", RUNTIME_ERROR,
        says=["[Errno 38] shmget: Function not implemented"]),
    "its kernel cache filled past its cap": Case(
        "relu", "r4s_fills_cache", RUNTIME_ERROR,
        says=["filled its kernel cache", "past its cap", "where 1 GiB"]),
}

GIB = 1 << 30
CAPPED = {    # name: candidate, judged under a 1 GiB memory cap
    "a 2 GiB shared anonymous mapping": "r4s_shared_mapping",
    "1.5 GiB in a nameless file in its memory exchange": "r4s_fills_exchange",
    "its /tmp, /dev/shm and HOME filled, each within its own size": "r4s_fills_tmpfs",
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_memory_no_cap_sees_and_a_disk_filled_are_refused(name, judge_case):  # noqa: F811
    case = EXPLOITS[name]
    result = judge_case(case)
    assert result.state == case.state, result.message
    assert result.rules == case.rules, result.message
    for fragment in case.says:
        assert fragment in result.message, result.message


@pytest.mark.parametrize("name", list(CAPPED))
def test_memory_held_outside_its_resident_pages_counts_against_the_cap(name, options):
    result = evaluate(problem("relu"), source(CAPPED[name]), "cpp",
                      options(memory_bytes=GIB, measure=False))
    assert result.state == RUNTIME_ERROR, result.message
    assert result.error["type"] == "out_of_memory", result.message
    assert "over the 1.00 GiB limit" in result.message


def test_an_honest_kernel_still_fits_under_the_same_cap(options):
    """Counting shared pages and the worker's own tmpfs refuses no honest kernel: its
    outputs cross in the memory exchange, counted, and it is judged as before."""
    result = evaluate(problem("relu"), source("cpp_relu"), "cpp",
                      options(memory_bytes=GIB, measure=False))
    assert result.state == CORRECT, result.message
    assert result.sandbox["memory"].startswith("capped at 1 GiB"), result.sandbox["memory"]


# --- what one candidate plants, and what another evaluation opens ---------------------------


class Planter:
    """r4s_plants_fifos judged in a thread, in a folder chosen here, with a secret of the
    host's for its links to point at; `go()` lets its first call finish."""

    def __init__(self, root: Path, options):
        self.secret = f"kforge-secret-{secrets.token_hex(8)}"
        secret_file = root / "secret.txt"
        secret_file.write_text(self.secret + "\n")
        self.text = source("r4s_plants_fifos").replace(
            'SECRET_PATH = "/nonexistent/kforge-secret.txt"',
            f"SECRET_PATH = {str(secret_file)!r}")
        assert str(secret_file) in self.text
        self.cache = layout.source_cache(Path(), self.text)
        self.cache.mkdir(parents=True, exist_ok=True)
        for flag in ("planted", "go"):
            (self.cache / flag).unlink(missing_ok=True)
        self.folder = root / "runs" / "planter"
        self.exchange = layout.memory_exchange(self.folder)
        self.result = None
        self.thread = threading.Thread(target=self.judge, args=(options,), daemon=True)
        self.thread.start()

    def judge(self, options) -> None:
        self.result = evaluate(problem("relu"), self.text, "cpp", options(measure=False),
                               folder=self.folder)

    def planted(self, timeout_s: float = 300) -> bool:
        return wait_for(lambda: (self.cache / "planted").exists() or not self.thread.is_alive(),
                        timeout_s) and (self.cache / "planted").exists()

    def go(self) -> None:
        (self.cache / "go").write_text("go\n")
        self.thread.join(300)


def wait_for(condition, timeout_s: float) -> bool:
    done = threading.Event()
    for _ in range(int(timeout_s / 0.05)):
        if condition():
            return True
        done.wait(0.05)
    return condition()


def files_containing(folder: Path, needle: str) -> list[str]:
    """Regular files (never through a link, never a FIFO) under `folder` holding `needle`."""
    return [str(p) for p in folder.rglob("*") if stat.S_ISREG(p.lstat().st_mode) and
            needle.encode() in p.read_bytes()]


def test_a_fifo_planted_by_one_candidate_never_blocks_another_evaluation(tmp_path, options):
    """While the first candidate's FIFOs and links sit in its exchange, HOME and cache, a
    second evaluation on the machine (which sweeps /dev/shm for stale exchanges) is judged to
    the end; the first's exchange is a link into its own tmpfs meanwhile, not a folder of the
    host's. Then the first ends: of its HOME only the small regular files are kept, its
    cache holds no FIFO or link, and nothing of it stays in /dev/shm."""
    planter = Planter(tmp_path, options)
    try:
        assert planter.planted(), "the planting candidate never got to plant"
        assert planter.exchange.is_symlink()
        assert os.readlink(planter.exchange).startswith("/proc/")
        other = {}
        second = threading.Thread(target=lambda: other.update(result=evaluate(
            problem("relu"), source("cpp_relu"), "cpp", options(measure=False))), daemon=True)
        second.start()
        second.join(300)
        assert not second.is_alive(), "the second evaluation hung on what the first planted"
        assert other["result"].state == CORRECT, other["result"].message
    finally:
        planter.go()
    result = planter.result
    assert result is not None and result.state == CORRECT, result and result.message
    kept = Path(result.artifacts) / "sandbox"
    assert (kept / "note.txt").read_text() == "a note\n"
    assert (kept / "notes" / "inner.txt").read_text() == "another note\n"
    for name in ("planted_fifo", "planted_link", "big.bin"):
        assert not os.path.lexists(kept / name), name
    assert files_containing(tmp_path / "runs", planter.secret) == []
    assert not os.path.lexists(planter.cache / "planted_fifo")
    assert not os.path.lexists(planter.cache / "planted_link")
    assert (planter.cache / "planted").exists()           # its regular files stay cached
    assert not os.path.lexists(planter.exchange)


def test_a_stale_exchange_whose_owner_is_a_fifo_a_link_or_huge_is_passed_over_at_once(
        tmp_path):
    """Unsandboxed (or where no tmpfs of its own could be mounted) the candidate owns its
    exchange folder: its `.owner` may be a FIFO, a link to a FIFO, or a sparse terabyte. The
    next evaluation's sweep of /dev/shm reads none of them beyond a pid's length, waits on
    none, and leaves those folders alone (whose they are is unknown); a folder whose owner is
    known and gone is still removed."""
    probe = layout.memory_exchange(tmp_path / "probe")
    if probe is None:
        pytest.skip("no /dev/shm here: outputs cross through the run folder")
    token = secrets.token_hex(6)
    stale = {kind: probe.parent / f"kforge-exchange-r4s-{token}-{kind}"
             for kind in ("fifo", "link", "huge", "dead")}
    try:
        for folder in stale.values():
            folder.mkdir()
        os.mkfifo(stale["fifo"] / ".owner")
        os.mkfifo(tmp_path / "elsewhere")
        os.symlink(tmp_path / "elsewhere", stale["link"] / ".owner")
        with open(stale["huge"] / ".owner", "wb") as f:
            f.truncate(1 << 40)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        (stale["dead"] / ".owner").write_text(str(dead.pid))
        made = {}
        sweep = threading.Thread(target=lambda: made.update(
            place=layout.make_memory_exchange(tmp_path / "next")), daemon=True)
        sweep.start()
        sweep.join(60)
        assert not sweep.is_alive(), "the sweep of /dev/shm hung on a stale exchange's .owner"
        assert all(stale[kind].exists() for kind in ("fifo", "link", "huge"))
        assert not stale["dead"].exists()
        shutil.rmtree(made["place"])
    finally:
        for folder in stale.values():
            shutil.rmtree(folder, ignore_errors=True)


def test_a_cache_filled_past_its_cap_is_removed_after_the_judging(judge_case):  # noqa: F811
    """What outlives a judging is bounded: the kernel cache of a text that filled it past its
    cap is gone (its next judging compiles again), and the verdict said why."""
    case = EXPLOITS["its kernel cache filled past its cap"]
    result = judge_case(case)
    assert result.state == RUNTIME_ERROR and result.error["type"] == "out_of_space"
    assert not layout.source_cache(Path(), source(case.candidate)).exists()


def test_a_folder_with_more_entries_than_its_cap_allows_is_over_it(tmp_path):
    """Entries cost the kernel memory no byte count shows: a folder of empty files is over
    its cap past MAX_ENTRIES, and the walk that says so looks at no more than that."""
    folder = tmp_path / "cache"
    folder.mkdir()
    for i in range(usage.MAX_ENTRIES + 1):
        (folder / str(i)).touch()
    watch = usage.Watch({"enabled": True, "disk_caps": [
        ["its kernel cache", str(folder), 1 << 30]]}, os.getpid())
    said = watch.disk_over(now=True)
    assert said.startswith("filled its kernel cache") and \
        f"more than {usage.MAX_ENTRIES} files and folders" in said
    (folder / "0").unlink()
    assert watch.disk_over(now=True) == ""


# --- as an unprivileged user ----------------------------------------------------------------

DRIVER = r'''
import json, sys
from kforge_nb.evaluator import EvalOptions, evaluate
from tests.adversarial.support import problem, source
out, cases = sys.argv[1], json.loads(sys.argv[2])
for name, gib in cases:
    r = evaluate(problem("relu"), source(name), "cpp", EvalOptions(
        baselines=("eager",), out_dir=out, measure=False, memory_bytes=int(gib * 2**30)))
    print(json.dumps({"name": name, "state": r.state, "message": r.message,
                      "error": r.error, "sandbox": r.sandbox, "artifacts": r.artifacts}))
'''


@pytest.mark.slow
def test_as_an_unprivileged_user_the_caps_hold_too():
    """A user runs kforge as themself: the worker's root is then reached through a user
    namespace, and its tmpfs and shared pages must still be counted by your process."""
    from tests.adversarial.test_sandbox import unprivileged_prefix
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the tests above ran the caps this way")
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("util-linux's unshare and setpriv are needed to run as uid 65534")
    work = Path(tempfile.mkdtemp(prefix="kforge-r4s-", dir="/tmp"))
    try:
        os.chmod(work, 0o755)
        for folder in ("home", "cache", "runs"):
            (work / folder).mkdir()
        for path in [work, *work.rglob("*")]:
            os.chown(path, 65534, 65534)
        cases = [["r4s_shared_mapping", 1], ["r4s_fills_exchange", 1], ["cpp_relu", 1]]
        env = {**os.environ, "HOME": str(work / "home"), "KFORGE_CACHE": str(work / "cache"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                           os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(unprivileged_prefix(work) + [
            sys.executable, "-c", DRIVER, str(work / "runs"), json.dumps(cases)],
            cwd=work, env=env, capture_output=True, text=True, timeout=900)
        results = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines())}
        assert len(results) == 3, proc.stderr[-3000:]
        box = results["cpp_relu"]["sandbox"]
        if not box.get("user_namespace", "").startswith("created"):
            pytest.skip(f"uid 65534 gets no user namespace here: {box.get('user_namespace')}")
        assert results["cpp_relu"]["state"] == CORRECT, results["cpp_relu"]["message"]
        assert box["memory"].startswith("capped"), box["memory"]
        for name in ("r4s_shared_mapping", "r4s_fills_exchange"):
            assert results[name]["state"] == RUNTIME_ERROR, results[name]["message"]
            assert results[name]["error"]["type"] == "out_of_memory", results[name]["message"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
