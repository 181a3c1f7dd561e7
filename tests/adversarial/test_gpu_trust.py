"""The trust boundary on a real GPU: Triton candidates that hide work on a stream, replay a
captured graph, patch the events the timer reads, or let torch compute once the audited trials
are over; and the shipped Triton and CUDA examples, sandboxed as root, still correct. Skipped
without a CUDA GPU (run on the lent H100/H200: docs/trust-boundary.md)."""
from __future__ import annotations

import pytest
import torch

from kforge_nb.evaluator import evaluate
from kforge_nb.guardrails import Guardrails
from kforge_nb.result import CORRECT, MISMATCH, REJECTED
from tests.adversarial.support import problem, source

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

STATIC_OFF = {"guardrails": Guardrails(defaults=False)}   # judged by what runs, not by names


def judge(options, candidate: str, target: str = "triton", **overrides):
    return evaluate(problem("softmax"), source(candidate), target, options(**overrides))


@pytest.mark.parametrize("candidate, target", [("triton_softmax", "triton"),
                                               ("cuda_softmax", "cuda")])
def test_the_shipped_gpu_examples_are_correct_in_the_sandbox(options, candidate, target):
    result = judge(options, candidate, target, baselines=("eager",))
    assert result.state == CORRECT, result.message
    assert result.timing.real and result.timing.speedup_vs_eager > 0
    assert result.sandbox["enabled"] is True


def test_work_on_a_hidden_stream_is_timed_by_the_wall_clock_or_refused(options):
    result = judge(options, "triton_softmax_hidden_stream", baselines=("eager",), **STATIC_OFF)
    if result.state == CORRECT:      # the events saw nothing; the wall clock saw the work
        assert "wall-clock" in result.timing.note, result.timing
        assert result.timing.speedup_vs_eager < 10
    else:
        assert result.state == REJECTED, result.message


def test_a_replayed_graph_answers_for_stale_inputs(options):
    result = judge(options, "triton_softmax_graph_replay", baselines=("eager",), **STATIC_OFF)
    assert result.state == MISMATCH, result.message


def test_patched_events_are_tampering(options):
    result = judge(options, "triton_softmax_patched_events", baselines=("eager",), **STATIC_OFF)
    assert result.state == REJECTED and "tampering" in result.rules, result.message
    assert "elapsed_time" in result.message or "event_elapsed" in result.message


def test_torch_computing_only_after_the_trials_is_seen(options):
    result = judge(options, "triton_softmax_torch_when_untimed", baselines=("eager",),
                   **STATIC_OFF)
    assert result.state == REJECTED, result.message
    assert result.rules == ["torch-compute-at-runtime"] and "softmax" in result.message
