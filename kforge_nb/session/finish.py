"""How a run ended: a `Finish` holds the kind of end, for code to decide on (the bench's table
reads it), and the sentence the person reads (the `finished` event, `kforge runs`, the summary).
The `finished` event records both (`finish_kind`, `reason`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..agents.base import Usage
from ..result import GENERATION_FAILURE

# the run ended on its own
BUDGET = "budget"                   # iterations, time, tokens or cost used (or too few for a call)
TARGET = "target"                   # the best reached --target-speedup
PATIENCE = "patience"               # --patience optimisation rounds without improvement
NOTHING_TO_TRY = "nothing_to_try"   # the analyst had nothing more, or every branch is pruned
# someone ended it
STOPPED = "stopped"                 # Stop (the button, `%kforge stop`, a bench stopped)
INTERRUPTED = "interrupted"         # Ctrl-C in `kforge run`: saved as interrupted, resumable
# it could not go on
PROVIDER_ERROR = "provider_error"   # the model's API failed (after its retries)
BAD_INPUT = "bad_input"             # the problem, a file it names, or a target it cannot use
ENGINE_ERROR = "engine_error"       # the executor (workers, cluster), not the candidate
INTERNAL_ERROR = "internal_error"   # a bug in kforge-nb: error.txt holds the traceback

KINDS = frozenset({BUDGET, TARGET, PATIENCE, NOTHING_TO_TRY, STOPPED, INTERRUPTED,
                   PROVIDER_ERROR, BAD_INPUT, ENGINE_ERROR, INTERNAL_ERROR})
ERRORS = frozenset({PROVIDER_ERROR, BAD_INPUT, ENGINE_ERROR, INTERNAL_ERROR})

# how an error's sentence begins ("provider error: ..."), as run.json and the views say it
ERROR_WORDS = {PROVIDER_ERROR: "provider error", BAD_INPUT: "bad input",
               ENGINE_ERROR: "engine error", INTERNAL_ERROR: "internal error"}


@dataclass(frozen=True)
class Finish:
    kind: str                        # one of KINDS
    text: str                        # why, in the person's words
    error: str | None = None         # the error's own message, where it ended on one

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of finish {self.kind!r}; one of {sorted(KINDS)}")

    @property
    def failed(self) -> bool:
        """The run could not go on (an error), as opposed to ending or being stopped."""
        return self.kind in ERRORS

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "error": self.error}


STOPPED_BY_USER = Finish(STOPPED, "stopped by the user")
ITERATIONS_USED = Finish(BUDGET, "iteration budget used")
CTRL_C = Finish(INTERRUPTED, "interrupted (Ctrl-C)")


def on_error(kind: str, error: str) -> Finish:
    """The end of a run on an error: "provider error: the Anthropic API failed ..."."""
    return Finish(kind, f"{ERROR_WORDS[kind]}: {error}", error)


def same_failure_again(history, iteration: int) -> Finish | None:
    """The end where the functional pass failed alike two rounds running: every attempt of
    round `iteration` and of the one before produced no code, for one and the same reason (the
    builtin agent cannot lower the reference: it would say so every round). That reason is the
    run's, instead of "iteration budget used"."""
    if iteration < 1:
        return None
    rounds = [[a for a in history if a.iteration == i] for i in (iteration - 1, iteration)]
    reasons = {a.result.message for attempts in rounds for a in attempts}
    failed = all(attempts and all(a.result.state == GENERATION_FAILURE and not a.code
                                  for a in attempts) for attempts in rounds)
    if not failed or len(reasons) != 1:
        return None
    return Finish(NOTHING_TO_TRY, f"the same generation failure two rounds running: "
                                  f"{reasons.pop()}")


def out_of_budget(ledger, best) -> Finish | None:
    """The budget's reason to stop now (time, tokens, cost first, then the target speedup), or
    None. With nothing spent, only the target speedup can end a run: that tells the two apart
    without reading the sentence."""
    spent = ledger.exhausted(None)
    if spent:
        return Finish(BUDGET, spent)
    reached = ledger.budget.exhausted(Usage(), 0.0, best)
    return Finish(TARGET, reached) if reached else None
