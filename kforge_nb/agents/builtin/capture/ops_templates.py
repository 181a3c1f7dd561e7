"""Ops the builtin agent writes as one whole kernel from a template: convolutions, pooling,
attention. Each becomes a `template` node (ir.py) whose `fn` names the family and whose
`attrs["params"]` hold everything the kernel needs that is not a tensor (strides, padding,
groups, ...); the tensors are the node's args. `attrs["vendor"]` is the torch call that
computes the same thing, written into ModelNew.forward when the candidate keeps the vendor's
kernel instead (templates/ says when).

A converter returns None for a call it does not cover (padding_mode="reflect", return_indices,
an attention mask); the op then stays a kept torch call, as before.
"""
from __future__ import annotations

import torch

from .fx_source import torch_calls
from .ir import FLOAT, Node


def _tuple(value, n: int) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value) if len(value) == n else tuple(int(value[0])
                                                                          for _ in range(n))
    return (int(value),) * n


def _names(call, values: list, kwargs: dict) -> list[str]:
    """The torch functions `call` dispatches: the guardrails allow them in a vendor forward."""
    seen = torch_calls(lambda: call(*values, **kwargs))
    return sorted({n for n in seen if n and not n.startswith("_")})


def _template(lw, family: str, tensors: list, params: dict, call, call_name: str,
              kwargs: dict) -> Node | None:
    """Add the template node; None when an operand is not a float32 tensor node. A module's
    call (`self.conv(x)`) stays that call where the vendor's kernel is kept."""
    out = lw.values.get(lw.fx)
    if not isinstance(out, torch.Tensor) or out.dtype != FLOAT:
        return None
    if any(t is not None and (not isinstance(t, Node) or t.dtype != FLOAT) for t in tensors):
        return None
    args = tuple(t for t in tensors if t is not None)
    values = [torch.empty(t.shape, device="meta") if t is not None else None for t in tensors]
    refs = ", ".join("{%d}" % args.index(t) if t is not None else "None" for t in tensors)
    extra = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    vendor = f"F.{call_name}({refs}{', ' + extra if extra else ''})"
    label = lw.label()
    if lw.fx.op == "call_module":
        vendor, label = f"self.{lw.fx.target}({{0}})", f"{label} (self.{lw.fx.target})"
    allow = ",".join(_names(call, values, kwargs))
    params = {**params, "shapes": [tuple(t.shape) for t in args]}
    return lw.add(Node(lw.fresh(lw.base_name()), "template", family, args,
                       {"params": params, "vendor": vendor, "allow": allow or call_name,
                        "label": label, "call": call_name}, tuple(out.shape), FLOAT,
                       lw.label()))


# -- convolutions -------------------------------------------------------------------------------
def conv(lw, x, weight, bias, dims: int, transposed: bool, stride, padding, dilation, groups,
         output_padding=0, padding_mode: str = "zeros"):
    if padding_mode != "zeros" or not isinstance(x, Node) or x.shape is None or \
            len(x.shape) != dims + 2:
        return None                      # unbatched input or a padding mode: stays in torch
    if isinstance(padding, str):
        if transposed or padding not in ("valid", "same") or \
                (padding == "same" and any(s != 1 for s in _tuple(stride, dims))):
            return None
        k = weight.shape[2:]
        d = _tuple(dilation, dims)
        if padding == "same" and any((d[i] * (k[i] - 1)) % 2 for i in range(dims)):
            return None                  # 'same' with uneven padding: torch pads one side more
        padding = (0,) * dims if padding == "valid" else tuple(d[i] * (k[i] - 1) // 2
                                                               for i in range(dims))
    params = {"dims": dims, "transposed": transposed, "stride": _tuple(stride, dims),
              "padding": _tuple(padding, dims), "dilation": _tuple(dilation, dims),
              "groups": int(groups), "output_padding": _tuple(output_padding, dims),
              "bias": bias is not None}
    kwargs = {"stride": params["stride"], "padding": params["padding"]}
    if transposed:
        kwargs["output_padding"] = params["output_padding"]
    kwargs.update({"groups": params["groups"], "dilation": params["dilation"]})
    name = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
    return _template(lw, "conv", [x, weight, bias], params, getattr(torch.nn.functional, name),
                     name, kwargs)


def c_conv(dims: int, transposed: bool):
    def convert(lw, a):
        return conv(lw, a["input"], a["weight"], a["bias"], dims, transposed, a["stride"],
                    a["padding"], a["dilation"], a["groups"], a.get("output_padding", 0))
    spec = ("input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, "
            "dilation=1") if transposed else \
        "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"
    return convert, spec


# -- pooling ------------------------------------------------------------------------------------
def pool(lw, x, kind: str, dims: int, kernel_size, stride, padding, dilation=1,
         ceil_mode=False, count_include_pad=True, divisor_override=None, return_indices=False):
    if return_indices or not isinstance(x, Node) or x.shape is None or \
            len(x.shape) not in (dims + 1, dims + 2):
        return None
    k = _tuple(kernel_size, dims)
    s = _tuple(stride if stride not in (None, [], ()) else kernel_size, dims)
    params = {"kind": kind, "dims": dims, "kernel": k, "stride": s,
              "padding": _tuple(padding, dims), "dilation": _tuple(dilation, dims),
              "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad),
              "divisor_override": divisor_override}
    kwargs = {"kernel_size": k, "stride": s, "padding": params["padding"],
              "ceil_mode": params["ceil_mode"]}
    if kind == "max":
        kwargs["dilation"] = params["dilation"]
    else:
        if params["dilation"] != (1,) * dims:
            return None
        kwargs["count_include_pad"] = params["count_include_pad"]
        if dims > 1:
            kwargs["divisor_override"] = divisor_override
        elif divisor_override is not None:
            return None
    name = f"{kind}_pool{dims}d"
    return _template(lw, "pool", [x], params, getattr(torch.nn.functional, name), name, kwargs)


def c_pool(kind: str, dims: int):
    def convert(lw, a):
        return pool(lw, a["input"], kind, dims, a["kernel_size"], a["stride"], a["padding"],
                    a.get("dilation", 1), a["ceil_mode"], a.get("count_include_pad", True),
                    a.get("divisor_override"), a.get("return_indices", False))
    spec = ("input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, "
            "return_indices=False") if kind == "max" else \
        ("input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True"
         + (", divisor_override=None" if dims > 1 else ""))
    return convert, spec


# -- attention ----------------------------------------------------------------------------------
def c_attention(lw, a):
    q, k, v = a["query"], a["key"], a["value"]
    if a["attn_mask"] is not None or a["dropout_p"] not in (0, 0.0) or a["enable_gqa"] or \
            not all(isinstance(t, Node) and t.shape is not None and len(t.shape) >= 2
                    for t in (q, k, v)) or q.shape[:-2] != k.shape[:-2] or \
            k.shape[:-1] != v.shape[:-1]:
        return None
    params = {"causal": bool(a["is_causal"]), "scale": a["scale"]}
    kwargs = {"is_causal": params["causal"], "scale": a["scale"]}
    return _template(lw, "attention", [q, k, v], params,
                     torch.nn.functional.scaled_dot_product_attention,
                     "scaled_dot_product_attention", kwargs)


FUNCTIONS = {
    **{f"conv{d}d": c_conv(d, False) for d in (1, 2, 3)},
    **{f"conv_transpose{d}d": c_conv(d, True) for d in (1, 2, 3)},
    **{f"max_pool{d}d": c_pool("max", d) for d in (1, 2, 3)},
    **{f"avg_pool{d}d": c_pool("avg", d) for d in (1, 2, 3)},
    "scaled_dot_product_attention": (c_attention, "query, key, value, attn_mask=None, "
                                                  "dropout_p=0.0, is_causal=False, scale=None, "
                                                  "enable_gqa=False"),
}


def module_call(module: torch.nn.Module, path: str, x, lw):
    """The template node for a conv / pool module call, or None (not a template op)."""
    nn = torch.nn
    p = lambda name: lw.param(f"{path}.{name}") if getattr(module, name, None) is not None \
        else None
    for dims, (c, ct, mp, ap) in enumerate(((nn.Conv1d, nn.ConvTranspose1d, nn.MaxPool1d,
                                             nn.AvgPool1d),
                                            (nn.Conv2d, nn.ConvTranspose2d, nn.MaxPool2d,
                                             nn.AvgPool2d),
                                            (nn.Conv3d, nn.ConvTranspose3d, nn.MaxPool3d,
                                             nn.AvgPool3d)), start=1):
        kind = type(module)
        if kind in (c, ct):
            return conv(lw, x, p("weight"), p("bias"), dims, kind is ct, module.stride,
                        module.padding, module.dilation, module.groups,
                        getattr(module, "output_padding", 0), module.padding_mode)
        if kind is mp:
            return pool(lw, x, "max", dims, module.kernel_size, module.stride, module.padding,
                        module.dilation, module.ceil_mode, return_indices=module.return_indices)
        if kind is ap:
            return pool(lw, x, "avg", dims, module.kernel_size, module.stride, module.padding,
                        1, module.ceil_mode, module.count_include_pad,
                        getattr(module, "divisor_override", None))
    return None
