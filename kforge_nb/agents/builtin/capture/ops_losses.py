"""Loss converters for the builtin agent: MSE, L1, smooth L1 / Huber, KL divergence, cross
entropy and NLL, binary cross entropy, hinge embedding, cosine similarity and cosine embedding,
pairwise distance and the triplet margin loss.

Each is written the way ATen computes it (the same operations in the same order, so that the
kernel rounds as torch does), as pointwise and reduce nodes: the elementwise loss, then the
reduction the `reduction` argument asks for. Picking the target class's log-probability is a
mask: the class index along the class dim (`Lowerer.iota`) compared with the target.
"""
from __future__ import annotations

from .ir import Node
from .ops_reduce import c_softmax

LOSS = "input, target, size_average=None, reduce=None, reduction='mean'"


def legacy(a) -> bool:
    """size_average / reduce (deprecated spellings of `reduction`) or a weight: not lowered."""
    return a.get("size_average") is not None or a.get("reduce") is not None or \
        a.get("weight") is not None


def reduced(lw, loss: Node, reduction: str, per_row: bool = False):
    """The loss reduced as `reduction` asks; `per_row` for 'batchmean' (sum / batch size)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return lw.reduce("sum", loss, None, False)
    if reduction == "mean":
        return lw.reduce("mean", loss, None, False)
    if reduction == "batchmean" and per_row:
        if len(loss.shape) < 2:
            return lw.reduce("sum", loss, None, False)
        rows = lw.reduce("sum", loss, tuple(range(1, len(loss.shape))), False,
                         name=f"{lw.base_name()}_row_sum")
        return lw.reduce("mean", rows, None, False)
    return None


def difference(lw, a, base: str):
    return lw.pw("sub", a["input"], a["target"], name=f"{base}_diff")


def c_mse_loss(lw, a):
    if legacy(a):
        return None
    d = difference(lw, a, lw.base_name())
    return reduced(lw, lw.pw("mul", d, d, name=f"{lw.base_name()}_squared"), a["reduction"])


def c_l1_loss(lw, a):
    if legacy(a):
        return None
    d = difference(lw, a, lw.base_name())
    return reduced(lw, lw.pw("abs", d, name=f"{lw.base_name()}_abs"), a["reduction"])


def c_smooth_l1_loss(lw, a):
    """where(|d| < beta, 0.5 * d^2 / beta, |d| - 0.5 * beta); beta 0 is the L1 loss."""
    if legacy(a):
        return None
    beta, base = float(a["beta"]), lw.base_name()
    n = lw.pw("abs", difference(lw, a, base), name=f"{base}_abs")
    if beta == 0:
        return reduced(lw, n, a["reduction"])
    square = lw.pw("mul", lw.pw("mul", n, n, name=f"{base}_sq"), 0.5, name=f"{base}_half_sq")
    inside = lw.pw("div", square, beta, name=f"{base}_quadratic")
    outside = lw.pw("sub", n, 0.5 * beta, name=f"{base}_linear")
    close = lw.pw("lt", n, beta, name=f"{base}_close")
    return reduced(lw, lw.pw("where", close, inside, outside, name=base), a["reduction"])


def c_huber_loss(lw, a):
    """where(|d| < delta, 0.5 * d^2, delta * (|d| - 0.5 * delta))."""
    if legacy(a):
        return None
    delta, base = float(a["delta"]), lw.base_name()
    n = lw.pw("abs", difference(lw, a, base), name=f"{base}_abs")
    inside = lw.pw("mul", lw.pw("mul", n, n, name=f"{base}_sq"), 0.5, name=f"{base}_quadratic")
    outside = lw.pw("mul", lw.pw("sub", n, 0.5 * delta, name=f"{base}_excess"), delta,
                    name=f"{base}_linear")
    close = lw.pw("lt", n, delta, name=f"{base}_close")
    return reduced(lw, lw.pw("where", close, inside, outside, name=base), a["reduction"])


def c_kl_div(lw, a):
    """target * (log(target) - input), 0 where target is 0 (xlogy); exp(t) * (t - input)
    for a log target."""
    if legacy(a):
        return None
    x, t, base = a["input"], a["target"], lw.base_name()
    if a["log_target"]:
        loss = lw.pw("mul", lw.pw("exp", t, name=f"{base}_target"),
                     lw.pw("sub", t, x, name=f"{base}_gap"), name=base)
    else:
        t_log_t = lw.pw("mul", t, lw.pw("log", t, name=f"{base}_log_target"),
                        name=f"{base}_t_log_t")
        xlogy = lw.pw("where", lw.pw("eq", t, 0.0, name=f"{base}_zero"), 0.0, t_log_t,
                      name=f"{base}_xlogy")
        loss = lw.pw("sub", xlogy, lw.pw("mul", t, x, name=f"{base}_cross"), name=base)
    return reduced(lw, loss, a["reduction"], per_row=True)


def picked(lw, values: Node, target: Node, ignore_index, base: str):
    """(-values at the target class per position, 1 where the target is not ignored): the class
    dim is dim 1 (dim 0 for a single sample), the target has that dim removed."""
    rank = len(values.shape)
    dim = 1 if rank > 1 else 0
    if not isinstance(target, Node) or target.dtype is None or target.dtype.is_floating_point:
        return None
    expected = tuple(s for d, s in enumerate(values.shape) if d != dim)
    if tuple(target.shape) != expected:
        return None
    classes = lw.iota(values, dim, rank)
    t = lw.as_float(target, name=f"{base}_target")
    column = lw.view(t, expected[:dim] + (1,) + expected[dim:], "{0}.unsqueeze(%d)" % dim, [t],
                     name=f"{base}_target_column")
    hit = lw.pw("eq", classes, column, name=f"{base}_hit")
    chosen = lw.reduce("sum", lw.pw("where", hit, values, 0.0, name=f"{base}_chosen"), dim,
                       False, name=f"{base}_picked")
    valid = lw.pw("ne", t, float(ignore_index), name=f"{base}_valid")
    return lw.pw("where", valid, lw.pw("neg", chosen, name=f"{base}_nll"), 0.0,
                 name=f"{base}_loss"), valid


def nll_reduced(lw, loss: Node, valid: Node, reduction: str, base: str):
    """'mean' divides by the number of targets not ignored, as torch does."""
    if reduction != "mean":
        return reduced(lw, loss, reduction)
    total = lw.reduce("sum", loss, None, False, name=f"{base}_total")
    count = lw.reduce("sum", valid, None, False, name=f"{base}_count")
    return lw.pw("div", total, count, name=base)


def c_nll_loss(lw, a):
    if legacy(a):
        return None
    base = lw.base_name()
    found = picked(lw, a["input"], a["target"], a["ignore_index"], base)
    return nll_reduced(lw, *found, a["reduction"], base) if found else None


def c_cross_entropy(lw, a):
    """log_softmax over the class dim, then the NLL loss (class indices) or the cross entropy
    with class probabilities (a float target of the input's shape)."""
    if legacy(a) or a["label_smoothing"] != 0:
        return None
    x, t, base = a["input"], a["target"], lw.base_name()
    dim = 1 if len(x.shape) > 1 else 0
    logp = c_softmax(True)[0](lw, {"input": x, "dim": dim, "dtype": None})
    if isinstance(t, Node) and t.dtype is not None and t.dtype.is_floating_point:
        if tuple(t.shape) != tuple(x.shape):
            return None
        products = lw.pw("mul", logp, t, name=f"{base}_weighted")
        per_sample = lw.pw("neg", lw.reduce("sum", products, dim, False, name=f"{base}_sum"),
                           name=f"{base}_per_sample")
        if a["reduction"] == "mean" and len(x.shape) > 1:
            return lw.reduce("mean", per_sample, None, False)
        return reduced(lw, per_sample, a["reduction"])
    found = picked(lw, logp, t, a["ignore_index"], base)
    return nll_reduced(lw, *found, a["reduction"], base) if found else None


def c_binary_cross_entropy(lw, a):
    """(t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)."""
    if legacy(a):
        return None
    x, t, base = a["input"], a["target"], lw.base_name()
    log_x = lw.pw("clamp", lw.pw("log", x, name=f"{base}_log"), low=-100.0, high=None,
                  name=f"{base}_log_clamped")
    log_rest = lw.pw("clamp", lw.pw("log1p", lw.pw("neg", x, name=f"{base}_neg"),
                                    name=f"{base}_log_rest"), low=-100.0, high=None,
                     name=f"{base}_log_rest_clamped")
    first = lw.pw("mul", lw.pw("sub", t, 1.0, name=f"{base}_t_minus_1"), log_rest,
                  name=f"{base}_negatives")
    loss = lw.pw("sub", first, lw.pw("mul", t, log_x, name=f"{base}_positives"), name=base)
    return reduced(lw, loss, a["reduction"])


def c_hinge_embedding_loss(lw, a):
    """where(t == 1, x, 0) + where(t == -1, max(margin - x, 0), 0)."""
    if legacy(a):
        return None
    x, t, base = a["input"], a["target"], lw.base_name()
    margin = lw.pw("clamp", lw.pw("sub", float(a["margin"]), x, name=f"{base}_gap"), low=0.0,
                   high=None, name=f"{base}_hinge")
    positive = lw.pw("where", lw.pw("eq", t, 1.0, name=f"{base}_is_pos"), x, 0.0,
                     name=f"{base}_pos")
    negative = lw.pw("where", lw.pw("eq", t, -1.0, name=f"{base}_is_neg"), margin, 0.0,
                     name=f"{base}_neg")
    return reduced(lw, lw.pw("add", positive, negative, name=base), a["reduction"])


def distance(lw, x1, x2, p, eps, keepdim: bool, base: str):
    """torch.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    if p not in (1, 1.0, 2, 2.0):
        return None
    diff = lw.pw("add", lw.pw("sub", x1, x2, name=f"{base}_diff"), float(eps),
                 name=f"{base}_diff_eps")
    rank = max(len(x1.shape), len(x2.shape))
    if p in (1, 1.0):
        return lw.reduce("sum", lw.pw("abs", diff, name=f"{base}_abs"), rank - 1, keepdim)
    total = lw.reduce("sum", lw.pw("mul", diff, diff, name=f"{base}_sq"), rank - 1, keepdim,
                      name=f"{base}_sum_sq")
    return lw.pw("sqrt", total, name=base)


def c_pairwise_distance(lw, a):
    return distance(lw, a["x1"], a["x2"], a["p"], a["eps"], a["keepdim"], lw.base_name())


def c_triplet_margin_loss(lw, a):
    """max(margin + d(anchor, positive) - d(anchor, negative), 0), d the pairwise distance."""
    if a["size_average"] is not None or a["reduce"] is not None:
        return None
    base = lw.base_name()
    anchor, p, eps = a["anchor"], a["p"], a["eps"]
    positive = distance(lw, anchor, a["positive"], p, eps, False, f"{base}_pos")
    negative = distance(lw, anchor, a["negative"], p, eps, False, f"{base}_neg")
    if positive is None:
        return None
    if a["swap"]:
        swap = distance(lw, a["positive"], a["negative"], p, eps, False, f"{base}_swap")
        negative = lw.pw("minimum", negative, swap, name=f"{base}_neg_min")
    gap = lw.pw("sub", lw.pw("add", positive, float(a["margin"]), name=f"{base}_margin"),
                negative, name=f"{base}_gap")
    loss = lw.pw("clamp", gap, low=0.0, high=None, name=base)
    return reduced(lw, loss, a["reduction"])


def c_cosine_similarity(lw, a):
    """sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps))) over dim, as ATen computes it."""
    x1, x2, dim, eps, base = a["x1"], a["x2"], a["dim"], float(a["eps"]), lw.base_name()
    if tuple(x1.shape) != tuple(x2.shape):
        return None

    def unit(x, tag):
        total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_{tag}_sq"), dim, True,
                          name=f"{base}_{tag}_sum_sq")
        norm = lw.pw("clamp", lw.pw("sqrt", total, name=f"{base}_{tag}_norm"), low=eps,
                     high=None, name=f"{base}_{tag}_norm_eps")
        return lw.pw("div", x, norm, name=f"{base}_{tag}_unit")
    product = lw.pw("mul", unit(x1, "a"), unit(x2, "b"), name=f"{base}_product")
    return lw.reduce("sum", product, dim, False)


def c_cosine_embedding_loss(lw, a):
    """cos = x1.x2 / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)) over the last dim; the loss is
    1 - cos where the target is 1, max(cos - margin, 0) where it is -1."""
    if a["size_average"] is not None or a["reduce"] is not None:
        return None
    x1, x2, t, base = a["input1"], a["input2"], a["target"], lw.base_name()
    dim = len(x1.shape) - 1
    dot = lw.reduce("sum", lw.pw("mul", x1, x2, name=f"{base}_x1x2"), dim, False,
                    name=f"{base}_dot")
    squares = [lw.pw("add", lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_{k}_sq"), dim,
                                      False, name=f"{base}_{k}_sum_sq"), 1e-12,
                     name=f"{base}_{k}_mag") for k, x in (("a", x1), ("b", x2))]
    denom = lw.pw("sqrt", lw.pw("mul", *squares, name=f"{base}_mags"), name=f"{base}_denom")
    cos = lw.pw("div", dot, denom, name=f"{base}_cos")
    t = lw.as_float(t, name=f"{base}_target")
    positive = lw.pw("where", lw.pw("eq", t, 1.0, name=f"{base}_is_pos"),
                     lw.pw("sub", 1.0, cos, name=f"{base}_pos_loss"), 0.0, name=f"{base}_pos")
    hinge = lw.pw("clamp", lw.pw("sub", cos, float(a["margin"]), name=f"{base}_excess"),
                  low=0.0, high=None, name=f"{base}_neg_loss")
    negative = lw.pw("where", lw.pw("eq", t, -1.0, name=f"{base}_is_neg"), hinge, 0.0,
                     name=f"{base}_neg")
    return reduced(lw, lw.pw("add", positive, negative, name=base), a["reduction"])


# nn loss modules: the functional op each calls, and the module attributes it passes on
MODULES = {
    "MSELoss": ("mse_loss", ()), "L1Loss": ("l1_loss", ()),
    "SmoothL1Loss": ("smooth_l1_loss", ("beta",)), "HuberLoss": ("huber_loss", ("delta",)),
    "KLDivLoss": ("kl_div", ("log_target",)),
    "CrossEntropyLoss": ("cross_entropy", ("ignore_index", "label_smoothing", "weight")),
    "NLLLoss": ("nll_loss", ("ignore_index", "weight")),
    "BCELoss": ("binary_cross_entropy", ("weight",)),
    "HingeEmbeddingLoss": ("hinge_embedding_loss", ("margin",)),
    "CosineEmbeddingLoss": ("cosine_embedding_loss", ("margin",)),
    "TripletMarginLoss": ("triplet_margin_loss", ("margin", "p", "eps", "swap")),
    "PairwiseDistance": ("pairwise_distance", ("norm", "eps", "keepdim")),
    "CosineSimilarity": ("cosine_similarity", ("dim", "eps")),
}


def loss_module(module, lw, functions: dict):
    """(converter, bound args) for an nn loss module's call, or None: the call's own
    arguments (all of them: a loss takes several) and the module's settings."""
    from .binding import bind
    entry = MODULES.get(type(module).__name__)
    if entry is None or lw.fx is None:
        return None
    name, settings = entry
    convert, spec = functions[name]
    bound = bind(lw.map(lw.fx.args), lw.map(lw.fx.kwargs), spec)
    for attr in settings:
        value = getattr(module, attr)
        bound["p" if attr == "norm" else attr] = value
    if hasattr(module, "reduction"):
        bound["reduction"] = module.reduction
    return convert, bound
