"""The builtin agent's op records (op_records.py) and its language classes (elementwise.py):
every record is lowered, written in each language and judged `correct` by the real evaluator;
a target's row says which template families it writes.

The unary problem is written from the records themselves, so an op added with a torch name is
judged in every language without touching this file.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from kforge_nb.agents.base import GenerationRequest
from kforge_nb.agents.builtin import BuiltinGenerator
from kforge_nb.agents.builtin.elementwise import CppFormulas, StdFormulas, TritonFormulas
from kforge_nb.agents.builtin.op_records import OPS, RECORDS, TORCH_NAMES, expensive
from kforge_nb.agents.builtin.targets import TARGETS
from kforge_nb.evaluator.worker.op_costs import COSTS
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem


def spelled(name: str) -> str:
    """torch.<name> where torch has it, else F.<name> (F.silu, F.mish, F.hardswish)."""
    return f"torch.{name}" if hasattr(torch, name) else f"F.{name}"


# x in [0.25, 1.75] whatever the evaluator's trial draws (its tail values too): inside every
# op's domain (log, sqrt, rsqrt, a fractional power), away from 0 (sign), no overflow
SQUASH = "x = torch.sigmoid(x) * 1.5 + 0.25\n"
EVERY_UNARY = problem(
    SQUASH + "y = x * 0.0\n" +
    "\n".join(f"y = y + {spelled(name)}(x)" for name in TORCH_NAMES) + "\nreturn y",
    "[torch.randn(7, 41)]")
# the ops with attributes or several operands, each branch of the records' writers
WITH_ATTRIBUTES = problem(
    SQUASH + "w = torch.sigmoid(w) + 0.5\n"
    "y = F.leaky_relu(x - 1.0, 0.2) + torch.clamp(x, 0.5, 1.5) + torch.clamp(x, min=0.75)\n"
    "y = y + F.gelu(x) + F.gelu(x, approximate='tanh') + F.softplus(x, beta=2.0, threshold=2.5)\n"
    "y = y + F.softplus(x) + F.elu(x - 1.0) + F.selu(x - 1.0) + F.celu(x - 1.0, alpha=0.5)\n"
    "y = y + x ** 2.5 + x ** 3 + x ** -2 + x ** 0.5 + torch.pow(x, w) + torch.pow(x - 1.0, 3.0)\n"
    "y = y + torch.maximum(x, w) + torch.minimum(x, w)\n"
    "y = y + F.smooth_l1_loss(x, w, reduction='none')\n"
    "return y + torch.relu(x - 1.0) + torch.sign(x - 1.0)",
    "[torch.randn(7, 41), torch.randn(7, 41)]", signature="x, w")

# (target, kind) -> how exp is spelled in the language its kernels are written in: the C++
# helpers (CppFormulas), libm (StdFormulas, the conservative version), triton.language
LANGUAGES = {("cpp", "initial"): "vexp(", ("cpp", "fix"): "std::exp(",
             ("triton", "initial"): "tl.exp("}


@pytest.mark.parametrize("target, kind", list(LANGUAGES), ids=["cpp", "std", "triton"])
@pytest.mark.parametrize("source", [EVERY_UNARY, WITH_ATTRIBUTES], ids=["unary", "attributes"])
def test_every_record_is_computed_correctly_in_every_language(source, target, kind, tmp_path):
    ref, generation = generate(source, target, kind)
    assert generation.kept_ops == [], generation.kept_ops      # every op lowered, none kept
    assert LANGUAGES[target, kind] in generation.code
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_records_cover_every_op_the_language_classes_write():
    """A formula for each record in each language, and no language table naming an op the
    records do not have (a misspelt key would be a formula nobody reaches)."""
    attrs = {"slope": 0.1, "low": 0.0, "high": 1.0, "approximate": "none", "beta": 1.0,
             "threshold": 20.0, "alpha": 1.0, "scale": 1.0, "input_scale": 1.0,
             "exponent_value": 2.5}
    for language in (CppFormulas(("exp",)), StdFormulas(), TritonFormulas()):
        assert set(language.code_for_op) <= set(OPS)
        for record in RECORDS:
            operands = [f"a{k}" for k in range(record.arity)]
            assert "a0" in language.formula(record.name, operands, attrs), record.name
    with pytest.raises(KeyError):
        TritonFormulas().formula("no_such_op", ["a0"], {})


def test_expensive_ops_are_those_costing_an_exp_or_more():
    """One home for costs: a record's cost is the evaluator's (op_costs), and what the C++
    passes park in the output rather than compute twice follows from it."""
    for record in RECORDS:
        assert record.cost == COSTS.get(record.name, 0)
    assert {r.name for r in RECORDS if expensive(r.name)} == {
        "exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "mish", "softplus", "elu",
        "log1p", "expm1", "pow", "sin", "cos"}
    assert not expensive("sqrt") and not expensive("sum")     # one instruction; not pointwise


CONV = problem("return self.conv(x)", "[torch.randn(1, 3, 9, 9)]",
               "self.conv = nn.Conv2d(3, 4, 3)")


@pytest.mark.parametrize("target", ["cpp", "triton"])
def test_a_target_writes_the_template_families_its_row_registers(target, monkeypatch):
    ref = Problem.from_string(CONV, name="conv")
    own = BuiltinGenerator().generate(GenerationRequest(ref, target, "initial"))
    assert own.kept_ops == [] and "kept in torch" not in own.code
    row = dataclasses.replace(TARGETS[target], templates={})     # no family registered
    monkeypatch.setitem(TARGETS, target, row)
    vendor = BuiltinGenerator().generate(GenerationRequest(ref, target, "initial"))
    assert vendor.code is None       # the conv stays torch's, and nothing else is left to write
    assert vendor.failure.startswith("builtin agent cannot lower: Conv2d (self.conv) (no ")
    assert vendor.failure.endswith("work left to put in a kernel)")
