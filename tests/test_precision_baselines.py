"""Fair baselines under a precision policy: with --precision tf32/bf16/fp16 the judge also times
the reference as a user would run it under that policy (TF32 switches, or torch.autocast), beside
the fp32 figures; the trials still compare against the strict fp32 reference.

Real parts only: real evaluator workers, g++-built candidates from tests/candidates/, the CLI as
a subprocess. Timings are never compared between sides (the machine's load decides those):
values are checked for presence, sign and structure.
"""
from __future__ import annotations

import json

import pytest
import torch

from kforge_nb.bench.report import Row, table
from kforge_nb.evaluator.worker import policy
from kforge_nb.guardrails import Guardrails
from kforge_nb.result import CORRECT, MISMATCH, Result, Timing
from tests.support.evaluator import CANDIDATES, PROBLEMS

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="what the CPU does without a GPU")
POLICY_FIELDS = ("policy", "eager_policy_ms", "compile_policy_ms", "speedup_vs_eager_policy",
                 "speedup_vs_compile_policy")


def under(precision: str, **more) -> dict:
    """EvalOptions fields for a policy: the comparison's tolerances and the guardrails'."""
    return {"precision": precision, "guardrails": Guardrails(precision=precision), **more}


# -- the policy's baseline -----------------------------------------------------------------------


@no_gpu
def test_bf16_times_eager_under_autocast_beside_the_fp32_figures(judge):
    result = judge("linear", "cpp_linear_bf16", **under("bf16"))
    t = result.timing
    assert result.state == CORRECT, result.message
    assert t.policy == "bf16 (autocast)"
    assert t.eager_policy_ms > 0 and t.speedup_vs_eager_policy > 0
    assert t.real and t.eager_ms > 0 and t.speedup_vs_eager > 0 and t.rounds >= 3  # fp32 stays
    assert t.compile_policy_ms is None and t.speedup_vs_compile_policy is None  # not asked for
    assert "under bf16 (autocast): eager " in result.summary()


def test_the_strict_policy_has_no_policy_figures(judge):
    result = judge("linear", "cpp_linear_same_names")
    assert result.state == CORRECT, result.message
    assert all(getattr(result.timing, name) is None for name in POLICY_FIELDS)
    assert not any(f"under {policy}" in result.summary() for policy in ("tf32", "bf16", "fp16"))


@no_gpu
def test_tf32_on_the_cpu_says_there_is_no_tf32_and_gives_the_fp32_figures(judge):
    result = judge("linear", "cpp_linear_same_names", **under("tf32"))
    t = result.timing
    assert result.state == CORRECT, result.message
    assert t.policy == "tf32 (no TF32 on the CPU: the fp32 figures)"
    # not timed again: the very fp32 numbers, under a label that says so
    assert t.eager_policy_ms == t.eager_ms and t.speedup_vs_eager_policy == t.speedup_vs_eager


@no_gpu
def test_fp16_on_the_cpu_is_not_timed_and_says_why(judge):
    result = judge("linear", "cpp_linear_same_names", **under("fp16"))
    t = result.timing
    assert result.state == CORRECT, result.message
    assert t.policy.startswith("fp16 (autocast) not timed: most CPUs have no fp16 arithmetic")
    assert t.eager_policy_ms is None and t.speedup_vs_eager_policy is None
    assert t.eager_ms > 0 and t.speedup_vs_eager > 0


@pytest.mark.slow
@no_gpu
def test_torch_compile_under_the_policy_is_timed_side_by_side_too(judge, kforge_cache):
    """fp32 and bf16 torch.compile each compiled once by the judge and timed in the same
    rounds: the speedup over bf16 torch.compile is a median of paired ratios, never a cached
    ratio."""
    result = judge("linear", "cpp_linear_bf16", **under("bf16", baselines=("eager", "compile")))
    t = result.timing
    assert result.state == CORRECT, result.message
    assert t.compile_ms > 0 and t.compile_policy_ms > 0
    assert t.speedup_vs_compile > 0 and t.speedup_vs_compile_policy > 0
    assert t.compile_cached_ms is None
    assert "torch.compile" in result.summary().split("under bf16 (autocast)")[1]


# -- the truth stays fp32 ------------------------------------------------------------------------


def test_a_bf16_kernel_is_measured_against_the_fp32_reference(judge):
    """Off the fp32 answer by bf16 rounding: a mismatch under strict, correct within bf16's
    tolerances; the output compared is the reference's fp32 one (autocast would give bf16)."""
    strict = judge("linear", "cpp_linear_bf16", measure=False)
    loose = judge("linear", "cpp_linear_bf16", measure=False, **under("bf16"))
    assert strict.state == MISMATCH and strict.correctness.tolerance["policy"] == "strict"
    assert loose.state == CORRECT, loose.message
    assert loose.correctness.dtype == "float32" and loose.correctness.tolerance["policy"] == "bf16"
    assert loose.correctness.rel_norm_error > strict.correctness.tolerance["rel_norm"]


def test_a_grossly_wrong_kernel_is_a_mismatch_under_bf16_too(judge):
    result = judge("linear", "cpp_linear_bf16_no_bias", measure=False, **under("bf16"))
    assert result.state == MISMATCH, result.message
    assert result.correctness.tolerance["policy"] == "bf16"


def test_the_policy_switches_are_restored_after_a_timed_block():
    """The judge serves several requests and its trials are strict: TF32 flags and autocast
    are back as they were after each block, exception or not."""
    def flags():
        return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                torch.get_float32_matmul_precision())
    saved = flags()
    with pytest.raises(RuntimeError), policy.running_under("tf32", "cuda"):
        assert flags() == (True, True, "high")
        raise RuntimeError("a failing timed call")
    assert flags() == saved
    with policy.running_under("bf16", "cpu"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


# -- where the figures show ----------------------------------------------------------------------


@pytest.mark.slow     # kforge eval with its torch.compile baseline
def test_the_cli_prints_the_policy_line_and_the_saved_result_carries_the_fields(kforge_cli,
                                                                                 tmp_path):
    proc = kforge_cli("eval", str(PROBLEMS / "linear.py"), str(CANDIDATES / "cpp_linear_bf16.py"),
                      "--target", "cpp", "--no-compile-baseline", "--precision", "bf16",
                      "--out", "runs")                  # kforge_cli runs in tmp_path
    assert proc.returncode == 0, proc.stderr
    assert "under bf16 (autocast): eager " in proc.stdout
    saved, = (tmp_path / "runs").glob("*/result.json")   # what --json prints
    timing = json.loads(saved.read_text())["timing"]
    assert set(POLICY_FIELDS) <= set(timing) and timing["eager_policy_ms"] > 0


def test_a_result_saved_before_the_policy_fields_still_loads():
    old = {"schema_version": 2, "state": "correct", "message": "ok",
           "timing": {"real": True, "eager_ms": 1.0, "candidate_ms": 0.5,
                      "speedup_vs_eager": 2.0, "a_field_from_elsewhere": 1}}
    t = Result.from_dict(old).timing
    assert t.speedup_vs_eager == 2.0 and all(getattr(t, n) is None for n in POLICY_FIELDS)
    assert Result.from_dict(Result("correct", "ok", timing=Timing(
        policy="bf16 (autocast)", eager_policy_ms=0.4)).to_dict()).timing.eager_policy_ms == 0.4


def test_the_summary_line_under_a_policy():
    result = Result("correct", "ok", timing=Timing(
        real=True, candidate_ms=0.39, eager_ms=1.6, speedup_vs_eager=4.1,
        policy="bf16 (autocast)", eager_policy_ms=0.41, speedup_vs_eager_policy=1.05,
        compile_policy_ms=0.30, speedup_vs_compile_policy=0.77))
    assert result.summary().splitlines()[-1] == \
        "  under bf16 (autocast): eager 0.41 ms (1.05x), torch.compile 0.3 ms (0.77x)"


def test_the_bench_table_has_policy_columns_only_when_a_row_has_them():
    plain = Row("gemm", "correct", 1.0, 2.0, None, 2.0, real=True)
    assert "x eager(p)" not in table([plain])
    policy_row = Row("gemm", "correct", 1.0, 2.0, None, 2.0, real=True, policy="bf16 (autocast)",
                     speedup_vs_eager_policy=1.1)
    text = table([plain, policy_row])
    assert "x eager(p)" in text and "1.10" in text
    assert "(p): eager and torch.compile under the precision policy: bf16 (autocast)" in text
