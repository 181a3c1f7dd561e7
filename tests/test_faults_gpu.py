"""GPU faults: a poisoned CUDA context stays in its own process, and GPU memory running out is
said as such. Skipped without a CUDA GPU (proven on the lent H100: docs/results.md)."""
import pytest
import torch

from kforge_nb.evaluator import Guardrails, evaluate
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, RUNTIME_ERROR
from tests.support.evaluator import EXAMPLES

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SOFTMAX = Problem.from_file(EXAMPLES / "softmax.py")
TRITON = (EXAMPLES / "triton_softmax.py").read_text()
CUDA = (EXAMPLES / "cuda_softmax.py").read_text()


def test_illegal_address_then_the_next_candidate_gets_a_clean_process(options):
    bad = CUDA.replace("row_out[c] = expf", "row_out[c + (1ll << 40)] = expf")
    result = evaluate(SOFTMAX, bad, "cuda", options())
    assert result.state == RUNTIME_ERROR and "illegal memory access" in result.message
    assert evaluate(SOFTMAX, TRITON, "triton", options()).state == CORRECT


def test_gpu_out_of_memory_is_said_as_such(options):
    greedy = TRITON.replace("        y = torch.empty_like(x)\n",
                            "        y = torch.empty_like(x)\n"
                            "        hoard = torch.empty(1 << 42, dtype=torch.uint8, device='cuda')\n")
    result = evaluate(SOFTMAX, greedy, "triton", options())
    assert result.state == RUNTIME_ERROR
    assert "GPU out of memory" in result.message
    assert evaluate(SOFTMAX, TRITON, "triton", options()).state == CORRECT


IDS = """import torch
import torch.nn as nn


class {name}(nn.Module):
    def forward(self, ids, x):
        return x * ids.to(x.dtype).unsqueeze(1)


def get_inputs():
    return [torch.randint(0, 8, (1024,)), torch.randn(1024, 512)]


def get_init_inputs():
    return []
"""


def test_a_problem_with_integer_inputs_is_timed_and_checked_on_the_same_draws(options):
    """Integer inputs are drawn again for each timed call; the candidate draws them inside the
    timed loop and the judge where it checks a kept call. Drawn "on the GPU" through
    `torch.device`, a torch-function mode the loop turns off, they came from two generators:
    the reference's own code, as the candidate, was a mismatch at its first checked call."""
    problem = Problem.from_string(IDS.format(name="Model"), "ids")
    result = evaluate(problem, IDS.format(name="ModelNew"), "triton",
                      options(guardrails=Guardrails(allow=["*"])))
    assert result.state == CORRECT, result.message
