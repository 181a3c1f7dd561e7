"""`kforge bench` and `%kforge bench`: a suite of problems, one table, resumable.

    suite.py    which problems (KernelBench layout or flat) and which candidate goes with each
    runner.py   Bench: the agent or the evaluator over the suite, on an executor
    store.py    the bench's folder: settings, a line per finished problem, CSV and JSON tables
    report.py   rows, correctness rate, fast_p, geometric means, the printed table
"""
from .report import FAST_P, Row, fast_p, geomean, summary, table
from .runner import Bench, Progress
from .store import SettingsDiffer, Store, folder_name
from .suite import Entry, candidate_for, entries, problem_files

__all__ = ["Bench", "Entry", "FAST_P", "Progress", "Row", "SettingsDiffer", "Store",
           "candidate_for", "entries", "fast_p", "folder_name", "geomean", "problem_files",
           "summary", "table"]
