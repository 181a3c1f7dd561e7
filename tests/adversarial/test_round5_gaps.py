"""Round five of the trust boundary (issue 37, the gaps its last review found): the candidate's
words quoted wherever they are shown, no read of a place a candidate can reach that waits on a
FIFO or follows a link, integer inputs drawn anew for each timed call, a measure hook the
candidate cannot tell apart, and a judge that dies where the candidate could have killed it
never said as the reference failing.

EXPLOITS and RUNS_HERE are real candidates (tests/adversarial/candidates/r5_*.py, each one's
docstring says what it tries) judged by the real evaluator; benchmarks/redteam.py runs them
through `kforge eval` too. Where a verdict is `correct` either way and what is forged lies
beside it (the head-to-head's reason, the hook's figures, another evaluation's wait, a memo
served in the timed calls), a test of its own checks that.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kforge_nb.evaluator import Evaluation, evaluate
from kforge_nb.evaluator.parent.jobs import reference_job
from kforge_nb.evaluator.parent.verdicts import CONTROL, QUOTE
from kforge_nb.executors.remote import packed
from kforge_nb.guardrails import Guardrails
from kforge_nb.problem import ProblemError
from kforge_nb.result import CORRECT, REJECTED, RUNTIME_ERROR
from kforge_nb.targets import get_target
from tests.adversarial.support import REPO, assert_runs_here, candidate_file, problem, \
    problem_file, source
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401  (a fixture)

POSED = "the reference itself failed"      # what a candidate would have the evaluator say
BAN = "std::cout[^;]*"                     # a user's ban on printing from kernels
NO_SANDBOX = {"sandbox": False}
JUDGE = "the judge (the worker that runs the reference and checks the candidate's outputs)"

EXPLOITS = {
    "a --ban match that holds escape sequences and a line break before a kforge line": Case(
        "relu", "r5_ban_quotes_a_kforge_line", REJECTED, [f"user-ban:{BAN}"],
        says=["std::cout\\x1b[2K\\x1b[G\\nkforge: relu: the reference itself fail"],
        options={"guardrails": Guardrails(bans=[BAN])}),
    "the judge killed by the candidate (--no-sandbox)": Case(
        "relu", "r5_kills_the_judge", RUNTIME_ERROR,
        says_re=rf"^{re.escape(JUDGE)} stopped while answering `(prepare|check)`: the worker "
                r"process was killed by SIGKILL; the candidate's processes share its PID "
                r"namespace \(no sandbox\) and could signal it, so the verdict is the candidate's",
        options=NO_SANDBOX),
}

# name -> (problem, candidate, target, native calls over the 6 trials): correct, with what
# they try checked by the tests below
RUNS_HERE = {
    "plants FIFOs and links where other evaluations read (in the sandbox: its own folders)":
        ("relu", "r5_plants_fifos_in_the_cache", "cpp", "native x6"),
    "answers zeros under the measure hook's old fixed seed (2000)":
        ("relu", "r5_knows_the_hook_seed", "cpp", "native x6"),
    "a C++ bag sum that memoises its answers on a hash of the ids (an integer input)":
        ("r5_bag_sum", "r5_cpp_bag_sum_id_memo", "cpp", "native x18"),
}


def own_lines(message: str) -> list[str]:
    """The lines of a message that are the evaluator's (not quoted)."""
    return [line for line in message.split("\n") if not line.startswith(QUOTE)]


def assert_the_evaluators_words(message: str) -> None:
    assert CONTROL.search(message) is None, repr(message)     # escapes, not sequences
    assert not any(line.startswith("kforge:") for line in own_lines(message)), message


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_exploit_gets_its_verdict(name, judge_case):  # noqa: F811
    case = EXPLOITS[name]
    result = judge_case(case)
    assert result.state == case.state, result.message
    assert result.rules == case.rules, result.message
    for fragment in case.says:
        assert fragment in result.message, result.message
    if case.says_re:
        assert re.search(case.says_re, result.message), result.message
    assert_the_evaluators_words(result.message)


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_runs_here_is_correct(name, options):
    assert_runs_here(RUNS_HERE[name], options)


# --- 1. the rival's failure, quoted -------------------------------------------------------------

def test_a_rivals_failure_is_quoted_in_the_void_head_to_head(options):
    """The rival raises in its constructor with a kforge line behind escape sequences: the
    candidate's verdict stands, and the head-to-head's reason quotes the rival's words."""
    result = evaluate(problem("relu"), source("cpp_relu"), "cpp",
                      options(rival=source("r5_rival_says_kforge"), rival_id="0.0"))
    assert result.state == CORRECT, result.message
    versus = result.timing.versus
    assert versus["verdict"] == "void", versus
    why = versus["why"]
    assert why.startswith("`construct` failed: RuntimeError:\n"), why
    assert f"{QUOTE}\\x1b[2K\\rkforge: relu: {POSED}" in why, why
    assert_the_evaluators_words(why)
    assert_the_evaluators_words(result.summary())


# --- 2. no read of a candidate's plant waits or follows a link ----------------------------------

def kforge_eval(candidate: str, cache, out, *args: str, timeout: float = 300) -> dict:
    """`kforge eval --json` of a candidate on the relu problem, KFORGE_CACHE at `cache`: its
    verdict (bounded: a read that waits on a FIFO never returns)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "kforge_nb.cli", "eval", str(problem_file("relu")),
               str(candidate_file(candidate)), "--target", "cpp", "--out", str(out),
               "--no-compile-baseline", "--json", *args]
    done = subprocess.run(command, cwd=out.parent, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": path,
                                                "KFORGE_CACHE": str(cache)})
    assert done.stdout.startswith("{"), done.stderr
    return json.loads(done.stdout)


def test_fifos_planted_in_the_shared_cache_block_no_evaluation(tmp_path):
    """Run with --no-sandbox, the candidate plants FIFOs in the timing lock's place, the CPU
    probe's and its problem's cached baseline's, FIFOs and a link in its run folder. Its own
    judging (which takes the timing lock, reads the cached baseline and the probe, and copies
    the profile's trace into the run folder, after its trials) and the next evaluation on the
    machine both end with their verdicts; the lock, the probe and the trace are regular files
    again, and packing the run folder to send it home neither waits on the FIFO nor reads the
    link's target."""
    cache, out = tmp_path / "cache", tmp_path / "runs"
    cache.mkdir()
    out.mkdir()
    (tmp_path / "secret.txt").write_text("the user's secret\n")
    planting = kforge_eval("r5_plants_fifos_in_the_cache", cache, out, "--no-sandbox")
    assert planting["state"] == CORRECT, planting["message"]
    assert planting["timing"]["compile_cached_ms"] is None    # the planted FIFO: no figure
    assert [p.is_fifo() for p in (cache / "baselines").iterdir()] == [True]
    for replaced in (cache / "locks" / "cpu.lock", cache / "cpu_peaks.v3.json"):
        assert replaced.is_file() and not replaced.is_symlink(), replaced

    again = kforge_eval("cpp_relu", cache, out)               # another evaluation after it
    assert again["state"] == CORRECT, again["message"]

    run = Path(planting["artifacts"])
    assert (run / "trace.json").is_file() and not (run / "trace.json").is_fifo()  # made anew
    assert (run / "pending.log").is_fifo() and (run / "kept.txt").is_symlink()
    files = within(30, packed, run)
    assert "pending.log" not in files and "kept.txt" not in files
    assert not any(b"the user's secret" in data for data in files.values())
    assert "result.json" in files and "candidate.py" in files


def within(seconds: float, function, *args):
    """function(*args), which must return within `seconds` (a read that waits on a FIFO never
    does): run on a thread, so a hang fails the test instead of stopping it."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", function(*args)),
                              daemon=True)
    thread.start()
    thread.join(seconds)
    assert "value" in box, f"{function.__name__} did not return within {seconds} s"
    return box["value"]


@pytest.mark.parametrize("plant", ["fifo", "link"])
def test_a_plant_in_the_lock_s_place_is_replaced_not_waited_on_or_followed(plant, tmp_path,
                                                                           monkeypatch):
    from kforge_nb.evaluator.parent import device_lock
    monkeypatch.setenv("KFORGE_CACHE", str(tmp_path / "cache"))
    lock = tmp_path / "cache" / "locks" / "cpu.lock"
    lock.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    if plant == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(victim)

    def hold() -> bool:
        with device_lock.timing_lock("cpu"):
            return True
    assert within(30, hold)
    assert lock.is_file() and not lock.is_symlink()
    assert not victim.exists()                     # nothing made through the link


@pytest.mark.parametrize("plant", ["fifo", "link", "not the probe's shape"])
def test_a_plant_in_the_cpu_probe_s_place_is_ignored(plant, tmp_path):
    from kforge_nb import devices
    path = tmp_path / "cpu_peaks.v3.json"
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"name": "yours", "busy": False, "bandwidth": 1.0,
                                  "cache_bandwidth": 1.0, "llc_bytes": 1, "float32": 1.0}))
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "link":
        path.symlink_to(secret)
    else:
        path.write_text(json.dumps({"name": "x", "busy": False, "bandwidth": "fast"}))
    assert within(30, devices.cached_peaks, path)[0] == {}
    os.replace(secret, path)                             # the probe's own file is read
    assert within(30, devices.cached_peaks, path)[0]["name"] == "yours"


# --- 3. integer inputs drawn anew for each timed call -------------------------------------------

def test_a_memo_keyed_on_integer_ids_is_never_served(options):
    """The bag sum's only input is its ids: refreshed by no factor, they repeated the timing
    sets' few draws in every timed call, and the memo served all but the first few. Drawn
    anew for each call (as a trial's are), no call of the trials, the warm-up, the timing or
    the profile repeats one; the checked timed calls are right on their own ids."""
    result = evaluate(problem("r5_bag_sum"), source("r5_cpp_bag_sum_id_memo"), "cpp", options())
    assert result.state == CORRECT, result.message
    assert result.timing.rounds >= 3 and result.timing.input_sets >= 2
    stats = json.loads((Path(result.artifacts) / "sandbox" / "memo_hits.json").read_text())
    assert stats["calls"] > 10, stats          # trials, warm-up and every timed call
    assert stats["hits"] == 0, stats


# --- 4. the measure hook's seed -----------------------------------------------------------------

SUMS = '''
def measure(model, inputs):
    return {"output_sum": float(model(*inputs).sum())}
'''


def test_the_measure_hook_is_not_told_apart_by_its_seed(options):
    """The candidate answers zeros where torch's seed is the hook's old fixed one: its hook
    figure would be 0 beside the reference's. Drawn from the secret, the seed is not that."""
    result = evaluate(problem("relu"), source("r5_knows_the_hook_seed"), "cpp",
                      options(measure_hook=SUMS, measure_label="sums.py"))
    assert result.state == CORRECT, result.message
    sums = {side: result.measures[side]["output_sum"] for side in ("reference", "candidate")}
    assert sums["reference"] > 0, result.measures
    assert sums["candidate"] == pytest.approx(sums["reference"], rel=1e-5), result.measures


# --- 5. a judge that stops, where the candidate cannot reach it ---------------------------------

def test_a_judge_killed_from_outside_the_candidate_s_reach_is_not_the_reference_failing(
        options, tmp_path):
    """In the sandbox the candidate's processes have a PID namespace of their own: no
    candidate can signal the judge. A real judge, ready, killed by this test while it is
    asked a step: the evaluation cannot go on (ProblemError), and its message says the judge
    stopped and why, never that the reference failed."""
    folder = tmp_path / "eval"
    folder.mkdir()
    evaluation = Evaluation(problem("relu"), source("cpp_relu"), get_target("cpp"), options(),
                            folder)
    talk = evaluation.talk
    talk.start_judge(reference_job(evaluation.problem, evaluation.options, folder,
                                   evaluation.device))
    try:
        assert talk.judge_reply().get("ready") is True
        os.kill(talk.judge.pid, signal.SIGKILL)
        trial = evaluation.options.trial_plan(evaluation.secret)[0]
        with pytest.raises(ProblemError) as stopped:
            talk.ask_judge("prepare", 0, trial)
    finally:
        talk.close()
    message = str(stopped.value)
    assert message.startswith(f"{evaluation.problem.label}: {JUDGE} stopped while answering "
                              "`prepare`: the worker process was killed by SIGKILL; no exception "
                              "of the reference was reported"), message
    assert POSED not in message
