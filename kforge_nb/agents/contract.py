"""What a candidate is held to, as a prompt states it: how it is built, how close its output must
be, the precision policy, and what it may do with the module's parameters.

Every figure is read from the code that applies it (the build flags, the evaluator's tolerance
table, the guardrails' rules and the audit's harmless ops), never restated: a change there is a
change here.
"""
from __future__ import annotations

POLICY_MEANING = {
    "strict": "fp32 arithmetic throughout: no TF32, no fp16/bf16 casts, no fast-math",
    "tf32": "TF32 matrix products allowed; the answer is still the fp32 reference",
    "bf16": "bf16 compute allowed (autocast-like); the answer is still the fp32 reference",
    "fp16": "fp16 compute allowed (autocast-like); the answer is still the fp32 reference",
}
# ops a forward may apply to a parameter on its way to the kernel, as examples (the audit's
# HARMLESS set decides; only those it holds are named)
MOVES = ("contiguous", "t", "transpose", "view", "reshape", "clone")


def build_lines(target: str) -> list[str]:
    """How the target's kernels are built, from the runtime's own flags."""
    if target == "cpp":
        from ..runtime.cpp import FLAGS
        return [f"- Build: kforge_nb.runtime.cpp.load(source) compiles with "
                f"`{' '.join(FLAGS)}`; fast-math flags and pragmas are refused"]
    if target == "cuda":
        from ..runtime.cuda import arch_flags
        return [f"- Build: kforge_nb.runtime.cuda.load(source) runs nvcc for "
                f"`{' '.join(arch_flags())}`; fast-math flags are refused"]
    if target == "triton":
        return ["- Build: Triton JIT-compiles each @triton.jit kernel at its first launch "
                "(under TRITON_INTERPRET=1 where there is no GPU: correctness only)"]
    return []


def tolerance_lines(policy: str) -> list[str]:
    """The evaluator's tolerance under `policy`, for each output dtype it names."""
    from ..evaluator.worker.correctness import TOLERANCES
    rows = {**TOLERANCES["strict"], **TOLERANCES.get(policy, {})}
    lines = ["- Correctness: every output element must satisfy |out - ref| <= atol*scale + "
             "rtol*|ref| (scale: the reference's RMS where that exceeds 1), and the whole "
             "output ||out - ref|| / ||ref|| <= the relative-norm bound; checked on several "
             "random inputs and once at another batch size:"]
    for dtype, (atol, rtol, norm) in rows.items():
        name = str(dtype).replace("torch.", "")
        lines.append(f"  - {name}: atol {atol:g}, rtol {rtol:g}, relative norm {norm:g}")
    return lines


def precision_line(policy: str) -> str:
    return f"- Precision policy: {policy}: {POLICY_MEANING.get(policy, 'as --precision says')}"


def parameter_lines() -> list[str]:
    """What forward may do with the module's parameters, as the guardrails and audit judge."""
    from ..evaluator.worker.audit import HARMLESS
    from ..guardrails import DEFAULT_BANS
    moves = ", ".join(f".{op}()" for op in MOVES if op in HARMLESS)
    compute = next(rule for rule in DEFAULT_BANS if rule.name == "torch-compute-in-forward")
    return [
        "- Parameters: a parameter may go straight to a kernel (the tensor itself, or "
        f"`.data_ptr()` for native code). Moving or viewing it in forward is allowed ({moves}); "
        f"computing with it in torch is not (rule {compute.name}: {compute.reason}).",
        "- Weights: the reference's weights are copied in only when ModelNew's state_dict has "
        "the same names and shapes (an extra parameter or registered buffer breaks that); a "
        "tensor derived from a weight in __init__ is made before the copy, so derive it in "
        "forward, in the kernel."]


def lines(target: str, policy: str) -> list[str]:
    """The prompt's contract section."""
    return [*build_lines(target), precision_line(policy), *tolerance_lines(policy),
            *parameter_lines()]
