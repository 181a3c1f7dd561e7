"""The Triton target's knobs: `TritonOptions` (per precision policy), the conservative
version a "fix" writes, and the single knob changes a round's extra samples sweep."""
from __future__ import annotations

from dataclasses import dataclass

LOWER_PRECISION = ("tf32", "bf16", "fp16")


@dataclass
class TritonOptions:
    block_size: int = 1024            # elements per program (pointwise) or per loop step (rows)
    num_warps: int = 4                # warps of a flat program (and of a long row's splits)
    num_stages: int = 0               # software-pipelining stages of a row loop; 0: Triton's own
    row_warps: int = 0                # warps of a row program; 0: by its tile (row_warps())
    row_tile: int = 2048              # elements a program takes on when its rows are short
    autotune: bool = False            # let @triton.autotune choose BLOCK_SIZE and num_warps
    matmul: str = "vendor"            # "vendor": keep the torch call; "kernel": the Triton GEMM
    block_m: int = 64                 # matmul tiles (the GEMM autotunes them on a GPU)
    block_n: int = 64
    block_k: int = 32
    group_m: int = 8
    dot: str = "ieee"                 # ieee | fma (exact fp32) | tf32 | bf16 | fp16

    @classmethod
    def for_precision(cls, precision: str) -> "TritonOptions":
        """Defaults for a precision policy: the vendor product under strict fp32, the Triton
        GEMM on the tensor cores when the policy allows lower precision."""
        if precision in LOWER_PRECISION:
            return cls(matmul="kernel", dot=precision, block_m=64, block_n=64, block_k=32)
        return cls()


def conservative() -> TritonOptions:
    """Small blocks, 4 warps, no autotuning, the vendor product."""
    return TritonOptions(block_size=256, num_warps=4, autotune=False, matmul="vendor")


def sweep_singles(options: TritonOptions) -> list[dict]:
    """Each knob on its own, around `options`."""
    block, warps, tile = options.block_size, options.num_warps, options.row_tile
    # a row kernel whose rows fit in registers ignores the block size and flat warps: its
    # tile and warps come next (vary() drops the steps that change nothing that runs)
    return [{"block_size": block * 2}, {"block_size": max(128, block // 2)},
            {"num_warps": 8 if warps != 8 else 4},
            *({"row_warps": w} for w in (8, 2) if w != options.row_warps),
            {"row_tile": tile * 4}, {"row_tile": max(256, tile // 4)},
            {"num_stages": 4 if options.num_stages != 4 else 2},
            {"block_size": block * 4}, {"block_size": max(128, block // 4)},
            {"num_warps": 2 if warps != 2 else 16},
            {"row_warps": 16 if options.row_warps != 16 else 4}]
