"""Every view shows a speedup with its 95 % interval, the busy banner, noisy marks, ties, repeats
and capped rooflines (issue 27), on a scripted run (tests/support/scripted_run.py): no timing
comes from this machine."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_nb.agents.feedback import profile_summary, summary_text
from kforge_nb.bench.report import Row, fast_p, row_from_dict, row_from_result, table
from kforge_nb.cli import history_table
from kforge_nb.intervals import busy_text
from kforge_nb.result import Result
from kforge_nb.ui import fallback
from kforge_nb.ui.bench_views import row_line
from kforge_nb.ui.report import bundle, run_record
from kforge_nb.ui.terminal import Progress
from tests.support.scripted_run import BUSY_NOTE, NOISE_NOTE, VERDICTS, scripted_session

LABEXTENSION = Path(__file__).parent.parent / "labextension"


def shows_131(text: str) -> bool:
    """Whether the 131 % roofline fraction is shown (not a 131 in a run folder's time stamp)."""
    return re.search(r"131(\.\d+)?\s?%", text) is not None or "1.31" in text


@pytest.fixture
def run(tmp_path):
    return scripted_session(tmp_path)


def test_the_fallbacks_show_intervals_busy_noisy_ties_repeats_and_capped_rooflines(run):
    record = run_record(run)
    text, html = fallback.to_text(record), fallback.to_html(record)
    assert "best 0.3: 0.625 ms, 1.60x ±6% (noisy) vs eager, 1.10x ±5% vs torch.compile" in text
    assert "⚠ the machine was busy while timing (candidate 0.2)" in text and BUSY_NOTE in text
    assert "0.2 correct 0.8 ms, 1.25x (1.15-1.35x) (busy)" in text and "tie with 0.1" in text
    assert "same as 0.3" in text and "0.5 correct 1.111 ms 0.90x " in text  # no interval: point
    assert 'data-role="busy"' in html and "1.20x ±8%" in html and "0.90x ±6%" in html
    assert "95 % interval 1.1-1.3x" in html                  # the exact bounds, as a title
    assert "&gt;100% (ceiling underestimated)" in html and not shows_131(html)
    assert f'title="{NOISE_NOTE}"' in html.replace("&#x27;", "'")
    assert "tie with 0.1" in html and "same as 0.3" in html
    # every candidate's record says what the views draw
    by_id = {a["id"]: a for a in record["history"]}
    assert by_id["0.2"]["tie_with"] == "0.1" and by_id["0.4"]["same_as"] == "0.3"
    assert record["busy"] == {"ids": ["0.2"], "note": BUSY_NOTE}
    json.dumps(bundle(record))                               # the bundle stays JSON


def test_a_record_without_intervals_shows_points_and_never_crashes(run):
    record = run_record(run)
    for a in record["history"]:                 # a run saved before intervals existed
        for key in ("speedup_vs_eager_ci", "speedup_vs_compile_ci", "noisy", "busy"):
            a["result"]["timing"].pop(key, None)
        a.pop("same_as"), a.pop("tie_with")
        a["result"]["roofline"].pop("ceiling_exceeded", None)
    record.pop("busy")
    for key in ("speedup_vs_eager_ci", "speedup_vs_compile_ci", "noisy"):
        record["summary"].pop(key)
    text = fallback.to_text(record)
    assert "1.60x vs eager" in text and "±" not in text and "BUSY" not in text
    html = fallback.to_html(record)
    assert "±" not in html and "1.25x" in html


def test_the_cli_table_and_the_progress_lines(run):
    out = history_table(run)
    assert "1.60x ±6% (noisy)" in out and "1.10x ±5%" in out and "0.90x " in out
    lines = {line.split()[1]: line for line in out.splitlines()[1:6]}
    assert lines["1"].endswith("-") is False and "tie with 0.1" in lines["2"]
    assert "busy" in lines["2"] and "same as 0.3" in lines["4"] and "best" in lines["3"]
    assert "⚠ the machine was busy while timing (candidate 0.2)" in out
    stream = io.StringIO()
    progress = Progress(stream)
    for event in run.events:
        progress(event)
    said = stream.getvalue()
    # busy: its own time first, then the ratio to eager with its interval written out
    assert "[0.2] correct, own time 0.8 ms, 1.25x (95 % interval 1.15-1.35x) vs eager, " \
        "roofline >100% (ceiling underestimated)" in said and "(tie with 0.1" in said
    assert "[0.4] correct" in said and "(same as 0.3: not judged again)" in said
    assert f"⚠ the machine was busy while timing: speedups may be off; {BUSY_NOTE}" in said
    assert f"noisy: {NOISE_NOTE}" in said


def test_the_busy_banner_says_busy_once_where_the_note_says_it_already():
    note = ("the machine was busy while timing (load 3.9 on 2 cores): noise that only adds "
            "time")
    said = busy_text(note, ["0.2"])
    assert said == "the machine was busy while timing candidate 0.2 (load 3.9 on 2 cores): " \
        "noise that only adds time"
    assert said.count("busy") == 1 and busy_text(note).count("busy") == 1


def test_the_analysts_summary_shows_intervals_and_the_ceiling():
    said = summary_text(profile_summary(VERDICTS["# B"]))
    assert "speedup 1.25x ±8% vs eager" in said and "95 % interval" in said
    assert "ceiling underestimated" in said and not shows_131(said)
    # busy and noisy are the views' to say: a line in one run's prompt and not the next's
    # would break the replay of a recorded run (the interval's width says how far to trust it)
    assert "busy" not in said and BUSY_NOTE not in said
    noisy = summary_text(profile_summary(VERDICTS["# C"]))
    assert "1.60x ±6% vs eager" in noisy and NOISE_NOTE not in noisy
    plain = summary_text(profile_summary(VERDICTS["# D"]))
    assert "speedup 0.90x vs eager" in plain and "±" not in plain


def rows() -> list[Row]:
    return [row_from_result("a", VERDICTS["# A"], 1.0), row_from_result("b", VERDICTS["# B"], 1.0),
            row_from_result("c", VERDICTS["# C"], 1.0), row_from_result("d", VERDICTS["# D"], 1.0),
            Row("e", "mismatch")]


def test_fast_p_counts_a_problem_faster_only_when_its_interval_clears_p():
    marginal = Result.from_dict({**VERDICTS["# A"].to_dict()})
    marginal.timing.speedup_vs_eager, marginal.timing.speedup_vs_eager_ci = 1.05, [0.97, 1.13]
    rs = rows() + [row_from_result("f", marginal, 1.0)]
    # a, b, c clear 1; f's point is above 1 but its interval is not; d (0.90x) is slower
    assert fast_p(rs, 1.0) == 3 / 6
    assert fast_p(rs, 1.5) == 0.0                      # c: 1.60x, but its low end is 1.50
    assert fast_p(rs, 1.45) == 1 / 6
    assert fast_p(rs, 1.0, "compile") == 1 / 6         # c 1.10x [1.05, 1.15]; a is 0.90x
    # a row saved before intervals: its point decides
    old = row_from_dict({"id": "g", "state": "correct", "speedup_vs_eager": 1.05, "real": True})
    assert fast_p([old], 1.0) == 1.0


def test_the_bench_table_says_how_faster_is_counted(run):
    out = table(rows())
    assert "1.20x ±8%" in out and "1.60x ±6%?" in out and " 0.90x " in out
    assert "faster = 95 % interval above 1x" in out
    assert ">100%*" in out and "*: ceiling underestimated" in out
    assert "?: noisy" in out and "⚠ the machine was busy while timing (candidate b)" in out
    # busy: the interval written out (on a contested CPU it is wide and lopsided)
    assert "b: correct 0.8 ms, 1.25x (95 % interval 1.15-1.35x) eager" in row_line(rows()[1])
    assert "BUSY" in row_line(rows()[1]) and " 1.25x (1.15-1.35x) " in out


@pytest.mark.skipif(shutil.which("node") is None or
                    not (LABEXTENSION / "node_modules" / "jsdom").is_dir(),
                    reason="needs node and jsdom: `cd labextension && npm ci`")
@pytest.mark.parametrize("renderer", ["mime", "widget"])
def test_the_view_draws_intervals_error_bars_the_busy_banner_and_capped_rooflines(
        run, tmp_path, renderer):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"renderer": renderer, "record": run_record(run), "steps": [
        {"click": "button[data-tab=performance]"}, {"snapshot": "end"}]}))
    proc = subprocess.run(["node", "test/render.mjs", str(scenario)], cwd=LABEXTENSION,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])["end"]
    assert any(n.startswith("⚠ the machine was busy while timing (candidate 0.2)")
               and BUSY_NOTE in n for n in seen["notes"])
    # 0.2 was timed on a busy CPU: its time first, its speedup's interval written out
    assert seen["chips"] == ["0.1 correct 1.20x ±8%",
                             "0.2 correct 0.8 ms · 1.25x (1.15-1.35x) · tie with 0.1",
                             "0.3 correct 1.60x ±6% (noisy) ★",
                             "0.4 correct 1.60x ±6% (noisy) · same as 0.3",
                             "0.5 correct 0.90x"]
    assert "1.60x ±6% (noisy) vs eager, 1.10x ±5% vs torch.compile" in seen["header"]
    tree = {node["id"]: node for node in seen["tree"]}
    assert tree["0.2"]["tags"]["tie"] == "tie with 0.1" and "busy" in tree["0.2"]["tags"]
    assert tree["0.4"]["tags"]["same"] == "same as 0.3"
    assert "noisy" in tree["0.3"]["tags"] and "1.60x ±6%" in tree["0.3"]["row"]
    # error bars where there is an interval (0.5 has none), vs compile where it was timed
    assert sorted(seen["errorbars"]) == ["compile:0.1", "compile:0.3", "compile:0.4",
                                         "eager:0.1", "eager:0.2", "eager:0.3", "eager:0.4"]
    assert seen["ceilings"] == ["0.2:100%"]               # 131 %: a full bar, flagged
    performance = seen["panes"]["performance"]
    assert ">100% (ceiling underestimated)" in performance and not shows_131(performance)
    row = next(r for r in seen["rows"] if r.startswith("0.2"))
    assert "0.8 (busy)" in row and "1.25x (1.15-1.35x)" in row and "tie with 0.1" in row
