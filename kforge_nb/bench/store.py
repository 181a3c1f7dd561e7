"""A bench's folder, so that nothing finished is lost and nothing finished is redone.

    bench.json      what was asked (problems, target, agent, budget, evaluation options)
    results.jsonl   one line per finished problem, appended and flushed as each finishes
    results.csv     the table, rewritten after each row
    results.json    rows and totals (correctness, fast_p, geomeans), rewritten after each row
    runs/, evals/   the sessions' run folders, or the evaluations of given candidates

Running the same bench again resumes it: finished problems are read back, the others run. A
bench asked with other settings is refused (its rows would not be comparable) unless
--restart, which keeps the earlier results under results-<time>.jsonl.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

from .report import Row, row_from_dict, summary, to_csv

# rows that say the engine failed, not the problem or its candidates: redone on resume
NOT_FINISHED = ("engine_error", "interrupted")


class SettingsDiffer(ValueError):
    pass


class BenchBusy(RuntimeError):
    """The bench's folder is being written by another run of it."""


def folder_name(problems: list[str], target: str, mode: str) -> str:
    names = "+".join(Path(p).resolve().name for p in problems[:3])
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", f"bench-{names}-{target}-{mode}")[:120]


class Store:
    def __init__(self, folder: str | Path, settings: dict, restart: bool = False,
                 defaults: dict | None = None):
        self.folder = Path(folder)
        self.settings = json.loads(json.dumps(settings, default=str))
        # an option added since the bench began is not a change while it keeps its default
        defaults = json.loads(json.dumps(defaults or {}, default=str))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.results = self.folder / "results.jsonl"
        saved = self.folder / "bench.json"
        if saved.is_file() and not restart:
            earlier = json.loads(saved.read_text())
            new_at_default = {k for k, v in self.settings.items()
                              if k not in earlier and k in defaults and defaults[k] == v}
            changed = {k: (earlier.get(k), v) for k, v in self.settings.items()
                       if earlier.get(k) != v and k not in new_at_default}
            if changed:
                raise SettingsDiffer(
                    f"the bench in {self.folder} was run with other settings ("
                    + "; ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in changed.items())
                    + "): give the same options to resume it, --restart to start it over "
                    "(earlier results are kept), or another --out")
        elif restart and self.results.is_file():
            self.results.rename(self.folder / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
        saved.write_text(json.dumps(self.settings, indent=1))
        self.rows: dict[str, Row] = {}
        if self.results.is_file():
            text = self.results.read_text()
            if text and not text.endswith("\n"):     # a line cut short: end it, rows follow
                with open(self.results, "a") as out:
                    out.write("\n")
            for line in text.splitlines():
                try:
                    row = row_from_dict(json.loads(line))
                except (ValueError, TypeError):
                    continue             # a line cut short by a crash: that problem reruns
                if row.state not in NOT_FINISHED:
                    self.rows[row.id] = row

    @contextmanager
    def held(self):
        """Held while a bench runs: two runs of one bench would write the same rows."""
        with open(self.folder / "bench.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                raise BenchBusy(f"the bench in {self.folder} is running already (process "
                                f"{lock.read().strip() or '?'}); wait for it or stop it "
                                f"first") from None
            lock.truncate(0)
            lock.write(str(os.getpid()))
            lock.flush()
            yield

    def done(self, id: str) -> bool:
        return id in self.rows

    def add(self, row: Row) -> None:
        if row.state in NOT_FINISHED:
            return
        self.rows[row.id] = row
        with open(self.results, "a") as out:
            out.write(json.dumps(row.__dict__) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def write_tables(self, order: list[str]) -> None:
        rows = [self.rows[i] for i in order if i in self.rows]
        (self.folder / "results.csv").write_text(to_csv(rows))
        (self.folder / "results.json").write_text(json.dumps(
            {"settings": self.settings, "summary": summary(rows),
             "rows": [r.__dict__ for r in rows]}, indent=1, default=str))
