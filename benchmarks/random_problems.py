"""A seeded generator of random problems in KernelBench form, to measure generalisation.

    python benchmarks/random_problems.py OUT_DIR --seed 20261124 --count 50 [--scale cpu|gpu]

Each problem is one file (`Model`, `get_inputs()`, `get_init_inputs()`), built from an optional
GEMM head (nn.Linear or a matmul with a weight), a chain of the pointwise ops the builtin
agent's capture knows, and an optional tail (a norm, a softmax, a reduction). Shapes are drawn
from round, odd and tiny sizes. The agent never imports this file: a draw with a seed nobody
tuned on is a fair test of the agent on problems it has not seen.

`--scale cpu` keeps eager at about a millisecond to a few tens of milliseconds on a small CPU;
`--scale gpu` draws sizes of KernelBench's order (tens of millions of elements).
"""
from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from pathlib import Path

# (name, line of forward) for ops that keep the shape. `{x}` is the running value.
POINTWISE = [
    ("relu", "torch.relu({x})"),
    ("sigmoid", "torch.sigmoid({x})"),
    ("tanh", "torch.tanh({x})"),
    ("gelu", "F.gelu({x})"),
    ("gelu_tanh", "F.gelu({x}, approximate='tanh')"),
    ("silu", "F.silu({x})"),
    ("mish", "F.mish({x})"),
    ("softplus", "F.softplus({x})"),
    ("elu", "F.elu({x}, alpha={a})"),
    ("selu", "torch.selu({x})"),
    ("leaky_relu", "F.leaky_relu({x}, negative_slope={s})"),
    ("hardtanh", "F.hardtanh({x}, min_val=-{h}, max_val={h})"),
    ("hardswish", "F.hardswish({x})"),
    ("hardsigmoid", "F.hardsigmoid({x})"),
    ("clamp", "torch.clamp({x}, min=-{h}, max={h})"),
    ("scale", "{x} * {c}"),
    ("shift", "{x} + {c}"),
    ("divide", "{x} / {c}"),
    ("square", "{x} * {x}"),
    ("pow", "torch.pow({x}, {p})"),
    ("exp_neg", "torch.exp(-torch.abs({x}))"),
    ("log_abs", "torch.log(torch.abs({x}) + 1.0)"),
    ("erf", "torch.erf({x})"),
    ("bias", "{x} + self.bias"),
    ("residual", "{x} + {first}"),
]
# tails: (name, needs 4-D input, forward line); they may change the shape, so they end a chain
TAILS = ["softmax", "log_softmax", "logsumexp", "sum", "mean", "max", "layer_norm", "rms_norm",
         "group_norm", "l2_normalize", "none"]


@dataclass
class Spec:
    index: int
    seed: int
    rng: random.Random
    shape: list[int] = field(default_factory=list)
    head: str = "none"
    ops: list[str] = field(default_factory=list)
    tail: str = "none"
    init: list[str] = field(default_factory=list)        # __init__ body lines
    forward: list[str] = field(default_factory=list)
    globals: dict = field(default_factory=dict)          # module-level sizes


def pick_size(rng: random.Random, kind: str, scale: str) -> int:
    """A dimension: round (1024), odd (1000, 4097) or tiny (1, 3, 17)."""
    big = scale == "gpu"
    if kind == "tiny":
        return rng.choice([1, 2, 3, 5, 7, 17, 31])
    if kind == "odd":
        return rng.choice([97, 255, 1000, 1531, 4097] + ([12289, 30001] if big else []))
    return rng.choice([128, 256, 512, 1024, 2048] + ([4096, 8192, 16384] if big else []))


def row_shape(rng: random.Random, scale: str) -> list[int]:
    """(rows, features) with rows * features inside the scale's element budget."""
    budget = 2 ** 26 if scale == "gpu" else 2 ** 21
    kinds = rng.choices(["round", "odd", "tiny"], weights=[5, 3, 1], k=2)
    rows, cols = (pick_size(rng, k, scale) for k in kinds)
    if rng.random() < 0.4:       # fill the budget: many rows
        rows = max(rows, budget // max(cols, 1) // rng.choice([1, 2, 4, 8]))
    while rows * cols > budget:
        rows = max(1, rows // 2)
    return [rows, cols]


def image_shape(rng: random.Random, scale: str) -> list[int]:
    """(N, C, H, W) with C divisible by the group count drawn later (a multiple of 8)."""
    n = rng.choice([1, 2, 8, 16, 32] + ([64, 128] if scale == "gpu" else []))
    c = rng.choice([8, 16, 32, 64, 128])
    hw = rng.choice([7, 8, 14, 16, 31, 32] + ([64, 128] if scale == "gpu" else []))
    budget = 2 ** 26 if scale == "gpu" else 2 ** 21
    while n * c * hw * hw > budget and n > 1:
        n //= 2
    return [n, c, hw, hw]


def constant(rng: random.Random) -> str:
    return repr(round(rng.choice([0.5, 2.0, 1.5, 0.1, 3.0, -0.7]) * rng.choice([1, 1, 0.5]), 3))


def draw(seed: int, index: int, scale: str) -> Spec:
    rng = random.Random(f"{seed}-{index}")
    spec = Spec(index, seed, rng)
    tail = rng.choices(TAILS, weights=[3, 2, 2, 2, 2, 1, 3, 2, 3, 1, 3])[0]
    image = tail == "group_norm" and rng.random() < 0.6
    spec.head = "none" if image else rng.choices(["none", "linear", "matmul"], [5, 3, 1])[0]
    if image:
        spec.shape = image_shape(rng, scale)
        spec.globals["shape"] = spec.shape
        features = spec.shape[1]
    else:
        rows, cols = row_shape(rng, scale)
        if spec.head != "none":
            # a GEMM head: rows x in_features @ in_features x out_features
            rows = min(rows, 8192 if scale == "gpu" else 512)
            spec.globals["in_features"] = rng.choice([64, 256, 512, 1000] +
                                                     ([2048, 4096] if scale == "gpu" else []))
            cols = min(cols, 8192 if scale == "gpu" else 2048)
            if tail == "group_norm":
                cols = max(8, cols // 8 * 8)
            spec.globals["out_features"] = cols
        elif tail == "group_norm":
            cols = max(8, cols // 8 * 8)
        spec.shape = [rows, cols]
        spec.globals["shape"] = spec.shape if spec.head == "none" else \
            [rows, spec.globals["in_features"]]
        features = cols
    x = "x"
    if spec.head == "linear":
        spec.init.append("self.linear = nn.Linear(in_features, out_features)")
        spec.forward.append("x = self.linear(x)")
    elif spec.head == "matmul":
        spec.init.append("self.weight = nn.Parameter(torch.randn(in_features, out_features) "
                         "/ in_features ** 0.5)")
        spec.forward.append("x = torch.matmul(x, self.weight)")
    spec.forward.append("first = x")
    chain = rng.randint(0 if tail != "none" else 1, 4)
    for _ in range(chain):
        name, line = rng.choice(POINTWISE)
        if name == "bias":
            shape = [features] if not image else [features, 1, 1]
            if "self.bias" not in "".join(spec.init):
                spec.init.append(f"self.bias = nn.Parameter(torch.randn({', '.join(map(str, shape))}) * 0.1)")
        text = line.format(x=x, a=rng.choice([1.0, 0.5]), s=rng.choice([0.01, 0.2]),
                           h=rng.choice([1.0, 2.0, 0.5]), c=constant(rng),
                           p=rng.choice([2, 3, 0.5]) if name == "pow" else 2, first="first")
        if name == "pow" and "0.5" in text:
            text = text.replace(f"torch.pow({x},", f"torch.pow(torch.abs({x}),")
        spec.ops.append(name)
        spec.forward.append(f"x = {text}")
    spec.tail = tail
    spec.forward += tail_lines(spec, tail, features, image)
    spec.forward.append("return x")
    return spec


def tail_lines(spec: Spec, tail: str, features: int, image: bool) -> list[str]:
    rng = spec.rng
    if tail == "softmax":
        return ["x = torch.softmax(x, dim=-1)"]
    if tail == "log_softmax":
        return ["x = F.log_softmax(x, dim=-1)"]
    if tail == "logsumexp":
        return [f"x = torch.logsumexp(x, dim=-1, keepdim={rng.choice([True, False])})"]
    if tail in ("sum", "mean"):
        return [f"x = torch.{tail}(x, dim=-1, keepdim={rng.choice([True, False])})"]
    if tail == "max":
        return ["x = torch.max(x, dim=-1).values"]
    if tail == "layer_norm":
        spec.init.append(f"self.norm = nn.LayerNorm({features})")
        return ["x = self.norm(x)"]
    if tail == "rms_norm":
        spec.init.append(f"self.norm_weight = nn.Parameter(torch.ones({features}))")
        return ["x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) "
                "* self.norm_weight"]
    if tail == "group_norm":
        groups = rng.choice([g for g in (1, 2, 4, 8) if features % g == 0])
        spec.init.append(f"self.norm = nn.GroupNorm({groups}, {features})")
        return ["x = self.norm(x)"]
    if tail == "l2_normalize":
        return ["x = F.normalize(x, p=2.0, dim=-1)"]
    return []


def source(spec: Spec, scale: str) -> str:
    head = "" if spec.head == "none" else f"{spec.head} head, "
    story = f"{head}{', '.join(spec.ops) or 'no pointwise ops'}, tail: {spec.tail}"
    args = ["in_features", "out_features"] if spec.head != "none" else []
    lines = [f'"""Random problem {spec.index} (seed {spec.seed}, {scale} scale): {story}."""',
             "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", "",
             "class Model(nn.Module):",
             f"    def __init__(self{''.join(', ' + a for a in args)}):",
             "        super().__init__()"]
    lines += ["        " + l for l in spec.init]
    lines += ["", "    def forward(self, x):"]
    lines += ["        " + l for l in spec.forward]
    lines += ["", ""]
    for name in args:
        lines.append(f"{name} = {spec.globals[name]}")
    lines.append(f"shape = {tuple(spec.globals['shape'])}")
    lines += ["", "", "def get_inputs():", "    return [torch.randn(*shape)]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(args)}]", ""]
    return "\n".join(lines)


def write_draw(out: Path, seed: int, count: int, scale: str = "cpu") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        spec = draw(seed, index, scale)
        path = out / f"r{seed}_{index:03d}_{spec.tail}.py"
        path.write_text(source(spec, scale))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--scale", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    for path in write_draw(Path(args.out), args.seed, args.count, args.scale):
        print(path)


if __name__ == "__main__":
    main()
