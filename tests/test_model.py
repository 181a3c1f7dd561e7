"""Whole models: `kforge model` and `%%kforge --whole-model` over a small multi-part model.

Real parts throughout: the decomposition runs in its child process, each part in a builtin
agent session on the C++ target (g++), the recomposed file in the evaluator's workers. Which
kernels the recomposed model takes depends on measured speed under the default `--use faster`,
so the end-to-end tests pass `--use correct` (every correct kernel) to stay independent of this
machine's speed and load; the speed is reported in docs/, not asserted here.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_nb.model.recompose import prefixed
from kforge_nb.problem import Problem
from tests.support.evaluator import REPO
from tests.test_magic import ip  # noqa: F401  (fixture: a real IPython shell)

MODEL = REPO / "tests" / "problems" / "small_transformer_mlp.py"
FAST = ["--target", "cpp", "--provider", "builtin", "--iterations", "2", "--trials", "2",
        "--no-compile-baseline", "--no-shape-check"]
EXPECTED_PARTS = {  # label -> uses in the forward
    "pow -> mean -> add -> rsqrt -> mul -> mul": 1,      # the hand-written RMSNorm
    "layer_norm": 3,                                      # the blocks' norms and out_norm
    "linear -> gelu": 2,
    "linear -> add": 2,                                   # down projection + residual
    "linear -> silu": 1,
}


def test_list_finds_the_parts_shares_identical_blocks_and_checks_the_split(kforge_main):
    done = kforge_main("model", str(MODEL), "--target", "cpp", "--list", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    labels = {p["label"]: p["occurrences"] for p in found["parts"]}
    for label, uses in EXPECTED_PARTS.items():
        assert labels.get(label) == uses, (label, labels)
    assert len(found["steps"]) == sum(p["occurrences"] for p in found["parts"])
    # the parts' own code, called in the model's order with its weights, is the model
    assert found["check"]["max_abs_error"] == 0.0
    assert abs(sum(p["share"] for p in found["parts"]) - 1.0) < 1e-6
    for part in found["parts"]:
        problem = Problem.from_file(part["file"])          # a KernelBench problem file
        assert f"Part {part['id']} of small_transformer_mlp" in problem.source
        assert "def get_inputs" in problem.source
    linear_gelu = next(p for p in found["parts"] if p["label"] == "linear -> gelu")
    text = Path(linear_gelu["file"]).read_text()
    assert "nn.Linear(in_features=128, out_features=256, bias=True)" in text
    assert "torch.randn((64, 128))" in text                 # the real shape of its input
    assert "linear -> gelu" in done.stderr          # the parts table, for a person


@pytest.mark.slow
def test_a_whole_model_end_to_end_offline(kforge_cli, tmp_path):
    done = kforge_cli("model", str(MODEL), *FAST, "--use", "correct", "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["error"] is None
    parts = summary["parts"]
    assert {p["label"] for p in parts} == set(EXPECTED_PARTS)
    for part in parts:
        assert part["state"] == "correct", part
        assert part["used"] and part["speedup_vs_eager"] > 0
        assert Path(part["artifacts"], "best_candidate.py").is_file()
    e2e = summary["end_to_end"]
    assert e2e["state"] == "correct", e2e["message"]
    assert sorted(e2e["kernels"]) == sorted(p["part"] for p in parts)
    assert e2e["speedup_vs_eager"] > 0 and e2e["timing_real"]
    assert "weights copied from the reference" in e2e["message"]
    # one standalone file: judged again on its own by `kforge eval`, it is still correct
    recomposed = Path(e2e["path"])
    source = recomposed.read_text()
    ast.parse(source)
    assert "class ModelNew(Model)" in source and source.count("extern \"C\"") >= len(parts)
    again = kforge_cli("eval", str(MODEL), str(recomposed), "--target", "cpp", "--trials", "2",
                       "--no-compile-baseline", "--json",
                       *[f"--allow={op}" for op in e2e["allowed_ops"]])
    assert json.loads(again.stdout)["state"] == "correct", again.stdout[-2000:]
    saved = json.loads(Path(summary["folder"], "model.json").read_text())
    assert saved["end_to_end"]["state"] == "correct"


@pytest.mark.slow
def test_only_the_chosen_parts_and_the_rest_as_written(kforge_cli):
    listed = json.loads(kforge_cli("model", str(MODEL), "--target", "cpp", "--list",
                                   "--json").stdout)
    rms = next(p["id"] for p in listed["parts"] if p["label"].startswith("pow"))
    done = kforge_cli("model", str(MODEL), *FAST, "--use", "correct", "--parts", str(rms),
                      "--json", timeout=600)
    summary = json.loads(done.stdout)
    rows = {p["part"]: p for p in summary["parts"]}
    assert rows[rms]["used"] and rows[rms]["state"] == "correct"
    others = [r for k, r in rows.items() if k != rms]
    assert all(r["state"] == "not optimised" and not r["used"] for r in others)
    e2e = summary["end_to_end"]
    assert e2e["state"] == "correct", e2e["message"]
    assert e2e["kernels"] == [rms]
    # the parts left as written run their torch code: allowed by name, op by op
    assert {"linear", "layer_norm", "gelu"} <= set(e2e["allowed_ops"])


@pytest.mark.slow     # `kforge model` processes
def test_bad_input_is_a_clear_error(kforge_cli, tmp_path):
    branchy = tmp_path / "branchy.py"
    branchy.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        if x.sum() > 0:\n            return x.relu()\n"
        "        return x\n\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n")
    done = kforge_cli("model", str(branchy), "--target", "cpp", "--list")
    assert done.returncode == 2
    assert "torch.fx could not trace the model" in done.stderr
    assert "Traceback" not in done.stderr
    done = kforge_cli("model", str(MODEL), "--target", "cpp", "--parts", "0,99", *FAST[2:])
    assert done.returncode == 2 and "no part 99" in done.stderr
    done = kforge_cli("model", str(MODEL), "--parts", "one")
    assert done.returncode == 2 and "not a list of part numbers" in done.stderr


@pytest.mark.slow
def test_whole_model_cell_magic_in_a_shell(ip, tmp_path, capsys):  # noqa: F811
    cell = MODEL.read_text()
    flags = " ".join(FAST) + f" --use correct --top 1 --out {tmp_path} --block"
    ip.run_cell_magic("kforge", f"--whole-model {flags}", cell)
    session = ip.user_ns["_kforge"]
    summary = session.summary()
    assert summary["error"] is None
    chosen = [p for p in summary["parts"] if p["state"] != "not optimised"]
    assert len(chosen) == 1 and chosen[0]["share"] == max(p["share"] for p in summary["parts"])
    assert summary["end_to_end"]["state"] == "correct"
    printed = capsys.readouterr().out
    assert "end to end: correct" in printed and "kforge model:" in printed


def test_part_names_stay_apart_in_the_recomposed_file():
    kernel = ('import torch\n_lib = None  # the library, built once\n\n\n'
              'def kernel(x, scale=2.0):\n    return x * scale\n\n\n'
              'class ModelNew(torch.nn.Module):\n    def forward(self, x):\n'
              '        global _lib\n        return kernel(x, scale=3.0) + self.kernel\n')
    renamed = prefixed(kernel, "_kf1_")
    assert "def _kf1_kernel(x, scale=2.0)" in renamed
    assert "return _kf1_kernel(x, scale=3.0) + self.kernel" in renamed   # attribute, keyword kept
    assert "global _kf1__lib" in renamed and "# the library, built once" in renamed
    assert "class _kf1_ModelNew" in renamed and "import torch" in renamed
    ast.parse(renamed)


def test_recomposed_model_runs_where_weights_move(tmp_path):
    """The tied weights follow `.to()` and `load_state_dict`: run in a child process (the
    recomposed file holds a model's code, never run in the test's own process)."""
    from kforge_nb.model.session import decompose
    from kforge_nb.model.recompose import PartCode, recompose
    found = decompose(Problem.from_file(MODEL), "cpu", tmp_path / "d")
    codes = [PartCode(p["id"], Path(p["file"]).read_text(), False, p["file"])
             for p in found["parts"]]
    path = tmp_path / "model_new.py"
    path.write_text(recompose(MODEL.read_text(), "m", found, codes))
    script = (
        "import importlib.util, torch\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(path)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "torch.manual_seed(0); ref = m.Model(*m.get_init_inputs())\n"
        "torch.manual_seed(1); new = m.ModelNew(*m.get_init_inputs()).double().float()\n"
        "new.load_state_dict(ref.state_dict()); new.eval(); ref.eval()\n"
        "x = m.get_inputs()[0]\n"
        "assert set(new.state_dict()) == set(ref.state_dict())\n"
        "assert all(not p.training for p in new._kforge_parts)\n"
        "print((new(x) - ref(x)).abs().max().item())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 0.0


@pytest.mark.parametrize("flag", ["--resume x", "--mode review"])
def test_whole_model_refuses_per_session_flags(ip, flag, tmp_path):  # noqa: F811
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="works on one module's session"):
        ip.run_cell_magic("kforge", f"--whole-model {flag} --out {tmp_path}", MODEL.read_text())


@pytest.mark.slow
def test_whole_model_in_a_headless_notebook_keeps_one_final_view(tmp_path):
    """`%%kforge --whole-model` executed by nbclient: one display, redrawn in place as the
    parts finish; the saved notebook holds the parts table, the end-to-end line and the
    profiled timeline before/after as an image, and no widget state."""
    import nbformat
    from nbclient import NotebookClient
    flags = " ".join(FAST) + f" --use correct --top 1 --out {tmp_path / 'runs'}"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext kforge_nb"),
        nbformat.v4.new_code_cell(f"%%kforge --whole-model {flags}\n{MODEL.read_text()}"),
        nbformat.v4.new_code_cell("print(_kforge.summary()['end_to_end']['state'])")])
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [o for o in nb.cells[1].outputs if o.output_type == "display_data"]
    assert len(shown) == 1
    html = shown[0].data["text/html"]
    assert "linear -&gt; gelu" in html and "end to end: correct" in html
    assert "data:image/png;base64," in html and "decomposing" not in html
    assert "widget-view+json" not in nbformat.writes(nb)
    assert nb.cells[2].outputs[0].text.strip() == "correct"


@pytest.mark.slow
def test_a_measurement_hook_on_the_recomposed_model(kforge_cli):
    """--measure runs the user's throughput hook on the model and on the recomposed model,
    each in its own worker; the summary carries both (values, not which is faster)."""
    hook = REPO / "benchmarks" / "hooks" / "tokens_per_s.py"
    done = kforge_cli("model", str(MODEL), *FAST, "--use", "correct", "--top", "1",
                      "--measure", str(hook), "--objective", "tokens_per_s", "--json",
                      timeout=600)
    summary = json.loads(done.stdout)
    measures = summary["end_to_end"]["measures"]
    assert measures["hook"].endswith("tokens_per_s.py") and "error" not in measures, measures
    for side in ("reference", "candidate"):
        assert measures[side]["tokens_per_s"] > 0 and measures[side]["latency_ms"] > 0
    assert measures["ratio"]["tokens_per_s"] > 0
    part = next(p for p in summary["parts"] if p["state"] != "not optimised")
    assert part["measures"]["candidate"]["tokens_per_s"] > 0    # the part's session, too


def test_a_provider_that_cannot_start_stops_the_model_at_its_first_part(kforge_main,
                                                                        monkeypatch):
    """No API key for --provider anthropic: the first part's session says why, and the model
    stops there (exit 2) instead of failing every part the same way."""
    import os
    for key in [k for k in os.environ if k.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(key)
    done = kforge_main("model", str(MODEL), "--target", "cpp", "--provider", "anthropic",
                       "--json")
    assert done.returncode == 2, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert "provider error" in summary["error"] and "ANTHROPIC_API_KEY" in summary["error"]
    tried = [p for p in summary["parts"] if p["state"] != "not optimised"]
    assert len(tried) == 1
    assert "Traceback" not in done.stderr
