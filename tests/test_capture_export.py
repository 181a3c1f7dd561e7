"""Where torch.fx cannot trace a reference, the builtin agent captures it with torch.export on
the example inputs (issue 36, item 1): Python control flow on shapes (`min(2, x.shape[-1])`,
`for choice in range(ids.shape[-1])`, `max(0, n - 4)`) is resolved at those shapes, item
assignment becomes a functional op. The ops the lowerer has no converter for stay torch calls,
and the generation's notes say so (and why export was used) before the first iteration. Each
first candidate is judged by the real evaluator on the CPU, at its second batch size too.
"""
from __future__ import annotations

import pytest

from kforge_nb.agents.builtin.capture import capture
from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

MOE_TOP2 = problem(
    "probs = torch.softmax(F.linear(x, self.gate), dim=-1)\n"
    "k = min(2, probs.shape[-1])\n"
    "weights, ids = probs.topk(k, dim=-1)\n"
    "weights = weights / weights.sum(dim=-1, keepdim=True)\n"
    "out = x * 0.0\n"
    "for choice in range(ids.shape[-1]):\n"
    "    w = self.experts[ids[:, choice]]\n"
    "    y = torch.bmm(w, x.unsqueeze(-1)).squeeze(-1)\n"
    "    out = out + weights[:, choice:choice + 1] * F.silu(y)\n"
    "return out",
    "[torch.randn(12, 16)]",
    "self.gate = nn.Parameter(torch.randn(4, 16))\n"
    "self.experts = nn.Parameter(torch.randn(4, 16, 16) * 0.25)")
SLIDING_WINDOW = problem(
    "scores = q @ k.transpose(-1, -2) * 0.25\n"
    "start = max(0, scores.shape[-1] - 4)\n"
    "scores[..., :start] = float('-inf')\n"
    "return torch.softmax(scores, dim=-1) @ v",
    "[torch.randn(2, 6, 16), torch.randn(2, 10, 16), torch.randn(2, 10, 16)]",
    signature="q, k, v")
SINK_WHEN_LONG = problem(
    "scores = q @ k.transpose(-1, -2) * 0.25\n"
    "if scores.shape[-1] > 4:\n"
    "    sink = self.sink.expand(scores.shape[0], scores.shape[1], 1)\n"
    "    scores = torch.cat([scores, sink], dim=-1)\n"
    "probs = torch.softmax(scores, dim=-1)[..., :k.shape[1]]\n"
    "return probs @ v",
    "[torch.randn(2, 6, 16), torch.randn(2, 10, 16), torch.randn(2, 10, 16)]",
    "self.sink = nn.Parameter(torch.zeros(1, 1, 1) + 0.5)", signature="q, k, v")
# DeepSeek's router keeps whole groups: a reshape of an expand, which torch copies (no view of
# an expanded tensor has that shape), where the graph export leaves says `view`
GROUP_MASK = problem(
    "tokens, groups = x.shape[0], min(4, x.shape[-1])\n"
    "by_group = x.view(tokens, groups, -1)\n"
    "kept = (by_group.amax(dim=-1) > 0).float()\n"
    "allowed = kept.unsqueeze(-1).expand_as(by_group).reshape(tokens, -1)\n"
    "return x * allowed",
    "[torch.randn(6, 16)]")
SHAPE_FLOW = {"moe_top2": (MOE_TOP2, "topk"), "sliding_window": (SLIDING_WINDOW, "slice_scatter"),
              "sink_when_long": (SINK_WHEN_LONG, None), "group_mask": (GROUP_MASK, None)}


@pytest.mark.parametrize("name", sorted(SHAPE_FLOW))
def test_what_fx_cannot_trace_is_captured_with_export_and_said(name):
    captured = capture(SHAPE_FLOW[name][0])
    note = captured.notes[0]
    assert note.startswith("torch.fx could not trace the reference (") and \
        note.endswith("captured with torch.export on the example inputs"), note
    kept = SHAPE_FLOW[name][1]
    assert kept is None or kept in [allow for _, allow in captured.kept]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPE_FLOW))
def test_the_first_candidate_of_a_shape_dependent_module_is_correct(name, tmp_path):
    ref, generation = generate(SHAPE_FLOW[name][0], "cpp")
    assert generation.code is not None, generation.failure
    assert "torch.fx could not trace" in generation.notes
    assert ("left to torch" in generation.notes) == bool(generation.kept_ops), generation.notes
    result = judge(ref, generation, "cpp", tmp_path)
    assert result.state == CORRECT, result.message


def test_a_module_neither_can_capture_is_refused_with_both_reasons():
    source = problem("if x.sum() > 0:\n    return x * 2.0\nreturn x", "[torch.randn(4, 8)]")
    _, generation = generate(source, "cpp")
    assert generation.code is None
    assert "torch.fx could not trace the reference" in generation.failure
    assert "torch.export could not capture it either" in generation.failure
