"""The roofline's FLOPs count pointwise work: an RMSNorm with an exp and sigmoid gate, which
torch's FlopCounterMode alone reads as 0 FLOPs, has its exp, sigmoid, rsqrt and arithmetic
counted at the costs per element of kforge_nb/evaluator/worker/op_costs.py (issue 30, part 3)."""
from __future__ import annotations

import types

import torch
from torch.utils.flop_counter import FlopCounterMode

from kforge_nb.evaluator.worker.judge import size_check
from kforge_nb.evaluator.worker.op_costs import COSTS, EXP, FlopCount, power_cost

ROWS, WIDTH = 8, 64


class GatedRMSNorm(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))

    def forward(self, x, gate):
        norm = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return norm * torch.sigmoid(gate) * torch.exp(-gate)


def expected_flops() -> int:
    n, rows = ROWS * WIDTH, ROWS
    return (n * 1              # x.pow(2): a multiply
            + n * COSTS["mean"] + rows * (COSTS["add"] + COSTS["rsqrt"])
            + 2 * n            # × rsqrt, × weight
            + n * COSTS["sigmoid"] + n                 # sigmoid, ×
            + n + n * EXP + n)                         # neg, exp, ×


def test_an_rmsnorm_with_exp_and_sigmoid_has_its_pointwise_work_counted():
    model, inputs = GatedRMSNorm(WIDTH), (torch.randn(ROWS, WIDTH), torch.randn(ROWS, WIDTH))
    with FlopCounterMode(display=False) as torch_only, torch.no_grad():
        model(*inputs)
    assert torch_only.get_total_flops() == 0           # what the roofline saw before
    with FlopCount() as count, torch.no_grad():
        model(*inputs)
    assert count.total() == expected_flops()
    assert COSTS["exp"] > COSTS["mul"] == 1            # a transcendental costs more than a multiply


def test_matrix_products_are_still_counted_beside_the_pointwise_work():
    model = torch.nn.Sequential(torch.nn.Linear(16, 8, bias=False), torch.nn.SiLU())
    with FlopCount() as count, torch.no_grad():
        model(torch.randn(4, 16))
    assert count.total() == 2 * 4 * 16 * 8 + 4 * 8 * COSTS["silu"]


def test_the_judge_counts_them_on_fake_tensors_before_allocating():
    module = types.SimpleNamespace(Model=GatedRMSNorm, get_init_inputs=lambda: [WIDTH],
                                   get_inputs=lambda: [torch.randn(ROWS, WIDTH),
                                                       torch.randn(ROWS, WIDTH)])
    too_large, flops = size_check(module, {"device": "cpu", "memory_bytes": 2**30})
    assert too_large == "" and flops == expected_flops()


def test_a_power_by_a_constant_costs_its_multiplies_and_any_other_an_exp_and_a_log():
    assert [power_cost(k) for k in (2.0, 3.0, 1.0, -1.0, 0.5, -0.5)] == [1, 2, 0, 1, 1, 2]
    assert power_cost(1.5) == COSTS["pow"] == 2 * EXP + 1

