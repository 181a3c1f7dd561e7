"""A run folder's saved state: what `kforge runs` lists and `--resume` continues.

`run.json` is rewritten atomically after every candidate, every round and at the end, so a run
killed at any moment (Ctrl-C, a kernel restart, SIGKILL, a lost machine) leaves its finished
work on disk:

    {"schema": 1, "status": "running" | "interrupted" (Ctrl-C) | "finished", "pid", "host",
     "config":   what the session was built from (problem source, target, agents, budget, ...),
     "progress": {"next_iteration", "stale_rounds", "elapsed_s", "usage"},
     "summary":  Session.summary(),
     "history":  [Attempt.to_dict(), ...]}

A run whose status says "running" but whose process is gone was interrupted. Resuming rebuilds
the session from `config` (Session.resume, with `resumable`'s arguments), takes back its
history, usage and elapsed time, and goes on from the next iteration in the same folder;
nothing finished is redone. This module reads and writes run.json; it never builds a Session.
"""
from __future__ import annotations

import dataclasses
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from .. import artifacts
from ..agents import AgentConfig
from ..agents.base import Recommendation, Usage
from ..evaluator import EvalOptions
from ..guardrails import Guardrails
from ..intervals import speedup_text
from ..problem import Problem
from ..result import Result
from .decisions import Decision
from .records import Attempt, Budget
from .search import make_search

SCHEMA = 1
STATE_FILE = "run.json"


class ResumeError(ValueError):
    """A run folder cannot be resumed; the message says why and what to do."""


# --- writing ----------------------------------------------------------------------------------

def config_of(session) -> dict:
    """Everything needed to build the same session again (never a key: none is held here)."""
    agents = {f.name: getattr(session.agents_config, f.name)
              for f in dataclasses.fields(session.agents_config) if f.name != "analyst"}
    options = dataclasses.asdict(session.options)
    options.pop("out_dir", None)
    return {"problem": {"source": session.problem.source, "name": session.problem.name,
                        "path": session.problem.path},
            "target": session.target.name, "agents": agents,
            "custom_analyst": session.agents_config.analyst is not None,
            "budget": dataclasses.asdict(session.budget), "options": options,
            "mode": session.mode, "aux": session.aux_specs,
            "translate_from": session.translate_from,
            "search": {"strategy": session.search.name, "width": session.search.width,
                       "seed": session.search.seed}}


def write_state(session, status: str) -> None:
    """Rewrite run.json (atomically) with the session's state now."""
    artifacts.write_json(session.folder / STATE_FILE, {
        "schema": SCHEMA, "status": status, "pid": os.getpid(), "host": socket.gethostname(),
        "config": session.config, "progress": {
            "next_iteration": session.next_iteration, "stale_rounds": session.stale_rounds,
            "elapsed_s": round(session.elapsed(), 3), "usage": dataclasses.asdict(session.usage),
            "pinned": sorted(session.pinned), "pruned": sorted(session.pruned),
            "finished_branches": sorted(session.finished_branches),
            "confirmed": session.confirmed, "outranked": sorted(session.outranked),
            "duels": [{**duel, "candidate": a} for (a, _), duel
                      in sorted(session.standing.duels.items())],
            "dropped": sorted(session.standing.dropped)},
        "summary": session.summary(), "history": [a.to_dict() for a in list(session.history)]})


# --- reading ----------------------------------------------------------------------------------

@dataclass
class SavedRun:
    folder: Path
    data: dict
    status: str          # running | interrupted | finished

    @property
    def summary(self) -> dict:
        return self.data.get("summary") or {}

    @property
    def iterations_done(self) -> int:
        return self.data.get("progress", {}).get("next_iteration", 0)

    @property
    def iterations_budget(self) -> int:
        return self.data.get("config", {}).get("budget", {}).get("iterations", 0)


def read(folder: str | Path) -> SavedRun:
    """The saved state of a run folder, or ResumeError saying why there is none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ResumeError(f"{str(folder)!r} is not a folder")
    path = folder / STATE_FILE
    if not path.is_file():
        if (folder / "result.json").is_file():
            raise ResumeError(f"{folder} holds one evaluation (kforge eval), not a run")
        raise ResumeError(f"{folder} has no {STATE_FILE}: not a kforge run folder (or one made "
                          "before runs were saved as they went)")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ResumeError(f"{path} is damaged ({err}); the candidates and verdicts under "
                          f"{folder}/iter-*/ are intact") from None
    missing = [k for k in ("schema", "status", "config", "progress", "history")
               if k not in data] if isinstance(data, dict) else ["everything"]
    if missing:
        raise ResumeError(f"{path} lacks {', '.join(missing)}: written by another version of "
                          "kforge-nb, or not by kforge-nb")
    if data["schema"] != SCHEMA:
        raise ResumeError(f"{path} has schema {data['schema']}; this kforge-nb reads {SCHEMA}")
    return SavedRun(folder, data, _status(data))


def _status(data: dict) -> str:
    if data["status"] != "running":
        return data["status"]
    if data.get("host") != socket.gethostname():
        return "interrupted"     # another machine's process: it cannot be asked, assume lost
    return "running" if _alive(data.get("pid")) else "interrupted"


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_runs(root: str | Path) -> list[SavedRun | tuple[Path, str]]:
    """Run folders under root, oldest first; damaged ones as (folder, why)."""
    root = Path(root)
    runs: list = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if not (folder / STATE_FILE).is_file():
            continue
        try:
            runs.append(read(folder))
        except ResumeError as err:
            runs.append((folder, str(err)))
    return runs


def runs_table(runs: list) -> str:
    rows = [("run", "status", "iterations", "best", "vs eager", "reason")]
    for run in runs:
        if isinstance(run, tuple):
            rows.append((run[0].name, "damaged", "-", "-", "-", run[1]))
            continue
        s = run.summary
        speedup = s.get("speedup_vs_eager")
        rows.append((run.folder.name, run.status,
                     f"{run.iterations_done}/{run.iterations_budget}",
                     s.get("best_state") or "-",
                     speedup_text(speedup, s.get("speedup_vs_eager_ci")) if speedup else "-",
                     s.get("reason") or ("killed before it finished"
                                         if run.status == "interrupted" else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


# --- resuming ---------------------------------------------------------------------------------

def resumable(folder: str | Path, **budget_changes) -> tuple[SavedRun, dict]:
    """The saved run in `folder` and the arguments to build its session again (Session.resume
    builds it, then takes the run back with Session.restore); ResumeError where it cannot go on.

    `budget_changes` (iterations=12, wall_s=..., tokens=..., cost_usd=..., patience=...) raise
    the saved budget: e.g. more iterations for a run that used all of its own."""
    saved = read(folder)
    if saved.status == "running":
        raise ResumeError(f"{saved.folder} is still running (process {saved.data.get('pid')}); "
                          "stop it first")
    config = saved.data["config"]
    budget = Budget(**config["budget"])
    unknown = set(budget_changes) - {f.name for f in dataclasses.fields(Budget)}
    if unknown:
        raise ResumeError(f"unknown budget field(s): {', '.join(sorted(unknown))}")
    budget = dataclasses.replace(budget, **{k: v for k, v in budget_changes.items()
                                            if v is not None})
    done = saved.iterations_done
    if done >= budget.iterations:
        raise ResumeError(f"{saved.folder.name} has used all {budget.iterations} of its "
                          f"iterations ({saved.summary.get('reason') or 'finished'}); pass "
                          f"--iterations N with N above {done} to go on")
    options = dict(config["options"])
    options["guardrails"] = Guardrails(**options["guardrails"])
    options["baselines"] = tuple(options["baselines"])
    p = config["problem"]
    return saved, dict(
        problem=Problem(p["source"], p["name"], p["path"]), target=config["target"],
        agents=AgentConfig(**config["agents"]), budget=budget,
        options=EvalOptions(**options), mode=config["mode"], aux=config["aux"],
        translate_from=None, folder=saved.folder,
        search=make_search(**search) if (search := config.get("search")) else None)


def resume_notes(saved: SavedRun) -> list[str]:
    """What a resumed session says first."""
    notes = [f"resuming {saved.folder.name} ({saved.status}) at iteration "
             f"{saved.iterations_done}: {len(saved.data['history'])} candidates already judged "
             "are kept, not redone"]
    if saved.data["config"].get("custom_analyst"):
        notes.append("the run had an analyst of your own, which a run folder cannot hold: the "
                     "provider's analyst takes over")
    return notes


def attempt_from_dict(d: dict) -> Attempt:
    """An Attempt as saved in run.json (the generation's prompt stays in its iteration folder)."""
    recommendation = Recommendation(d["recommendation"], "") if d.get("recommendation") else None
    decision = Decision(d["decision"], d.get("decision_text") or "") \
        if d.get("decision") else None
    applied = d.get("applied")
    return Attempt(d["iteration"], d["sample"], d["kind"], d.get("code"),
                   Result.from_dict(d["result"]), None, recommendation, decision,
                   d.get("parent"), d.get("lineage"),
                   Recommendation(applied["title"], applied["text"]) if applied else None,
                   d.get("same_as"))


def usage_from_dict(d: dict) -> Usage:
    return Usage(**{f.name: d[f.name] for f in dataclasses.fields(Usage) if f.name in d})
