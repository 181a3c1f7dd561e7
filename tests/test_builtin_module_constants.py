"""The builtin agent carries the reference's module-level constants its copied code reads.

ModelNew keeps the reference's constructor verbatim, so a constructor that reads `HIDDEN = 48`
(or a helper class that does) needs that line in the candidate file too, or the candidate
dies with `NameError` before any kernel runs. The reference is only parsed to find them.
"""
from __future__ import annotations

from pathlib import Path

from kforge_nb.agents.builtin.candidate import reference_parts
from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge

# Constants bound every way a module binds them (a tuple, an annotation, an update, one
# constant made of others), read by the constructor, by a helper class it builds, by forward
# (captured as numbers, so not needed) and by get_inputs alone (the reference's own, not copied).
CONSTANTS_PROBLEM = '''"""Module-level constants, the way user modules write them."""
import torch
import torch.nn as nn

HIDDEN, FACTOR = 48, 2
WIDTH: int = HIDDEN * FACTOR
WIDTH += 8
GAIN = 1.5
EPS = 1e-6
SCALE = 1.0 / WIDTH ** 0.5
BATCH = 16
UNUSED = 7


class Gain(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Parameter(torch.full((WIDTH,), GAIN))

    def forward(self, x):
        return x * self.g


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HIDDEN, WIDTH)
        self.gain = Gain()

    def forward(self, x):
        y = self.gain(self.fc(x)) * SCALE
        return y / torch.sqrt((y * y).mean(dim=-1, keepdim=True) + EPS)


def get_inputs():
    return [torch.randn(BATCH, HIDDEN)]


def get_init_inputs():
    return []
'''

BAG_SUM = Path(__file__).parent / "adversarial" / "problems" / "r5_bag_sum.py"


def test_the_constructor_gets_the_constants_it_reads_and_no_others():
    support, init = reference_parts(CONSTANTS_PROBLEM)
    assert support == ["import torch", "import torch.nn as nn",
                       "HIDDEN, FACTOR = 48, 2", "WIDTH: int = HIDDEN * FACTOR", "WIDTH += 8",
                       "GAIN = 1.5", support[-1]]
    assert support[-1].startswith("class Gain(nn.Module):")
    assert "nn.Linear(HIDDEN, WIDTH)" in init


def test_the_reference_is_parsed_not_run():
    source = "import torch\nraise SystemExit('ran')\nN = 3\n\n" + \
        "class Model(torch.nn.Module):\n    def __init__(self):\n        self.n = N\n"
    assert reference_parts(source)[0] == ["import torch", "N = 3"]


def test_a_candidate_whose_constructor_reads_module_constants_is_correct(tmp_path):
    ref, generation = generate(CONSTANTS_PROBLEM, "cpp")
    assert "UNUSED" not in generation.code and "BATCH" not in generation.code
    result = judge(ref, generation, "cpp", tmp_path)
    assert result.state == CORRECT, result.message


def test_bag_sum_sized_by_a_tuple_of_constants_is_correct(tmp_path):
    ref, generation = generate(BAG_SUM.read_text(), "cpp")
    assert "VOCAB, DIM, BATCH, BAG = 4096, 64, 64, 32" in generation.code
    result = judge(ref, generation, "cpp", tmp_path)
    assert result.state == CORRECT, result.message
