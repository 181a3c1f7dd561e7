"""`kforge bench`: a suite in KernelBench layout, judged in this process or by local workers,
written to a results table that survives interruption and resumes. Real CLI subprocesses,
real g++ builds, real evaluations; the Dask executor is tested in test_bench_dask.py."""
from __future__ import annotations

import ast
import json

import pytest

from kforge_nb.bench import Row, entries, fast_p, summary
from tests.support.bench_suite import EXPECTED, write_suite
from tests.support.evaluator import REPO
from tests.test_magic import ip  # noqa: F401  (fixtures: a real IPython shell,
from tests.test_notebook_live import kernel  # noqa: F401  a real kernel)

pytestmark = pytest.mark.slow     # each test judges a suite: kforge bench, its workers, kernels

FAST = ["--target", "cpp", "--no-compile-baseline", "--trials", "1", "--no-shape-check"]


@pytest.fixture
def suite(tmp_path):
    return write_suite(tmp_path)


def bench(kforge_cli, *args):
    run = kforge_cli("bench", *args, "--json", timeout=600)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout), run


def states(report) -> dict:
    return {r["id"]: r["state"] for r in report["rows"]}


def test_kernelbench_layout_gives_level_ids_in_natural_order(suite):
    problems, _ = suite
    (problems / "level1" / "10_relu.py").write_text((problems / "level1" / "1_relu.py")
                                                     .read_text())
    assert [e.id for e in entries([problems])] == [
        "level1/1_relu", "level1/2_relu_again", "level1/10_relu", "level2/3_relu_bias",
        "level2/4_relu_alone"]


def test_candidates_are_judged_into_a_table_with_fast_p(kforge_cli, suite, tmp_path):
    problems, cands = suite
    report, run = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                        "--out", "out")
    assert states(report) == EXPECTED
    s = report["summary"]
    assert (s["problems"], s["correct"], s["fast_p"]["0.0"]) == (4, 2, 0.5)
    # fast_1 counts only correct rows faster than eager: never more than fast_0
    assert s["fast_p"]["1.0"] <= s["fast_p"]["0.0"]
    folder = tmp_path / report["folder"]
    table = json.loads((folder / "results.json").read_text())
    assert states(table) == EXPECTED
    csv = (folder / "results.csv").read_text().splitlines()
    assert csv[0].startswith("id,state,") and len(csv) == 5
    assert len((folder / "results.jsonl").read_text().splitlines()) == 4
    correct = next(r for r in report["rows"] if r["id"] == "level1/1_relu")
    assert (folder / "evals" / "level1" / "1_relu" / "result.json").is_file()
    assert correct["speedup_vs_eager"] > 0 and correct["real"] is True
    assert "no candidate for level2/4_relu_alone" in \
        next(r for r in report["rows"] if r["id"] == "level2/4_relu_alone")["note"]
    assert run.returncode == 1                 # not every problem is correct


def test_the_printed_table_has_states_speedups_and_fast_p(kforge_cli, suite):
    problems, cands = suite
    run = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST, "--out", "o",
                     timeout=600)
    out = run.stdout
    assert "level1/2_relu_again" in out and "mismatch" in out
    assert "correct 2/4 (50%)" in out
    assert "fast_p vs eager:" in out and "fast_0 50%" in out
    assert "fast_p vs torch.compile:" in out
    assert "4/4" in run.stderr                 # the progress bar reached the end


def test_a_bench_resumes_where_it_stopped_and_redoes_nothing_finished(kforge_cli, suite,
                                                                     tmp_path):
    problems, cands = suite
    report, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                      "--out", "out")
    folder = tmp_path / report["folder"]
    lines = (folder / "results.jsonl").read_text().splitlines()
    # as if it had been interrupted after two problems (the last line cut mid-write)
    (folder / "results.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:30])
    finished = {json.loads(line)["id"] for line in lines[:2]}
    again, run = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                       "--out", "out")
    assert "resuming: 2 finished earlier" in run.stderr
    assert states(again) == EXPECTED
    redone = {line.split(":")[0] for line in run.stderr.splitlines()
              if line.split(":")[0] in EXPECTED}
    assert redone == set(EXPECTED) - finished
    # everything finished: a third run judges nothing
    third, run = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                       "--out", "out")
    assert states(third) == EXPECTED and "resuming: 4 finished earlier" in run.stderr
    assert not any(line.split(":")[0] in EXPECTED for line in run.stderr.splitlines())


def test_other_settings_are_refused_and_restart_keeps_the_earlier_results(kforge_cli, suite,
                                                                          tmp_path):
    problems, cands = suite
    report, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                      "--out", "out")
    run = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST, "--out", "out",
                     "--precision", "tf32")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "precision: 'strict' then, 'tf32' now" in run.stderr and "--restart" in run.stderr
    again, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                     "--out", "out", "--precision", "tf32", "--restart")
    # tf32 tolerates the 0.1 % error: the mismatch becomes correct
    assert states(again)["level1/2_relu_again"] == "correct"
    folder = tmp_path / report["folder"]
    assert len(list(folder.glob("results-*.jsonl"))) == 1


def test_local_workers_give_the_same_verdicts_as_this_process(kforge_cli, suite):
    problems, cands = suite
    report, run = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                        "--out", "out", "--workers", "2")
    assert states(report) == EXPECTED
    assert "2 local worker processes" in run.stderr
    judged = [r for r in report["rows"] if r["state"] != "no_candidate"]
    assert {r["worker"].split()[0] for r in judged} <= {"local-0", "local-1"}
    assert all(r["worker"] for r in judged)


def test_bad_folders_and_problems_are_said_plainly(kforge_cli, suite, tmp_path):
    problems, cands = suite
    run = kforge_cli("bench", str(tmp_path / "nowhere"), *FAST)
    assert run.returncode == 2 and "no such problem file or folder" in run.stderr
    run = kforge_cli("bench", str(problems), "--candidates", str(tmp_path / "none"), *FAST)
    assert run.returncode == 2 and "is not a folder" in run.stderr
    (problems / "level1" / "9_broken.py").write_text("class Model:\n    pass\n")
    report, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                      "--out", "out")
    assert states(report)["level1/9_broken"] == "bad_problem"


def test_fast_p_counts_all_problems_and_only_real_timings():
    rows = [Row("a", "correct", speedup_vs_eager=2.5, speedup_vs_compile=0.9, real=True),
            Row("b", "correct", speedup_vs_eager=1.2, speedup_vs_compile=1.1, real=True),
            Row("c", "correct", speedup_vs_eager=0.8, speedup_vs_compile=0.5, real=True),
            Row("d", "mismatch"), Row("e", "no_candidate")]
    assert [fast_p(rows, p) for p in (0, 1, 1.5, 2)] == [0.6, 0.4, 0.2, 0.2]
    assert fast_p(rows, 1, "compile") == 0.2
    s = summary(rows)
    assert s["correct_rate"] == 0.6
    assert abs(s["geomean_speedup_vs_eager"] - (2.5 * 1.2 * 0.8) ** (1 / 3)) < 1e-9
    interpreted = [Row("a", "correct", speedup_vs_eager=3.0, real=False), Row("b", "mismatch")]
    assert fast_p(interpreted, 0) == 0.5 and fast_p(interpreted, 1) is None


def test_a_local_worker_killed_mid_candidate_gets_it_requeued_once_then_reported(tmp_path):
    """Killed once: the candidate is judged again by a fresh worker. Killed twice: reported
    as runtime_error of kind worker_lost. Worker deaths are driven by the test, not timed."""
    import os
    import signal
    import threading
    import time
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.evaluator.parent.process import descendants
    from kforge_nb.executors.local import LocalWorkers
    from kforge_nb.problem import Problem
    from kforge_nb.targets import get_target
    from tests.support.bench_suite import add_waiting_problem, waiting_flag

    problems, cands = write_suite(tmp_path)
    flag = waiting_flag()
    add_waiting_problem(problems, cands)
    problem = Problem.from_file(problems / "level2" / "5_relu_waits.py")
    code = (cands / "level2" / "5_relu_waits.py").read_text()
    options = EvalOptions(baselines=("eager",), out_dir=tmp_path / "runs", trials=1,
                          shape_check=False, timing_budget_s=0.2)
    options.guardrails.allow = ["*"]

    def kill_when_judging(executor, times):
        for _ in range(times):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:   # the worker, its fork server, the candidate
                busy = [w for w in executor.workers if w.pid and len(descendants(w.pid)) >= 2]
                if busy:
                    killed = busy[0].pid
                    os.kill(killed, signal.SIGKILL)
                    while busy[0].pid == killed:       # until the executor saw it die
                        time.sleep(0.05)
                    break
                time.sleep(0.05)

    def judged(times):
        with LocalWorkers(1, log_dir=tmp_path / "logs") as executor:
            killer = threading.Thread(target=kill_when_judging, args=(executor, times))
            killer.start()
            outcome = {}
            judge = threading.Thread(target=lambda: outcome.setdefault("r", executor.evaluate(
                problem, code, get_target("cpp"), options, tmp_path / f"k{times}")))
            judge.start()
            killer.join()
            flag.touch()
            judge.join(600)
            flag.unlink()
            return outcome["r"]

    once = judged(1)
    assert once.state == "correct" and once.worker == "local-0"
    twice = judged(2)
    assert twice.state == "runtime_error" and twice.error["kind"] == "worker_lost"
    assert "died twice" in twice.message and "was killed by SIGKILL" in twice.message


def test_kforge_bench_line_magic_in_a_shell_and_in_a_headless_notebook(ip, suite, tmp_path):
    """`%kforge bench` in a real IPython shell (terminal view, blocks) and in a notebook
    executed headless by nbclient: the cell holds the table and the plot, and no widget."""
    import nbformat
    from nbclient import NotebookClient
    problems, cands = suite
    line = f"bench {problems} --candidates {cands} {' '.join(FAST)} --out {tmp_path / 'o'}"
    ip.run_line_magic("kforge", line)
    bench = ip.user_ns["_kforge_bench"]
    assert not bench.running and {r.id: r.state for r in bench.rows()} == EXPECTED
    assert bench.report()["summary"]["fast_p"]["0.0"] == 0.5

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext kforge_nb"),
        nbformat.v4.new_code_cell(f"%kforge {line} --restart"),
        nbformat.v4.new_code_cell("assert not _kforge_bench.running\n"
                                  "print(sorted(r.state for r in _kforge_bench.rows()))"),
        nbformat.v4.new_code_cell("print(sorted(r.id for r in _kforge_bench.rows()\n"
                                  "             if r.correct and r.real and r.speedup_vs_eager))")])
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[1].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    # the table, then the plotly speedup chart of the problems with a real timing
    timed = ast.literal_eval(nb.cells[3].outputs[0].text)
    assert len(shown) == (2 if timed else 1)
    if timed:
        chart = shown[1].data["application/vnd.plotly.v1+json"]["data"][0]
        assert chart["type"] == "bar" and sorted(chart["x"]) == timed
    html = shown[0].data["text/html"]
    assert "fast_0 50%" in html and "data:image/png;base64," in html
    assert "fast_p vs eager" in shown[0].data["text/plain"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "[4/4] " in printed and "level1/2_relu_again: mismatch" in printed
    assert "widget-view+json" not in nbformat.writes(nb)
    assert nb.cells[2].outputs[0].text.strip() == \
        "['correct', 'correct', 'mismatch', 'no_candidate']"


def test_the_builtin_agent_over_a_suite_with_two_local_workers(kforge_cli, tmp_path):
    """Agent mode: a session per problem, two problems at once, each judged by a worker."""
    problems = tmp_path / "suite"
    problems.mkdir()
    for name in ("relu", "softmax"):
        (problems / f"{name}.py").write_text(
            (REPO / "benchmarks" / "problems" / f"{name}.py").read_text())
    report, run = bench(kforge_cli, str(problems), *FAST, "--iterations", "1", "--workers",
                        "2", "--out", "out")
    assert states(report) == {"relu": "correct", "softmax": "correct"}
    assert "agent (builtin)" in run.stderr and "2 local worker processes" in run.stderr
    for row in report["rows"]:
        run_folder = tmp_path / row["folder"]
        assert (run_folder / "run.json").is_file() and row["iterations"] == 1
        assert row["worker"].startswith("local-")
    assert report["summary"]["fast_p_vs_compile"]["1.0"] is None    # compile was not timed


def test_a_bench_running_already_is_refused_not_written_twice(kforge_cli, suite, tmp_path):
    from kforge_nb.bench import Store
    problems, cands = suite
    report, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST,
                      "--out", "out")
    folder = tmp_path / report["folder"]
    settings = json.loads((folder / "bench.json").read_text())
    with Store(folder, settings).held():          # as another process running it would
        run = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST,
                         "--out", "out")
    assert run.returncode == 2 and "is running already (process" in run.stderr
    assert len((folder / "results.jsonl").read_text().splitlines()) == 4


def test_kforge_bench_in_a_live_kernel_shows_a_widget_then_the_table_in_its_place(
        kernel, suite, tmp_path):
    """As JupyterLab drives it (allow_stdin=True): the cell returns at once with the progress
    widget; at the end the same display becomes the table and the plot (no widget left)."""
    from tests.test_notebook_live import WIDGET, idle, messages
    problems, cands = suite
    kc = kernel()
    messages(kc, idle(kc.execute("%load_ext kforge_nb", allow_stdin=True)))
    cell = kc.execute(f"%kforge bench {problems} --candidates {cands} {' '.join(FAST)} "
                      f"--out {tmp_path / 'o'}", allow_stdin=True)
    seen = messages(kc, idle(cell))
    shown = [m["content"] for m in seen if m["msg_type"] == "display_data"]
    # the widget, and where the plotly speedup chart goes at the end
    assert len(shown) == 2 and WIDGET in shown[0]["data"] and shown[1]["data"]["text/plain"] == ""
    assert shown[0]["data"]["text/plain"].startswith("kforge bench (live view")
    display_id = shown[0]["transient"]["display_id"]
    final = messages(kc, lambda m: m["msg_type"] == "update_display_data" and
                     m["content"]["transient"]["display_id"] == display_id, timeout=300)[-1]
    data = final["content"]["data"]
    assert WIDGET not in data and "fast_0 50%" in data["text/html"]
    assert "correct 2/4" in data["text/plain"]
    plot_id = shown[1]["transient"]["display_id"]
    plot = messages(kc, lambda m: m["msg_type"] == "update_display_data" and
                    m["content"]["transient"]["display_id"] == plot_id, timeout=300)[-1]
    assert plot["content"]["data"]["application/vnd.plotly.v1+json"]["data"][0]["type"] == "bar"


def test_local_workers_are_pinned_one_gpu_each_and_start_without_credentials(tmp_path,
                                                                            monkeypatch):
    """Read off the worker processes' own environments (/proc/PID/environ), as started."""
    import time
    from kforge_nb.executors.local import LocalWorkers
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    with LocalWorkers(3, log_dir=tmp_path, gpus=["4", "7"]) as executor:
        envs = []
        for worker in executor.workers:
            worker.start()
            while b"worker_main" not in open(f"/proc/{worker.pid}/cmdline", "rb").read():
                time.sleep(0.01)                   # until exec: before, it is our own env
            raw = open(f"/proc/{worker.pid}/environ", "rb").read().split(b"\0")
            envs.append(dict(item.decode().split("=", 1) for item in raw if b"=" in item))
        assert [e.get("CUDA_VISIBLE_DEVICES") for e in envs] == ["4", "7", "4"]
        assert not any("ANTHROPIC_API_KEY" in e for e in envs)
        assert "pinned to GPUs 4, 7, 4" in executor.describe()


def test_a_bench_begun_before_an_option_existed_resumes(kforge_cli, suite, tmp_path):
    """bench.json from an older kforge lacks a newer option: at its default it is no change."""
    problems, cands = suite
    first, _ = bench(kforge_cli, str(problems), "--candidates", str(cands), *FAST, "--out", "o")
    saved = next((tmp_path / "o").glob("*/bench.json"))
    settings = json.loads(saved.read_text())
    settings.pop("no_images", None)
    settings.pop("knowledge", None)
    saved.write_text(json.dumps(settings))
    again = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST, "--out", "o")
    assert again.returncode in (0, 1), again.stderr
    assert "resuming: 4 finished earlier" in again.stderr
    changed = kforge_cli("bench", str(problems), "--candidates", str(cands), *FAST, "--out", "o",
                         "--no-images")
    assert changed.returncode == 2 and "no_images" in changed.stderr
