"""Whether a run can work on its target here, decided before its first iteration: a target the
chosen agent cannot write (the builtin agent writes cpp and triton kernels only), or one whose
candidates could be neither run nor compiled on this host, ends the run at once with the reason
as its first line, instead of iterations that each end "no correct candidate"."""
from __future__ import annotations

from ..problem import ProblemError

LOCAL_EXECUTORS = ("in-process", "local workers")    # candidates are judged on this host
# where a target's availability reason goes on about a candidate (kept, compiled): before a
# run there is none, so these are cut off what the header and the refusal say
ABOUT_A_CANDIDATE = (" The candidate is kept", " (the source was compiled",
                     "; nvcc is not here either")


class TargetError(ProblemError):
    """The run cannot begin on this target (a usage error: exit 2, no traceback)."""


def refusal(generator, target, executor) -> str:
    """Why a run with this generator cannot begin on `target`; "" when it can."""
    writes = written_targets(generator)
    if writes is not None and target.name not in writes:
        kinds = " and ".join(writes)
        return (f"--target {target.name}: the builtin agent cannot write {target.name} kernels "
                f"(it writes {kinds} kernels). Choose --target {' or '.join(writes)}, or a "
                f"model provider (--provider anthropic or openai) to write {target.name} "
                "kernels")
    available = target.availability()
    if not available.runs and not available.compiles and \
            getattr(executor, "name", "") in LOCAL_EXECUTORS:
        return (f"--target {target.name}: its candidates can be neither run nor compiled on "
                f"this machine, so none could be judged: {host_reason(available)}")
    return ""


def written_targets(generator) -> tuple[str, ...] | None:
    """The targets a generator can write; None: any (a model writes what it is asked for)."""
    from ..agents.builtin import BuiltinGenerator
    if isinstance(generator, BuiltinGenerator):
        from ..agents.builtin.targets import TARGETS
        return tuple(TARGETS)
    return None


def host_reason(available) -> str:
    """What this host lacks for a target, without the words about a candidate."""
    text = available.reason
    for cut in ABOUT_A_CANDIDATE:
        text = text.split(cut)[0]
    return text.strip()


def where_it_runs(target) -> str:
    """The header's device: where candidates run, or what this host lacks for them."""
    available = target.availability()
    return target.device() if available.runs else host_reason(available)
