"""`--baseline max-autotune`: "vs compile" timed against torch.compile(mode="max-autotune"),
the mode recorded on the judged result and named by every view that names the baseline."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_nb import options as schema
from kforge_nb.baselines import long_name, short_name
from kforge_nb.bench.report import Row, table
from kforge_nb.result import CORRECT
from kforge_nb.session.config import eval_options
from kforge_nb.ui.report import run_record
from tests.support.scripted_run import scripted_session


@pytest.mark.parametrize("command", [schema.EVAL, schema.RUN, schema.BENCH, schema.MAGIC])
def test_every_judging_command_takes_the_baseline_and_defaults_to_compile(command):
    import argparse
    parser = argparse.ArgumentParser()
    schema.add_options(parser, command)
    assert schema.defaults(command).baseline == "compile"
    assert parser.parse_args(["--baseline", "max-autotune"]).baseline == "max-autotune"
    with pytest.raises(SystemExit):
        parser.parse_args(["--baseline", "reduce-overhead"])


def test_the_flags_make_the_evaluators_options():
    args = schema.defaults(schema.EVAL)
    args.baseline = "max-autotune"
    assert eval_options(args).compile_mode == "max-autotune"
    assert eval_options(args).baselines == ("eager", "compile")
    args.no_compile_baseline = True                 # still skips torch.compile altogether
    assert eval_options(args).baselines == ("eager",)
    assert eval_options(schema.defaults(schema.EVAL)).compile_mode == "default"


def test_a_bench_table_names_the_baseline_its_rows_were_timed_against():
    rows = [Row("rmsnorm", "correct", speedup_vs_eager=2.0, speedup_vs_compile=0.8, real=True,
                compile_mode="max-autotune"), Row("rope", "mismatch")]
    text = table(rows)
    assert "x max-autotune" in text and "vs torch.compile max-autotune 0.80x" in text
    assert "x compile" not in text
    default = table([Row("rmsnorm", "correct", speedup_vs_eager=2.0, speedup_vs_compile=0.8,
                         real=True, compile_mode="default")])
    assert "x compile" in default and "max-autotune" not in default
    assert (short_name(None), long_name(None)) == ("compile", "torch.compile")   # old records


@pytest.mark.slow
def test_max_autotune_is_compiled_timed_and_recorded(options):
    """The real evaluator on a tiny linear (a GEMM, what max-autotune tunes): the progress says
    the reference is compiled with max-autotune before the timing, and the judged result
    carries the mode and a speedup against it with its interval."""
    from kforge_nb.evaluator import evaluate
    from tests.support.evaluator import candidate_source, load_problem
    said: list[str] = []
    result = evaluate(load_problem("linear"), candidate_source("cpp_linear_same_names"), "cpp",
                      options(baselines=("eager", "compile"), compile_mode="max-autotune"),
                      progress=said.append)
    t = result.timing
    assert result.state == CORRECT, result.message
    assert t.compile_mode == "max-autotune"
    assert t.compile_ms > 0 and t.speedup_vs_compile > 0
    low, high = t.speedup_vs_compile_ci
    assert low <= t.speedup_vs_compile <= high
    assert "torch.compile max-autotune" in result.summary()
    compiling = [i for i, line in enumerate(said) if "compiling the reference with "
                 "torch.compile max-autotune" in line]
    assert compiling and compiling[0] < next(i for i, line in enumerate(said)
                                             if line.startswith("torch.compile max-autotune ("))
    saved = json.loads((Path(result.artifacts) / "result.json").read_text())
    assert saved["timing"]["compile_mode"] == "max-autotune"


@pytest.mark.slow
def test_the_default_baseline_is_recorded_as_the_default_mode(judge):
    result = judge("relu", "cpp_relu", baselines=("eager", "compile"))
    assert result.state == CORRECT
    assert result.timing.compile_mode == "default" and result.timing.speedup_vs_compile > 0
    assert "max-autotune" not in result.summary()


def test_a_whole_models_parts_and_end_to_end_line_name_the_baseline():
    from kforge_nb.ui.model_view import end_to_end_line, parts_table
    row = {"part": 0, "share": 0.6, "occurrences": 1, "label": "softmax", "state": "correct",
           "speedup_vs_eager": 1.5, "speedup_vs_compile": 0.9, "timing_real": True,
           "compile_mode": "max-autotune", "used": True}
    assert "vs max-autotune" in parts_table([row]).splitlines()[0]
    e2e = {"state": "correct", "message": "", "path": "model.py", "kernels": [0],
           "candidate_ms": 1.0, "eager_ms": 1.5, "speedup_vs_eager": 1.5,
           "speedup_vs_compile": 0.9, "timing_real": True, "compile_mode": "max-autotune"}
    assert "0.90x vs torch.compile max-autotune" in end_to_end_line(e2e)


@pytest.mark.slow
def test_kforge_eval_passes_the_baseline_to_the_judge(kforge_cli):
    """The flag as a user gives it, through the real CLI and evaluator: the JSON verdict
    carries the mode its compile figure was timed against."""
    from tests.support.evaluator import CANDIDATES, PROBLEMS
    proc = kforge_cli("eval", str(PROBLEMS / "linear.py"),
                      str(CANDIDATES / "cpp_linear_same_names.py"), "--target", "cpp",
                      "--trials", "1", "--baseline", "max-autotune", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    timing = json.loads(proc.stdout)["timing"]
    assert timing["compile_mode"] == "max-autotune" and timing["speedup_vs_compile"] > 0


LABEXTENSION = Path(__file__).parent.parent / "labextension"


@pytest.mark.skipif(shutil.which("node") is None or
                    not (LABEXTENSION / "node_modules" / "jsdom").is_dir(),
                    reason="needs node and jsdom: `cd labextension && npm ci`")
@pytest.mark.parametrize("mode", ["max-autotune", None])
def test_the_browser_view_names_the_baseline_the_run_was_timed_against(mode, tmp_path):
    """The header, the candidates table's column and the speedup chart say "max-autotune" where
    that was the baseline, and "torch.compile" / "vs compile" where it was the default (or a
    record from before the mode was recorded)."""
    record = run_record(scripted_session(tmp_path))
    for attempt in record["history"]:
        if attempt["result"].get("timing"):
            attempt["result"]["timing"]["compile_mode"] = mode
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"renderer": "mime", "record": record, "steps": [
        {"click": "button[data-tab=performance]"}, {"snapshot": "end"}]}))
    proc = subprocess.run(["node", "test/render.mjs", str(scenario)], cwd=LABEXTENSION,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])["end"]
    performance = seen["panes"]["performance"]
    if mode:
        assert "1.10x ±5% vs torch.compile max-autotune" in seen["header"], seen["header"]
        assert "vs max-autotune" in performance and "vs compile" not in performance
        assert "vs torch.compile max-autotune" in performance       # the chart's series
    else:
        assert "1.10x ±5% vs torch.compile" in seen["header"]
        assert "max-autotune" not in seen["header"] + performance
        assert "vs compile" in performance
