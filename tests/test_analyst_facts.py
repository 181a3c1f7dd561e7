"""The builtin analyst reads the facts of a candidate from its `# kforge-builtin:` header, which
the generator writes as it emits the code, and never the code's text: a fact drives its rule,
and code without the header, or changed below it, has no facts."""
from __future__ import annotations

from kforge_nb.agents.base import AnalysisRequest, GenerationRequest
from kforge_nb.agents.builtin import BuiltinAnalyst, BuiltinGenerator
from kforge_nb.agents.builtin.candidate import HEADER_MARK, CodeFacts, facts_of, kernel_text, \
    stamped
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, Result
from tests.test_builtin import PROBLEMS, problem

# each row sums 20000 terms: past 16384 the default ("auto") accumulates in double
LONG_SUM = problem("return torch.sum(x, dim=1)", "[torch.randn(4, 20000)]")
FASTER = {"speedup_vs_eager": 1.5, "candidate_ms": 1.0, "eager_ms": 1.5,
          "fraction_of_sol": 0.3, "bound": "memory", "timing_real": True}
FLOAT_SUMS = "accumulate in float"


def generate(source: str, target: str = "cpp", kind: str = "initial", **asked) -> str:
    request = GenerationRequest(Problem.from_string(source, name="p"), target, kind, **asked)
    return BuiltinGenerator().generate(request).code


def titles(code: str, target: str = "cpp") -> list[str]:
    """Every recommendation the analyst gives this candidate, in order, until it is done."""
    said: list[str] = []
    for _ in range(20):
        rec = BuiltinAnalyst().analyse(AnalysisRequest(
            Problem.from_string(LONG_SUM, name="p"), target, code, Result(CORRECT, "ok"),
            dict(FASTER), list(said)))
        said.append(rec.title)
        if rec.action.get("kind") == "done":
            break
    return said


def test_the_generator_records_a_double_accumulator_and_the_analyst_asks_for_float():
    code = generate(LONG_SUM)
    assert facts_of(code).double_accumulator
    assert FLOAT_SUMS in titles(code)


def test_code_without_the_header_or_changed_below_it_has_no_facts():
    code = generate(LONG_SUM)
    without = kernel_text(code)                      # an LLM's code: no header at all
    edited = code.replace("// pass 1:", "// pass 1 (tuned by hand):", 1)   # header kept
    assert edited != code
    for other in (without, edited):
        assert facts_of(other) == CodeFacts()
        assert FLOAT_SUMS not in titles(other)


def test_the_header_facts_not_the_text_drive_the_rule():
    options = {"accumulate": "auto"}
    text = f"{HEADER_MARK}\n// double row_acc = 0.0;   (text the analyst does not read)\n"
    assert FLOAT_SUMS not in titles(stamped(text, "cpp", options, CodeFacts()))
    plain = f"{HEADER_MARK}\nfloat row = 0.0f;\n"
    assert FLOAT_SUMS in titles(stamped(plain, "cpp", options,
                                        CodeFacts(double_accumulator=True)))


def test_a_header_states_only_facts_of_the_right_type():
    facts = CodeFacts.from_json({"double_accumulator": "yes", "openmp": True,
                                 "reductions": [3, "4", True], "vector_math": ["exp", 1],
                                 "unknown": 1})
    assert facts == CodeFacts(openmp=True, reductions=[3], vector_math={"exp"})
    assert CodeFacts.from_json(["not", "a", "dict"]) == CodeFacts()


def test_the_facts_say_what_the_kernels_hold():
    """Each fact agrees with the text the writers emitted, on candidates that have it and
    candidates that do not."""
    softmax, fixed = generate(PROBLEMS["softmax"]), generate(PROBLEMS["softmax"], kind="fix")
    lanes = generate(PROBLEMS["rms_norm_by_hand"])
    linear = generate(PROBLEMS["linear_gelu"])
    summed = generate(PROBLEMS["linear_gelu"], "triton", "optimise", previous_code=generate(
        PROBLEMS["linear_gelu"], "triton"),
        instruction='action: {"kind": "matmul", "value": "kernel", "dot": "fma"}')
    for code in (softmax, fixed, lanes, linear):
        facts = facts_of(code)
        assert facts.lane_block == ("LANE_BLOCK" in code)
        assert facts.task_loop == ("for (int64_t task = 0; task < tasks" in code)
        assert facts.parked_output == ("parked here" in code)
        assert facts.openmp == ("omp parallel" in code)
        assert bool(facts.vendor_gemm) == ("kept in torch: the vendor GEMM" in code)
        assert all(f"v{name}(" in code for name in facts.vector_math)
        assert all(f"std::{name}(" in code for name in facts.scalar_math)
    assert facts_of(lanes).lane_block and facts_of(softmax).parked_output
    assert facts_of(softmax).vector_math == {"exp"} and facts_of(fixed).scalar_math == {"exp"}
    assert facts_of(fixed).double_accumulator and facts_of(linear).vendor_gemm == ["linear"]
    assert facts_of(summed).triton_dot_by_sum and "acc + tl.sum(a[:, :, None]" in summed
    assert not facts_of(generate(PROBLEMS["linear_gelu"], "triton")).triton_dot_by_sum
