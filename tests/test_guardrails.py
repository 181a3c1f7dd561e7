"""Guardrails reject a candidate before it runs, naming every rule that fired; a candidate that
patches the verdict's functions at run time is `rejected` as well, never `correct`."""
import ast
from pathlib import Path

import pytest

from kforge_nb.evaluator import evaluate
from kforge_nb.guardrails import Guardrails
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, REJECTED
from kforge_nb.targets.cpp import CppTarget
from tests.support.evaluator import EXAMPLES, PROBLEMS, candidate_source, line_of

ADV = Path(__file__).parent / "adversarial" / "candidates"


def rules_fired(source: str, guardrails: Guardrails | None = None) -> list[str]:
    fired = (guardrails or Guardrails()).check(source, ast.parse(source), CppTarget.required)
    return [rule.name for rule, _ in fired]


def test_torch_softmax_in_forward_is_rejected_naming_torch_compute_in_forward(judge):
    result = judge("relu", "torch_softmax_in_forward")
    line = line_of(candidate_source("torch_softmax_in_forward"), "torch.softmax(")
    assert result.state == REJECTED
    assert result.rules == ["torch-compute-in-forward"]
    assert f"line {line}: torch.softmax()" in result.message


def test_a_matrix_product_by_at_is_torch_compute_unless_matmul_is_allowed():
    """`a @ b` is torch.matmul: refused in forward like the call, allowed by the same name
    (the builtin agent keeps a vendor GEMM written `@` and declares `matmul`)."""
    source = cpp_candidate('extern "C" void f(const float* x, float* y, long n) {}').replace(
        "        return y\n", "        return y @ x\n")
    assert "torch-compute-in-forward" in rules_fired(source)
    assert "torch-compute-in-forward" not in rules_fired(source, Guardrails(allow=["matmul"]))
    assert "torch-compute-in-forward" in rules_fired(source, Guardrails(allow=["bmm"]))


def test_triton_candidate_without_a_jit_kernel_is_rejected_naming_triton_kernel(judge):
    result = judge("tiny_add", "triton_without_jit", target="triton")
    assert result.state == REJECTED
    assert result.rules == ["triton-kernel"]
    assert "no @triton.jit kernel" in result.message


def test_user_ban_regex_rejects_a_matching_candidate(options):
    no_openmp = Guardrails(bans=[r"#pragma\s+omp"])
    result = evaluate(Problem.from_file(EXAMPLES / "softmax.py"),
                      (EXAMPLES / "cpp_softmax.py").read_text(), "cpp",
                      options(guardrails=no_openmp))
    assert result.state == REJECTED
    assert result.rules == [r"user-ban:#pragma\s+omp"]
    assert "banned by the user" in result.message and "#pragma omp" in result.message


def test_calling_a_loaded_kernel_named_after_a_torch_op_is_not_torch_compute():
    assert "kernels.relu(x, y, x.numel())" in candidate_source("cpp_relu")
    assert rules_fired(candidate_source("cpp_relu")) == []


def test_a_kernel_name_rebound_to_torch_passes_the_static_pass_and_is_caught_running(options):
    """Names are not the judge: the static pass lets it through, the run-time audit sees
    aten.relu dispatched from forward and names the line."""
    source = candidate_source("cpp_relu").replace("kernels.relu(x, y, x.numel())",
                                                  "kernels = torch\n        y = kernels.relu(x)")
    assert rules_fired(source) == []
    result = evaluate(Problem.from_file(PROBLEMS / "relu.py"), source, "cpp", options())
    assert result.state == REJECTED and result.rules == ["torch-compute-at-runtime"]
    assert f"aten.relu at line {line_of(source, 'kernels.relu(x)')}" in result.message


def test_tampering_candidate_is_rejected_by_the_static_patching_rule(judge):
    result = judge("relu", "cpp_tampering_wrong_values")
    assert result.state == REJECTED
    assert result.rules == ["patching-or-introspection"]
    for name in ("torch.allclose", "torch.testing.assert_close", "time.perf_counter"):
        assert f"assigns {name}" in result.message


def test_tampering_candidate_that_runs_is_rejected_by_the_integrity_check(judge):
    result = judge("relu", "cpp_tampering_wrong_values", guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED                   # not correct, not even mismatch
    assert result.rules == ["tampering"]
    for name in ("torch.allclose", "torch.testing.assert_close", "time.perf_counter"):
        assert name in result.message
    assert "its own outcome was mismatch" in result.message   # the patches fooled nothing
    assert result.correctness.mismatch_fraction > 0.3


def test_patching_a_clock_after_the_trials_is_rejected_not_correct(judge):
    result = judge("relu", "cpp_tampering_timer_only", guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED
    assert result.rules == ["tampering"]
    assert "time.perf_counter_ns" in result.message
    assert "its own outcome was correct" in result.message


def test_patching_the_evaluators_own_comparison_changes_no_verdict(judge):
    """The patch fools nothing (its own outcome is a mismatch) and is itself caught: the
    integrity check now guards the evaluator's comparison too (as test_exploits says)."""
    result = judge("relu", "cpp_patches_the_evaluator", guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED and result.rules == ["tampering"], result.message
    assert "kforge_nb.evaluator.worker.correctness.compare_values" in result.message
    assert "its own outcome was mismatch" in result.message


def test_a_tampering_candidate_does_not_leak_into_the_next_evaluation(judge):
    off = Guardrails(defaults=False)
    assert judge("relu", "cpp_tampering_wrong_values", guardrails=off).rules == ["tampering"]
    result = judge("relu", "cpp_relu", guardrails=off)
    assert result.state == CORRECT and result.rules == []


def test_a_patch_present_only_while_timed_is_rejected_not_correct(judge):
    result = judge("relu", "cpp_tampering_only_while_timed",
                   guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED
    assert result.rules == ["tampering"]
    assert "time.perf_counter_ns" in result.message


# --- rules read code: the C++ tokenizer and what each rule reads ------------------------------

from kforge_nb.cpp_source import cpp_tokens, strip_cpp_comments_and_strings  # noqa: E402
from kforge_nb.targets.triton import TritonTarget  # noqa: E402


def test_the_tokenizer_drops_comments_and_keeps_literals_whole():
    text = ('// dlsym in a comment\nint a = 1\'000; /* at::mm\n */ auto s = "// not a comment";\n'
            'auto r = R"x(fast::exp ")x"; char q = \'"\'; u8"at::x";')
    tokens = cpp_tokens(text)
    assert [t.text for t in tokens if t.kind == "ident"] == ["int", "a", "auto", "s", "auto",
                                                          "r", "char", "q"]
    assert [(t.text, t.line) for t in tokens if t.kind == "string"] == [
        ('"// not a comment"', 3), ('R"x(fast::exp ")x"', 4), ('u8"at::x"', 4)]
    assert ("1'000", 2) in [(t.text, t.line) for t in tokens if t.kind == "number"]
    assert ("'\"'", 4) in [(t.text, t.line) for t in tokens if t.kind == "char"]


def test_stripping_keeps_every_line_and_column():
    text = 'a; // fast-math\n/* dlsym\n RTLD_NOW */ b = "at::mm"; c = \'x\';\n#pragma omp for\n'
    stripped = strip_cpp_comments_and_strings(text)
    assert len(stripped) == len(text) and stripped.count("\n") == text.count("\n")
    for gone in ("fast-math", "dlsym", "RTLD_NOW", "at::mm"):
        assert gone not in stripped
    assert 'b = "      "; c = \' \';' in stripped and "#pragma omp for" in stripped
    assert strip_cpp_comments_and_strings(text, strings=False).count('"at::mm"') == 1


def cpp_candidate(cpp: str, python: str = "") -> str:
    return (f'import torch\nimport torch.nn as nn\nfrom kforge_nb.runtime import cpp\n{python}\n'
            f'source = r"""\n{cpp}\n"""\nkernels = cpp.load(source)\n\n\n'
            'class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n'
            '        kernels.f(x, y, x.numel())\n        return y\n')


def fired(source: str, target=CppTarget, **kw) -> dict[str, list[str]]:
    found = Guardrails(**kw).check(source, ast.parse(source), target.required)
    return {rule.name: where for rule, where in found}


KERNEL = 'extern "C" void f(const float* x, float* y, long n) { %s }'


def test_comments_docstrings_and_strings_are_not_code():
    python = ('"""No fast-math, no autocast, no torch.float16, no std::thread, no dlsym."""\n'
              '# -ffast-math is off; torch.cuda.Stream is not used\n'
              'NOTE = "we never call at::matmul or use autocast"\n')
    cpp = ("// -ffast-math? no. #pragma GCC optimize would change results\n"
           "/* std::thread, pthread_create, dlsym(RTLD_NEXT), at::matmul, fast::exp */\n"
           + KERNEL % 'const char* s = "fast-math dlsym at::mm std::async"; (void)s;')
    assert fired(cpp_candidate(cpp, python)) == {}


@pytest.mark.parametrize("cpp, rule, where", [
    (KERNEL % "auto t = std::thread([]{}); t.join();", "extra-threads-or-streams",
     "std::thread"),
    (KERNEL % "auto f = std::async(std::launch::async, []{});", "extra-threads-or-streams",
     "std::async"),
    ("#pragma GCC optimize(\"fast-math\")\n" + KERNEL % "", "fast-math", "#pragma GCC optimize"),
    ('__attribute__((optimize("Ofast")))\n' + KERNEL % "", "fast-math", "__attribute__((optimize"),
    (KERNEL % 'void* h = dlopen("libmkl_rt.so", RTLD_NOW); (void)h;', "native-dynamic-symbols",
     "dlopen"),
    (KERNEL % 'auto g = dlsym(RTLD_DEFAULT, "sgemm" "_"); (void)g;', "native-dynamic-symbols",
     "dlsym"),
    ("__attribute__((constructor)) static void early() {}\n" + KERNEL % "",
     "native-dynamic-symbols", "constructor"),
    ('extern "C" void* PyEval_GetFrame(void);\n' + KERNEL % "(void)PyEval_GetFrame();",
     "native-interpreter-access", "PyEval_GetFrame"),
    ('extern "C" void* lookup(void*, const char*) __asm__("dlsym");\n'
     + KERNEL % 'auto g = lookup(nullptr, "sgemm_"); (void)g;', "native-interpreter-access",
     '__asm__("dlsym")'),
    ("#include <link.h>\n" + KERNEL % "dl_iterate_phdr(nullptr, nullptr);",
     "native-interpreter-access", "dl_iterate_phdr"),
    (KERNEL % "auto r = at::matmul(a, b);", "native-calls-libtorch", "at::matmul"),
    (KERNEL % "auto r = torch::mm(a, b);", "native-calls-libtorch", "torch::mm"),
    (KERNEL % "auto r = at::native::softmax(a, 1, false);", "native-calls-libtorch",
     "at::native::softmax"),
    ("using namespace at;\n" + KERNEL % "", "native-calls-libtorch", "using namespace at"),
    (KERNEL % 'cblas_sgemm(0, 0, 0, 1, 1, 1, 1.f, x, 1, x, 1, 0.f, y, 1);',
     "native-calls-libtorch", "cblas_sgemm"),
])
def test_native_rules_fire_on_code_and_name_the_line(cpp, rule, where):
    source = cpp_candidate(cpp)
    found = fired(source)
    assert list(found) == [rule], found
    line = next(i for i, text in enumerate(source.splitlines(), 1) if where in text)
    assert any(hit.startswith(f"line {line}: ") and where.split("(")[0] in hit
               for hit in found[rule]), found


def test_libtorch_types_allocation_and_streams_are_allowed():
    cpp = ("#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n"
           "torch::Tensor f(torch::Tensor x) {\n  TORCH_CHECK(x.is_contiguous(), \"x\");\n"
           "  auto y = torch::empty_like(x);\n  auto w = at::zeros({4}, x.options());\n"
           "  auto s = at::cuda::getCurrentCUDAStream();\n  c10::cuda::CUDAGuard g(x.device());\n"
           "  if (x.scalar_type() != at::ScalarType::Float || x.dtype() != torch::kFloat32) {}\n"
           "  at::parallel_for(0, 8, 1, [&](int64_t a, int64_t b) {});\n"
           "  float* p = y.data_ptr<float>(); (void)p; return y;\n}")
    source = cpp_candidate(cpp).replace("kernels = cpp.load(source)",
                                        "kernels = load_inline('f', cpp_sources=[source])")
    assert "native-calls-libtorch" not in fired(source)


def test_the_current_stream_is_not_an_extra_stream_but_a_new_one_is():
    body = "with torch.cuda.stream({}):\n    pass\n"
    assert fired(cpp_candidate(KERNEL % "", body.format("torch.cuda.current_stream()"))) == {}
    assert fired(cpp_candidate(KERNEL % "", body.format("torch.cuda.default_stream()"))) == {}
    made = fired(cpp_candidate(KERNEL % "", "s = torch.cuda.Stream()\n" + body.format("s")))
    assert list(made) == ["extra-threads-or-streams"]
    assert any("torch.cuda.Stream" in w for w in made["extra-threads-or-streams"])
    assert any("torch.cuda.stream(s)" in w for w in made["extra-threads-or-streams"])


@pytest.mark.parametrize("python, bad", [
    ("torch.backends.cuda.matmul.allow_tf32 = False\ntorch.backends.cudnn.allow_tf32 = False\n",
     False),
    ("torch.set_float32_matmul_precision('highest')\n", False),
    ("torch.backends.cuda.matmul.allow_tf32 = True\n", True),
    ("torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True\n", True),
    ("torch.set_float32_matmul_precision('high')\n", True),
    ("torch.backends.cuda.matmul.fp32_precision = 'tf32'\n", True),
])
def test_precision_settings_are_judged_by_their_value_not_as_patching(python, bad):
    found = fired(cpp_candidate(KERNEL % "", python))
    assert "patching-or-introspection" not in found
    assert ("precision-switch" in found) == bad, found
    if bad:   # opted in: the same assignment is fine
        assert fired(cpp_candidate(KERNEL % "", python), precision="tf32") == {}


def test_fast_math_flags_in_code_still_fire():
    source = cpp_candidate(KERNEL % "").replace(
        "kernels = cpp.load(source)",
        "kernels = load_inline('f', cpp_sources=[source], extra_cflags=['-O3', '-ffast-math'])")
    found = fired(source)
    assert list(found) == ["fast-math"]
    assert found["fast-math"] == [f"line {line_of(source, '-ffast-math')}: -ffast-math"]


@pytest.mark.parametrize("python, where", [
    ("a = np.ctypeslib.as_array(p, shape=(4,))\n", "np.ctypeslib"),
    ("a = np.frombuffer(b, dtype=np.float32)\n", "np.frombuffer"),
    ("a = np.from_dlpack(x)\n", "np.from_dlpack"),
    ("from torch.utils.dlpack import to_dlpack\n", "torch.utils.dlpack"),
    ("m = memoryview(x)\n", "memoryview()"),
    ("p = native.ctypes.cast(x.data_ptr(), native.ctypes.c_void_p)\n", "native.ctypes"),
])
def test_raw_host_buffers_are_rejected(python, where):
    found = fired(cpp_candidate(KERNEL % "", "import numpy as np\n" + python))
    assert list(found) == ["host-buffer-access"], found
    assert any(where in w for w in found["host-buffer-access"])


def test_data_ptr_to_a_native_function_is_not_a_raw_buffer():
    source = candidate_source("cpp_relu").replace("kernels.relu(x, y, x.numel())",
                                                  "assert x.data_ptr() != y.data_ptr()\n"
                                                  "        kernels.relu(x, y, x.numel())")
    assert rules_fired(source) == []


def test_fx_spelling_of_public_ops_is_not_reaching_into_torch_C():
    """`kforge model` keeps parts as torch.fx writes them: `torch._C._nn.gelu` is F.gelu."""
    python = ("class Kept(nn.Module):\n    def forward(self, x):\n"
              "        return torch._C._nn.gelu(torch._C._nn.linear(x, x, None))\n")
    assert "patching-or-introspection" not in fired(cpp_candidate(KERNEL % "", python))
    for hidden in ("torch._C._DisableTorchDispatch()", "torch._C._nn._parse_to(x)",
                   "torch._C._set_grad_enabled(False)"):
        found = fired(cpp_candidate(KERNEL % "", f"z = {hidden}\n"))
        assert "patching-or-introspection" in found, hidden


def test_triton_autotune_is_a_kernel_and_passes_the_static_pass():
    text = (ADV / "triton_relu_autotune.py").read_text()
    assert fired(text, TritonTarget) == {}


def test_a_name_bound_only_to_the_current_stream_is_the_current_stream():
    body = "s = torch.cuda.current_stream()\nwith torch.cuda.stream(s):\n    pass\n"
    assert fired(cpp_candidate(KERNEL % "", body)) == {}
    rebound = body + "s = torch.cuda.Stream()\n"
    assert list(fired(cpp_candidate(KERNEL % "", rebound))) == ["extra-threads-or-streams"]


def test_the_builtin_records_and_the_guardrail_read_one_list_of_pointwise_ops():
    """Each builtin record is a key of compute_ops.POINTWISE (its torch spellings are read from
    there), each key has a record, and every name and spelling is a compute function to the
    guardrail."""
    from kforge_nb.agents.builtin.op_records import RECORDS
    from kforge_nb.compute_ops import COMPUTE_FUNCTIONS, POINTWISE
    assert sorted(r.name for r in RECORDS) == sorted(POINTWISE)
    known = {r.name for r in RECORDS} | {name for r in RECORDS for name in r.torch}
    assert known <= COMPUTE_FUNCTIONS, f"not compute functions: {sorted(known - COMPUTE_FUNCTIONS)}"


def test_no_function_the_guardrail_refuses_is_harmless_to_the_audit():
    """The static pass and the run-time audit agree: no name refused in forward as compute is
    one the audit lets pass as moving, allocating or asking about memory."""
    from kforge_nb.compute_ops import COMPUTE_FUNCTIONS
    from kforge_nb.evaluator.worker.audit import HANDLING, HARMLESS
    assert not COMPUTE_FUNCTIONS & (HARMLESS | HANDLING)


def relu_then(call: str) -> str:
    """The C++ relu candidate with `y = call` after its kernel's launch in forward."""
    launch = "kernels.relu(x, y, x.numel())"
    source = candidate_source("cpp_relu").replace(launch, f"{launch}\n        y = {call}")
    assert call in source
    return source


@pytest.mark.parametrize("call", ["torch.log1p(x)", "torch.expm1(x)", "F.mish(x)"])
def test_a_record_op_called_in_forward_is_torch_compute(call):
    source = relu_then(call)
    assert rules_fired(source) == ["torch-compute-in-forward"]


# The heavy ops a whole model is split around (compute_ops.GEMM, REDUCTION) the guardrail's own
# list lacked: until they shared one list, these were refused only once they ran (the audit)
@pytest.mark.parametrize("call", ["torch.cumprod(x, 0)", "F.avg_pool1d(x, 2)",
                                  "F.scaled_dot_product_attention(x, x, x)", "F.normalize(x)"])
def test_a_heavy_op_of_a_models_split_called_in_forward_is_torch_compute(call):
    source = relu_then(call)
    assert rules_fired(source) == ["torch-compute-in-forward"]
    allowed = Guardrails(allow=[call.split("(")[0].split(".")[-1]])     # --allow cumprod
    assert rules_fired(source, allowed) == []


def test_torch_cumprod_in_forward_is_rejected_before_it_runs(options):
    source = relu_then("torch.cumprod(y, 0)")
    result = evaluate(Problem.from_file(PROBLEMS / "relu.py"), source, "cpp", options())
    assert result.state == REJECTED
    assert result.rules == ["torch-compute-in-forward"]
    assert f"line {line_of(source, 'torch.cumprod(')}: torch.cumprod()" in result.message


@pytest.mark.parametrize("sizes, fires", [
    ("x.shape", False), ("(1, *x.shape[1:])", False), ("tuple(x.shape)[::-1]", False),
    ("[1] + list(x.shape[1:])", False), ("x", True), ("[x.sum(), 1]", True)])
def test_numpy_on_a_tensors_sizes_is_host_arithmetic_not_torch_compute(sizes, fires):
    """np.cumprod of a shape (a wrapper's strides) reads no tensor data, as np.sqrt of a row
    length does not: cumprod joined the refused names with the model's split, and is refused
    on a tensor, never on Python numbers."""
    source = "import numpy as np\n" + relu_then(f"np.cumprod({sizes})")
    assert rules_fired(source) == (["torch-compute-in-forward"] if fires else [])
