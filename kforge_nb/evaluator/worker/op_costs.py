"""FLOPs of a reference's forward, pointwise work included. torch's FlopCounterMode counts
matrix products and convolutions only, so an RMSNorm with exp and sigmoid work read 0 FLOPs and
sat on the roofline as pure memory traffic. Here each pointwise op and reduction is counted at a
cost per element (COSTS), beside FlopCounterMode's count."""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# FLOPs per output element (per input element for reductions and softmax), an FMA counted as 2.
# The transcendental costs are the floating-point operations of the AVX2 Vectorized<float>
# kernels PyTorch's CPU runs (ATen/cpu/vec/vec256/vec256_float.h): exp is a range reduction
# (2 FMAs) and a degree-5 Horner polynomial (5 FMAs) and a scaling, about 16; erf is 6 FMAs, a
# divide, a square and an exp, about 30; log, tanh and sin/cos are SLEEF polynomials of the same
# size as exp. sqrt, rsqrt, reciprocal and division are one instruction each and count 1. A GPU's
# special function unit does several of these in one instruction: the figure is the arithmetic
# asked for, the same on every device, not the instructions issued.
EXP = 16
COSTS = {
    # arithmetic, 1 per element
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "square": 1,
    "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "addcmul": 2, "addcdiv": 2, "lerp": 2,
    "sum": 1, "mean": 1, "var": 3, "std": 4, "norm": 2, "linalg_vector_norm": 2,
    # transcendental
    "exp": EXP, "exp2": EXP, "expm1": EXP, "log": EXP, "log2": EXP, "log1p": EXP, "tanh": 20,
    "sigmoid": EXP + 2, "silu": EXP + 3, "erf": 30, "erfc": 30, "gelu": 34, "mish": 3 * EXP,
    "softplus": 2 * EXP + 1, "elu": EXP + 2, "selu": EXP + 3, "celu": EXP + 3,
    "sin": 20, "cos": 20, "tan": 24, "atan": 20, "pow": 2 * EXP + 1,
    "_softmax": EXP + 4, "_log_softmax": 2 * EXP + 4, "logsumexp": EXP + 3,
    "native_layer_norm": 8, "_fused_rms_norm": 5, "native_group_norm": 8,
    "native_batch_norm": 4, "_native_batch_norm_legit_no_training": 4,
}
INPUT_SIZED = {"sum", "mean", "var", "std", "norm", "linalg_vector_norm", "_softmax",
               "_log_softmax", "logsumexp"}


def op_cost(name: str, args: tuple) -> int:
    """FLOPs per element of one aten op (its packet name, an in-place '_' dropped)."""
    if name == "pow" and len(args) > 1 and isinstance(args[1], (int, float)):
        return power_cost(float(args[1]))
    return COSTS.get(name, 0)


def power_cost(exponent: float) -> int:
    """x ** k by a constant: k - 1 multiplies for a whole k (and a division where it is
    negative), a square root for ±0.5; any other power is an exp and a log."""
    if abs(exponent) == 0.5:
        return 1 + (exponent < 0)
    if exponent.is_integer():
        return max(int(abs(exponent)) - 1, 0) + (exponent < 0)
    return COSTS["pow"]


def first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return next((v for v in value if isinstance(v, torch.Tensor)), None)
    return None


class PointwiseCounter(TorchDispatchMode):
    """Adds COSTS[op] × elements for every op that runs under it (fake tensors too)."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        name = name[:-1] if name.endswith("_") and not name.startswith("_") else name
        cost = op_cost(name, args)
        if cost:
            sized = first_tensor(args) if name in INPUT_SIZED else first_tensor(out)
            if sized is not None and sized.is_floating_point():
                self.flops += cost * sized.numel()
        return out


class FlopCount:
    """`with FlopCount() as count: model(*inputs)`, then `count.total()`: torch's count of
    matrix products and convolutions plus the pointwise work at COSTS."""

    def __enter__(self):
        from torch.utils.flop_counter import FlopCounterMode
        self.products = FlopCounterMode(display=False)
        self.pointwise = PointwiseCounter()
        self.products.__enter__()
        self.pointwise.__enter__()
        return self

    def __exit__(self, *exc):
        self.pointwise.__exit__(*exc)
        self.products.__exit__(*exc)
        return False

    def total(self) -> int:
        return int(self.products.get_total_flops()) + self.pointwise.flops
