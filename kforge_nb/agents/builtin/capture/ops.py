"""What each reference op means in the builtin agent's primitives (see `ir.py`): the tables.

One table maps an op's leaf name (`relu` for torch.relu, F.relu and Tensor.relu alike) to a
converter and the signature its arguments are bound by (`bind`); `module_call` maps nn.Module
classes to the same converters. A converter receives the op's arguments bound by name and builds
pointwise / reduce / matmul nodes through the `Lowerer` (lowerer.py); the converters live in
ops_pointwise.py, ops_reduce.py, ops_norms.py and ops_matmul.py.

A converter returns None when it cannot express a particular call (an unusual argument); the
op then stays a torch call in ModelNew.forward and the coverage note says so.
"""
from __future__ import annotations

import torch

from .binding import bind  # noqa: F401  (ops.bind: the converters' binder)

from . import ops_index
from .ops_losses import LOSS, loss_module, c_binary_cross_entropy, c_cosine_embedding_loss, \
    c_cosine_similarity, c_cross_entropy, c_hinge_embedding_loss, c_huber_loss, c_kl_div, \
    c_l1_loss, c_mse_loss, c_nll_loss, c_pairwise_distance, c_smooth_l1_loss, \
    c_triplet_margin_loss
from .ops_matmul import c_diag, c_einsum, c_linear, c_matmul, c_triangle
from .ops_norms import c_batch_norm, c_group_norm, c_instance_norm, c_layer_norm, c_normalize, \
    c_rms_norm
from .ops_pointwise import COMPARISONS, SIMPLE_UNARY, binary, c_celu, c_clamp, c_div, \
    c_dropout, c_elu, c_float, c_gelu, c_hardtanh, c_identity, c_leaky_relu, c_masked_fill, \
    c_max_min, c_pow, c_relu6, c_round, c_selu, c_softplus, c_where, unary
from .positions import ARANGE, c_bitwise
from .ops_reduce import c_adaptive_avg_pool, c_arg_reduce, c_cat, c_flip, c_logsumexp, c_norm, \
    c_reduce, c_scan, c_softmax, c_var_std, c_vector_norm




FUNCTIONS: dict[str, tuple] = {name: unary(fn) for name, fn in SIMPLE_UNARY.items()}
FUNCTIONS.update({
    "gelu": (c_gelu, "input, approximate='none'"),
    "softplus": (c_softplus, "input, beta=1.0, threshold=20.0"),
    "elu": (c_elu, "input, alpha=1.0, inplace=False"),
    "selu": (c_selu, "input, inplace=False"),
    "celu": (c_celu, "input, alpha=1.0, inplace=False"),
    "leaky_relu": (c_leaky_relu, "input, negative_slope=0.01, inplace=False"),
    "hardtanh": (c_hardtanh, "input, min_val=-1.0, max_val=1.0, inplace=False"),
    "relu6": (c_relu6, "input, inplace=False"),
    "clamp": (c_clamp, "input, min=None, max=None"),
    "clip": (c_clamp, "input, min=None, max=None"),
    "clamp_min": (c_clamp, "input, min=None"),
    "clamp_max": (c_clamp, "input, max=None"),
    "add": binary("add", "input, other, alpha=1"),
    "sub": binary("sub", "input, other, alpha=1"),
    "subtract": binary("sub", "input, other, alpha=1"),
    "mul": binary("mul"), "multiply": binary("mul"),
    "div": (c_div, "input, other, rounding_mode=None"),
    "divide": (c_div, "input, other, rounding_mode=None"),
    "true_divide": (c_div, "input, other"),
    "pow": (c_pow, "input, exponent"),
    "round": (c_round, "input, decimals=0"),
    **{name: binary(op) for name, op in COMPARISONS.items()},
    "logical_and": binary("logical_and"), "logical_or": binary("logical_or"),
    "where": (c_where, "condition, input, other"),
    "masked_fill": (c_masked_fill, "input, mask, value"),
    "maximum": binary("maximum"), "minimum": binary("minimum"),
    "max": c_max_min("max"), "min": c_max_min("min"),
    "sum": c_reduce("sum"), "mean": c_reduce("mean"),
    "amax": c_reduce("max"), "amin": c_reduce("min"),
    "softmax": c_softmax(False), "log_softmax": c_softmax(True),
    "logsumexp": (c_logsumexp, "input, dim, keepdim=False"),
    "layer_norm": (c_layer_norm, "input, normalized_shape, weight=None, bias=None, eps=1e-05"),
    "rms_norm": (c_rms_norm, "input, normalized_shape, weight=None, eps=None"),
    "group_norm": (c_group_norm, "input, num_groups, weight=None, bias=None, eps=1e-05"),
    "batch_norm": (c_batch_norm, "input, running_mean, running_var, weight=None, bias=None, "
                                 "training=False, momentum=0.1, eps=1e-05"),
    "instance_norm": (c_instance_norm, "input, running_mean=None, running_var=None, weight=None, "
                                       "bias=None, use_input_stats=True, momentum=0.1, eps=1e-05"),
    "normalize": (c_normalize, "input, p=2.0, dim=1, eps=1e-12"),
    "norm": (c_norm, "input, p='fro', dim=None, keepdim=False, dtype=None"),
    "linalg.vector_norm": (c_vector_norm, "input, ord=2, dim=None, keepdim=False, dtype=None"),
    "adaptive_avg_pool1d": (c_adaptive_avg_pool, "input, output_size"),
    "adaptive_avg_pool2d": (c_adaptive_avg_pool, "input, output_size"),
    "adaptive_avg_pool3d": (c_adaptive_avg_pool, "input, output_size"),
    "argmax": c_arg_reduce("max"), "argmin": c_arg_reduce("min"),
    "cumsum": c_scan("sum"), "cumprod": c_scan("prod"),
    "diag": (c_diag, "input, diagonal=0"),
    "triu": c_triangle(True), "tril": c_triangle(False),
    "arange": ARANGE, "bitwise_and": c_bitwise("and"), "bitwise_or": c_bitwise("or"),
    "bitwise_not": c_bitwise("invert"),
    "linear": (c_linear, "input, weight, bias=None"),
    "matmul": c_matmul("matmul"), "mm": c_matmul("mm", "input, mat2"),
    "bmm": c_matmul("bmm", "input, mat2"),
    "dropout": (c_dropout, "input, p=0.5, training=True, inplace=False"),
    "contiguous": (c_identity, "input, memory_format=None"),
    "clone": (c_identity, "input, memory_format=None"),
    "detach": (c_identity, "input"),
    "float": (c_float, "input, memory_format=None"),
    "mse_loss": (c_mse_loss, LOSS + ", weight=None"),
    "l1_loss": (c_l1_loss, LOSS + ", weight=None"),
    "smooth_l1_loss": (c_smooth_l1_loss, LOSS + ", beta=1.0"),
    "huber_loss": (c_huber_loss, LOSS + ", delta=1.0, weight=None"),
    "kl_div": (c_kl_div, LOSS + ", log_target=False"),
    "cross_entropy": (c_cross_entropy, "input, target, weight=None, size_average=None, "
                                       "ignore_index=-100, reduce=None, reduction='mean', "
                                       "label_smoothing=0.0"),
    "nll_loss": (c_nll_loss, "input, target, weight=None, size_average=None, "
                             "ignore_index=-100, reduce=None, reduction='mean'"),
    "binary_cross_entropy": (c_binary_cross_entropy, "input, target, weight=None, "
                                                     "size_average=None, reduce=None, "
                                                     "reduction='mean'"),
    "hinge_embedding_loss": (c_hinge_embedding_loss, "input, target, margin=1.0, "
                                                     "size_average=None, reduce=None, "
                                                     "reduction='mean'"),
    "pairwise_distance": (c_pairwise_distance, "x1, x2, p=2.0, eps=1e-06, keepdim=False"),
    "cosine_similarity": (c_cosine_similarity, "x1, x2, dim=1, eps=1e-08"),
    "cosine_embedding_loss": (c_cosine_embedding_loss, "input1, input2, target, margin=0.0, "
                                                       "size_average=None, reduce=None, "
                                                       "reduction='mean'"),
    "triplet_margin_loss": (c_triplet_margin_loss, "anchor, positive, negative, margin=1.0, "
                                                   "p=2.0, eps=1e-06, swap=False, "
                                                   "size_average=None, reduce=None, "
                                                   "reduction='mean'"),
})
FUNCTIONS.update(ops_index.functions(FUNCTIONS))     # gathers, scatters, index arithmetic
# These have more than one calling convention; they bind their own arguments.
RAW = {"var": c_var_std("var"), "std": c_var_std("std"), "einsum": c_einsum, "flip": c_flip,
       "cat": c_cat}

OPERATORS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
             "neg": "neg", "matmul": "matmul", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le",
             "gt": "gt", "ge": "ge", "and": "logical_and", "or": "logical_or"}


def module_call(module: torch.nn.Module, path: str, x, lw):
    """(converter, bound args) for a leaf nn.Module call, or None to keep `self.path(x)`."""
    nn = torch.nn
    p = lambda name: lw.param(f"{path}.{name}") if getattr(module, name, None) is not None else None
    kind = type(module)
    simple = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu",
              nn.Mish: "mish", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid",
              nn.SELU: "selu", nn.ReLU6: "relu6"}
    if kind in simple:
        return FUNCTIONS[simple[kind]][0], {"input": x}
    table = {
        nn.GELU: lambda: (c_gelu, {"input": x, "approximate": module.approximate}),
        nn.Softplus: lambda: (c_softplus, {"input": x, "beta": module.beta,
                                           "threshold": module.threshold}),
        nn.ELU: lambda: (c_elu, {"input": x, "alpha": module.alpha}),
        nn.CELU: lambda: (c_celu, {"input": x, "alpha": module.alpha}),
        nn.LeakyReLU: lambda: (c_leaky_relu, {"input": x, "negative_slope": module.negative_slope}),
        nn.Hardtanh: lambda: (c_hardtanh, {"input": x, "min_val": module.min_val,
                                           "max_val": module.max_val}),
        nn.Softmax: lambda: (FUNCTIONS["softmax"][0], {"input": x, "dim": module.dim}),
        nn.LogSoftmax: lambda: (FUNCTIONS["log_softmax"][0], {"input": x, "dim": module.dim}),
        nn.Identity: lambda: (c_identity, {"input": x}),
        nn.Embedding: lambda: (ops_index.c_embedding, {"input": x, "weight": p("weight"),
                                                       "max_norm": module.max_norm}),
        nn.AdaptiveAvgPool1d: lambda: (c_adaptive_avg_pool, {"input": x,
                                                            "output_size": module.output_size}),
        nn.AdaptiveAvgPool2d: lambda: (c_adaptive_avg_pool, {"input": x,
                                                            "output_size": module.output_size}),
        nn.Dropout: lambda: (c_dropout, {"input": x, "p": module.p, "training": module.training}),
        nn.Linear: lambda: (c_linear, {"input": x, "weight": p("weight"), "bias": p("bias")}),
        nn.LayerNorm: lambda: (c_layer_norm, {"input": x, "normalized_shape": module.normalized_shape,
                                              "weight": p("weight"), "bias": p("bias"),
                                              "eps": module.eps}),
        nn.GroupNorm: lambda: (c_group_norm, {"input": x, "num_groups": module.num_groups,
                                              "weight": p("weight"), "bias": p("bias"),
                                              "eps": module.eps}),
    }
    if hasattr(nn, "RMSNorm"):
        table[nn.RMSNorm] = lambda: (c_rms_norm, {"input": x, "normalized_shape":
                                                  module.normalized_shape, "weight": p("weight"),
                                                  "eps": module.eps})
    for bn in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
        table[bn] = lambda: (c_batch_norm, {
            "input": x, "running_mean": p("running_mean"), "running_var": p("running_var"),
            "weight": p("weight"), "bias": p("bias"),
            "training": module.training or module.running_mean is None,
            "eps": module.eps})
    for inorm in (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d):
        table[inorm] = lambda: (c_instance_norm, {
            "input": x, "weight": p("weight"), "bias": p("bias"), "eps": module.eps,
            "use_input_stats": module.training or not module.track_running_stats})
    make = table.get(kind)
    return make() if make else loss_module(module, lw, FUNCTIONS)
