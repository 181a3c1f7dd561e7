"""The torch functions that compute, by name: one home, below every place that needs it.

* The guardrails reject a candidate that calls one of them by its own name in forward: that is
  the answer, not a kernel (guardrails/numerics.py, COMPUTE_FUNCTIONS).
* The builtin agent's op records (agents/builtin/op_records.py), one per key of POINTWISE,
  read their torch spellings from it; how each op is written stays in its record.
* A whole model is split around its heavy ops, one GEMM or REDUCTION per part (model/graph.py).
* The run-time audit (evaluator/worker/audit.py) needs no such list: it refuses every ATen op
  outside its HARMLESS set, so a function missing here is still caught when it runs;
  tests/test_guardrails.py checks that nothing here is harmless to it.

The list lives here, not in the records, because the guardrails cannot import the agents package
(it imports the evaluator, which imports the guardrails); nothing here imports torch.
"""
from __future__ import annotations

# The builtin agent's pointwise ops, each an op record's name (itself a torch function) ->
# the torch functions that are exactly this op, one input and no argument of their own
# (torch.relu, F.silu, Tensor.exp): capture maps those straight to the op.
POINTWISE: dict[str, tuple[str, ...]] = {
    "add": (), "sub": (), "mul": (), "div": (), "maximum": (), "minimum": (), "pow": (),
    "eq": (), "ne": (), "lt": (), "le": (), "gt": (), "ge": (), "where": (),
    "logical_and": (), "logical_or": (), "logical_not": ("logical_not",),
    "relu": ("relu",), "sigmoid": ("sigmoid",), "tanh": ("tanh",), "exp": ("exp",),
    "log": ("log",), "abs": ("abs",), "neg": ("neg", "negative"), "sqrt": ("sqrt",),
    "rsqrt": ("rsqrt",), "erf": ("erf",), "sin": ("sin",), "cos": ("cos",),
    "log1p": ("log1p",), "expm1": ("expm1",), "reciprocal": ("reciprocal",),
    "square": ("square",), "floor": ("floor",), "ceil": ("ceil",), "trunc": ("trunc", "fix"),
    "round": (),        # its `decimals` is an argument (agents/builtin/capture/ops_pointwise.py)
    "silu": ("silu",), "mish": ("mish",), "hardswish": ("hardswish",),
    "hardsigmoid": ("hardsigmoid",), "sign": ("sign",),
    "leaky_relu": (), "clamp": (), "gelu": (), "softplus": (), "elu": (),
}

# The heavy ops a whole model's part holds one of: products, convolutions, attention, and the
# embedding lookup (as large as a product's operand)
GEMM = frozenset({
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "embedding",
    "scaled_dot_product_attention", "tensordot",
})
# ... and the other heavy ops: norms, softmaxes, reductions, scans, pools, losses
REDUCTION = frozenset({
    "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "softmax",
    "log_softmax", "sum", "mean", "amax", "amin", "max", "min", "var", "std", "logsumexp",
    "cumsum", "cumprod", "prod", "norm", "argmax", "argmin", "max_pool1d", "max_pool2d",
    "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "normalize", "cross_entropy", "mse_loss", "nll_loss", "kl_div",
})

# vector products the model's split does not count as heavy, other pointwise ops, selections,
# in-place forms
OTHER = frozenset({
    "dot", "outer", "clip", "addcmul", "lerp", "masked_fill", "sort", "topk",
    "add_", "mul_", "div_", "sub_", "clamp_", "relu_", "exp_",
})

SPELLINGS = frozenset(name for names in POINTWISE.values() for name in names)
COMPUTE_FUNCTIONS = frozenset(POINTWISE) | SPELLINGS | GEMM | REDUCTION | OTHER
