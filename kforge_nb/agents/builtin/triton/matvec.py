"""The body of a Triton matrix-vector product (B has one column): y = A x.

A tiled GEMM would multiply a 64-column tile of B that is one column and 63 of padding, and
sum each output's K products in one fp32 running sum: over a K of a million that drifts past
a 1e-4 relative bound. Here a program takes BLOCK_M rows and one column of B; each product
of two fp32 values is exact in fp64 and is summed in fp64 ([BLOCK_M, BLOCK_K] partial sums,
reduced once at the end), so the result is the exact dot product rounded once to fp32. The
product is memory-bound (every element of A is read once), so the fp64 work is hidden behind
the loads. The body leaves `acc` ([BLOCK_M, 1], fp32), `offs_m`, `offs_n`, `batch` and
`mask` as the tiled GEMM does, so the bias, the fused epilogue and the store are shared.
"""
from __future__ import annotations

from typing import Callable

from ..capture.ir import Node

# (BLOCK_M, BLOCK_K, num_stages, num_warps): a few rows, a long slice of K
CONFIGS = [(4, 512, 3, 4), (8, 256, 3, 4), (16, 256, 3, 8), (2, 1024, 3, 4)]
# what the launcher passes where no autotuner runs (the CPU interpreter)
TILES = "BLOCK_M=8, BLOCK_N=1, BLOCK_K=2048, GROUP_M=1, num_warps=4"


def is_matvec(node: Node, batched: bool) -> bool:
    """A product whose result has one column at the captured sizes (A (M, K) @ x (K, 1))."""
    return not batched and len(node.shape) >= 2 and node.shape[-1] == 1


def body(a: Node, b: Node, load: Callable[[Node, str], str]) -> list[str]:
    """The kernel's lines from the program ids to the product in `acc`; `load(operand, read)`
    gives a tl.load of A or B as float32."""
    return [
        "    # y = A x: BLOCK_M rows of A and one column of B a program. Each fp32 product is",
        "    # exact in fp64 and summed in fp64, so a long K is one rounding, not K of them.",
        "    pid = tl.program_id(0)",
        "    batch = tl.program_id(1)",
        "    pid_m, pid_n = pid // N, pid % N",
        "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    offs_n = pid_n + tl.arange(0, 1)",
        "    offs_k = tl.arange(0, BLOCK_K)",
        "    # row offsets in int64: M * K may pass 2**31 elements",
        "    a_ptrs = a_ptr + batch * stride_ab + offs_m[:, None].to(tl.int64) * stride_am + "
        "offs_k[None, :] * stride_ak",
        "    b_ptrs = b_ptr + batch * stride_bb + offs_k * stride_bk + pid_n * stride_bn",
        "    sums = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float64)",
        "    for k in range(0, tl.cdiv(K, BLOCK_K)):",
        "        k_left = K - k * BLOCK_K",
        "        a = " + load(a, "tl.load(a_ptrs, mask=(offs_m[:, None] < M) & "
                            "(offs_k[None, :] < k_left), other=0.0)"),
        "        x = " + load(b, "tl.load(b_ptrs, mask=offs_k < k_left, other=0.0)"),
        "        sums += a.to(tl.float64) * x.to(tl.float64)[None, :]",
        "        a_ptrs += BLOCK_K * stride_ak",
        "        b_ptrs += BLOCK_K * stride_bk",
        "    acc = tl.sum(sums, axis=1)[:, None].to(tl.float32)",
        "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)"]


def configs() -> str:
    """The autotuner's list (BLOCK_N 1: the grid is row blocks x columns)."""
    return ",\n        ".join(
        f"triton.Config({{'BLOCK_M': {m}, 'BLOCK_N': 1, 'BLOCK_K': {k}, 'GROUP_M': 1}}, "
        f"num_stages={s}, num_warps={w})" for m, k, s, w in CONFIGS)
