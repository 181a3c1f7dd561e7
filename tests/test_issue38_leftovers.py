"""Issue 38's leftovers: every place a person meets a figure says what the notebook view says.

- `History`'s repr and HTML lead as the view leads: the time the verdict leads with (its own
  time on a busy CPU), the head-to-head with the best of its time, then the speedup vs eager
  with its interval (written out on a busy CPU).
- Notebook 03 numbers iterations as the view does (from 1; a candidate's id from 0).
- The roofline's fraction of the speed of light is taken at the time the verdict leads with.
- A replay does not diverge on the memory-/compute-bound word: this machine's ceilings decide
  it, so a replay compares prompts without it (and the views keep this machine's word).
- `kforge run`'s table says what "busy" means once, right under its rows.
- A saved report's chart: plotly.js from its CDN by default (offline the PNG stays, and the
  HTML says so), embedded with KFORGE_PLOTLY_JS=inline so that it draws offline.
"""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kforge_nb.agents.feedback import profile_summary
from kforge_nb.cli import history_table
from kforge_nb.intervals import own_ms
from kforge_nb.providers.recording import recorded_digest, request_digest
from kforge_nb.result import CORRECT, Result
from kforge_nb.session.events import Event
from kforge_nb.session.records import Attempt, History
from kforge_nb.ui import fallback
from kforge_nb.ui.report import run_record
from tests.support.scripted_run import DUELS, scripted_session
from tests.test_timing_numbers import Scripted, Seen

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_03 = REPO / "notebooks" / "03_human_in_the_loop.ipynb"
RECORDING = REPO / "notebooks" / "data" / "softmax_session.jsonl"
SOFTMAX = REPO / "kforge_nb" / "targets" / "examples" / "softmax.py"
CHROMIUM = os.environ.get("KFORGE_CHROMIUM", "/usr/bin/chromium")


def duels() -> History:
    """The head-to-heads of tests/support/scripted_run.py as a session's history: 0.1 P (no
    rival), 0.2 Q (faster than 0.1), 0.3 R (busy, own time 0.55 ms, slower than 0.2), 0.4 S (a
    tie with 0.2), 0.5 T (busy, own time 0.45 ms, faster than 0.2), 0.6 V (no head-to-head)."""
    return History(Attempt(0, k + 1, "optimise", f"# {tag}", Result.from_dict(r.to_dict()))
                   for k, (tag, r) in enumerate(DUELS.items()))


def line_of(history: History, ident: str) -> str:
    return next(line for line in repr(history).splitlines() if line.split()[0] == ident)


# --- History's repr and HTML lead as the view leads -------------------------------------------

def test_a_busy_candidate_leads_with_its_own_time_then_its_head_to_head_then_vs_eager():
    line = line_of(duels(), "0.3")
    # the view's chip: "0.55 ms · slower than 0.2 side by side · 5.00x (2-20x)"
    own, versus, eager = "0.55 ms own (busy)", "slower than 0.2 side by side", \
        "5.00x (2-20x) vs eager"
    assert line.endswith(f"{own}  {versus} · {eager}"), line
    assert line.index(own) < line.index(versus) < line.index(eager)
    assert "0.9 ms" not in line            # the blocks' median, which carries the load
    assert "±" not in line                 # a lopsided busy interval is written out, not ±


def test_an_idle_candidate_leads_with_its_time_then_its_head_to_head_then_vs_eager():
    history = duels()
    faster = line_of(history, "0.2")
    assert re.search(r"0\.6897 ms +faster than 0\.1 side by side · 1\.45x ±5% vs eager$",
                     faster), faster
    assert line_of(history, "0.4").endswith("tie with 0.2 side by side · 1.48x ±5% vs eager")
    assert "no head-to-head with 0.5 · 1.10x ±9% vs eager" in line_of(history, "0.6")
    assert re.search(r"0\.8333 ms +1\.20x ±8% vs eager$", line_of(history, "0.1"))


def test_the_html_shows_the_same_cells_and_the_verdict_in_words_as_their_title():
    history = duels()
    page = history._repr_html_()
    for attempt in history:
        for cell in attempt.cells():
            assert f">{html.escape(cell)}</td>" in page, cell
    busy = history[2]
    # the title holds the verdict's own lines: its time said as its own, the duel's ratio and
    # interval in words
    title = re.search(r'<td title="([^"]*)">slower than 0\.2', page).group(1)
    assert "candidate 0.55 ms, its own time" in title and "5.00x (95 % interval 2-20x)" in title
    assert "0.80x, slower side by side (95 % interval 0.75-0.86x)" in title
    assert busy.result.timing_lines()[0].startswith("candidate 0.55 ms, its own time")


def test_a_repeat_says_so_and_no_head_to_head_of_its_own():
    attempts = duels()
    repeat = Attempt(0, 9, "optimise", "# Q", Result.from_dict(DUELS["# Q"].to_dict()),
                     same_as="0.2")
    cells = repeat.cells()
    assert cells[4] == "1.45x ±5% vs eager · same as 0.2"
    failed = Attempt(1, 0, "fix", "x", Result("compile_failure", "g++ exited 1\nmore"),
                     same_as="0.9")
    assert failed.cells()[3:] == ["-", "g++ exited 1 (same as 0.9)"]
    assert repr(History([*attempts, repeat])).count("\n") == len(attempts) + 1


# --- kforge run's table: busy said once, under the rows ---------------------------------------

def test_the_busy_note_follows_the_rows_and_says_busy_once(tmp_path):
    lines = history_table(scripted_session(tmp_path)).splitlines()
    rows = [k for k, line in enumerate(lines) if re.match(r"\d+ +\d+ ", line)]
    note = lines[rows[-1] + 1]
    assert note.startswith("⚠ the machine was busy while timing (candidate 0.2)"), lines
    assert note.lower().count("busy") == 1 and not any("BUSY" in line for line in lines)
    assert lines.index("★ best: candidate 0.3") > rows[-1] + 1


# --- notebook 03 numbers iterations as the view does ------------------------------------------

def notebook_helper() -> dict:
    """The notebook's own `next_recommendation` (its cell, executed as it stands)."""
    nb = nbformat.read(NOTEBOOK_03, as_version=4)
    source = next(c.source for c in nb.cells if "def next_recommendation" in c.source)
    scope: dict = {}
    exec(compile(source, str(NOTEBOOK_03), "exec"), scope)
    return scope


class Waiting:
    """What the helper reads of a session: its events, and that it runs."""
    running = True

    def __init__(self, events):
        self.events = events


def test_notebook_03_says_iteration_as_the_view_does(capsys):
    scope = notebook_helper()
    # the recommendation made after iteration 1's candidate 0.0: the loop's iteration 1 (from
    # 0) makes candidates 1.*; the view says "for iteration 2/4, whose candidates are 1.*"
    made = Event("recommendation", 1, {"title": "chunk the rows", "text": "...",
                                       "parent": "0.0"})
    assert scope["next_recommendation"](Waiting([made])) is made
    said = capsys.readouterr().out.splitlines()[0]
    assert said == "recommendation for iteration 2, whose candidates are 1.* (about " \
        "candidate 0.0): chunk the rows"


def test_notebook_03s_words_number_iterations_not_rounds():
    nb = nbformat.read(NOTEBOOK_03, as_version=4)
    words = "\n".join(c.source for c in nb.cells)
    # "rounds" only as the evaluator's timing rounds ("timed in the same rounds")
    assert [words[m.start() - 9:m.end()] for m in re.finditer(r"\brounds?\b", words)] == \
        ["the same rounds"]
    assert "rec.iteration + 1" in words


# --- the roofline at the time the verdict leads with ------------------------------------------

def timed(tmp_path, seen) -> Result:
    """A timing of scripted blocks (each candidate block: low calls at 1 ms, a median of 2 ms)
    on a problem of 64 MB and 1 GFLOP, judged with the CPU watch's reading `seen`."""
    script = {"judge": [[4.0, 4.0, 8.0]], "candidate": [[1.0, 2.0, 2.0]]}
    run = Scripted(script, tmp_path)
    run.summary = {"flops": 10**9, "min_bytes": 64 * 2**20}
    paired = run.interleave(6, {side: 3 for side in script}, adaptive=False)
    paired["cpu"] = seen.reading()
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, 2.0, False, "")
    return result


def test_the_roofline_fraction_is_taken_at_the_time_the_verdict_leads_with(tmp_path):
    busy = timed(tmp_path, Seen(others_cores=1.8, load1=4.0))
    t, roof = busy.timing, busy.roofline
    assert t.busy and t.candidate_low_ms < t.candidate_ms       # own time 1 ms, median 2 ms
    assert busy.timing_lines()[0].startswith(f"candidate {t.candidate_low_ms:.4g} ms, its own")
    assert roof.fraction_of_sol == pytest.approx(roof.speed_of_light_ms / t.candidate_low_ms)
    # the analyst's figures agree with it: its time and its achieved rates at the same time
    summary = profile_summary(busy)
    assert summary["candidate_ms"] == own_ms(t) == t.candidate_low_ms
    assert summary["achieved_bandwidth"] == pytest.approx(roof.min_bytes / (own_ms(t) * 1e-3))
    idle = timed(tmp_path, Seen())
    assert not idle.timing.busy
    assert idle.roofline.fraction_of_sol == pytest.approx(
        idle.roofline.speed_of_light_ms / idle.timing.candidate_ms)


# --- a replay and the memory-/compute-bound word ----------------------------------------------

def recorded_calls() -> list[dict]:
    return [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]


def text_of(request: dict) -> str:
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(
        b.get("text", "") for b in content if b.get("type") == "text")


def with_last_text(request: dict, text: str) -> list[dict]:
    messages = json.loads(json.dumps(request["messages"]))
    last = messages[-1]
    if isinstance(last["content"], str):
        last["content"] = text
    else:
        block = next(b for b in last["content"] if b.get("type") == "text")
        block["text"] = text
    return messages


def test_the_bound_word_and_the_notes_it_ranked_do_not_change_a_prompts_identity():
    """The recorded optimise prompt (memory-bound) as a machine that finds the candidate
    compute-bound writes it: the word, and the notes' reasons and order (knowledge/ranking.py
    choose ranks cpu_vectorisation first for compute)."""
    call = next(c for c in recorded_calls() if "## Knowledge notes chosen" in text_of(c["request"])
                and "Roofline: memory-bound" in text_of(c["request"]))
    recorded = text_of(call["request"])
    listed = re.search(r"## Knowledge notes chosen for this problem\n((?:- .*\n)+)", recorded)
    assert "(bottleneck: memory)" in listed.group(1)
    other = ("- cpu_vectorisation (bottleneck: compute)\n- cpu_openmp_threads (general cpp "
             "advice)\n- fusion_and_launch_overhead (general cpp advice)\n")
    compute = recorded.replace("Roofline: memory-bound", "Roofline: compute-bound") \
        .replace(listed.group(1), other)
    system = call["request"]["system"]
    assert request_digest(system, with_last_text(call["request"], compute)) == \
        recorded_digest(call)
    # the notes themselves still count: another note is another prompt
    fewer = compute.replace("- fusion_and_launch_overhead (general cpp advice)\n", "")
    assert request_digest(system, with_last_text(call["request"], fewer)) != \
        recorded_digest(call)


def peaks_that_make_it(bound: str) -> dict:
    """This machine's cached probe (devices.cpu_peaks), with a bandwidth that puts every
    problem with FLOPs on one side of the ridge point: unbounded (compute) or crawling
    (memory)."""
    bandwidth = 1e18 if bound == "compute" else 1e3
    return {"name": "CPU (2 cores, 2 threads)", "busy": False, "bandwidth": bandwidth,
            "cache_bandwidth": bandwidth, "llc_bytes": 32 * 2**20, "float32": 1e9}


@pytest.mark.slow
def test_a_replay_on_a_machine_that_finds_it_compute_bound_plays_every_recorded_call(
        tmp_path):
    """Notebook 06's recording was made where the softmax was memory-bound; replayed where
    it is compute-bound, every call plays, and the run keeps this machine's word."""
    analysis = next(c for c in recorded_calls() if c["role"] == "analysis")
    assert "Roofline: memory-bound" in text_of(analysis["request"])
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "cpu_peaks.v3.json").write_text(json.dumps(peaks_that_make_it("compute")))
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(SOFTMAX), "--replay",
         str(RECORDING), "--target", "cpp", "--iterations", "3", "--trials", "2",
         "--no-compile-baseline", "--patience", "10", "--out", str(runs), "--json"],
        capture_output=True, text=True, timeout=1200, cwd=REPO,
        env={**os.environ, "KFORGE_CACHE": str(cache)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = json.loads(next((runs.glob("*/run.json"))).read_text())
    history = record["history"]
    assert [a["result"]["state"] for a in history] == ["compile_failure", "correct", "correct"]
    assert "diverged" not in json.dumps(record)
    assert {a["result"]["roofline"]["bound"] for a in history[1:]} == {"compute"}


# --- the saved report's chart, offline --------------------------------------------------------

@pytest.fixture
def report(tmp_path):
    return run_record(scripted_session(tmp_path))


def test_by_default_plotly_comes_from_its_cdn_and_the_report_says_what_offline_does(
        report, monkeypatch):
    monkeypatch.delenv("KFORGE_PLOTLY_JS", raising=False)
    page = fallback.to_html(report)
    assert "https://cdn.plot.ly/plotly-" in page and "plotly.js v" not in page
    assert "offline this picture stays" in page and "KFORGE_PLOTLY_JS=inline" in page
    assert len(page) < 200_000                 # the PNG, the table: no library


def test_inline_embeds_plotly_js_once_and_says_so(report, monkeypatch):
    monkeypatch.setenv("KFORGE_PLOTLY_JS", "inline")
    page = fallback.to_html(report)
    library = fallback.plotly_js()
    assert page.count(library) == 1 and page.count("plotly.js v") == 1
    assert "is embedded in this report (KFORGE_PLOTLY_JS=inline)" in page
    assert len(page) - len(library) < 200_000


def browser_missing() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return f"no chromium at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright (bash .ci/browser-deps .venv)"
    return ""


@pytest.mark.skipif(bool(browser_missing()), reason=browser_missing() or "chromium")
def test_offline_the_inline_report_draws_its_chart_and_the_default_keeps_its_picture(
        report, monkeypatch, tmp_path):
    from playwright.sync_api import sync_playwright
    pages = {}
    for mode in ("inline", "cdn"):
        monkeypatch.setenv("KFORGE_PLOTLY_JS", mode)
        pages[mode] = tmp_path / f"{mode}.html"
        pages[mode].write_text(f"<!doctype html><meta charset=utf-8>{fallback.to_html(report)}")
    seen = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True)
            for mode, path in pages.items():
                page = context.new_page()
                errors = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(path.as_uri())
                if mode == "inline":
                    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
                else:
                    page.wait_for_load_state("load")
                seen[mode] = (page.locator(".js-plotly-plot").count(),
                              page.locator("img[alt^='speedup']").count(), errors)
        finally:
            browser.close()
    assert seen["inline"] == (1, 0, [])        # plotly drew over the picture, offline
    assert seen["cdn"] == (0, 1, [])           # no network: the picture stays
