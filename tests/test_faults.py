"""Faults a candidate can cause: each gets a precise verdict, complete artifacts, and the next
candidate is judged normally. (Crash signals, exceptions, timeouts and host memory are in
test_runtime_errors.py; GPU faults in test_faults_gpu.py.)"""
from pathlib import Path

from kforge_nb.guardrails import Guardrails
from kforge_nb.result import CORRECT, RUNTIME_ERROR


def processes_with_argument(argument: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if argument.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_candidate_that_prints_megabytes_keeps_a_capped_log_with_its_tail(judge):
    result = judge("relu", "cpp_relu_floods_output", measure=False)
    assert result.state == CORRECT
    log = Path(result.artifacts) / "worker.log"
    assert log.stat().st_size < 3 * 2**20              # 6 MB a call, 6 calls: capped
    text = log.read_text()
    assert "bytes of output dropped" in text
    assert text.rstrip().endswith("LAST LINE OF THIS CALL")


def test_a_process_started_to_outlive_the_candidate_is_reaped(judge):
    result = judge("relu", "cpp_relu_leaves_a_daemon", measure=False,
                   guardrails=Guardrails(defaults=False))
    assert result.state == CORRECT
    assert result.sandbox["processes"].startswith("isolated")
    assert processes_with_argument("987.654") == []    # its PID namespace took it along
    assert judge("relu", "cpp_relu", measure=False).state == CORRECT


def test_an_import_that_never_returns_is_a_timeout_and_the_next_candidate_runs(judge):
    result = judge("relu", "import_never_returns", timeout_s=4,
                   guardrails=Guardrails(defaults=False, allow=["*"]))
    assert result.state == RUNTIME_ERROR and result.error["type"] == "timeout"
    assert "no answer within 4 s" in result.message
    assert judge("relu", "cpp_relu", measure=False).state == CORRECT


def test_a_crash_verdict_carries_the_end_of_the_workers_log(judge):
    result = judge("relu", "cpp_says_then_crashes")
    assert result.state == RUNTIME_ERROR and "SIGSEGV" in result.message
    assert "kernel: about to write" in result.message
    assert "kernel: about to write" in result.error["log_tail"]
