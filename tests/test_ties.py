"""Ties are ties, and the same code is not judged twice (issue 27): the session's decisions on
scripted verdicts. No timing comes from this machine: a scripted executor hands back Results
whose speedups and intervals are written out here."""
from __future__ import annotations

import threading

from kforge_nb import intervals
from kforge_nb.result import CORRECT, Result, Timing
from kforge_nb.session import Session
from kforge_nb.session.records import normalised_code
from kforge_nb.session.search import Tree
from kforge_nb.ui.report import run_record
from tests.test_session_anthropic import PROBLEM


def timed(speedup: float, ci: tuple[float, float] | None = None, **timing) -> Result:
    return Result(CORRECT, "ok", timing=Timing(
        real=True, candidate_ms=1.0 / speedup, eager_ms=1.0, speedup_vs_eager=speedup,
        speedup_vs_eager_ci=list(ci) if ci else None, **timing))


class Scripted:
    """An executor: each code's verdict is looked up by its first line ("# A", "# B", ...)."""
    name = "scripted"

    def __init__(self, verdicts: dict[str, Result], gate: threading.Event | None = None):
        self.verdicts, self.calls, self.gate = verdicts, [], gate

    def evaluate(self, problem, code, target, options, folder):
        self.calls.append(code)
        if self.gate is not None:
            self.gate.wait(10)
        return Result.from_dict(self.verdicts[code.splitlines()[0]].to_dict())

    def describe(self) -> str:
        return "scripted"


def kernel(tag: str, body: str = "") -> str:
    """Code whose verdict is `tag`'s; kernels with other tags differ in more than comments."""
    return f"{tag}\n{body or f'x = {tag[2:]!r}'}\n"


def session(tmp_path, verdicts, **kw) -> Session:
    executor = Scripted(verdicts, kw.pop("gate", None))
    return Session(PROBLEM, "cpp", out=tmp_path, executor=executor, **kw)


def test_a_faster_point_inside_the_bests_interval_is_a_tie(tmp_path):
    s = session(tmp_path, {"# A": timed(0.95, (0.80, 1.10)), "# B": timed(0.97, (0.85, 1.12))})
    first = s.evaluate_code(kernel("# A"))
    second = s.evaluate_code(kernel("# B"))
    assert s.best is first                        # 0.97x vs 0.95x: the intervals overlap
    assert s.ties == {second.id: first.id}
    evaluated = [e for e in s.events if e.kind == "evaluated"]
    assert evaluated[-1].data["tie_with"] == first.id and not evaluated[-1].data["best"]
    record = run_record(s)
    assert record["best_id"] == first.id
    assert record["history"][1]["tie_with"] == first.id


def test_separate_intervals_crown_the_faster(tmp_path):
    s = session(tmp_path, {"# A": timed(1.0, (0.95, 1.05)), "# B": timed(1.3, (1.2, 1.4)),
                           "# C": timed(1.35, (1.3, 1.45))})
    s.evaluate_code(kernel("# A"))
    b = s.evaluate_code(kernel("# B"))
    assert s.best is b and s.ties == {}
    c = s.evaluate_code(kernel("# C"))            # 1.30 is not above 1.40: a tie with B
    assert s.best is b and s.ties == {c.id: b.id}


def test_without_intervals_the_points_decide_as_before(tmp_path):
    # a run saved before intervals existed, or the interpreter: no interval anywhere
    s = session(tmp_path, {"# A": timed(0.95), "# B": timed(0.97)})
    s.evaluate_code(kernel("# A"))
    b = s.evaluate_code(kernel("# B"))
    assert s.best is b and s.ties == {}


def test_the_search_expands_the_best_not_a_tie(tmp_path):
    s = session(tmp_path, {"# A": timed(1.0, (0.9, 1.1)), "# B": timed(1.05, (0.95, 1.15))})
    a = s.evaluate_code(kernel("# A"))
    s.evaluate_code(kernel("# B"))
    branches = s.search.branches(s.tree(), s._rank, 1)
    assert [br.parent for br in branches] == [a]


def test_the_final_judging_may_still_overturn_a_tie(tmp_path):
    s = session(tmp_path, {"# A": timed(1.0, (0.9, 1.1)), "# B": timed(1.05, (0.95, 1.15))})
    a = s.evaluate_code(kernel("# A"))
    b = s.evaluate_code(kernel("# B"))
    assert s.best is a
    # the final judging timed b beside a again: faster side by side
    s.standing.duels[(b.id, a.id)] = {"id": a.id, "ratio": 1.2, "ci": [1.15, 1.25],
                                      "noise": 0.02, "verdict": "faster"}
    assert s.best is b


def test_the_same_code_is_not_judged_again(tmp_path):
    s = session(tmp_path, {"# A": timed(1.2, (1.1, 1.3))})
    code = ('# A\nimport torch\n\n\nSRC = """\n// the kernel\n'
            'int f() { return 1; }  /* one */\n"""\n')
    again = ('# A\nimport torch  # torch\n# a comment of its own line\nSRC = """\n'
             'int f() { return 1; }\n\n"""\n')
    first = s.evaluate_code(code)
    second = s.evaluate_code(again)
    assert len(s.executor.calls) == 1                  # judged once
    assert second.same_as == first.id and second.result.state == CORRECT
    assert second.result.timing.speedup_vs_eager == 1.2
    assert s.best is first and second.id not in s.ties
    record = run_record(s)
    assert record["history"][1]["same_as"] == first.id
    assert s.tree().population() == [first]            # the repeat is never expanded
    evaluated = [e for e in s.events if e.kind == "evaluated"]
    assert evaluated[-1].data["same_as"] == first.id


def test_two_samples_with_one_code_are_judged_once_even_at_once(tmp_path):
    gate = threading.Event()
    s = session(tmp_path, {"# A": timed(1.2, (1.1, 1.3))}, gate=gate)
    out = []
    threads = [threading.Thread(target=lambda: out.append(s.evaluate_code(kernel("# A"))))
               for _ in range(2)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(20)
    assert len(s.executor.calls) == 1 and len(out) == 2
    assert sorted(bool(a.same_as) for a in out) == [False, True]


def test_normalised_code_sets_aside_comments_and_blank_lines_only():
    base = "def f(x):\n    return x + 1\n"
    assert normalised_code(base) == normalised_code("# head\ndef f(x):  # f\n\n    return x + 1\n")
    assert normalised_code(base) != normalised_code("def f(x):\n    return x + 2\n")
    assert normalised_code(base) != normalised_code("def f(x):\n    return 'x + 1'\n")
    src = 'S = """\n__global__ void k() { a[i] = 1; }\n"""\n'
    assert normalised_code(src) == normalised_code(
        'S = """\n/* doc */\n__global__ void k() {  // one\n a[i] = 1; }\n"""\n'.replace(
            "{  // one\n a[i]", "{ a[i]"))
    assert normalised_code(src) != normalised_code(src.replace("= 1", "= 2"))
    # code tokenize cannot read still compares, line by line
    assert normalised_code("def f(:\n  pass\n") == normalised_code("# c\ndef f(:\n\n  pass\n")


def test_a_saved_run_keeps_same_as(tmp_path):
    from kforge_nb.session import saved
    s = session(tmp_path, {"# A": timed(1.2, (1.1, 1.3))})
    s.evaluate_code(kernel("# A"))
    s.evaluate_code(kernel("# A", "x = 'A'  # same"))
    s._save_state()
    back = saved.attempt_from_dict(s.history[1].to_dict())
    assert back.same_as == s.history[0].id


def test_a_tie_is_no_improvement_for_recombination():
    from kforge_nb.agents.base import Recommendation
    from kforge_nb.session.records import Attempt
    a = Attempt(0, 0, "initial", "a", timed(1.0, (0.9, 1.1)))
    change = Recommendation("unroll", "unroll")
    tie = Attempt(1, 0, "optimise", "b", timed(1.05, (0.95, 1.15)), parent="0.0",
                  applied=change)
    win = Attempt(1, 1, "optimise", "c", timed(1.5, (1.4, 1.6)), parent="0.0", applied=change)
    assert [c.id for c, _ in Tree([a, tie, win]).improvements()] == ["1.1"]


def test_compare_and_the_texts():
    assert intervals.compare({"speedup_vs_eager": 1.3, "speedup_vs_eager_ci": [1.2, 1.4]},
                             {"speedup_vs_eager": 1.0, "speedup_vs_eager_ci": [0.9, 1.1]}) \
        == "better"
    assert intervals.compare({"speedup_vs_eager": 0.9}, {"speedup_vs_eager": 1.0}) == "worse"
    assert intervals.speedup_text(1.42, [1.33, 1.51]) == "1.42x ±6%"
    assert intervals.speedup_text(1.42, None) == "1.42x"
    assert intervals.speedup_text(1.42, ["bad", None]) == "1.42x"        # never a crash
    assert intervals.speedup_text(1.0, [0.996, 1.004]) == "1.00x ±0.4%"
    assert intervals.speedup_text(None, [1, 2]) == "-"
    assert intervals.faster_than(1.05, [0.98, 1.12]) is False
    assert intervals.faster_than(1.05, None) is True
    assert intervals.roofline_text(1.31) == ">100% (ceiling underestimated)"
    assert intervals.roofline_text(0.42) == "42.0%"
    assert intervals.bar_fraction(1.78) == 1.0
