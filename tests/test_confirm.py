"""The final judging (--confirm): the best few candidates are each timed again beside the best
before the best is named. Driven by the real `anthropic` SDK against the scripted Messages API
on 127.0.0.1, with real g++ builds; the timings that matter are scripted by a flag file the test
creates when the final judging starts (a candidate sleeps 10 ms a call while it exists, or
while it does not), so the outcome does not depend on the machine's speed. The sandbox shows a
candidate none of the test's folders: the flag lies in the one cache folder it sees, its own
(one per candidate text, evaluator/sandbox.source_cache)."""
from __future__ import annotations

import json

from pathlib import Path

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.evaluator.sandbox.layout import source_cache
from kforge_nb.problem import Problem
from kforge_nb.session import Budget, Session
from kforge_nb.session.confirm import sentence
from kforge_nb.ui.terminal import Progress
from tests.test_session_anthropic import GOOD, PROBLEM, answer, api, options  # noqa: F401

pytestmark = pytest.mark.slow     # each test runs a session and its final judging


FLAG = 'os.path.exists(os.path.join(os.environ["KFORGE_CACHE"], "final-judging"))'


def flags(*candidates: str) -> list[Path]:
    """Where each candidate's sandbox sees its flag; none there yet."""
    out = []
    for text in candidates:
        flag = source_cache(Path(), text) / "final-judging"
        flag.parent.mkdir(parents=True, exist_ok=True)
        flag.unlink(missing_ok=True)
        out.append(flag)
    return out


def touch(paths: list[Path]) -> None:
    for path in paths:
        path.touch()


def sleeping(while_there: bool, seconds: float = 0.01) -> str:
    """GOOD, `seconds` slower a call while its flag exists (or while it does not)."""
    test = FLAG
    return GOOD.replace("import torch\n", "import os\nimport time\n\nimport torch\n", 1).replace(
        "        x = x.contiguous()\n",
        f"        if {'' if while_there else 'not '}{test}:\n"
        f"            time.sleep({seconds})\n        x = x.contiguous()\n", 1)


# The softmax whose eager call sleeps 20 ms: speedups are ratios to eager, and on a machine
# whose cores are all busy a 20-microsecond OpenMP softmax can stall for a scheduler slice
# (7 ms a call was seen), on either side. Against 20 ms of eager and 100 ms of sleep, a stall
# of that size cannot turn the ranking round.
SLOW_EAGER = Problem.from_string(PROBLEM.source.replace(
    "import torch\n", "import time\n\nimport torch\n", 1).replace(
    "        return torch.softmax", "        time.sleep(0.02)\n        return torch.softmax", 1),
    name="softmax_slow_eager")


def test_a_lucky_first_timing_does_not_name_the_best(api, tmp_path):  # noqa: F811
    lucky, steady = sleeping(True, 0.1), sleeping(False, 0.1)
    flag = flags(lucky, steady)
    api([answer(lucky), answer(steady)])
    session = Session(SLOW_EAGER, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=1, samples=2, confirm=2, patience=None),
                      options(tmp_path), out=tmp_path)
    lines = []
    session.subscribe(lambda e: touch(flag) if e.kind == "confirming" else None)
    session.subscribe(Progress(stream=type("S", (), {"write": lambda self, t: lines.append(t),
                                                      "flush": lambda self: None})()))
    session.run()
    by_code = {a.code: a.id for a in session.history}
    assert len(by_code) == 2 and all(a.result.state == "correct" for a in session.history)
    confirming = next(e for e in session.events if e.kind == "confirming").data
    confirmed = next(e for e in session.events if e.kind == "confirmed").data
    assert confirming["finalists"][0] == by_code[lucky]        # fastest as first measured
    assert confirmed["before"] == by_code[lucky] and confirmed["best"] == by_code[steady]
    assert session.best.code == steady
    judged_with, code = (session.folder / "best_candidate.py").read_text().split("\n", 1)
    assert judged_with == "# kforge-judged-with: --target cpp" and code == steady
    judged = confirmed["judged"]
    assert [(j["id"], j["rival"]) for j in judged] == [(by_code[steady], by_code[lucky])]
    assert judged[0]["versus"]["verdict"] == "faster" and judged[0]["versus"]["ratio"] > 1
    assert (session.folder / "duels" / f"{by_code[steady]}-vs-{by_code[lucky]}").is_dir()
    progress = json.loads((session.folder / "run.json").read_text())["progress"]
    assert {(d["candidate"], d["id"]) for d in progress["duels"]} >= \
        {(by_code[steady], by_code[lucky])}
    text = "".join(lines)
    assert f"[final] timing {by_code[lucky]}, {by_code[steady]} again, each beside the best" \
        in text
    assert f"Best is {by_code[steady]}, was {by_code[lucky]}" in text
    assert sentence(confirmed) in text
    # a resumed session ranks as the final judging left it
    again = Session.resume(session.folder, iterations=2)
    assert again.best.id == by_code[steady]


def test_a_finalist_wrong_when_judged_again_is_dropped(api, tmp_path):  # noqa: F811
    flaky = GOOD.replace("import torch\n", "import os\n\nimport torch\n", 1).replace(
        "x.numel() // cols, cols)", f"x.numel() // cols, cols // 2 if {FLAG} else cols)",
        1)                                        # half rows: wrong once the flag is there
    flag = flags(flaky, sleeping(False))
    api([answer(flaky), answer(sleeping(False))])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=1, samples=2, confirm=3, patience=None),
                      options(tmp_path), out=tmp_path)
    session.subscribe(lambda e: touch(flag) if e.kind == "confirming" else None)
    session.run()
    confirmed = next(e for e in session.events if e.kind == "confirmed").data
    # the flaky one was the best going in: timed again as the rival, its output was wrong
    dropped = next(j for j in confirmed["judged"] if j["dropped"])
    assert session.history[0].code == flaky or session.history[1].code == flaky
    flaky_id = next(a.id for a in session.history if a.code == flaky)
    assert dropped["dropped"] == flaky_id != confirmed["best"] == session.best.id
    assert f"{flaky_id} dropped: wrong when timed again" in sentence(confirmed)
    assert "was wrong" in dropped["versus"]["why"]


def test_greedy_names_its_best_as_measured_unless_asked(api, tmp_path):  # noqa: F811
    """No final judging by default for greedy (beam and evolve: 3 finalists); --confirm 0
    turns it off for them."""
    api([answer(GOOD), answer(GOOD.replace("schedule(static)", "schedule(static, 4)"))])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=1, samples=2, patience=None), options(tmp_path),
                      out=tmp_path)
    assert session.confirm_count == 0
    session.run()
    assert not any(e.kind.startswith("confirm") for e in session.events)
    assert Session(PROBLEM, "cpp", search="beam", out=tmp_path).confirm_count == 3
    assert Session(PROBLEM, "cpp", search="beam", budget=Budget(confirm=0),
                   out=tmp_path).confirm_count == 0
