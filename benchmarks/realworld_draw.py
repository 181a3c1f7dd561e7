"""Seeded real-world-like modules, never tuned on: each one a random chain of the op families of
benchmarks/realworld/ (norms, residual adds, gated and biased activations, linears, rotary
embedding, per-token quantisation, soft caps, softmax, top-k masks), with random sizes, dtype,
ops and order, written as a KernelBench problem file (`Model`, `get_inputs`, `get_init_inputs`,
the sizes divided by KFORGE_REALWORLD_SHRINK like the fixed set's).

    python benchmarks/realworld_draw.py --seed 7 --count 6 --out /tmp/drawn

The same seed writes the same files; the seed is printed (and, with no --seed, drawn).
"""
from __future__ import annotations

import argparse
import random
import secrets
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

DTYPES = ("bfloat16", "bfloat16", "float16", "float32")     # bf16 most, as served
MOST_SHRUNK = 16               # sizes stay whole down to KFORGE_REALWORLD_SHRINK=16


@dataclass
class Source:
    """What a drawn module's file is made of, filled in op by op."""
    width: int                       # the current last dimension of h, at serving size
    init: list[str] = field(default_factory=list)
    forward: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=lambda: ["x"])
    names: list[str] = field(default_factory=list)
    width_expr: str = "hidden"       # the current width, in __init__'s arguments


# Each op appends to `Source`; `k` numbers its parameters so two of a kind do not clash.
def rmsnorm(s: Source, r: random.Random, k: int) -> None:
    s.init.append(f"self.norm{k} = nn.Parameter(1 + 0.1 * torch.randn({s.width_expr}))")
    s.forward += ["f = h.float()",
                  "f = f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-6)",
                  f"h = (f * self.norm{k}).to(h.dtype)"]
    s.names.append("rmsnorm")


def residual_add(s: Source, r: random.Random, k: int) -> None:
    if s.width_expr != "hidden":         # the residual has the input's width
        return
    s.inputs.append(f"residual{k}")
    s.forward.append(f"h = h + residual{k}")
    s.names.append("add")


def gated(s: Source, r: random.Random, k: int) -> None:
    if s.width % (2 * MOST_SHRUNK):
        return
    act = r.choice(["F.silu(a)", "F.gelu(a, approximate='tanh')", "F.gelu(a)"])
    s.forward += ["a, b = h.chunk(2, dim=-1)", f"h = {act} * b"]
    s.width //= 2
    s.width_expr = f"({s.width_expr}) // 2"
    s.names.append(act.split("(")[0].replace("F.", "") + "-gate")


def bias_act(s: Source, r: random.Random, k: int) -> None:
    act = r.choice(["F.gelu", "F.silu", "torch.relu", "torch.tanh"])
    s.init.append(f"self.bias{k} = nn.Parameter(0.1 * torch.randn({s.width_expr}))")
    s.forward.append(f"h = {act}(h + self.bias{k}.to(h.dtype))")
    s.names.append("bias-" + act.split(".")[-1])


def linear(s: Source, r: random.Random, k: int) -> None:
    out = r.choice([1024, 2048, 4096, 8192])
    bias = r.random() < 0.5
    s.init.append(f"self.linear{k} = nn.Linear({s.width_expr}, {out} // shrink, bias={bias})")
    s.forward.append(f"h = self.linear{k}(h.to(self.linear{k}.weight.dtype)).to(h.dtype)")
    s.width, s.width_expr = out, f"{out} // shrink"
    s.names.append("linear" + ("+bias" if bias else ""))


def rope(s: Source, r: random.Random, k: int) -> None:
    if s.width % (64 * MOST_SHRUNK) or "positions" in s.inputs:     # whole 64-wide heads
        return
    s.inputs.append("positions")
    s.init += ["inv = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)",
               "angles = torch.outer(torch.arange(max_position).float(), inv)",
               f"self.register_buffer('cos{k}', angles.cos())",
               f"self.register_buffer('sin{k}', angles.sin())"]
    s.forward += [f"cos, sin = self.cos{k}[positions].unsqueeze(1), "
                  f"self.sin{k}[positions].unsqueeze(1)",
                  "g = h.view(h.shape[0], -1, 64).float()"]
    if r.random() < 0.5:
        s.forward += ["g1, g2 = g.chunk(2, dim=-1)",
                      "g = torch.cat((g1 * cos - g2 * sin, g2 * cos + g1 * sin), dim=-1)"]
        s.names.append("rope-half")
    else:
        s.forward += ["g1, g2 = g[..., 0::2], g[..., 1::2]",
                      "g = torch.stack((g1 * cos - g2 * sin, g2 * cos + g1 * sin), dim=-1)"]
        s.names.append("rope-interleaved")
    s.forward.append("h = g.flatten(1).to(h.dtype)")


def quantise(s: Source, r: random.Random, k: int) -> None:
    top, name = r.choice([(127.0, "int8"), (448.0, "fp8")])
    s.forward += ["f = h.float()",
                  f"scale = f.abs().amax(-1, keepdim=True).clamp(min=1e-8) / {top}",
                  f"h = (torch.round(f / scale).clamp(-{top}, {top}) * scale).to(h.dtype)"]
    s.names.append(f"{name}-fake-quant")


def softcap(s: Source, r: random.Random, k: int) -> None:
    cap = r.choice([30.0, 50.0])
    s.forward.append(f"h = (torch.tanh(h.float() / {cap}) * {cap}).to(h.dtype)")
    s.names.append("softcap")


def softmax(s: Source, r: random.Random, k: int) -> None:
    s.forward.append("h = torch.softmax(h.float(), dim=-1).to(h.dtype)")
    s.names.append("softmax")


def topk_mask(s: Source, r: random.Random, k: int) -> None:
    top = r.choice([2, 4, 8])
    s.forward += [f"values, ids = h.float().topk({top}, dim=-1)",
                  "values = values / values.abs().sum(-1, keepdim=True).clamp(min=1e-6)",
                  "h = torch.zeros_like(h).scatter(-1, ids, values.to(h.dtype))"]
    s.names.append(f"top{top}-normalised")


OPS = (rmsnorm, residual_add, gated, bias_act, linear, rope, quantise, softcap, softmax,
       topk_mask)


def draw_module(r: random.Random) -> tuple[str, str]:
    """(a name listing its ops, the problem file's source)."""
    tokens, hidden = r.choice([1024, 2048, 4096, 8192]), r.choice([1024, 2048, 4096])
    dtype = r.choice(DTYPES)
    s = Source(width=hidden)
    for k in range(r.randint(2, 4)):
        r.choice(OPS)(s, r, k)
    if not s.names:
        rmsnorm(s, r, 0)
    init = textwrap.indent("\n".join(s.init) or "pass", " " * 8)
    forward = textwrap.indent("\n".join(s.forward + ["return h"]), " " * 8)
    extra = {"x": "torch.randn(TOKENS, HIDDEN, dtype=DTYPE)",
             "positions": "torch.randint(0, MAX_POSITION, (TOKENS,))"}
    inputs = ", ".join(extra.get(i, "torch.randn(TOKENS, HIDDEN, dtype=DTYPE)") for i in s.inputs)
    source = f'''"""Drawn: {' -> '.join(s.names)} ({dtype})."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, MAX_POSITION = {tokens} // SHRINK, {hidden} // SHRINK, 4096
DTYPE = torch.{dtype}


class Model(nn.Module):
    def __init__(self, hidden: int, shrink: int, max_position: int):
        super().__init__()
{init}
        self.to(torch.{dtype})

    def forward(self, {", ".join(s.inputs)}):
        h = x
{forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [HIDDEN, SHRINK, MAX_POSITION]
'''
    return "_".join(s.names).replace("+", "_"), source


def draw(seed: int, count: int, out: Path) -> list[Path]:
    """Write `count` drawn problem files under `out`; the same seed writes the same files."""
    r = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        name, source = draw_module(r)
        path = out / f"drawn{i:02d}_{name}.py"
        path.write_text(source)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="default: drawn, and printed")
    parser.add_argument("--count", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbelow(10 ** 6)
    print(f"seed {seed}")
    for path in draw(seed, args.count, args.out):
        print(path)


if __name__ == "__main__":
    main()
