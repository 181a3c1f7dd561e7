"""Kernel > Interrupt stops a run that goes on after its cell has returned.

While a cell runs, ipykernel turns SIGINT into a KeyboardInterrupt in that cell (a `--block`
run stops there: magics.py). Between cells it ignores SIGINT: after each request it restores
the handler it saved before it (`kernel.saved_sigint_handler`), SIG_IGN in a new kernel, so an
Interrupt sent while a background run is live reached nothing. `watch(kernel, run)` makes that
between-cells handler `on_interrupt`, which stops every live run (after its current step, as
the Stop button does); with none live it does what the handler before it did. A cell that
runs when Interrupt comes still gets its KeyboardInterrupt: ipykernel installs its own handler
for each request.
"""
from __future__ import annotations

import signal
import threading

SAID = ("Kernel > Interrupt: stopping after the current step (an evaluation in flight "
        "finishes first)")


class InterruptStops:
    """The live background runs of this kernel, stopped by SIGINT between cells."""

    def __init__(self):
        self.runs: list = []             # sessions, model sessions, benches: .running, .stop()
        self.before = signal.SIG_IGN     # the between-cells handler this one stands in for
        self._lock = threading.Lock()

    def watch(self, kernel, run) -> bool:
        """Let Interrupt stop `run` once this cell has returned; False where this kernel keeps
        no between-cells handler to stand in for (then only the Stop button stops it)."""
        saved = getattr(kernel, "saved_sigint_handler", None)
        if saved is None:
            return False
        with self._lock:
            self.runs = [r for r in self.runs if r.running] + [run]
        if saved != self.on_interrupt:
            self.before = saved
            kernel.saved_sigint_handler = self.on_interrupt    # what ipykernel restores next
        return True

    def on_interrupt(self, signum, frame) -> None:
        with self._lock:
            live = [r for r in self.runs if r.running]
            self.runs = live
        if not live:
            if callable(self.before):
                self.before(signum, frame)
            return
        # stopping takes locks the interrupted main thread may hold: not in a signal handler
        threading.Thread(target=stop_all, args=(live,), daemon=True,
                         name="kforge-interrupt").start()


def stop_all(runs: list) -> None:
    for run in runs:
        journal = getattr(run, "journal", None)
        if journal is not None:           # a Session: its views say why it stops
            journal.emit("notice", getattr(run, "next_iteration", 0), text=SAID)
        run.stop()


INTERRUPTS = InterruptStops()          # one per kernel process: SIGINT has one handler
