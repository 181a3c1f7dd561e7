"""Verdicts built from what the workers reported: a failure, an output that is not what the
harness writes, torch computing unseen, tampering, a problem's own error; and a correct verdict
overturned later.

A verdict's message is the evaluator's own words. Where it carries the candidate's (its output,
an exception's text, a compiler's errors), they are quoted: a line of them stays inline after
the evaluator's label, several go in a block whose every line starts with QUOTE, and control
characters are shown as escapes. A line the candidate prints (`kforge: ... the reference
itself failed`) or a terminal sequence that rewrites a line can then never pass for kforge's.
"""
from __future__ import annotations

import re

from ...problem import Problem
from ...result import COMPILE_FAILURE, REJECTED, RUNTIME_ERROR, Result
from ...targets import Target
from .process import WorkerFailure

QUOTE = "  | "
# C0 and C1 controls (escape sequences, carriage returns), line and paragraph separators, and
# the bidirectional overrides that reorder what a terminal shows; \t and \n are kept
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with its control characters written as escapes (`\\x1b`, `\\r`)."""
    return CONTROL.sub(lambda m: ascii(m.group(0))[1:-1], text)


def inline(text: str) -> str:
    """The candidate's words inside one of the evaluator's lines: control characters and line
    breaks written as escapes, so no line of the message is theirs."""
    return printable(text).replace("\n", "\\n")


def quoted(text: str, limit: int, end: bool = False) -> str:
    """The candidate's words as a verdict quotes them: at most `limit` characters (its start,
    or its `end`), every line behind QUOTE."""
    text = printable(text.strip().replace("\r\n", "\n"))
    text = text[-limit:] if end else text[:limit]
    return "\n".join(QUOTE + line for line in text.split("\n"))


def its_words(text: str, limit: int) -> str:
    """": one line" after a label, or ":" and the quoted block of several ("" for none)."""
    text = text.strip()
    if not text:
        return ""
    if "\n" not in text[:limit]:
        return f": {printable(text[:limit])}"
    return ":\n" + quoted(text, limit)


def end_of_log(tail: str) -> str:
    """The end of a worker's log, quoted ("" where it said nothing)."""
    tail = tail.strip()
    return quoted(tail, 800, end=True) if tail not in ("", "(empty)", "(no log)") else ""


def runtime_failure(failure: WorkerFailure) -> Result:
    said = end_of_log(failure.log_tail)
    text = f"{failure} (see worker.log)" + (f"; the end of its output:\n{said}" if said else "")
    return Result(RUNTIME_ERROR, text, error={"type": failure.kind, "text": str(failure),
                                              "log_tail": failure.log_tail.strip()})


def judge_stopped(failure: WorkerFailure | OSError, step: str) -> str:
    """The judge's worker stopped (its death or overrun, not the reference's exception)."""
    return (f"the judge (the worker that runs the reference and checks the candidate's "
            f"outputs) stopped while answering `{step}`: {failure}")


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
    found = re.search(r"tried to allocate (\d{1,20}) bytes", text)
    return f" ({int(found.group(1)) / 2**30:.1f} GiB in one allocation)" if found else ""


def failure_result(message: dict, target: Target) -> Result:
    """A failure the candidate's worker reported, its shape checked (replies.failure): the
    step and the exception's name in the evaluator's words, the exception's text quoted."""
    failed = message["failed"]
    tampered = message.get("tampered") or []
    where = f", line {failed['line']}" if failed.get("line") else ""
    if failed["state"] == COMPILE_FAILURE:
        said, limit = f"{target.name} build failed", 1500
    elif failed.get("kind") == "gpu_out_of_memory":
        said, limit = f"GPU out of memory during {failed['phase']}", 600
    else:
        said, limit = f"{failed['type']} during {failed['phase']}", 1500
    text = failed["text"].strip()
    result = Result(failed["state"], f"{said}{where}{allocation_size(text[:limit])}"
                    f"{its_words(text, limit)}", error=failed)
    return tampering(result, tampered) if tampered else result


def bad_output(why: str, where: str) -> Result:
    """An output the judge could not read as tensors (or its reply's fingerprints of the
    inputs, not one per input): the candidate's fault, never the reference's."""
    text = f"protocol violation: the output of {where} is not what the harness writes: {why}"
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
