"""A right answer is `correct`, then timed, profiled and placed on the roofline."""
from pathlib import Path

import pytest
import torch

from kforge_nb.result import CORRECT
from kforge_nb.targets.triton import INTERPRETER_NOTE


def test_correct_cpp_candidate_has_real_timing_profile_trace_and_roofline(judge):
    result = judge("relu", "cpp_relu")
    t, roof = result.timing, result.roofline
    assert result.state == CORRECT
    assert result.correctness.passed_trials == 6       # 5 trials + 1 at another batch size
    assert t.real and t.note == ""
    assert t.candidate_ms > 0 and t.eager_ms > 0 and t.repeats >= 10
    # the speedup is the median of paired ratios, near (not equal to) the ratio of medians
    assert t.speedup_vs_eager > 0 and t.rounds >= 3 and t.input_sets == 3
    assert t.speedup_spread is not None
    low, high = t.speedup_vs_eager_ci                  # a 95 % interval of the paired ratios
    assert low <= t.speedup_vs_eager <= high and t.rounds >= 6
    assert t.compile_ms is None                        # baseline not asked for
    names = {e["name"] for e in result.profile["candidate_events"]}
    assert "cpu::relu" in names                        # the kernel, as the profiler saw it
    assert result.profile["reference_events"]
    assert Path(result.profile["trace"]).is_file()
    assert roof.flops is not None
    assert roof.min_bytes == 2 * 8 * 64 * 4            # read x, write y, fp32
    assert roof.bound == "memory" and roof.speed_of_light_ms > 0
    assert 0 < roof.fraction_of_sol


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU, Triton runs there for real")
def test_correct_triton_under_the_interpreter_is_correct_but_not_a_timing(judge):
    result = judge("tiny_add", "triton_add", target="triton")
    assert result.state == CORRECT
    assert result.timing.real is False
    assert result.timing.note == INTERPRETER_NOTE == "interpreter — not a performance figure"
    assert result.roofline.fraction_of_sol is None     # no speed-of-light fraction from it
    assert INTERPRETER_NOTE in result.summary()


def test_reference_weights_are_copied_when_parameter_names_match(judge):
    result = judge("linear", "cpp_linear_same_names")   # zero-initialised without the copy
    assert result.state == CORRECT
    assert "weights copied from the reference" in result.message
    assert result.roofline.flops == 2 * 4 * 16 * 8     # batch × in × out multiply-adds


@pytest.mark.slow
def test_torch_compile_is_timed_side_by_side_and_the_cache_is_only_a_display(judge, kforge_cache):
    """torch.compile is compiled once by the judge and timed in the same interleaved rounds as
    eager and the candidate: its speedup is a median of paired ratios with its own interval.
    The figure is kept in the cache, and a later judging without the compile side shows it
    with its age, outside every ratio."""
    import json
    result = judge("relu", "cpp_relu", baselines=("eager", "compile"))
    t = result.timing
    assert result.state == CORRECT
    assert t.compile_ms is not None and t.compile_ms > 0
    low, high = t.speedup_vs_compile_ci
    assert low <= t.speedup_vs_compile <= high
    assert t.compile_cached_ms is None                 # its own figure: no cached one shown
    cached = [json.loads(p.read_text()) for p in (kforge_cache / "baselines").glob("*.json")]
    assert any(c.get("compile_ms") == t.compile_ms for c in cached)
    assert "torch.compile" in result.summary()
    later = judge("relu", "cpp_relu").timing
    assert later.compile_ms is None and later.speedup_vs_compile is None
    assert later.compile_cached_ms == t.compile_ms and later.compile_cached_age_s >= 0
    assert later.speedup_vs_compile_ci is None


def test_a_module_that_draws_random_numbers_is_judged_on_the_same_draws(options):
    """Dropout in training mode: every trial and every checked timed call seeds the generators
    the same way on both sides, so the reference's own forward is `correct` against itself."""
    from kforge_nb.evaluator import evaluate
    from kforge_nb.guardrails import Guardrails
    from tests.support.evaluator import load_problem
    problem = load_problem("dropout_train")
    candidate = problem.source + "\n\nclass ModelNew(Model):\n    pass\n"
    result = evaluate(problem, candidate, "cpp", options(guardrails=Guardrails(allow=["*"])))
    assert result.state == CORRECT, result.message
    assert result.timing.rounds >= 3
