"""KernelBench problems by op class, read off their file names, and the draw beside the whole.

Level 1 names say the op (`57_conv_transposed_2D...`, `42_Max_Pooling_2D`, `23_Softmax`);
every level 2 problem is a fusion (a conv or GEMM and what follows), every level 3 a model.
Softmax and log-softmax count as norms (a row reduction then a rescale, as LayerNorm).
"""
from __future__ import annotations

import random
import re

# first match wins: transposed convolutions before convolutions, losses before norms
CLASSES = [
    ("conv_transpose", r"conv_?transpose"),
    ("conv", r"conv"),
    ("pool", r"pool"),
    ("loss", r"loss"),
    ("attention", r"attention"),
    ("scan", r"cumsum|cumprod"),
    ("reduction", r"reduction|argmax|argmin"),
    ("norm", r"norm|softmax"),
    ("matmul", r"matmul|matrix_multiplication|matrix_vector"),
]
ORDER = [name for name, _ in CLASSES] + ["pointwise", "level2 fusion", "level3 model"]


def op_class(problem: str) -> str:
    """`level1/57_conv_transposed_2D__square_input__square_kernel` -> conv_transpose."""
    level, _, name = problem.rpartition("/")
    if level.endswith("level2"):
        return "level2 fusion"
    if level.endswith("level3"):
        return "level3 model"
    for label, pattern in CLASSES:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return "pointwise"


def drawn(problems: list[str], count: int, seed: int) -> set[str]:
    """A seeded draw of `count` problems: the part nobody tuned on, reported beside the whole."""
    ordered = sorted(set(problems))
    return set(random.Random(seed).sample(ordered, min(count, len(ordered))))
