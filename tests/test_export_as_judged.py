"""`kforge eval` accepts what the run accepted (issue 36, item 6).

The builtin agent keeps a gather whose index tensors broadcast against each other
(`x[rows[:, None], cols]`, ATen's `index`) in torch on purpose and its run allows it;
`kforge eval` of the run's best_candidate.py without that allowance refuses it
(`torch-compute-at-runtime`). (This test used `torch.round`, then a gather by one index tensor,
until the agent learned to round and to gather in its kernels.) The file carries the run's flags
on a first line the session writes (`# kforge-judged-with:`); the refusal names them,
`kforge eval --as-judged` judges the file as the run did, and the exported kernel says the same
command and writes the reference it needs. A kept op refused by name before it runs
(`torch-compute-in-forward`: F.bilinear) names the run's flags the same way. What the line may
declare is bounded: --target, --precision and op names, never '*' nor any other flag.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kforge_nb.export import DeclarationError, declared_flags
from kforge_nb.problem import Problem

pytestmark = pytest.mark.slow

GATHER = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, rows, cols):
        return torch.relu(x[rows[:, None], cols] * 2.0)


def get_inputs():
    return [torch.randn(64, 32), torch.randint(0, 64, (16,)), torch.randint(0, 32, (8,))]


def get_init_inputs():
    return []
'''


def kforge_eval(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kforge_nb.cli", "eval", "--trials", "2",
                           "--no-compile-baseline", "--out", str(cwd / "runs"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=900)


def test_the_exported_kernel_is_judged_as_the_run_judged_it(tmp_path):
    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.session import Budget, Session
    session = Session(Problem.from_string(GATHER, "gather"), "cpp",
                      AgentConfig(provider="builtin"), Budget(iterations=1, patience=None),
                      EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2),
                      out=tmp_path).start()
    session.wait(600)
    assert session.best is not None, session.finish_reason
    assert "index" in session.best.generation.kept_ops
    best = session.folder / "best_candidate.py"
    assert best.read_text().startswith("# kforge-judged-with: --target cpp --allow index\n")
    exported = session.export(tmp_path / "kernel.py")
    assert "best_candidate.py --target cpp --allow index`" in exported.read_text()

    reference = tmp_path / "reference.py"
    subprocess.run([sys.executable, str(exported), "--write-reference", str(reference)],
                   check=True, timeout=120)
    assert reference.read_text() == GATHER

    refused, accepted = refused_then_as_judged(reference, best, "index", tmp_path)
    assert "rejected" in refused.stdout and "aten.index" in refused.stdout
    assert "judging as the run did (best_candidate.py's kforge-judged-with line): --target " \
        "cpp --allow index" in accepted.stderr
    assert accepted.stdout.startswith("correct")


@pytest.mark.parametrize("line, why", [
    ("# kforge-judged-with: --allow '*'", "allows '*', not an op name"),
    ("# kforge-judged-with: --no-sandbox x", "names '--no-sandbox'"),
    ("# kforge-judged-with: --allow", "a flag without a value"),
    ("# kforge-judged-with: --allow 'round", "does not parse"),
    ("# kforge-judged-with: --allow index;rm", "not an op name"),
])
def test_a_declaration_names_only_ops_a_target_and_a_precision(line, why):
    with pytest.raises(DeclarationError, match=why.replace("*", r"\*").replace("(", r"\(")):
        declared_flags(f"import torch\n{line}\n")


def test_a_file_without_a_declaration_is_told_so(tmp_path):
    candidate = tmp_path / "mine.py"
    candidate.write_text("import torch\n")
    assert declared_flags(candidate.read_text()) is None
    reference = tmp_path / "reference.py"
    reference.write_text(GATHER)
    told = kforge_eval(reference, candidate, "--as-judged", cwd=tmp_path)
    assert told.returncode == 2
    assert "mine.py has no '# kforge-judged-with:' line" in told.stderr


BILINEAR = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 16, 12))
        self.b = nn.Parameter(torch.randn(8))

    def forward(self, a, b):
        return torch.relu(F.bilinear(a, b, self.w, self.b))


def get_inputs():
    return [torch.randn(32, 16), torch.randn(32, 12)]


def get_init_inputs():
    return []
'''


def test_an_op_kept_by_name_is_refused_before_it_runs_and_judged_as_the_run_did(tmp_path):
    """The builtin agent keeps F.bilinear as the torch call and lowers the relu after it. The
    guardrail refuses `F.bilinear(` by name in forward (torch-compute-in-forward) before the
    candidate runs, so `kforge eval` without the run's flags points at them there too, and
    `--as-judged` accepts what the run accepted."""
    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.session import Budget, Session
    session = Session(Problem.from_string(BILINEAR, "bilinear"), "cpp",
                      AgentConfig(provider="builtin"), Budget(iterations=1, patience=None),
                      EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2),
                      out=tmp_path).start()
    session.wait(600)
    assert session.best is not None, session.finish_reason
    best = session.folder / "best_candidate.py"
    assert best.read_text().startswith("# kforge-judged-with: --target cpp --allow bilinear\n")
    assert "F.bilinear(" in best.read_text()
    reference = tmp_path / "reference.py"
    reference.write_text(BILINEAR)

    refused, accepted = refused_then_as_judged(reference, best, "bilinear", tmp_path)
    assert "torch-compute-in-forward" in refused.stdout and "F.bilinear()" in refused.stdout
    assert accepted.stdout.startswith("correct")


def refused_then_as_judged(reference, best, allowed: str, folder):
    """`kforge eval` of the run's best without its flags (refused, and pointed at the file's
    kforge-judged-with line), then with --as-judged (accepted): both processes."""
    refused = kforge_eval(reference, best, "--target", "cpp", cwd=folder)
    assert refused.returncode == 1, refused.stderr
    assert (f"judged it with --target cpp --allow {allowed}: kforge eval --as-judged judges it "
            "the same way") in refused.stdout
    accepted = kforge_eval(reference, best, "--as-judged", cwd=folder)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    return refused, accepted
