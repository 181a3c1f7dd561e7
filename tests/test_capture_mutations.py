"""The builtin agent never drops an in-place write (issue 36, item 1).

fx records `c.index_copy_(0, i, u)` as a node nobody reads; before, the lowerer kept only what
the outputs read, so the write vanished with the ops that fed it. Now any in-place op hands the
module to torch.export, whose functional graph gives each write a new value. One problem per
family of in-place op; each first candidate is judged by the real evaluator on the CPU, and its
note names the write. A write the agent cannot reproduce (a buffer's state kept between calls)
is refused by name.
"""
from __future__ import annotations

import pytest

from kforge_nb.agents.builtin.capture import CaptureError, capture
from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

# name -> (problem, how the note names the write)
WRITES = {
    "pointwise_add_mul": (problem(
        "y = x * 2.0\ny.add_(1.0)\ny.mul_(x)\nreturn y - 0.25",
        "[torch.randn(8, 33)]"), "Tensor.add_"),
    "relu_inplace_then_read": (problem(
        "y = x - 0.5\nz = F.relu(y, inplace=True)\nreturn y + z * 3.0",
        "[torch.randn(8, 33)]"), "relu (inplace=True)"),
    "masked_fill": (problem(
        "s = x * 1.5\ns.masked_fill_(x > 0.5, -1.0)\nreturn torch.softmax(s, dim=-1)",
        "[torch.randn(8, 33)]"), "Tensor.masked_fill_"),
    # the judge's other batch size changes cache and u (the leading dim they share with the
    # first input), never the positions written: no index falls outside, none repeats
    "index_copy_kv_cache": (problem(
        "c = cache.clone()\nc.index_copy_(1, index, u + 0.125)\nreturn c * 2.0",
        "[torch.randn(3, 6, 16), torch.tensor([1, 4]), torch.randn(3, 2, 16)]",
        signature="cache, index, u"), "Tensor.index_copy_"),
    "index_copy_bf16_kv_cache": (problem(      # the casts name the cache's dtype, as written
        "c = cache.clone()\nc.index_copy_(1, index, (u.float() + 0.125).to(cache.dtype))\n"
        "return c.float() * 2.0",
        "[torch.randn(3, 6, 16).bfloat16(), torch.tensor([1, 4]), "
        "torch.randn(3, 2, 16).bfloat16()]", signature="cache, index, u"), "Tensor.index_copy_"),
    "index_put_kv_cache": (problem(
        "c = cache.clone()\nrows = torch.arange(c.shape[0], device=c.device)\n"
        "c.index_put_((rows, pos), u * 0.5)\nreturn c + 1.0",
        "[torch.randn(3, 6, 16), torch.tensor([5, 0, 2]), torch.randn(3, 16)]",
        signature="cache, pos, u"), "Tensor.index_put_"),
    "scatter": (problem(
        "c = x.clone()\nc.scatter_(1, index, -2.0)\nreturn torch.exp(c)",
        "[torch.randn(6, 16), torch.tensor([[0], [3], [5], [7], [1], [15]])]",
        signature="x, index"), "Tensor.scatter_"),
    "setitem_slices": (problem(
        "s = x * 2.0\ns[..., 0] = s[..., 0] + 1.0\ns[..., 1::2] = float('-inf')\n"
        "return torch.softmax(s, dim=-1)", "[torch.randn(8, 10)]"), "could not trace"),
    "copy_into_a_view": (problem(
        "c = x.clone()\nc[:, :4].copy_(u * 3.0)\nreturn c.sum(dim=1)",
        "[torch.randn(8, 12), torch.randn(8, 4)]", signature="x, u"), "Tensor.copy_"),
    "input_written_in_place": (problem(
        "x.add_(1.0)\nreturn x * 2.0", "[torch.randn(8, 33)]"), "Tensor.add_"),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_the_capture_keeps_each_write_and_says_how(name):
    source, named = WRITES[name]
    captured = capture(source.replace("import torch\n", "import torch\n", 1))
    assert any(named in note and "torch.export" in note for note in captured.notes), \
        captured.notes
    # the write survives as an op of the graph (kept in torch or lowered), never just a cast
    assert any(n.op in ("pointwise", "reduce", "host") and n.fn != "view"
               for n in captured.graph.nodes)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRITES))
def test_the_first_candidate_of_each_write_is_correct(name, tmp_path):
    ref, generation = generate(WRITES[name][0], "cpp")
    assert generation.code is not None, generation.failure
    assert "torch.export" in generation.notes
    result = judge(ref, generation, "cpp", tmp_path)
    assert result.state == CORRECT, result.message


# fx runs the first eagerly (a buffer is no proxy) and records nothing; the second it records
BUFFER_STATE = {
    "constant_step": problem("self.seen.add_(1.0)\nreturn x * self.seen", "[torch.randn(4, 8)]",
                             "self.register_buffer('seen', torch.zeros(8))"),
    "step_from_input": problem("self.seen.add_(x.sum(0))\nreturn x * self.seen",
                               "[torch.randn(4, 8)]",
                               "self.register_buffer('seen', torch.zeros(8))"),
}


@pytest.mark.parametrize("name", sorted(BUFFER_STATE))
def test_a_buffer_written_between_calls_is_refused_by_name(name):
    with pytest.raises(CaptureError) as refused:
        capture(BUFFER_STATE[name])
    message = str(refused.value)
    assert "Tensor.add_" in message and "self.seen" in message and "between calls" in message
    _, generation = generate(BUFFER_STATE[name], "cpp")
    assert generation.code is None and "self.seen" in generation.failure


def test_a_plain_tensor_attribute_written_in_place_is_refused_by_name():
    """Before, fx dropped `self.hidden.copy_(h)` and the candidate read the stale state."""
    source = problem("self.hidden.copy_(h)\nreturn torch.cat((x, self.hidden), dim=1) * 2.0",
                     "[torch.randn(4, 8), torch.randn(4, 8)]",
                     "self.hidden = torch.zeros(4, 8)", signature="x, h")
    with pytest.raises(CaptureError) as refused:
        capture(source)
    assert str(refused.value).startswith("the reference writes in place (Tensor.copy_), and "
                                         "torch.export could not capture it either")


def test_a_module_without_writes_is_still_traced_by_fx():
    captured = capture(problem("return torch.relu(x) + 1.0", "[torch.randn(4, 8)]"))
    assert not any("torch.export" in note for note in captured.notes)
