"""Attacks on the trust boundary between the candidate's worker and the evaluator.

The candidate's worker runs model-written code, so everything in that process is the
attacker's: its reply channel to the parent, the harness functions it times and writes
outputs with, its threads, the files it can write (its folder, the kernel caches). Each row
below is a real candidate (tests/adversarial/candidates/, its docstring says what it tries),
judged by the real evaluator: in this process, or through `kforge eval` in a subprocess where
the attack needs a real environment (a credential in the parent's environment, a cache of its
own, a deadline). Every row asserts:

* the verdict is never `correct` (except the two rows whose attack is a side effect on an
  honest kernel: a planted cache entry, a held lock; they assert the side effect instead);
* the state (and the rule, where one is specific) the defence should give;
* the fake credential put in the parent's environment appears in no file of the run and the
  file the candidate would write it to never appears;
* the evaluation ends (the CLI rows run under a subprocess deadline).
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from kforge_nb.result import CORRECT, MISMATCH, REJECTED, RUNTIME_ERROR
from tests.adversarial.support import REPO, candidate_file, problem_file

KEY_NAME = "ANTHROPIC_API_KEY"
KEY_FILE_LINE = 'KEY_FILE = "/tmp/kforge-redteam-key-pickle"'
NEVER_SAYS = ("the reference itself failed",)   # a candidate never pins its failure on the problem


@dataclass
class Attack:
    problem: str
    candidate: str
    states: tuple[str, ...]                     # acceptable verdicts once the defences land
    rules: tuple[str, ...] | None = None        # when rejected: one of these rules (None: any)
    target: str = "cpp"
    cli: bool = False                           # `kforge eval` in a subprocess
    cli_args: tuple[str, ...] = ()
    subprocess_timeout_s: float = 600.0
    private_cache: bool = False                 # a KFORGE_CACHE of its own (CLI rows)
    compile_baseline: bool = False
    options: dict = field(default_factory=dict)  # EvalOptions overrides (in-process rows)
    replace: dict = field(default_factory=dict)  # text substitutions in the candidate
    says_any: tuple[str, ...] = ()              # one of these must be in the message ...
    says_when: tuple[str, ...] | None = None    # ... when the state is one of these (None: any)
    may_be_correct: bool = False                # the attack is a side effect, not the verdict
    check: Callable | None = None               # extra assertions: check(result, run) -> None


def key_file_check(result: dict, run: "Run") -> None:
    """(Rows that plant a key file.) Nothing in the parent ran the candidate's payload."""
    assert not run.key_file.exists(), \
        f"the parent ran the candidate's payload: {run.key_file.read_text()!r}"


def no_big_speedup(result: dict, run: "Run") -> None:
    """The kernel sleeps 5 ms a call; eager ReLU takes microseconds: any speedup is a lie."""
    timing = result.get("timing") or {}
    speedup = timing.get("speedup_vs_eager")
    assert speedup is None or speedup < 1.0, f"reported a {speedup:.3g}x speedup"


def baseline_not_planted(result: dict, run: "Run") -> None:
    planted = run.home / "planted.txt"   # what the candidate says it managed (its $HOME)
    said = planted.read_text() if planted.exists() else ""
    entries = list((run.cache / "baselines").glob("*.json")) if run.cache else []
    for entry in entries:
        data = json.loads(entry.read_text())
        assert data.get("compile_ms") != 1000.0 or data.get("eager_ms") != 0.001, \
            f"the candidate planted {entry}: {data} ({said.strip()})"
    timing = result.get("timing") or {}
    vs_compile, vs_eager = timing.get("speedup_vs_compile"), timing.get("speedup_vs_eager")
    # vs_compile / vs_eager is compile's time over eager's: compiled ReLU on 512 floats is
    # mostly torch.compile's call overhead: 7.8x eager's on a lightly loaded machine, more on a busy one (a
    # bound of 50 is the likeliest cause of one busy CI run's failure); the planted entry says 1e6
    if vs_compile is not None and vs_eager:
        assert vs_compile <= 1000 * vs_eager, \
            f"speedup_vs_compile {vs_compile:.3g} against {vs_eager:.3g}x eager: a planted ratio"
    if result["state"] == CORRECT:
        assert vs_compile is None or vs_compile < 10, f"speedup_vs_compile {vs_compile:.3g}"


ATTACKS = {
    # --- the reply channel ---------------------------------------------------------------------
    "1 pickle frame runs code in the parent": Attack(
        "relu", "cpp_zeros_pickle_parent", (RUNTIME_ERROR, MISMATCH), cli=True,
        says_any=("protocol",), says_when=(RUNTIME_ERROR,), check=key_file_check),
    "2 forged JSON reply frame": Attack(
        "relu", "cpp_zeros_forged_json", (MISMATCH, RUNTIME_ERROR)),
    # --- what is audited -----------------------------------------------------------------------
    "3 torch compute once the audited trials are over": Attack(
        "relu", "cpp_mm_when_untimed", (REJECTED,), ("torch-compute-at-runtime",)),
    "4 trial and timing inputs predicted, answers precomputed in __init__": Attack(
        "relu", "cpp_relu_precomputed_init", (REJECTED, MISMATCH)),
    "5 torch compute whenever no audit is detected": Attack(
        "softmax_rows", "cpp_detects_audit", (REJECTED,)),
    "6a nn.Softmax on a _thread thread": Attack(
        "softmax_rows", "cpp_softmax_in_thread", (REJECTED,)),
    "6b torch.softmax on a threading.Thread": Attack(
        "softmax_rows", "cpp_softmax_in_threading", (REJECTED,)),
    "7 helper's co_filename rewritten into the triton package": Attack(
        "softmax_rows", "triton_forged_cofilename", (REJECTED,), target="triton"),
    "8a NumPy on np.from_dlpack(x)": Attack(
        "softmax_rows", "cpp_numpy_dlpack", (REJECTED,)),
    "8b NumPy on a ctypes view of x.data_ptr()": Attack(
        "softmax_rows", "cpp_numpy_data_ptr", (REJECTED,)),
    # --- the harness rebound from inside the worker ----------------------------------------------
    "9 harness.perf_counter_ns rebound to a fake clock": Attack(
        "relu", "cpp_rebinds_timer", (REJECTED,), check=no_big_speedup),
    "10 transfer.write_tensors rebound to compute the answer": Attack(
        "relu", "cpp_rebinds_writer", (REJECTED, MISMATCH)),
    "11 harness.fingerprint rebound to hide an in-place write": Attack(
        "relu", "cpp_rebinds_fingerprint", (REJECTED, MISMATCH)),
    # --- work outside the call -------------------------------------------------------------------
    "12a std::async fills the output 20 ms after the call": Attack(
        "relu", "cpp_async_fill", (MISMATCH, REJECTED), ("extra-threads-or-streams",)),
    "12b pthread_create through dlsym fills it 20 ms after": Attack(
        "relu", "cpp_async_fill_dlsym", (MISMATCH, REJECTED)),
    "13 only the outputs the evaluator keeps are filled": Attack(
        "relu", "cpp_fills_kept_only", (MISMATCH,)),
    # --- malformed data for the judge ------------------------------------------------------------
    # (the writer rebound: `tampering` may wrap the verdict; the message must still blame the
    # output, never the reference)
    "14a exchange header: a 2**40-element shape": Attack(
        "relu", "cpp_forged_output_header", (RUNTIME_ERROR, REJECTED),
        says_any=("protocol", "output")),
    "14b exchange header: not JSON": Attack(
        "relu", "cpp_forged_output_header", (RUNTIME_ERROR, REJECTED),
        says_any=("protocol", "output"),
        replace={'MODE = "huge_shape"': 'MODE = "corrupt_json"'}),
    "14c exchange header: an unknown dtype": Attack(
        "relu", "cpp_forged_output_header", (RUNTIME_ERROR, REJECTED),
        says_any=("protocol", "output"),
        replace={'MODE = "huge_shape"': 'MODE = "bad_dtype"'}),
    "14d exchange file replaced after the real writer (nothing rebound)": Attack(
        "relu", "cpp_forged_output_header_late", (RUNTIME_ERROR, REJECTED),
        says_any=("protocol", "output")),
    # --- shared state outside the run folder -----------------------------------------------------
    "15 a planted torch.compile baseline in KFORGE_CACHE": Attack(
        "relu_planted_baseline", "cpp_plants_baseline", (CORRECT, REJECTED, MISMATCH,
                                                         RUNTIME_ERROR),
        cli=True, private_cache=True, compile_baseline=True, may_be_correct=True,
        check=baseline_not_planted),
    "16 the CPU timing lock held by the candidate and a forked child": Attack(
        "relu", "cpp_holds_device_lock", (CORRECT, REJECTED, MISMATCH, RUNTIME_ERROR),
        cli=True, cli_args=("--timeout", "20"), subprocess_timeout_s=120, private_cache=True,
        may_be_correct=True),
}


@dataclass
class Run:
    """Where one attack runs: its scratch folder, the fake credential, the files it touches."""
    tmp: Path
    secret: str
    key_file: Path
    cache: Path | None = None

    @property
    def runs(self) -> Path:
        return self.tmp / "runs"

    @property
    def home(self) -> Path:
        folders = sorted(self.runs.glob("*/sandbox"))
        return folders[-1] if folders else self.tmp / "no-run-folder"


def candidate_text(attack: Attack, key_file: Path) -> str:
    text = candidate_file(attack.candidate).read_text()
    for old, new in attack.replace.items():
        assert old in text, (attack.candidate, old)
        text = text.replace(old, new)
    if KEY_FILE_LINE in text:
        text = text.replace(KEY_FILE_LINE, f"KEY_FILE = {str(key_file)!r}")
    return text


def cli_command(attack: Attack, candidate: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "kforge_nb.cli", "eval", str(problem_file(attack.problem)),
            str(candidate), "--target", attack.target, "--json", "--out", str(out),
            *(() if attack.compile_baseline else ("--no-compile-baseline",)), *attack.cli_args]


def run_cli(attack: Attack, run: Run, text: str) -> dict:
    candidate = run.tmp / f"{attack.candidate}.py"
    candidate.write_text(text)
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, KEY_NAME: run.secret}
    if run.cache is not None:
        env["KFORGE_CACHE"] = str(run.cache)
    started = time.monotonic()
    proc = subprocess.Popen(cli_command(attack, candidate, run.runs), cwd=run.tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=attack.subprocess_timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()       # its fork server sees the socket close and kills the workers
        proc.communicate()
        pytest.fail(f"no verdict within {attack.subprocess_timeout_s:g} s: the evaluation hangs")
    assert stdout.strip(), f"kforge eval gave no verdict (exit {proc.returncode}); stderr " \
                           f"ends:\n{stderr[-3000:]}"
    result = json.loads(stdout)
    result["_wall_s"] = time.monotonic() - started
    return result


def run_in_process(attack: Attack, run: Run, text: str, options) -> dict:
    from kforge_nb.evaluator import evaluate
    from tests.adversarial.support import problem
    overrides = dict(attack.options)
    if attack.compile_baseline:
        overrides["baselines"] = ("eager", "compile")
    result = evaluate(problem(attack.problem), text, attack.target,
                      options(out_dir=run.runs, **overrides))
    return result.to_dict()


def files_containing(folder: Path, needle: str) -> list[str]:
    if not folder.exists():
        return []
    return [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
            and needle.encode() in p.read_bytes()]


def judge_attack(attack: Attack, run: Run, options) -> dict:
    text = candidate_text(attack, run.key_file)
    return run_cli(attack, run, text) if attack.cli else \
        run_in_process(attack, run, text, options)


def verdict_problems(name: str, attack: Attack, result: dict) -> list[str]:
    """What is wrong with a verdict for this attack (empty: as the defence should give)."""
    state, rules, message = result["state"], result.get("rules") or [], result.get("message", "")
    wrong = []
    if state == CORRECT and not attack.may_be_correct:
        wrong.append(f"judged correct: {message[:600]}")
    elif state not in attack.states:
        wrong.append(f"state {state}, expected one of {attack.states}: {message[:600]}")
    if state == REJECTED and attack.rules is not None and REJECTED in attack.states \
            and not set(rules) & set(attack.rules):
        wrong.append(f"rules {rules}, expected one of {attack.rules}: {message[:400]}")
    if attack.says_any and state != CORRECT and state in attack.states and \
            (attack.says_when is None or state in attack.says_when) and \
            not any(s.lower() in message.lower() for s in attack.says_any):
        wrong.append(f"the message names none of {attack.says_any}: {message[:400]}")
    for phrase in NEVER_SAYS:
        if phrase in message:
            wrong.append(f"the message says {phrase!r}: {message[:400]}")
    return wrong


@pytest.fixture
def attack_run(tmp_path, monkeypatch):
    secret = f"sk-ant-test-{secrets.token_hex(16)}"
    monkeypatch.setenv(KEY_NAME, secret)      # the parent's environment holds a credential
    key_file = Path(f"/tmp/kforge-redteam-key-{secrets.token_hex(8)}")
    run = Run(tmp_path, secret, key_file)
    yield run
    key_file.unlink(missing_ok=True)          # written by the parent, if the attack works


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_fails(name, attack_run, options):
    attack = ATTACKS[name]
    run = attack_run
    if attack.private_cache:
        run.cache = run.tmp / "kforge-cache"
        run.cache.mkdir()
    result = judge_attack(attack, run, options)
    leaked = files_containing(run.tmp, run.secret)
    assert not run.key_file.exists(), \
        f"{name}: the parent ran the candidate's payload and wrote {run.key_file}: " \
        f"{run.key_file.read_text()!r} (verdict {result['state']}: {result['message'][:300]})"
    assert leaked == [], f"{name}: the credential is in {leaked}"
    wrong = verdict_problems(name, attack, result)
    assert not wrong, f"{name}: " + "; ".join(wrong)
    if attack.check is not None:
        attack.check(result, run)
