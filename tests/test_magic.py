"""`%%kforge` / `%kforge` in a real IPython shell, with real sessions and the real evaluator.

The model is a scripted Messages API on 127.0.0.1 (tests/support/fake_anthropic.py) reached
through the real `anthropic` SDK, so every test controls exactly which candidates arrive.
Helpers here are shared by the widget, export and notebook tests.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import kforge_nb
from tests.support.fake_anthropic import FakeAnthropic

EXAMPLES = Path(kforge_nb.__file__).parent / "targets" / "examples"
SOFTMAX_CELL = (EXAMPLES / "softmax.py").read_text()
GOOD = (EXAMPLES / "cpp_softmax.py").read_text()
FASTER = GOOD.replace("schedule(static)", "schedule(static, 4)")
FASTEST = GOOD.replace("schedule(static)", "schedule(static, 8)")
WRONG = GOOD.replace("row_out[c] *= inv_sum;", "row_out[c] *= 0.5f * inv_sum;")
BROKEN = GOOD.replace("row_sum += row_out[c];", "row_sum += row_out[c]")
# Small and fast: 2 trials, no torch.compile baseline (~30 s here), no patience stop.
FAST = "--target cpp --trials 2 --no-compile-baseline --patience 10"


def answer(code: str) -> dict:
    return {"text": f"Here is the kernel.\n\n```python\n{code}```\n"}


def recommendation(title: str = "chunk the rows", text: str = "use schedule(static, 4)") -> dict:
    return {"text": f"TITLE: {title}\nRECOMMENDATION: {text}\nEXPECTED GAIN: ~1.1x"}


@pytest.fixture
def api(monkeypatch):
    """api(script) starts the scripted server and points ANTHROPIC_* at it; returns it."""
    started: list[FakeAnthropic] = []

    def start(script):
        server = FakeAnthropic(script).__enter__()
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        started.append(server)
        return server
    yield start
    for server in started:
        server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp
    shell = globalipapp.start_ipython() or globalipapp.get_ipython()   # one shell per process
    if "KForgeMagics" not in shell.magics_manager.registry:
        shell.run_line_magic("load_ext", "kforge_nb")
    return shell


def magics(ip):
    return ip.magics_manager.registry["KForgeMagics"]


@pytest.fixture
def kforge(ip, tmp_path):
    """kforge(flags, cell=softmax) runs `%%kforge FAST --out tmp flags` and returns the Session."""
    def run(flags: str = "", cell: str = SOFTMAX_CELL):
        ip.run_cell_magic("kforge", f"{FAST} --out {tmp_path / 'runs'} {flags}", cell)
        return ip.user_ns["_kforge"]
    yield run
    for session in magics(ip).sessions.values():
        session.stop()
        session.wait(60)
    magics(ip).sessions.clear()


def wait_for(session, kind: str, count: int = 1, timeout: float = 600.0) -> None:
    """Until the session has emitted `count` events of `kind` (the bound only ends a hung test:
    a loaded machine takes minutes for what an idle one does in seconds)."""
    deadline = time.monotonic() + timeout
    while sum(e.kind == kind for e in session.events) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {kind} event #{count} within {timeout} s; events: "
                                 f"{[e.kind for e in session.events]}; error {session.error}")
        time.sleep(0.05)


def usage_error(ip, capsys, source: str) -> str:
    """Run a cell that must fail with a UsageError; return what the user sees."""
    result = ip.run_cell(source)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert type(result.error_in_exec).__name__ == "UsageError", shown
    assert "Traceback" not in shown
    return shown


# --- the magic runs a session ---------------------------------------------------------------

@pytest.mark.slow
def test_cell_magic_runs_a_session_and_binds_it_to_kforge(api, kforge):
    from kforge_nb.session import Session
    api([answer(BROKEN), answer(GOOD)])
    session = kforge("--iterations 2")
    assert isinstance(session, Session) and not session.running   # auto mode blocks here
    assert [a.result.state for a in session.history] == ["compile_failure", "correct"]
    assert session.best.code == GOOD
    assert session.summary()["best_state"] == "correct"


@pytest.mark.slow
def test_flags_and_traitlets_config_set_the_session(api, ip, kforge):
    api([answer(GOOD)])
    ip.run_line_magic("config", "KForgeMagics.iterations = 1")
    ip.run_line_magic("config", "KForgeMagics.name = 'softmax_run'")
    try:
        kforge("--hint 'prefer OpenMP'")
        session = ip.user_ns["softmax_run"]
    finally:
        ip.run_line_magic("config", "KForgeMagics.iterations = None")
        ip.run_line_magic("config", "KForgeMagics.name = '_kforge'")
    assert session.budget.iterations == 1
    assert session.options.baselines == ("eager",) and session.options.trials == 2
    assert session.agents_config.hint == "prefer OpenMP"


@pytest.mark.slow
def test_a_module_with_inputs_from_the_notebook_is_reproduced_in_the_reference(api, ip, kforge):
    import torch
    api([answer(GOOD)])
    ip.user_ns["x"] = torch.randn(8, 300)
    cell = ("import torch\nimport torch.nn as nn\n\nclass RowSoftmax(nn.Module):\n"
            "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n")
    session = kforge("--iterations 1 --inputs x", cell)
    assert session.history[0].result.state == "correct"
    assert "Model = RowSoftmax" in session.problem.source
    namespace = {}
    exec(session.problem.source, namespace)
    assert torch.equal(namespace["get_inputs"]()[0], ip.user_ns["x"])
    assert "RowSoftmax" in ip.user_ns                         # the cell's names, as if run


# --- errors are one paragraph, no traceback ------------------------------------------------

def test_bad_flag_is_a_one_paragraph_usage_error(ip, capsys):
    shown = usage_error(ip, capsys, f"%%kforge --iteratoins 3\n{SOFTMAX_CELL}")
    assert "unrecognized arguments: --iteratoins 3" in shown and "kforge run" in shown


def test_unknown_target_is_a_usage_error(ip, capsys):
    shown = usage_error(ip, capsys, f"%%kforge --target vulkan\n{SOFTMAX_CELL}")
    assert "unknown target 'vulkan'" in shown


def test_cell_missing_an_import_says_the_reference_runs_elsewhere(ip, capsys):
    cell = "class Model(nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n"
    shown = usage_error(ip, capsys, f"%%kforge --target cpp\n{cell}")
    # line 2 as the editor numbers it: the %%kforge line is line 1
    assert "NameError at line 2 ('class Model(nn.Module):')" in shown
    assert "separate process" in shown


def test_a_syntax_error_names_the_line_the_editor_shows(ip, capsys):
    cell = "import torch\nimport torch.nn as nn\nclass Model(nn.Module)\n    pass\n"
    shown = usage_error(ip, capsys, f"%%kforge --target cpp\n{cell}")
    assert "the cell does not parse: line 4: expected ':'" in shown


def test_cell_without_get_inputs_asks_for_inputs(ip, capsys):
    cell = "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n"
    shown = usage_error(ip, capsys, f"%%kforge --target cpp\n{cell}")
    assert "no `get_inputs()`" in shown and "--inputs" in shown


def test_inputs_that_cannot_cross_processes_are_refused(ip, capsys):
    ip.user_ns["handle"] = open(__file__)
    cell = "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n"
    shown = usage_error(ip, capsys, f"%%kforge --target cpp --inputs handle\n{cell}")
    assert "TextIOWrapper" in shown and "cannot be passed" in shown
    ip.user_ns.pop("handle").close()


def test_unknown_subcommand_lists_the_subcommands(ip, capsys):
    shown = usage_error(ip, capsys, "%kforge launch")
    assert "last, stop, eval" in shown


# --- line magics ----------------------------------------------------------------------------

@pytest.mark.slow
def test_kforge_stop_ends_a_running_session(api, ip, kforge):
    api([answer(GOOD)] + [recommendation(), answer(FASTER)] * 6)
    session = kforge("--iterations 6 --no-block")
    wait_for(session, "evaluated")
    ip.run_line_magic("kforge", "stop")
    session.wait(600)
    assert session.finish_reason == "stopped by the user"
    assert len({a.iteration for a in session.history}) < 6


@pytest.mark.slow
def test_kforge_eval_judges_a_notebook_variable_against_the_last_problem(api, ip, kforge, capsys):
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    ip.user_ns["my_kernel"] = WRONG
    ip.run_line_magic("kforge", "eval my_kernel")
    assert session.history[-1].code == WRONG
    assert session.history[-1].result.state == "mismatch"
    assert "mismatch" in capsys.readouterr().out
    from kforge_nb.ui.report import run_record
    # the view's record has it too, under an id of its own (the run's last iteration, sample 1)
    assert [a["id"] for a in run_record(session)["history"]] == ["0.0", "0.1"]


@pytest.mark.slow
def test_kforge_last_and_config_print_in_a_terminal(api, ip, kforge, capsys):
    api([answer(GOOD)])
    kforge("--iterations 1")
    capsys.readouterr()
    ip.run_line_magic("kforge", "last")
    assert "1 candidates over 1 iterations" in capsys.readouterr().out
    ip.run_line_magic("kforge", "config")
    assert "c.KForgeMagics.target" in capsys.readouterr().out


@pytest.mark.slow
def test_kforge_eval_reads_a_candidate_file(api, ip, kforge, tmp_path):
    api([answer(BROKEN)])
    session = kforge("--iterations 1")
    path = tmp_path / "mine.py"
    path.write_text(GOOD)
    ip.run_line_magic("kforge", f"eval {path}")
    assert session.history[-1].result.state == "correct" and session.best.code == GOOD


@pytest.mark.slow
def test_record_then_replay_through_the_magic_needs_no_model(api, ip, kforge, tmp_path,
                                                            monkeypatch):
    api([answer(BROKEN), answer(GOOD), recommendation(), answer(FASTER)])
    recording = tmp_path / "session.jsonl"
    live = kforge(f"--iterations 3 --record {recording}")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    replayed = kforge(f"--iterations 3 --replay {recording}")
    assert [a.result.state for a in replayed.history] == \
        [a.result.state for a in live.history] == ["compile_failure", "correct", "correct"]
    assert replayed.provider_description.startswith("replay")


@pytest.mark.slow
def test_the_session_shows_its_report_when_displayed(api, ip, kforge, capsys):
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    shown, _ = ip.display_formatter.format(session)
    assert {"application/vnd.kforge.run+json", "text/html", "text/plain"} <= set(shown)
    capsys.readouterr()
    ip.run_cell("_kforge", store_history=True)
    assert "1 candidates over 1 iterations" in capsys.readouterr().out


# --- a second cell while one runs; resuming a saved run -------------------------------------

@pytest.mark.slow
def test_a_second_kforge_cell_while_one_runs_is_refused_and_loses_nothing(api, ip, kforge,
                                                                          capsys):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    first = kforge("--iterations 2 --mode review --no-block")
    wait_for(first, "recommendation")               # waiting for a decision: surely running
    shown = usage_error(ip, capsys, f"%%kforge {FAST} --iterations 2\n{SOFTMAX_CELL}")
    assert "a session is still running as _kforge" in shown and "%kforge stop" in shown
    assert "--name" in shown
    assert ip.user_ns["_kforge"] is first and first.running       # untouched, still going
    first.accept()
    first.wait(600)
    assert [a.result.state for a in first.history] == ["correct", "correct"]


@pytest.mark.slow
def test_kforge_resume_goes_on_with_a_stopped_run_in_its_own_folder(api, ip, kforge, capsys):
    api([answer(GOOD), recommendation(), recommendation(), answer(FASTER), recommendation(),
         answer(FASTEST), recommendation(), answer(FASTEST)])
    first = kforge("--iterations 3 --mode review --no-block")
    wait_for(first, "recommendation")
    first.stop()                                     # as the Stop button does
    first.wait(600)
    assert first.finish_reason == "stopped by the user" and len(first.history) == 1
    folder = first.folder

    differing = SOFTMAX_CELL.replace("dim=-1", "dim=0")
    shown = usage_error(ip, capsys, f"%%kforge --resume {folder}\n{differing}")
    assert "differs from the reference" in shown

    ip.run_line_magic("kforge", f"resume {folder} --mode auto --block")
    resumed = ip.user_ns["_kforge"]
    assert resumed is not first and resumed.folder == folder
    assert [a.iteration for a in resumed.history] == [0, 1, 2]
    assert resumed.history[0].code == first.history[0].code == GOOD      # kept, not redone
    assert resumed.best.code in (GOOD, FASTER, FASTEST)
    assert resumed.summary()["iterations"] == 3
    from kforge_nb.ui.report import run_record
    assert len(run_record(resumed)["history"]) == 3   # the view shows the earlier one too
    resumed.stop()
    ip.run_cell_magic("kforge", f"--resume {folder} --iterations 4 --block",
                      "# the same run, one more round")
    assert ip.user_ns["_kforge"].summary()["iterations"] == 4
