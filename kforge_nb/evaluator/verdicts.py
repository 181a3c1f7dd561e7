"""Verdicts built from what the workers reported: a failure, an output that is not what the
harness writes, torch computing unseen, tampering, a problem's own error; and a correct verdict
overturned later."""
from __future__ import annotations

import re

from ..problem import Problem
from ..result import COMPILE_FAILURE, REJECTED, RUNTIME_ERROR, Result
from ..targets import Target
from .process import WorkerFailure


def runtime_failure(failure: WorkerFailure) -> Result:
    tail = failure.log_tail.strip()
    text = f"{failure} (see worker.log)" + (f"; its log ends:\n{tail[-800:]}" if tail and
                                           tail not in ("(empty)", "(no log)") else "")
    return Result(RUNTIME_ERROR, text, error={"type": failure.kind, "text": str(failure),
                                              "log_tail": tail})


class CandidateFailed(Exception):
    """The candidate failed after its trials (while timed or profiled): its verdict."""

    def __init__(self, result: Result):
        super().__init__(result.message)
        self.result = result


def overturn(result: Result, by: Result) -> None:
    """A correct verdict undone after its trials (timing, the hook): the new state, its
    message and rules."""
    result.state, result.message, result.error = by.state, by.message, by.error
    result.rules = list(by.rules)


def problem_message(problem: Problem, err: dict) -> str:
    if err.get("type") in ("TooLarge", "BadInputs"):
        return f"{problem.label}: {err['text']}"
    where = f" line {err['line']} ({err['source_line']})" if err.get("line") else ""
    return (f"{problem.label}{where}: running the reference raised {err['type']}: "
            f"{err['text']}{allocation_size(err['text'])}. Check Model, get_inputs() and "
            "get_init_inputs().")


def allocation_size(text: str) -> str:
    """Allocators say a failed request in bytes; a person reads GiB."""
    found = re.search(r"tried to allocate (\d+) bytes", text)
    return f" ({int(found.group(1)) / 2**30:.1f} GiB in one allocation)" if found else ""


def failure_result(message: dict, target: Target) -> Result:
    failed = message["failed"]
    tampered = message.get("tampered") or []
    where = f"line {failed['line']}: " if failed.get("line") else ""
    if failed["state"] == COMPILE_FAILURE:
        text = f"{target.name} build failed, {where}{failed['text'].strip()[:1500]}"
    elif failed.get("kind") == "gpu_out_of_memory":
        text = f"GPU out of memory during {failed['phase']}, {where}{failed['text'][:600]}"
    else:
        text = (f"{failed['type']} during {failed['phase']}, {where}{failed['text'][:1500]}"
                f"{allocation_size(failed['text'][:1500])}")
    result = Result(failed["state"], text, error=failed)
    return tampering(result, tampered) if tampered else result


def bad_output(why: str, where: str) -> Result:
    """An output file the judge could not read as tensors: the candidate's fault, never the
    reference's."""
    text = f"protocol violation: the output file of {where} is not what the harness writes: {why}"
    return Result(RUNTIME_ERROR, text, error={"type": "protocol", "text": text})


def unaudited_compute(calls: list[str]) -> Result:
    """Torch computed where the trials' audit did not see it: on a thread, or only in calls
    outside the trials (the warm-up, the timed calls, the profile)."""
    return Result(REJECTED, "ModelNew computed with torch where the trials' audit did not see "
                  f"it: {'; '.join(calls[:4])} (rule `torch-compute-at-runtime`: every call is "
                  "watched, not only the trials)", rules=["torch-compute-at-runtime"],
                  error={"type": "torch-compute", "unaudited": calls})


def tampering(result: Result, tampered: list[str]) -> Result:
    if not tampered:
        return result
    result.rules.append("tampering")
    result.message = (f"the candidate replaced {', '.join(tampered)} (rule `tampering`); its own "
                      f"outcome was {result.state}: {result.message}")
    result.state = REJECTED
    return result
