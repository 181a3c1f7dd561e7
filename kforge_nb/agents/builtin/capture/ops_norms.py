"""Normalisation converters for the builtin agent: layer / RMS / group / batch / instance norm
and F.normalize, built from mean and variance reductions, rsqrt, and the affine weight and bias.
"""
from __future__ import annotations

import math

import torch

from .ir import Node


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
    """Normalised and scaled in one view [N, G, C/G, spatial], so that the statistics, the
    normalisation and the per-channel affine are one fused group; viewed back at the end."""
    x, groups, base = a["input"], int(a["num_groups"]), lw.base_name()
    n, channels = x.shape[0], x.shape[1]
    per_group, spatial = channels // groups, math.prod(x.shape[2:])
    shape = (n, groups, per_group, spatial)
    grouped = lw.view(x, shape, "{0}.reshape({0}.shape[0], %d, %d, -1)" % (groups, per_group),
                      [x], name=f"{base}_grouped")
    y = normalise(lw, grouped, (2, 3), float(a["eps"]), base)

    def per_channel(vector):
        if not isinstance(vector, Node):
            return vector
        return lw.view(vector, (groups, per_group, 1), "{0}.view(%d, %d, 1)" % (groups, per_group),
                       [vector], name=f"{vector.name}_grouped")
    y = affine(lw, y, per_channel(a["weight"]), per_channel(a["bias"]))
    return lw.view(y, x.shape, "{0}.reshape({1}.shape)", [y, x], name=f"{base}_ungrouped")


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

