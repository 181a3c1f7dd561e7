"""The torch.compile baseline a candidate is timed against, and what every view calls it.

`--baseline compile` (the default) is torch.compile's default mode; `--baseline max-autotune`
is torch.compile(mode="max-autotune"), what a user who wants the fastest compiled model picks
instead (it tunes tiles and templates by timing them: minutes of compiling on a CPU). A Timing
records the mode it was timed against (`Timing.compile_mode`); the views name the baseline
from it, here, so that a "vs compile" column says "vs max-autotune" where that was the baseline.

Nothing heavy is imported here: options.py and the views read it.
"""
from __future__ import annotations

DEFAULT = "default"
# --baseline's choices -> torch.compile's mode
MODES = {"compile": DEFAULT, "max-autotune": "max-autotune"}


def compile_mode(choice: str) -> str:
    """torch.compile's mode for a --baseline choice."""
    return MODES[choice]


def short_name(mode: str | None) -> str:
    """The baseline in a column or a compact line: "compile" or "max-autotune"."""
    return "compile" if mode in (None, "", DEFAULT) else mode


def long_name(mode: str | None) -> str:
    """The baseline in a sentence: "torch.compile" or "torch.compile max-autotune"."""
    return "torch.compile" if mode in (None, "", DEFAULT) else f"torch.compile {mode}"


def mode_of(timing) -> str | None:
    """The compile mode a Timing (or its dict, or a bench row) was timed against; None in
    records made before the mode was recorded (those were the default mode)."""
    if timing is None:
        return None
    return timing.get("compile_mode") if isinstance(timing, dict) else \
        getattr(timing, "compile_mode", None)


def common_mode(timings) -> str | None:
    """The compile mode of a table's timings (Timings, their dicts, bench rows): the first that
    records one (one run, one bench, one baseline)."""
    return next((mode for mode in map(mode_of, timings) if mode), None)
