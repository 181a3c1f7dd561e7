"""KernelBench problem files shrunk to CPU size, the problem itself unchanged.

A problem's sizes live in module-level constants (`batch_size = 16`, `dim = 16384`,
`M = 256 * 8`, `bias_shape = (out_channels, 1, 1)`) and, rarely, as literals in `get_inputs()`.
`shrunk_source(source, f)` divides every such integer above 4 by `f`, keeping what defines the
op as it is (kernel sizes, strides, padding, dilation, groups, heads, pool sizes, values such as
`scale` or `eps`), keeping every size a multiple of the groups / heads that divided it, and
keeping odd sizes odd (odd tails are what break kernels). Constants written in terms of others
follow them.

`find_shrink(source)` tries factors from the most aggressive to none, in a child process
(`python kernelbench_shrink.py --probe`), and keeps the largest problem whose reference still
runs on the CPU within the budget (elements of inputs + parameters + outputs, and seconds of one
forward) with a non-empty output.
"""
from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
import time
from typing import Callable

# names whose integers define the op (or are values, not sizes): never shrunk
KEEP = re.compile(r"kernel|stride|padding|dilation|groups|pool|heads|value|scale|factor|divisor|"
                  r"constant|clamp|min|max|eps|momentum|slope|multiplier$|^bias$|weight$|"
                  r"^p$|dropout|return_indices", re.IGNORECASE)
# sizes that must stay multiples of these (GroupNorm channels, grouped convs, attention heads)
DIVISORS = re.compile(r"groups|heads", re.IGNORECASE)
DIVIDED = re.compile(r"channel|feature|embed|hidden|^dim$|d_?model", re.IGNORECASE)
SMALL = 4                      # integers up to this are axes, counts or op parameters
BATCH = 8                      # a batch is at most this (the budget goes to the other sizes)
FACTORS = [2 ** (k / 2) for k in range(24, -1, -1)]      # 4096 ... 1.41, 1
MAX_ELEMENTS = 1 << 17         # inputs + parameters + outputs
MAX_SECONDS = 0.05             # one forward of the reference
OVER_BUDGET_RUN = 16           # a problem this many times over the budget at its smallest is
#                                still run (and kept, marked over the budget); larger is not


def shrink_int(value: int, factor: float, divisors: list[int]) -> int:
    """`value / factor`, a multiple of the divisors that divide `value`, odd if it was odd."""
    if value <= SMALL or factor <= 1:
        return value
    step = math.lcm(1, *[d for d in divisors if d > 1 and value % d == 0])
    if value % 2 == 0 and step % 2:
        step *= 2
    # two or more per group where there were (a group of one is another problem)
    new = max(step * min(2, value // step), int(value / factor) // step * step)
    if value % 2 and new % 2 == 0:
        new += step if step % 2 else 1
    return min(new, value)


def _constant_value(node: ast.expr):
    """The value of an expression of literals only (`256 * 8`, `(3, 5)`), else None."""
    if any(isinstance(n, ast.Name) for n in ast.walk(node)):
        return None
    try:
        return eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})
    except Exception:
        return None


def _shrunk_value(value, factor: float, divisors: list[int]):
    if type(value) is int:
        return shrink_int(value, factor, divisors)
    if isinstance(value, (tuple, list)) and all(type(v) is int for v in value):
        return type(value)(shrink_int(v, factor, divisors) for v in value)
    return value


def _divisors(tree: ast.Module) -> list[int]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and DIVISORS.search(t.id) for t in node.targets):
            value = _constant_value(node.value)
            if type(value) is int:
                found.append(value)
    return found


class _InputsLiterals(ast.NodeTransformer):
    """Size literals written into get_inputs() (`torch.rand(batch_size, 3, 224, 224)`)."""

    def __init__(self, factor: float):
        self.factor = factor

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        name = ast.unparse(node.func)
        first = 2 if name.endswith("randint") and len(node.args) >= 3 else 0   # low, high
        node.args = [a if i < first else self._sized(a) for i, a in enumerate(node.args)]
        return node

    def _sized(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return ast.Constant(shrink_int(node.value, self.factor, []))
        if isinstance(node, (ast.Tuple, ast.List)):
            node.elts = [self._sized(e) for e in node.elts]
        return node


def assignments(node: ast.Assign) -> list[tuple[list[str], ast.expr, Callable]]:
    """(names, value, set_value) of `a = b = 3` and of each pair of `d, h, w = 16, 32, 32`."""
    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    if names:
        return [(names, node.value, lambda v: setattr(node, "value", v))]
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
            len(target.elts) == len(value.elts):
        return [([t.id], v, lambda new, i=i: value.elts.__setitem__(i, new))
                for i, (t, v) in enumerate(zip(target.elts, value.elts))
                if isinstance(t, ast.Name)]
    return []


def shrunk_source(source: str, factor: float) -> tuple[str, dict]:
    """The source with its sizes divided by `factor`, and {name: [before, after]}."""
    tree = ast.parse(source)
    divisors = _divisors(tree)
    changed = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            before = ast.unparse(node)
            _InputsLiterals(factor).visit(node)
            if ast.unparse(node) != before:
                changed["get_inputs"] = "literal sizes"
        if not isinstance(node, ast.Assign):
            continue
        for names, expr, set_value in assignments(node):
            if any(KEEP.search(n) for n in names):
                continue
            value = _constant_value(expr)
            divided = divisors if any(DIVIDED.search(n) for n in names) else []
            batch = any("batch" in n.lower() for n in names) and type(value) is int
            new = _shrunk_value(value, max(factor, value / BATCH) if batch else factor, divided)
            if value is not None and new != value:
                set_value(ast.parse(repr(new), mode="eval").body)
                changed["=".join(names)] = [value, new]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", changed


def find_shrink(source: str, max_elements: int = MAX_ELEMENTS, max_seconds: float = MAX_SECONDS,
                timeout: float = 120.0) -> dict:
    """{"factor", "source", "changed", "elements", "seconds", "within_budget"} for the
    largest shrunk problem within the budget, or {"error": why none runs}."""
    candidates, seen = [], set()
    for factor in FACTORS:
        text, changed = shrunk_source(source, factor)
        if text not in seen:                 # many factors give the same sizes
            seen.add(text)
            candidates.append({"factor": round(factor, 3), "source": text, "changed": changed})
    probe = {"sources": [c["source"] for c in candidates], "max_elements": max_elements,
             "max_seconds": max_seconds}
    try:
        done = subprocess.run([sys.executable, __file__, "--probe"], input=json.dumps(probe),
                              capture_output=True, text=True, timeout=timeout)
        tries = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"error": f"shrinking took over {timeout:.0f} s"}
    except (ValueError, IndexError):
        return {"error": f"the probe failed: {done.stderr.strip()[-300:]}"}
    return choose(candidates, tries)


def choose(candidates: list[dict], tries: list[dict]) -> dict:
    within = [i for i, t in enumerate(tries) if t.get("ok") and t["within"]]
    ran = [i for i, t in enumerate(tries) if t.get("ok")]
    if not within and not ran:
        errors = [t.get("error", "") for t in tries if t.get("error")]
        return {"error": "the reference ran at no size: " + (errors[-1] if errors else
                                                             "over the budget at every size")}
    best = within[-1] if within else ran[0]
    return {**candidates[best], "elements": tries[best]["elements"],
            "seconds": tries[best]["seconds"], "within_budget": bool(within)}


# --- the child process: runs the references, smallest first ----------------------------------
def _elements(value) -> int:
    import torch
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return sum(map(_elements, value))
    return 0


def probe_one(source: str, max_elements: int) -> dict:
    import torch
    space: dict = {"__name__": "kb_probe"}
    exec(compile(source, "<problem>", "exec"), space)
    torch.manual_seed(0)
    model = space["Model"](*space["get_init_inputs"]())
    inputs = space["get_inputs"]()
    elements = _elements(list(inputs)) + sum(p.numel() for p in model.parameters())
    if elements > max_elements * OVER_BUDGET_RUN:
        return {"ok": False, "over": True, "elements": elements,
                "error": f"{elements} elements before the forward"}
    seconds = []
    with torch.no_grad():
        for _ in range(2):                   # the first call pays for one-time set-up
            started = time.perf_counter()
            out = model(*inputs)
            seconds.append(time.perf_counter() - started)
    seconds = seconds[-1]
    out_elements = _elements(out if isinstance(out, (list, tuple)) else [out])
    if out_elements == 0:
        return {"ok": False, "error": "empty output", "elements": elements}
    elements += out_elements
    return {"ok": True, "within": elements <= max_elements, "elements": elements,
            "seconds": round(seconds, 4)}


def probe(sources: list[str], max_elements: int, max_seconds: float) -> list[dict]:
    """Each source's reference run once, from the smallest; stops at the first over budget."""
    import torch
    torch.set_num_threads(1)
    tries = []
    for source in sources:
        try:
            tried = probe_one(source, max_elements)
        except Exception as err:             # too small for the kernel, a bad divisibility...
            tried = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:200]}"}
        if tried.get("ok") and (tried.get("seconds") or 0) > max_seconds:
            tried["within"] = False
        tries.append(tried)
        if tried.get("over") or (tried.get("ok") and not tried["within"]):
            break
    return tries


if __name__ == "__main__" and sys.argv[1:] == ["--probe"]:
    asked = json.loads(sys.stdin.read())
    print(json.dumps(probe(asked["sources"], asked["max_elements"], asked["max_seconds"])))
