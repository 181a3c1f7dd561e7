"""Whether a run can work on its target here, decided before anything is made for it: a target
the chosen agent cannot write (the builtin agent writes cpp and triton kernels only) on a host
that cannot run it, or one whose candidates could be neither run nor compiled on this host, is
refused with one paragraph (what this machine lacks, which targets run here instead) before a
run folder exists (`check`, called by `kforge run` and `%%kforge`), instead of iterations that
each end "no correct candidate". A Session built directly (the API, `kforge bench`, `kforge
model`) meets the same refusal as its first line (loop.py)."""
from __future__ import annotations

from ..problem import ProblemError

LOCAL_EXECUTORS = ("in-process", "local workers")    # candidates are judged on this host
# where a target's availability reason goes on about a candidate (kept, compiled): before a
# run there is none, so these are cut off what the header and the refusal say
ABOUT_A_CANDIDATE = (" The candidate is kept", " (the source was compiled",
                     "; nvcc is not here either")


class TargetError(ProblemError):
    """The run cannot begin on this target (a usage error: exit 2, no traceback)."""


def check(agents, target, executor=None) -> None:
    """Before a run folder exists: a TargetError saying why a run of these agents on `target`
    could not work here (nothing is raised where it can)."""
    writes, notice = targets_written_by(agents)
    why = refusal(writes, target, executor)
    if why:
        raise TargetError(f"{why} {notice}" if notice and writes is not None else why)


def refusal(writes, target, executor=None) -> str:
    """Why a run whose agent writes `writes` (None: any target) cannot begin on `target`; ""
    when it can. `executor` None: candidates are judged on this host."""
    lacks = host_lacks(target, executor)
    builtin_cannot = writes is not None and target.name not in writes
    if lacks and (builtin_cannot or not target.availability().compiles):
        why = f"--target {target.name} cannot run here: {lacks}."
        why += f" The builtin agent does not write {target.name} kernels either (it writes " \
               f"{' and '.join(writes)})." if builtin_cannot else \
            " Its candidates could not even be compiled here, so none could be judged."
        return f"{why} {instead(target, writes)}"
    if builtin_cannot:
        kinds = " and ".join(writes)
        return (f"--target {target.name}: the builtin agent cannot write {target.name} kernels "
                f"(it writes {kinds} kernels). Choose --target {' or '.join(writes)}, or a "
                f"model provider (--provider anthropic or openai) to write {target.name} "
                "kernels.")
    return ""


def host_lacks(target, executor=None) -> str:
    """What this host lacks to run `target`'s candidates, in the target's words ("no CUDA GPU
    on this machine"); "" where they run here, or are judged elsewhere (a cluster)."""
    if executor is not None and getattr(executor, "name", "") not in LOCAL_EXECUTORS:
        return ""
    available = target.availability()
    return "" if available.runs else host_reason(available).split(": ")[0].rstrip(".")


def instead(target, writes) -> str:
    """"Use --target cpp (...) or --target triton (...) on this machine.": the targets that
    run here, each with what its timings are."""
    from ..targets import get_target, names
    usable = []
    for name in writes or names():
        other = get_target(name)
        if name != target.name and other.availability().runs:
            note = other.timing_note() or "runs and is timed here"
            usable.append(f"--target {name} ({note})")
    return f"Use {' or '.join(usable)} on this machine." if usable else ""


def targets_written_by(agents) -> tuple[tuple[str, ...] | None, str | None]:
    """(the targets the configured generator can write, None: any; the provider's notice, as
    for `auto` without a key) without making the agents (no key is checked, nothing called)."""
    from ..providers import resolve
    if agents.replay:
        return None, None              # a recording plays back what a model wrote
    name, notice = resolve(agents.provider)
    return (builtin_targets() if name == "builtin" else None), notice


def written_targets(generator) -> tuple[str, ...] | None:
    """The targets a generator can write; None: any (a model writes what it is asked for)."""
    from ..agents.builtin import BuiltinGenerator
    return builtin_targets() if isinstance(generator, BuiltinGenerator) else None


def builtin_targets() -> tuple[str, ...]:
    from ..agents.builtin.targets import TARGETS
    return tuple(TARGETS)


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
