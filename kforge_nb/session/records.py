"""What a session keeps: its budget, and one `Attempt` per evaluated candidate (its `History`)."""
from __future__ import annotations

import html
import io
import re
import tokenize
from dataclasses import dataclass

from ..agents.base import Generation, Recommendation, Usage
from ..intervals import own_time_cell, shown_speedup, versus_tag
from ..result import CORRECT, Result
from .decisions import Decision


@dataclass
class Budget:
    iterations: int = 8
    samples: int = 1
    wall_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    target_speedup: float | None = None      # stop once the best beats eager by this much
    patience: int | None = 3                 # optimisation rounds without improvement
    confirm: int | None = None               # finalists judged again at the end (None: the
    #                                          search's default, see Session.confirm_count)

    def exhausted(self, usage: Usage, elapsed_s: float, best: "Attempt | None") -> str | None:
        """Why the session must stop now, or None."""
        if self.wall_s and elapsed_s > self.wall_s:
            return f"time budget ({self.wall_s:g} s) used"
        if self.tokens and usage.input_tokens + usage.output_tokens >= self.tokens:
            return f"token budget ({self.tokens}) used"
        if self.cost_usd and usage.cost_usd >= self.cost_usd:
            return f"cost budget (${self.cost_usd:g}) used"
        t = best.result.timing if best else None
        if self.target_speedup and t and t.real and (t.speedup_vs_eager or 0) >= self.target_speedup:
            return f"target speedup {self.target_speedup:g}x reached"
        return None


@dataclass
class Attempt:
    """One evaluated candidate: where it came from and its verdict."""
    iteration: int
    sample: int
    kind: str
    code: str | None
    result: Result
    generation: Generation | None = None
    recommendation: Recommendation | None = None
    decision: Decision | None = None
    parent: str | None = None        # the id of the candidate it was made from (fixed or optimised)
    lineage: str | None = None       # the id of the first correct candidate of its line (search.py)
    applied: Recommendation | None = None   # the change it was asked to make, where it was one
    #                                  (the recommendation, an alternative, another lineage's)
    same_as: str | None = None       # the id of an earlier candidate with the same code (comments
    #                                  and blank lines aside): not judged again, its verdict taken

    @property
    def id(self) -> str:
        """`iteration.sample`: unique in a session (hand-judged candidates take samples above
        the agent's, see Session.evaluate_code)."""
        return f"{self.iteration}.{self.sample}"

    @property
    def speed(self) -> float:
        """Lower is better; only correct candidates with a time rank. The time relative to
        eager's (1 / speedup vs eager) where the evaluator timed eager beside it, else the
        time itself: a figure for candidates no head-to-head reaches (a saved run from before
        rivals, the interpreter). Decisions are made side by side (session/standing.py)."""
        t = self.result.timing
        if self.result.state != CORRECT or t.candidate_ms is None:
            return float("inf")
        return 1.0 / t.speedup_vs_eager if t.speedup_vs_eager else t.candidate_ms

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "sample": self.sample, "kind": self.kind,
                "code": self.code, "result": self.result.to_dict(),
                "recommendation": self.recommendation.title if self.recommendation else None,
                "decision": self.decision.kind if self.decision else None,
                "decision_text": self.decision.text if self.decision else None,
                "parent": self.parent, "lineage": self.lineage,
                "applied": {"title": self.applied.title, "text": self.applied.text}
                if self.applied else None, "same_as": self.same_as}

    def cells(self) -> list[str]:
        """id, kind, state, time, figures (or the message's start, for a failure), led as the
        notebook view leads (labextension/src/view.ts, chips and Performance table): the
        time the verdict leads with (on a busy CPU its own time), then the head-to-head with
        the best of its time, then the speedup vs eager with its interval (written out on a
        busy CPU: intervals.shown_speedup)."""
        t = self.result.timing
        same = f"same as {self.same_as}" if self.same_as else ""
        if self.result.state == CORRECT and t.candidate_ms is not None:
            return [self.id, self.kind, self.result.state, own_time_cell(t),
                    " · ".join(part for part in (*self.figures(), same) if part)]
        first = (self.result.message.splitlines() or [""])[0]
        return [self.id, self.kind, self.result.state, "-",
                first[:60] + (f" ({same})" if same else "")]

    def figures(self) -> list[str]:
        """A correct candidate's figures after its time: its head-to-head (none for a repeat,
        which was not judged again), then its speedup vs eager; a timing that is no
        performance figure says why instead."""
        t = self.result.timing
        if not t.real or not t.speedup_vs_eager:
            return [t.note or "no speedup"]
        # its few words, as the view's chip says it ("faster than 0.0 side by side"); the
        # ratio and its interval are in the verdict's lines (the HTML cell's title)
        versus = versus_tag(t.versus) if not self.same_as else ""
        return [versus, f"{shown_speedup(t, compact=True)} vs eager"]

    def __repr__(self) -> str:
        return "<Attempt " + "  ".join(self.cells()) + ">"

    def _repr_html_(self) -> str:
        return _table([self])


class History(list):
    """The session's attempts, in order: a list that prints one line per attempt."""

    def __repr__(self) -> str:
        if not self:
            return "<History: no candidates yet>"
        widths = [max(len(a.cells()[k]) for a in self) for k in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(a.cells(), widths + [0])).rstrip()
                 for a in self]
        return f"<History: {len(self)} candidates>\n" + "\n".join("  " + line for line in lines)

    def _repr_html_(self) -> str:
        return _table(self) if self else "<i>no candidates yet</i>"


def _table(attempts) -> str:
    """The attempts' cells as an HTML table; a correct candidate's figures carry its verdict's
    lines (Result.timing_lines: each time, interval and head-to-head in words) as their title."""
    head = "".join(f"<th>{h}</th>" for h in ("id", "kind", "state", "time",
                                              "side by side · vs eager / message"))
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in a.cells()[:4])
                   + _cell(a.cells()[4], "\n".join(a.result.timing_lines())) + "</tr>"
                   for a in attempts)
    return f"<table><tr>{head}</tr>{rows}</table>"


def _cell(text: str, title: str) -> str:
    tip = f' title="{html.escape(title)}"' if title else ""
    return f"<td{tip}>{html.escape(text)}</td>"


# C and C++ comments inside a kernel's source string (a URL's "://" is not one)
C_COMMENTS = re.compile(r"/\*.*?\*/|(?<![:\"'])//[^\n]*", re.S)


def normalised_code(code: str | None) -> str | None:
    """The code with comments and blank lines aside: Python's tokens without comments or
    blank lines (tokenize; indentation kept as structure, not width), and in multi-line
    strings (kernel sources) C-style comments, trailing spaces and blank lines dropped. Two
    candidates with the same normalised code are the same kernel: one is not judged again.
    Code tokenize cannot read is compared line by line, blank and `#` lines dropped."""
    if not code:
        return code
    parts: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE,
                            tokenize.ENDMARKER):
                parts.append(tokenize.tok_name[tok.type])
            elif tok.type == tokenize.STRING and "\n" in tok.string:
                parts.append(_plain_lines(C_COMMENTS.sub("", tok.string)))
            else:
                parts.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _plain_lines("\n".join(line for line in code.splitlines()
                                      if not line.lstrip().startswith("#")))
    return "\x1f".join(parts)


def _plain_lines(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
