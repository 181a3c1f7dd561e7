"""Your own measurement (`--measure FILE.py`, `--objective NAME[:min|max]`): the parent's side.

A hook file defines `measure(model, inputs) -> dict[str, float]`. Here it is only read (its
text checked for a `measure`), never executed: the judge runs it on the reference model and the
candidate worker, in its sandbox, on the candidate's (evaluator/worker/common.py `run_hook`),
each on inputs drawn from the same seed. The two replies become `Result.measures` (`combine`).

The objective names one of the hook's keys and a direction (max by default): the session ranks
correct candidates by it (`score`), and the analyst is given it as its goal (`objective_text`).
Nothing heavy is imported here.
"""
from __future__ import annotations

import ast
from pathlib import Path

from .problem import ProblemError
from .pyparse import parse_ast

SIGNATURE = "def measure(model, inputs) -> dict[str, float]"


class MeasureError(ProblemError):
    """A hook file or an objective that cannot be used. A ProblemError, so that every command
    reports it as a usage error (exit 2), as it reports an unusable reference."""


def eval_fields(path: str | None, objective: str | None) -> dict:
    """The EvalOptions fields for `--measure PATH --objective NAME`, checked: the hook's source
    and label, the objective as given. Raises MeasureError."""
    source, label = read_hook(path) if path else ("", "")
    if objective:
        parse_objective(objective)
        if not source:
            raise MeasureError(f"--objective {objective!r} ranks candidates by a value of your "
                               f"--measure FILE.py hook: give one ({SIGNATURE})")
    return {"measure_hook": source, "measure_label": label, "objective": objective or ""}


def read_hook(path: str) -> tuple[str, str]:
    """(source, label) of a hook file, checked without running it: it parses and names
    `measure` at its top level."""
    file = Path(path)
    if not file.is_file():
        raise MeasureError(f"--measure {path}: no such file")
    try:
        source = file.read_text()
        tree = parse_ast(source, filename=str(file))
    except (UnicodeDecodeError, SyntaxError) as err:
        where = f" line {err.lineno}" if getattr(err, "lineno", None) else ""
        raise MeasureError(f"--measure {path}{where}: {getattr(err, 'msg', err)}") from None
    if "measure" not in top_level_names(tree):
        raise MeasureError(f"--measure {path}: the file defines no `measure`; a hook file "
                           f"defines `{SIGNATURE}`")
    return source, str(path)


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def parse_objective(text: str) -> tuple[str, str]:
    """"tokens_per_s" -> ("tokens_per_s", "max"); "latency_ms:min" -> ("latency_ms", "min")."""
    name, sep, direction = text.rpartition(":")
    if not sep:
        name, direction = text, "max"
    if not name or direction not in ("min", "max"):
        raise MeasureError(f"--objective {text!r}: give NAME, NAME:min or NAME:max (a key of "
                           "the dict your measure() returns)")
    return name, direction


def combine(label: str, reference: dict, candidate: dict) -> dict:
    """Result.measures from the two workers' replies ({"values": {...}, "errors": [...]})."""
    ref, cand = reference.get("values") or {}, candidate.get("values") or {}
    measures = {"hook": label, "reference": ref, "candidate": cand,
                "ratio": {k: cand[k] / ref[k] for k in cand if ref.get(k)}}   # no ratio to 0
    errors = [f"{side}: {e}" for side, reply in (("reference", reference),
                                                  ("candidate", candidate))
              for e in reply.get("errors") or []]
    if errors:
        measures["error"] = "; ".join(errors)
    return measures


def score(result, objective: str) -> float | None:
    """The candidate's objective value, as lower-is-better; None when there is no objective or
    the candidate has no such measure."""
    if not objective:
        return None
    name, direction = parse_objective(objective)
    value = ((result.measures or {}).get("candidate") or {}).get(name)
    if value is None:
        return None
    return -value if direction == "max" else value


def objective_text(result, objective: str) -> str:
    """The goal as the analyst reads it: "maximise tokens_per_s: candidate 1234.5, reference
    1000 (1.23x)"."""
    if not objective:
        return ""
    name, direction = parse_objective(objective)
    goal = f"{'maximise' if direction == 'max' else 'minimise'} {name}"
    m = result.measures or {}
    value = (m.get("candidate") or {}).get(name)
    if value is None:
        why = m.get("error") or f"the hook returned no {name!r}"
        return f"{goal} (not measured for this candidate: {why})"
    text = f"{goal}: candidate {value:.6g}"
    reference = (m.get("reference") or {}).get(name)
    if reference is not None:
        text += f", reference {reference:.6g}"
    if name in (m.get("ratio") or {}):
        text += f" ({m['ratio'][name]:.2f}x)"
    return text
