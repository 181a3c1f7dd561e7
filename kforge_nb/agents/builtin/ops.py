"""What each reference op means in the builtin agent's primitives (see `ir.py`).

One table maps an op's leaf name (`relu` for torch.relu, F.relu and Tensor.relu alike) to a
converter; another maps nn.Module classes to the same converters. A converter receives the
op's arguments bound by name and builds pointwise / reduce / matmul nodes through the
`Lowerer` (capture.py). Composite ops are decomposed here, in the order a student would write
them by hand: softmax is max, exp(x - max), sum, divide.

A converter returns None when it cannot express a particular call (an unusual argument); the
op then stays a torch call in ModelNew.forward and the coverage note says so.
"""
from __future__ import annotations

import ast
import math

import torch

from .ir import Node, normalise_dims

REQUIRED = object()


def bind(args: tuple, kwargs: dict, spec: str) -> dict:
    """Bind positional/keyword arguments to the names in `spec` ("input, dim=None, ...")."""
    names, defaults = [], {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, default = part.partition("=")
        names.append(name.strip())
        defaults[name.strip()] = ast.literal_eval(default.strip()) if default else REQUIRED
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    for name in names:
        bound.setdefault(name, defaults[name])
        if bound[name] is REQUIRED:
            raise TypeError(f"missing argument {name}")
    return bound


# --- pointwise --------------------------------------------------------------------------------

SIMPLE_UNARY = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log",
    "abs": "abs", "neg": "neg", "negative": "neg", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "erf": "erf", "sin": "sin", "cos": "cos", "log1p": "log1p", "expm1": "expm1",
    "reciprocal": "reciprocal", "square": "square", "floor": "floor", "ceil": "ceil",
    "silu": "silu", "mish": "mish", "hardswish": "hardswish", "hardsigmoid": "hardsigmoid",
    "sign": "sign",
}
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def unary(fn: str):
    def convert(lw, a):
        return lw.pw(fn, a["input"])
    return convert, "input, inplace=False"


def c_gelu(lw, a):
    if a["approximate"] not in ("none", "tanh"):
        return None
    return lw.pw("gelu", a["input"], approximate=a["approximate"])


def c_softplus(lw, a):
    return lw.pw("softplus", a["input"], beta=float(a["beta"]), threshold=float(a["threshold"]))


def c_elu(lw, a):
    return lw.pw("elu", a["input"], alpha=float(a["alpha"]), scale=1.0, input_scale=1.0)


def c_selu(lw, a):
    return lw.pw("elu", a["input"], alpha=SELU_ALPHA, scale=SELU_SCALE, input_scale=1.0)


def c_celu(lw, a):
    alpha = float(a["alpha"])
    return lw.pw("elu", a["input"], alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


def c_leaky_relu(lw, a):
    return lw.pw("leaky_relu", a["input"], slope=float(a["negative_slope"]))


def c_hardtanh(lw, a):
    return lw.pw("clamp", a["input"], low=float(a["min_val"]), high=float(a["max_val"]))


def c_relu6(lw, a):
    return lw.pw("clamp", a["input"], low=0.0, high=6.0)


def c_clamp(lw, a):
    low, high, x = a.get("min"), a.get("max"), a["input"]
    if isinstance(low, Node) or isinstance(high, Node):     # tensor bounds: max/min with tensors
        if low is not None:
            x = lw.pw("maximum", x, low)
        return lw.pw("minimum", x, high) if high is not None else x
    return lw.pw("clamp", x, low=None if low is None else float(low),
                 high=None if high is None else float(high))


def binary(fn: str, spec: str = "input, other"):
    def convert(lw, a):
        other = a["other"]
        if a.get("alpha", 1) != 1:
            other = lw.pw("mul", other, a["alpha"])
        return lw.pw(fn, a["input"], other)
    return convert, spec


def c_div(lw, a):
    if a.get("rounding_mode") is not None:
        return None
    return lw.pw("div", a["input"], a["other"])


def c_pow(lw, a):
    return lw.pw("pow", a["input"], a["exponent"])


def c_max_min(kind: str):
    maxmin = {"max": "maximum", "min": "minimum"}[kind]

    def convert(lw, a):
        second = a["dim"]
        if (isinstance(second, Node) and second.is_tensor) or isinstance(second, float):
            return lw.pw(maxmin, a["input"], second)     # a float here was torch.tensor(c)
        if second is None:
            return lw.reduce(kind, a["input"], None, False)
        if not lw.only_first_item_used():      # the indices are wanted too: leave it to torch
            return None
        return (lw.reduce(kind, a["input"], second, a["keepdim"]), None)
    return convert, "input, dim=None, keepdim=False"


# --- reductions and normalisations --------------------------------------------------------------

def c_reduce(kind: str):
    def convert(lw, a):
        if a.get("dtype") not in (None, torch.float32):
            return None
        return lw.reduce(kind, a["input"], a["dim"], a["keepdim"])
    return convert, "input, dim=None, keepdim=False, dtype=None"


def c_var_std(kind: str):
    def convert(lw, args, kwargs):
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        correction = 1
        if len(args) > 2:
            correction = int(bool(args[2])) if isinstance(args[2], bool) else None
        if "unbiased" in kwargs:
            correction = int(bool(kwargs["unbiased"]))
        if "correction" in kwargs:
            correction = kwargs["correction"] if kwargs["correction"] is not None else 1
        keepdim = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
        if isinstance(dim, bool) or correction is None:
            return None
        base = lw.base_name()
        mean = lw.reduce("mean", x, dim, True, name=f"{base}_mean")
        centred = lw.pw("sub", x, mean, name=f"{base}_centred")
        var = lw.reduce("mean", lw.pw("mul", centred, centred, name=f"{base}_squared"), dim,
                        keepdim, correction=correction, name=f"{base}_var" if kind == "std" else base)
        return lw.pw("sqrt", var) if kind == "std" else var
    return convert


def c_softmax(log: bool):
    def convert(lw, a):
        if a.get("dtype") not in (None, torch.float32) or a["dim"] is None:
            return None
        x, base = a["input"], lw.base_name()
        row_max = lw.reduce("max", x, a["dim"], True, name=f"{base}_max")
        shifted = lw.pw("sub", x, row_max, name=f"{base}_shifted")
        exps = lw.pw("exp", shifted, name=f"{base}_exp")
        total = lw.reduce("sum", exps, a["dim"], True, name=f"{base}_sum")
        if log:
            return lw.pw("sub", shifted, lw.pw("log", total, name=f"{base}_log_sum"))
        return lw.pw("div", exps, total)
    return convert, "input, dim=None, _stacklevel=3, dtype=None"


def c_logsumexp(lw, a):
    x, base = a["input"], lw.base_name()
    row_max = lw.reduce("max", x, a["dim"], True, name=f"{base}_max")
    exps = lw.pw("exp", lw.pw("sub", x, row_max, name=f"{base}_shifted"), name=f"{base}_exp")
    total = lw.reduce("sum", exps, a["dim"], True, name=f"{base}_sum")
    out = lw.pw("add", lw.pw("log", total, name=f"{base}_log_sum"), row_max,
                name=base if a["keepdim"] else f"{base}_keep")
    if a["keepdim"]:
        return out
    dims = normalise_dims(a["dim"], len(x.shape))
    return lw.view(out, tuple(s for d, s in enumerate(out.shape) if d not in dims),
                   "{0}.squeeze(%r)" % (dims,), [out])


def normalise(lw, x, dims, eps, base: str, rms: bool = False):
    """(x - mean) * rsqrt(var + eps), or x * rsqrt(mean(x^2) + eps) for RMS norm."""
    if rms:
        mean_square = lw.reduce("mean", lw.pw("mul", x, x, name=f"{base}_squared"), dims, True,
                                name=f"{base}_mean_square")
        rstd = lw.pw("rsqrt", lw.pw("add", mean_square, eps, name=f"{base}_ms_eps"),
                     name=f"{base}_rstd")
        return lw.pw("mul", x, rstd, name=f"{base}_normed")
    mean = lw.reduce("mean", x, dims, True, name=f"{base}_mean")
    centred = lw.pw("sub", x, mean, name=f"{base}_centred")
    var = lw.reduce("mean", lw.pw("mul", centred, centred, name=f"{base}_squared"), dims, True,
                    name=f"{base}_var")
    rstd = lw.pw("rsqrt", lw.pw("add", var, eps, name=f"{base}_var_eps"), name=f"{base}_rstd")
    return lw.pw("mul", centred, rstd, name=f"{base}_normed")


def affine(lw, y, weight, bias, channel_view: bool = False):
    """y * weight + bias; per-channel vectors are viewed as [C, 1, 1, ...] to broadcast."""
    rank = len(y.shape)
    if weight is not None:
        if channel_view and rank > 2:
            weight = lw.channel_view(weight, rank)
        y = lw.pw("mul", y, weight, name=f"{lw.base_name()}_scaled" if bias is not None else None)
    if bias is not None:
        if channel_view and rank > 2:
            bias = lw.channel_view(bias, rank)
        y = lw.pw("add", y, bias)
    return y


def c_layer_norm(lw, a):
    x = a["input"]
    shape = a["normalized_shape"]
    count = 1 if isinstance(shape, int) else len(shape)
    dims = tuple(range(len(x.shape) - count, len(x.shape)))
    y = normalise(lw, x, dims, float(a["eps"]), lw.base_name())
    return affine(lw, y, a["weight"], a["bias"])


def c_rms_norm(lw, a):
    x = a["input"]
    shape = a["normalized_shape"]
    count = 1 if isinstance(shape, int) else len(shape)
    dims = tuple(range(len(x.shape) - count, len(x.shape)))
    eps = a["eps"] if a["eps"] is not None else torch.finfo(torch.float32).eps
    y = normalise(lw, x, dims, float(eps), lw.base_name(), rms=True)
    return affine(lw, y, a["weight"], None)


def c_group_norm(lw, a):
    x, groups, base = a["input"], int(a["num_groups"]), lw.base_name()
    n, rank = x.shape[0], len(x.shape)
    grouped = lw.view(x, (n, groups, math.prod(x.shape) // max(n * groups, 1)),
                      "{0}.reshape({0}.shape[0], %d, -1)" % groups, [x], name=f"{base}_grouped")
    y = normalise(lw, grouped, (2,), float(a["eps"]), base)
    y = lw.view(y, x.shape, "{0}.reshape({1}.shape)", [y, x], name=f"{base}_ungrouped")
    return affine(lw, y, a["weight"], a["bias"], channel_view=rank > 2)


def c_batch_norm(lw, a):
    x, rank, base = a["input"], len(a["input"].shape), lw.base_name()
    if a["training"]:
        dims = (0,) + tuple(range(2, rank))
        y = normalise(lw, x, dims, float(a["eps"]), base)
        lw.note("batch_norm in training mode: the kernel normalises with the batch statistics "
                "but does not update running_mean / running_var")
    else:   # x first, so the per-channel factors that follow fuse into the same kernel
        mean = lw.channel_view(a["running_mean"], rank) if rank > 2 else a["running_mean"]
        centred = lw.pw("sub", x, mean, name=f"{base}_centred")
        var = lw.channel_view(a["running_var"], rank) if rank > 2 else a["running_var"]
        rstd = lw.pw("rsqrt", lw.pw("add", var, float(a["eps"]), name=f"{base}_var_eps"),
                     name=f"{base}_rstd")
        y = lw.pw("mul", centred, rstd, name=f"{base}_normed")
    return affine(lw, y, a["weight"], a["bias"], channel_view=rank > 2)


def c_instance_norm(lw, a):
    x, rank = a["input"], len(a["input"].shape)
    if not a["use_input_stats"]:
        return None
    y = normalise(lw, x, tuple(range(2, rank)), float(a["eps"]), lw.base_name())
    return affine(lw, y, a["weight"], a["bias"], channel_view=rank > 2)


def c_normalize(lw, a):
    x, p, base = a["input"], a["p"], lw.base_name()
    if p not in (1, 1.0, 2, 2.0):
        return None
    if p in (2, 2.0):
        total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_squared"), a["dim"], True,
                          name=f"{base}_sum_squares")
        norm = lw.pw("sqrt", total, name=f"{base}_norm")
    else:
        norm = lw.reduce("sum", lw.pw("abs", x, name=f"{base}_abs"), a["dim"], True,
                         name=f"{base}_norm")
    denom = lw.pw("clamp", norm, low=float(a["eps"]), high=None, name=f"{base}_denom")
    return lw.pw("div", x, denom)


def c_norm(lw, a):
    x, p, base = a["input"], a["p"], lw.base_name()
    if p not in ("fro", 2, 2.0, None) or a.get("dtype") is not None:
        return None
    total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_squared"), a["dim"], a["keepdim"],
                      name=f"{base}_sum_squares")
    return lw.pw("sqrt", total)


def c_vector_norm(lw, a):
    x, order, base = a["input"], a["ord"], lw.base_name()
    if a.get("dtype") is not None:
        return None
    if order in (2, 2.0):
        total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_squared"), a["dim"],
                          a["keepdim"], name=f"{base}_sum_squares")
        return lw.pw("sqrt", total)
    if order in (1, 1.0):
        return lw.reduce("sum", lw.pw("abs", x, name=f"{base}_abs"), a["dim"], a["keepdim"])
    if order == float("inf"):
        return lw.reduce("max", lw.pw("abs", x, name=f"{base}_abs"), a["dim"], a["keepdim"])
    return None


def c_adaptive_avg_pool(lw, a):
    """Adaptive average pooling to a single value per channel is a mean over the spatial dims."""
    x, size = a["input"], a["output_size"]
    sizes = size if isinstance(size, (tuple, list)) else (size,)
    if any(s != 1 for s in sizes):
        return None
    rank = len(x.shape)
    spatial = rank - 2 if rank > 2 else 1
    return lw.reduce("mean", x, tuple(range(rank - spatial, rank)), True)


def c_arg_reduce(kind: str):
    """argmax / argmin: the first index where x equals its max (min), as torch returns."""
    def convert(lw, a):
        x, base = a["input"], lw.base_name()
        if a["dim"] is None:
            return None
        best = lw.reduce(kind, x, a["dim"], True, name=f"{base}_{kind}")
        hit = lw.pw("eq", x, best, name=f"{base}_is_{kind}")
        return lw.reduce("first_index", hit, a["dim"], a["keepdim"])
    return convert, "input, dim=None, keepdim=False"


def c_cumsum(lw, a):
    if a.get("dtype") not in (None, torch.float32):
        return None
    return lw.scan("sum", a["input"], a["dim"])


# --- products, identities -------------------------------------------------------------------------

def c_linear(lw, a):
    return lw.matmul("linear", a["input"], a["weight"], a["bias"])


def c_matmul(kind: str, spec: str = "input, other"):
    def convert(lw, a):
        return lw.matmul(kind, a["input"], a["other" if "other" in a else "mat2"], None)
    return convert, spec


def c_dropout(lw, a):
    if a["p"] == 0 or not a["training"]:
        return a["input"]
    return None


def c_identity(lw, a):
    return a["input"]


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
    "cumsum": (c_cumsum, "input, dim, dtype=None"),
    "linear": (c_linear, "input, weight, bias=None"),
    "matmul": c_matmul("matmul"), "mm": c_matmul("mm", "input, mat2"),
    "bmm": c_matmul("bmm", "input, mat2"),
    "dropout": (c_dropout, "input, p=0.5, training=True, inplace=False"),
    "contiguous": (c_identity, "input, memory_format=None"),
    "clone": (c_identity, "input, memory_format=None"),
    "detach": (c_identity, "input"),
})
# var/std have two calling conventions; they bind their own arguments.
RAW = {"var": c_var_std("var"), "std": c_var_std("std")}

OPERATORS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
             "neg": "neg", "matmul": "matmul"}


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
    return make() if make else None
