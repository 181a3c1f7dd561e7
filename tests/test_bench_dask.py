"""`kforge bench --cluster`: a real Dask scheduler and two real workers, started here as
separate processes on 127.0.0.1. The bench gives the verdicts the local executor gives; a
worker killed while it judges a candidate gets the candidate re-queued and the bench
completes; candidates go to workers that advertise what their target needs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.bench_suite import EXPECTED, add_waiting_problem, waiting_flag, write_suite
from tests.support.evaluator import EXAMPLES

pytestmark = pytest.mark.slow     # a real Dask scheduler and two workers, started per test

distributed = pytest.importorskip("distributed")

FAST = ["--target", "cpp", "--no-compile-baseline", "--trials", "1", "--no-shape-check"]
BIN = os.path.dirname(sys.executable)


def until(condition, what: str, timeout: float = 180.0):
    """Poll for an event (not a duration): fails only if it never comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """A scheduler and named workers, each its own process group (killed whole)."""

    def __init__(self, root):
        self.root, self.procs = root, {}
        self.file = root / "scheduler.json"
        # the scheduler reports a lost task at once: the re-queue under test is kforge's own
        env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
        self.start("scheduler", [f"{BIN}/dask", "scheduler", "--host", "127.0.0.1", "--port",
                                 "0", "--no-dashboard", "--scheduler-file", str(self.file)], env)
        self.address = until(lambda: self.file.is_file() and json.loads(
            self.file.read_text() or "{}").get("address"), "the scheduler")

    def start(self, name, argv, env=None):
        log = open(self.root / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=log, env=env or os.environ,
                                            start_new_session=True)

    def worker(self, name, *resources):
        self.start(name, [f"{BIN}/dask", "worker", self.address, "--name", name, "--nthreads",
                          "1", "--no-nanny", "--no-dashboard",
                          *(["--resources", " ".join(resources)] if resources else [])])

    def client(self):
        return distributed.Client(self.address, timeout=30, set_as_default=False)

    def close(self):
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


def workers_up(client, count):
    return until(lambda: len(client.scheduler_info(n_workers=-1)["workers"]) >= count,
                 f"{count} workers")


def test_a_dask_bench_gives_the_local_verdicts_and_survives_a_killed_worker(
        cluster, kforge_cli, tmp_path):
    problems, cands = write_suite(tmp_path)
    flag = waiting_flag()
    waiting = add_waiting_problem(problems, cands)
    expected = {**EXPECTED, waiting: "correct"}
    cluster.worker("wA")
    cluster.worker("wB")
    client = cluster.client()
    workers_up(client, 2)
    args = [str(problems), "--candidates", str(cands), *FAST, "--allow", "*", "--json"]

    bench = subprocess.Popen(
        [sys.executable, "-m", "kforge_nb.cli", "bench", *args, "--cluster", cluster.address,
         "--out", "dask"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    # the worker judging the waiting candidate is killed while it judges it
    busy = until(lambda: next((w for w, keys in client.processing().items()
                               if any("5_relu_waits" in str(k) for k in keys)), None),
                 "a worker to take the waiting candidate")
    pids = client.run(os.getpid)
    name = next(n for n, p in cluster.procs.items() if p.pid == pids[busy])
    os.killpg(cluster.procs[name].pid, signal.SIGKILL)
    flag.touch()
    out, err = bench.communicate(timeout=600)
    assert bench.returncode in (0, 1), err
    report = json.loads(out)
    got = {r["id"]: r for r in report["rows"]}
    assert {i: r["state"] for i, r in got.items()} == expected
    survivor = ({"wA", "wB"} - {name}).pop()
    assert got[waiting]["worker"].startswith(survivor)     # re-queued on the other worker
    # the evaluation's files came back into the bench's folder
    result = json.loads((tmp_path / got["level1/1_relu"]["folder"] / "result.json").read_text())
    assert result["state"] == "correct" and result["worker"]
    assert (tmp_path / got["level1/1_relu"]["folder"] / "candidate.py").is_file()

    local = kforge_cli("bench", *args, "--workers", "2", "--out", "local", timeout=600)
    assert {r["id"]: r["state"] for r in json.loads(local.stdout)["rows"]} == expected
    client.close()


def test_each_candidate_goes_to_a_worker_that_can_run_its_target(cluster, tmp_path):
    """Metal needs MPS=1: with no such worker it is unavailable, naming the resource; with
    one (here a Linux worker that only says it has MPS) the candidate goes there, which
    judges it as far as Linux can (the shader cannot run: unavailable, saying why)."""
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.executors.cluster import DaskCluster
    from kforge_nb.problem import Problem
    from kforge_nb.targets import get_target
    problem = Problem.from_file(EXAMPLES / "softmax.py")
    metal = (EXAMPLES / "metal_softmax.py").read_text()
    options = EvalOptions(baselines=("eager",), out_dir=tmp_path / "runs")
    cluster.worker("cpu-only")
    executor = DaskCluster(cluster.address)
    workers_up(executor.client, 1)
    result = executor.evaluate(problem, metal, get_target("metal"), options, tmp_path / "a")
    assert result.state == "unavailable" and "advertises MPS=1" in result.message
    cluster.worker("mac", "MPS=1")
    workers_up(executor.client, 2)
    result = executor.evaluate(problem, metal, get_target("metal"), options, tmp_path / "b")
    assert result.worker.startswith("mac")
    assert result.state == "unavailable" and "MPS is not available on this host" in result.message
    cpp = executor.evaluate(problem, (EXAMPLES / "cpp_softmax.py").read_text(),
                            get_target("cpp"), options, tmp_path / "c")
    assert cpp.state == "correct" and cpp.worker
    executor.close()


def test_an_unreachable_scheduler_is_a_clear_error(kforge_cli, tmp_path):
    problems, cands = write_suite(tmp_path)
    run = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST,
                     "--cluster", "tcp://127.0.0.1:9")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in run.stderr


def test_kforge_worker_offers_this_machine_to_a_cluster(cluster, tmp_path):
    """`kforge worker ADDRESS` starts Dask workers that advertise what this machine has (on
    a machine without a GPU or MPS: one CPU worker, no resources) and judges candidates."""
    from kforge_nb.executors.cluster import DaskCluster, worker_commands
    assert [argv[argv.index("--resources") + 1] for argv, _ in
            worker_commands("tcp://h:1", ["0", "1"], False)] == ["GPU=1", "GPU=1"]
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in
            worker_commands("tcp://h:1", ["0", "1"], False)] == ["0", "1"]
    assert "MPS=1" in worker_commands("tcp://h:1", [], True)[0][0]
    cluster.start("kforge-worker", [f"{BIN}/kforge", "worker", cluster.address,
                                    "--name", "here"])
    executor = DaskCluster(cluster.address)
    workers = workers_up(executor.client, 1) and executor.workers()
    assert [w["name"] for w in workers.values()] == ["here-cpu"]
    assert all(not w.get("resources") for w in workers.values())
    assert "1 workers" in executor.describe()
    executor.close()


def test_the_agent_over_a_suite_with_its_candidates_judged_on_the_cluster(cluster, kforge_cli,
                                                                           tmp_path):
    """Agent mode: sessions run here, every candidate of theirs is judged on a Dask worker,
    in the same sandbox as it would be here."""
    from kforge_nb.evaluator import EvalOptions, evaluate
    from kforge_nb.problem import Problem
    problems = tmp_path / "suite"
    problems.mkdir()
    (problems / "relu.py").write_text(
        (EXAMPLES.parent.parent.parent / "benchmarks" / "problems" / "relu.py").read_text())
    cluster.worker("only")
    report_run = kforge_cli("bench", str(problems), *FAST, "--iterations", "1", "--json",
                            "--cluster", cluster.address, "--out", "out", timeout=600)
    assert report_run.returncode == 0, report_run.stderr
    row = json.loads(report_run.stdout)["rows"][0]
    assert row["state"] == "correct" and row["worker"].startswith("only")
    run_folder = tmp_path / row["folder"]
    remote = json.loads(next(run_folder.glob("iter-00/sample-0/result.json")).read_text())
    here = evaluate(Problem.from_file(problems / "relu.py"),
                    (run_folder / "iter-00" / "sample-0" / "candidate.py").read_text(), "cpp",
                    EvalOptions(baselines=("eager",), trials=1, out_dir=tmp_path / "here"))
    assert remote["state"] == here.state == "correct"
    for part in ("enabled", "network", "processes"):       # the same isolation, there as here
        assert remote["sandbox"][part] == here.sandbox[part]
    assert remote["sandbox"]["env"].startswith("allow-list:") and \
        here.sandbox["env"].startswith("allow-list:")
    assert str(run_folder) in remote["sandbox"]["filesystem"]    # its paths point here


def test_a_scheduler_lost_mid_bench_is_one_line_and_the_finished_rows_resume(cluster, tmp_path):
    problems, cands = write_suite(tmp_path)
    flag = waiting_flag()
    add_waiting_problem(problems, cands)
    cluster.worker("wA")
    client = cluster.client()
    workers_up(client, 1)
    args = [sys.executable, "-m", "kforge_nb.cli", "bench", str(problems), "--candidates",
            str(cands), *FAST, "--allow", "*", "--out", "out"]
    bench = subprocess.Popen([*args, "--cluster", cluster.address], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until(lambda: any("5_relu_waits" in str(k) for keys in client.processing().values()
                      for k in keys), "the waiting candidate to be under way")
    client.close()
    os.killpg(cluster.procs["scheduler"].pid, signal.SIGKILL)
    _, err = bench.communicate(timeout=300)
    assert bench.returncode == 2 and "Traceback" not in err
    assert "lost the Dask scheduler at " + cluster.address in err
    assert "4 finished problems are saved" in err
    flag.touch()
    cluster.close()
    # another cluster: the same bench resumes and judges only the fifth problem
    (tmp_path / "again").mkdir()
    again = Cluster(tmp_path / "again")
    try:
        again.worker("wB")
        done = subprocess.run([*args, "--cluster", again.address, "--json"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert "resuming: 4 finished earlier" in done.stderr
        rows = json.loads(done.stdout)["rows"]
        assert {r["id"]: r["state"] for r in rows} == {**EXPECTED, "level2/5_relu_waits":
                                                       "correct"}
    finally:
        again.close()
