"""The torch functions that compute, by name: one list, below both of the places that need it.

The guardrails reject a candidate that calls one of them by its own name in forward: that is
the answer, not a kernel (guardrails/numerics.py). The builtin agent's op records
(agents/builtin/op_records.py) are the pointwise ops it writes kernels for, each with its torch
spellings: every one is a torch function that computes, so each is in POINTWISE, and
tests/test_guardrails.py fails on a record the list lacks. The list lives here, not in the
records, because the guardrails cannot import the agents package (it imports the evaluator,
which imports the guardrails).
"""
from __future__ import annotations

# the builtin agent's pointwise ops: each op record's name and its torch spellings
POINTWISE = frozenset({
    "add", "sub", "mul", "div", "maximum", "minimum", "pow",
    "eq", "ne", "lt", "le", "gt", "ge", "where", "logical_and", "logical_or", "logical_not",
    "relu", "sigmoid", "tanh", "exp", "log", "abs", "neg", "negative", "sqrt", "rsqrt", "erf",
    "sin", "cos", "log1p", "expm1", "reciprocal", "square", "floor", "ceil", "trunc", "fix",
    "round", "silu", "mish", "hardswish", "hardsigmoid", "sign", "leaky_relu", "clamp", "gelu",
    "softplus", "elu",
})

# reductions, products, convolutions, norms, selections, other pointwise ops, in-place forms
OTHER = frozenset({
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "norm", "var", "std", "clip",
    "logsumexp", "cumsum", "prod", "conv1d", "conv2d", "conv3d", "linear", "layer_norm",
    "group_norm", "batch_norm", "dot", "outer", "addcmul", "lerp", "sort", "topk", "masked_fill",
    "add_", "mul_", "div_", "sub_", "clamp_", "relu_", "exp_", "copy_",
})

COMPUTE_FUNCTIONS = POINTWISE | OTHER
