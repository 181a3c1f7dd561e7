"""Words a new user meets in the views and the terminal, each said once and plainly (issue 38):
a notebook run's name, the analyst's last title, the iteration a recommendation belongs to."""
from __future__ import annotations

from kforge_nb.session.loop import unnested
from kforge_nb.ui.cell import problem_from_cell
from tests.test_magic import SOFTMAX_CELL

RMS_CELL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

def get_inputs():
    return [torch.randn(8, 64)]
'''


def test_a_notebook_run_is_named_by_the_ops_its_forward_calls(tmp_path):
    from kforge_nb.session import Session
    assert problem_from_cell(SOFTMAX_CELL, {}, tmp_path).name == "softmax"
    assert problem_from_cell(RMS_CELL, {}, tmp_path).name == "rsqrt-mean-pow"
    session = Session(problem_from_cell(RMS_CELL, {}, tmp_path), "cpp", out=tmp_path / "runs")
    assert session.folder.name.endswith("-rsqrt-mean-pow-cpp")      # what `kforge runs` lists


def test_a_forward_that_calls_no_op_keeps_the_name_cell(tmp_path):
    moves = RMS_CELL.replace("return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                             "return x.view(-1).contiguous()")
    assert problem_from_cell(moves, {}, tmp_path).name == "cell"


def test_a_title_said_in_parentheses_has_none_of_its_own():
    assert unnested("no further change expected (round 4)") == \
        "no further change expected, round 4"
    assert unnested("at the memory bandwidth already") == "at the memory bandwidth already"
