"""Trust, round four (issue 37, item 3): tolerance without holes.

The red team's wrong answers each end `mismatch` now: zeros for a softmax whose values sit
below float32's rounding unit, a complex output with no imaginary part, a ReLU that is wrong
only past 40 (and a softmax that overflows past 88), each a real candidate judged by the real
evaluator. The honest kernels beside them end `correct`: complex values within rounding, an exp
whose tails overflow in the reference too, a sum in another order on the tails trial. Below the
tables, the parts one at a time: the comparison on tensors (the guard at every scale, rounding
noise told by the float64 answer, complex values), the tails trial's values, and the float64
answer of the builtin agent's problems passing on every tails trial.
"""
from __future__ import annotations

import re

import pytest
import torch

from kforge_nb.evaluator import EvalOptions
from kforge_nb.evaluator.worker import correctness, harness, trial_values
from kforge_nb.evaluator.worker.correctness import Float64Answer, compare_outputs, compare_values
from kforge_nb.result import CORRECT, MISMATCH, Correctness
from tests.adversarial.support import problem_file
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401
from tests.adversarial.test_legitimate import run

TAILS_TRIAL = "inputs with tail values (large, tiny, zero)"

EXPLOITS = {
    "softmax over 2**24 positions (values ~6e-8) answered with zeros": Case(
        "softmax_16m", "r4c_cpp_softmax_zeros", MISMATCH,
        says=["relative error norm 1 exceeds 0.0001", "trial 1 (seed "]),
    "softmax over 2**24 positions answered 1/N (the right size, none of the shape)": Case(
        "softmax_16m", "r4c_cpp_softmax_uniform", MISMATCH, says=["relative error norm"]),
    "complex64 output with an all-zero imaginary part": Case(
        "complex_rotate", "r4c_cpp_complex_real_only", MISMATCH,
        # nearly all: a value whose real part the trial drew as 0 (or within the tolerance) is
        # answered right by a zero imaginary part, so the share is not always 100 %
        says=["% of values outside", "imaginary part 0, expected"],
        says_re=r"\b(?:100\.00|99\.\d\d)% of values outside"),
    "ReLU answering 0 above 40": Case(
        "relu", "r4c_cpp_relu_zero_above_40", MISMATCH, says=["trial 5 (seed ", TAILS_TRIAL]),
    "softmax without the max subtracted (exp overflows past 88)": Case(
        "softmax_rows", "r4c_cpp_softmax_no_max", MISMATCH, says=["trial 5 (seed ", TAILS_TRIAL]),
}

# name -> (problem, candidate, target, kernel launches over the trials)
RUNS_HERE = {
    "complex64 output within rounding (std::cos, std::sin)":
        ("complex_polar", "r4c_cpp_complex_polar", "cpp", "native x6"),
    "exp: the tails overflow in the reference too, so that trial is dropped":
        ("exp_values", "r4c_cpp_exp", "cpp", "native x5"),
    "row sums in another order, the tails trial included":
        ("row_sum_wide", "row_sum_reversed", "cpp", "native x6"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round4_wrong_answer_is_a_mismatch(name, judge_case):
    case = EXPLOITS[name]
    result = judge_case(case)
    assert result.state == case.state, f"{name}: {result.state}: {result.message}"
    full = result.message + " " + (result.correctness.failed_check or "")
    for fragment in case.says:
        assert fragment in full, full
    assert re.search(case.says_re, full), full


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_round4_honest_kernel_is_correct(name, options):
    problem_name, candidate, target, launches = RUNS_HERE[name]
    result = run(problem_name, candidate, target, options)
    assert result.state == CORRECT, f"{name}: {result.state}: {result.message}"
    assert f"kernels launched: {launches}" in result.message


def test_a_tails_trial_the_reference_cannot_answer_is_dropped_and_said(options):
    result = run("exp_values", "r4c_cpp_exp", "cpp", options, measure=False)
    assert result.state == CORRECT, result.message
    assert "matches the reference on 5 trials" in result.message
    assert ("trial 5 skipped: the reference's output is not finite (inf or NaN) on tail "
            "values (large, tiny, zero)") in result.message


def test_the_builtin_kernel_for_a_mean_of_group_norm_is_correct_through_its_rounding_noise(
        tmp_path):
    """KernelBench level2/23's shape: the mean of a GroupNorm output is zero up to rounding,
    so the kernel's answer is other noise (relative error norm ~1 or more); the float64
    answer shows both are noise, and the kernel is correct."""
    from tests.test_builtin import generate, judge, problem
    source = problem("x = self.conv(x)\nx = self.gn(x)\nreturn x.mean(dim=[1, 2, 3, 4])",
                     "[torch.randn(8, 3, 6, 8, 8)]",
                     "self.conv = nn.Conv3d(a0, a1, 3)\nself.gn = nn.GroupNorm(a2, a1)",
                     "[3, 16, 4]")
    result = judge(*generate(source, "cpp"), "cpp", tmp_path)
    assert result.state == CORRECT, result.message
    assert result.correctness.rel_norm_error > 1e-4      # beyond the guard: noise decided


# --- the relative-norm guard at every scale -------------------------------------------------


def tiny_answer(n: int = 4096) -> torch.Tensor:
    """Values ~1e-8: every element within atol of zero, the RMS below float32's eps."""
    return torch.rand(n, generator=torch.Generator().manual_seed(0)) * 2e-8


def test_zeros_for_values_below_float_rounding_are_a_mismatch():
    r = tiny_answer()
    for exact in (None, lambda: r.double()):
        ok, why = compare_values(r, torch.zeros_like(r), "strict", Correctness(), exact)
        assert not ok and "relative error norm 1 exceeds" in why


def test_values_of_the_right_size_but_not_the_answer_are_a_mismatch():
    r = tiny_answer()
    ok, why = compare_values(r, r.flip(0), "strict", Correctness(), lambda: r.double())
    assert not ok and "relative error norm" in why


def normalised_mean(x: torch.Tensor) -> torch.Tensor:
    return ((x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)).mean(1)


def test_rounding_noise_around_a_true_zero_passes_only_once_the_float64_answer_says_so():
    x = torch.randn(16, 4096, generator=torch.Generator().manual_seed(0))
    reference = normalised_mean(x)                                   # ~1e-8: rounding
    normed = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    other_order = normed.view(16, 64, 64).sum(2).sum(1) / 4096
    assert not compare_values(reference, other_order, "strict", Correctness())[0]
    exact = normalised_mean(x.double())                              # ~1e-17
    assert compare_values(reference, other_order, "strict", Correctness(), lambda: exact)[0]


def test_a_float64_answer_that_is_not_the_references_own_waives_nothing():
    """An answer computed on other values (a module whose float64 run draws other random
    numbers) is as large as the reference: the reference is no noise by it, zeros fail."""
    r = tiny_answer()
    other = tiny_answer().roll(1).double()
    ok, why = compare_values(r, torch.zeros_like(r), "strict", Correctness(), lambda: other)
    assert not ok and "relative error norm" in why


def ill_conditioned_attention():
    """The tails trial's inputs for a softmax of products where float32's reference is 0.026
    off its float64 answer (the draw of a CI run that failed an honest C++ kernel), and an
    honest float32 kernel of another summation order."""
    torch.manual_seed(2908126541244537294)
    drawn = [torch.randn(2, 3, 37, 24), torch.randn(2, 3, 100, 24), torch.randn(2, 3, 100, 40),
             torch.randn(2, 3, 37, 40), torch.randn(3, 37, 40), torch.randn(3, 100, 40),
             torch.randn(3, 100, 24)]               # tests/test_builtin_attention.py's inputs
    x, y, z = trial_values.with_tails(drawn)[4:]
    attend = torch.nn.functional.scaled_dot_product_attention
    reference = attend(x, y, z, scale=0.3)
    exact = attend(x.double(), y.double(), z.double(), scale=0.3)
    honest = torch.softmax(x @ y.transpose(1, 2) * 0.3, -1) @ z
    return reference, exact, honest


def test_an_ill_conditioned_output_holds_an_honest_kernel_to_the_float64_answer():
    reference, exact, honest = ill_conditioned_attention()
    assert (reference.double() - exact).abs().max() > 0.02      # the reference's own error
    ok, why = compare_values(reference, honest, "strict", Correctness())
    assert not ok and "of values outside" in why                # around r alone: refused
    report = Correctness()
    assert compare_values(reference, honest, "strict", report, lambda: exact) == (True, "")
    assert report.tolerance["widened_by_reference_error"] == correctness.CONDITION_FACTOR


def test_an_ill_conditioned_output_gives_no_slack_where_the_reference_is_exact():
    """Slack is the reference's error element by element: a kernel wrong by 0.05 on one
    well-conditioned element fails as before, and one wrong where r is ill-conditioned by
    more than twice r's own error fails too."""
    reference, exact, honest = ill_conditioned_attention()
    off = (reference.double() - exact).abs()
    for where in (off.argmin(), off.argmax()):
        wrong = honest.clone()
        wrong.view(-1)[where] = float(exact.view(-1)[where] + 0.05 + 3 * off.view(-1)[where])
        ok, why = compare_values(reference, wrong, "strict", Correctness(), lambda: exact)
        assert not ok and "of values outside" in why


def test_a_small_difference_of_large_terms_is_held_to_the_float64_answer_in_norm():
    """A triplet loss on the tails trial (a CI run's draw: seed 767298597255922963): the hinge
    leaves 0.037 from distances of hundreds, the reference is 2.9e-6 off its float64 answer
    (7.9e-5 relative) and an honest kernel 1.4e-6 the other way, 1.2e-4 from the reference: past
    the norm guard around r, well within it around the float64 answer. Zeros still fail."""
    reference = torch.tensor(0.0370396189391613)
    honest = torch.tensor(0.0370352603495121)
    exact = torch.tensor(0.037036709928396964, dtype=torch.float64)
    ok, why = compare_values(reference, honest, "strict", Correctness())
    assert not ok and "relative error norm" in why              # around r alone: refused
    report = Correctness()
    assert compare_values(reference, honest, "strict", report, lambda: exact) == (True, "")
    assert report.tolerance["widened_by_reference_error"] == correctness.CONDITION_FACTOR
    for wrong in (torch.tensor(0.0), reference * 1.001):
        ok, why = compare_values(reference, wrong, "strict", Correctness(), lambda: exact)
        assert not ok, (wrong, why)


class Mean(torch.nn.Module):
    def forward(self, x):
        return normalised_mean(x), x.sum(1)


def test_the_float64_answer_is_computed_once_and_only_where_an_output_may_be_noise():
    x = torch.randn(16, 4096, generator=torch.Generator().manual_seed(0))
    drawn = []
    exact = Float64Answer(Mean(), lambda: drawn.append(1) or [x])
    refs = Mean()(x)
    assert compare_outputs(refs, [r.clone() for r in refs], "strict", Correctness(), exact)[0]
    assert drawn == []                                  # equal answers: never asked
    normed = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    noise = normed.view(16, 64, 64).sum(2).sum(1) / 4096
    for _ in range(2):
        assert compare_outputs(refs, [noise, refs[1]], "strict", Correctness(), exact)[0]
    assert drawn == [1]                                 # asked once, kept
    assert exact.output(0).dtype == torch.float64 and exact.output(1).dtype == torch.float64


class InsistsOnFloat32(torch.nn.Module):
    def forward(self, x):
        return normalised_mean(x) @ torch.eye(16, dtype=torch.float32)


def test_a_module_that_cannot_run_in_float64_keeps_the_guard():
    x = torch.randn(16, 4096, generator=torch.Generator().manual_seed(0))
    exact = Float64Answer(InsistsOnFloat32(), lambda: [x])
    assert exact.output(0) is None
    r = normalised_mean(x)
    ok, why = compare_values(r, torch.zeros_like(r), "strict", Correctness(),
                             lambda: exact.output(0))
    assert not ok and "relative error norm" in why


# --- complex outputs, compared as complex ---------------------------------------------------


def complex_answer() -> torch.Tensor:
    return torch.randn(8, 64, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("policy", ["strict", "tf32", "bf16"])
def test_complex_outputs_are_held_to_their_parts_tolerance(policy):
    assert correctness.tolerance(torch.complex64, policy) == \
        correctness.tolerance(torch.float32, policy)
    assert correctness.tolerance(torch.complex128, policy) == \
        correctness.tolerance(torch.float64, policy)


def test_a_missing_imaginary_part_is_a_mismatch_that_names_the_part():
    r = complex_answer()
    report = Correctness()
    ok, why = compare_values(r, torch.complex(r.real, torch.zeros_like(r.real)), "strict", report)
    assert not ok and "imaginary part 0, expected" in why
    assert report.worst[0]["part"] == "imaginary" and report.worst[0]["got"] == 0.0
    assert report.max_abs_error == pytest.approx(float(r.imag.abs().max()), rel=1e-6)


def test_complex_values_within_rounding_pass_and_a_wrong_part_alone_fails():
    r = complex_answer()
    phase = torch.polar(torch.ones(r.shape), torch.rand(r.shape) * 6.3)
    assert compare_values(r, r * (1 + 3e-6 * phase), "strict", Correctness()) == (True, "")
    off = torch.complex(r.real, r.imag + 1e-3 * r.abs())     # real part exact
    ok, why = compare_values(r, off, "strict", Correctness())
    assert not ok and "imaginary part" in why


def test_non_finite_complex_values_match_part_by_part():
    inf, nan = float("inf"), float("nan")
    r = torch.tensor([complex(inf, 1.0), complex(nan, 2.0), 3 + 4j], dtype=torch.complex64)
    assert compare_values(r, r.clone(), "strict", Correctness())[0]
    other = torch.tensor([complex(inf, 5.0), complex(nan, 2.0), 3 + 4j], dtype=torch.complex64)
    assert not compare_values(r, other, "strict", Correctness())[0]


# --- the tails trial ------------------------------------------------------------------------


def drawn(problem: str, distribution: str = "tails", seed: int = 7) -> list:
    module = harness.load_module(problem_file(problem).read_text(), problem, f"r4_{problem}")
    return harness.trial_inputs(module, {"seed": seed, "trial": 5, "distribution": distribution})


def test_the_tails_trial_reaches_both_signs_far_out_near_zero_and_zero_itself():
    (x,), (given,) = drawn("relu"), drawn("relu", "given")
    m = float(given.abs().max())
    assert x.shape == given.shape and x.dtype == given.dtype
    assert float(x.max()) == pytest.approx(64 * m) and float(x.min()) == pytest.approx(-64 * m)
    tiny = x[(x != 0) & (x.abs() < 1e-19)]
    assert tiny.numel() and bool((tiny.abs() >= torch.finfo(torch.float32).tiny).all())
    assert int((x == 0).sum()) > 0
    changed = float((x != given).float().mean())
    assert 0.1 < changed < 0.3                               # about 3/16 of the elements
    assert torch.equal(x, drawn("relu")[0])                  # both workers draw the same


def test_a_positive_draw_stays_positive(tmp_path):
    path = tmp_path / "logs.py"
    path.write_text("import torch\n\n\ndef get_inputs():\n    return [torch.rand(64, 64) + 0.1, "
                    "torch.arange(6), torch.randn(4, 4).half() * 100]\n")
    module = harness.load_module(path.read_text(), str(path), "r4_logs")
    x, labels, half = harness.trial_inputs(module, {"seed": 3, "trial": 5,
                                                    "distribution": "tails"})
    assert bool((x > 0).all()) and float(x.max()) > 50 and float(x.min()) < 1e-19
    assert torch.equal(labels, torch.arange(6))                    # integers as drawn
    assert bool(half.isfinite().all()) and float(half.abs().max()) <= 256   # sqrt(fp16 max)


def test_trial_five_draws_the_tails_and_the_batch_trial_stays_last():
    plan = EvalOptions().trial_plan(secret=12345)
    assert plan[4]["distribution"] == trial_values.TAILS and plan[4]["trial"] == 5
    assert plan[-1]["batch"] == "auto" and len(plan) == 6
    assert [t["distribution"] for t in EvalOptions(trials=3).trial_plan()[:3]] == \
        [t["distribution"] for t in plan[:3]]


def test_a_reference_that_is_not_finite_on_the_tails_drops_that_trial_only():
    tails = {"seed": 1, "trial": 5, "distribution": "tails"}
    given = {"seed": 1, "trial": 1, "distribution": "given"}
    overflowed = [torch.tensor([1.0, float("inf")])]
    assert trial_values.unusable(tails, overflowed).startswith("trial 5 skipped")
    assert trial_values.unusable(tails, [torch.ones(3), torch.arange(3)]) == ""
    assert trial_values.unusable(given, overflowed) == ""


def builtin_problems() -> dict:
    from tests.test_builtin import PROBLEMS
    return {**PROBLEMS, "shipped softmax": problem_file("softmax").read_text()}


@pytest.mark.parametrize("name", sorted(builtin_problems()))
def test_the_float64_answer_passes_on_every_tails_trial(name):
    """The most accurate honest kernel (float64 throughout, rounded once) against the float32
    reference on the tails trial: the tolerance scales with the magnitudes there."""
    module = harness.load_module(builtin_problems()[name], name, "r4_builtin")
    torch.manual_seed(0)
    model = module.Model(*harness.argument_list(module.get_init_inputs()))
    for seed in range(3):
        trial = {"seed": seed, "trial": 5, "distribution": "tails"}
        with torch.no_grad():
            refs = harness.as_tensor_list(model(*harness.trial_inputs(module, trial)))
        assert trial_values.unusable(trial, refs) == ""
        exact = Float64Answer(model, lambda: harness.trial_inputs(module, trial))
        honest = [exact.output(k).to(r.dtype) for k, r in enumerate(refs)]
        ok, why = compare_outputs(refs, honest, "strict", Correctness(), exact)
        assert ok, f"seed {seed}: {why}"
