"""What every convolution writer shares: the conv in 3-d form, its story line, and the
launcher's first lines (the output size computed at run time as torch does)."""
from __future__ import annotations



def settings(node) -> dict:
    """The conv in 3-d form (leading 1s / 0s for the dims it does not have)."""
    p = node.attrs["params"]
    dims = p["dims"]
    pad = lambda t, fill: (fill,) * (3 - dims) + tuple(int(v) for v in t)
    weight, groups = p["shapes"][1], p["groups"]
    cig, cog = (weight[0] // groups, weight[1]) if p["transposed"] else \
        (weight[1], weight[0] // groups)
    return {"dims": dims, "transposed": p["transposed"], "groups": groups, "cig": cig,
            "cog": cog,
            "bias": p["bias"], "k": pad(p["shapes"][1][2:], 1), "s": pad(p["stride"], 1),
            "p": pad(p["padding"], 0), "d": pad(p["dilation"], 1),
            "op": pad(p["output_padding"], 0)}


def volume(w: dict) -> int:
    kd, kh, kw = w["k"]
    return kd * kh * kw


def kind(w: dict) -> str:
    """A name for the story: depthwise, pointwise, grouped or plain."""
    shape = "depthwise " if w["cig"] == 1 and w["groups"] > 1 else \
        "pointwise " if volume(w) == 1 else "grouped " if w["groups"] > 1 else ""
    return shape + ("transposed " if w["transposed"] else "") + f"{w['dims']}-d conv"


def what(w: dict, how: str) -> str:
    window = "x".join(str(k) for k in w["k"][3 - w["dims"]:]) + ("-tap" if w["dims"] == 1 else "")
    extra = [f"groups={w['groups']}"] if w["groups"] > 1 else []
    extra += [f"{name}={w[key][3 - w['dims']:]}" for key, name, plain in
              (("s", "stride", 1), ("p", "padding", 0), ("d", "dilation", 1))
              if any(v != plain for v in w[key])]
    return (f"{kind(w)} with a {window} kernel{' (' + ', '.join(extra) + ')' if extra else ''}"
            f"{' and bias' if w['bias'] else ''}: {how}")


def launcher_head(function: str, w: dict, name: str, how: str) -> list[str]:
    """The launcher's first lines: contiguous operands, the sizes as torch computes them, the
    output. Names the kernels take: N, CIN, COUT, D, H, W, OD, OH, OW, out."""
    bias = ", bias" if w["bias"] else ""
    lines = [f"def {function}(x, weight{bias}):",
             f'    """Runs {name}: {what(w, how)}."""',
             "    x, weight = x.contiguous(), weight.contiguous()"]
    if w["bias"]:
        lines.append("    bias = bias.contiguous()")
    dims = w["dims"]
    lines += [f"    dims = {dims}",
              "    N, CIN = x.shape[0], x.shape[1]",
              "    D, H, W = (1,) * (3 - dims) + tuple(x.shape[2:])",
              f"    COUT = weight.shape[1] * {w['groups']}" if w["transposed"] else
              "    COUT = weight.shape[0]",
              "    sizes = []",
              f"    for n, k, s, p, d, op in zip((D, H, W), {w['k']}, {w['s']}, {w['p']}, "
              f"{w['d']}, {w['op']}):",
              "        sizes.append((n - 1) * s - 2 * p + d * (k - 1) + op + 1)"
              if w["transposed"] else
              "        sizes.append((n + 2 * p - d * (k - 1) - 1) // s + 1)",
              "    OD, OH, OW = sizes",
              "    out = torch.empty((N, COUT) + tuple(sizes[3 - dims:]), dtype=x.dtype, "
              "device=x.device)"]
    return lines
