"""The C++ target's knobs: `CppOptions`, the conservative version a "fix" writes, and the
single knob changes a round's extra samples sweep (sweep.py pairs them)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CppOptions:
    vector_math: bool = True          # vectorisable exp/log/tanh/erf helpers instead of libm
    lane_block: int = 256             # lanes per task when the innermost dim is kept
    min_parallel_work: int = 32768    # below this many elements a kernel runs on one thread
    accumulate: str = "auto"          # "float", "double", or "auto" (double past 16384 terms)
    schedule: str = "static"          # OpenMP schedule of the row loop
    matmul: str = "vendor"            # "vendor": torch's GEMM; "kernel": the C++ tiled GEMM
    reuse_output: bool = True         # park an exp computed in the last pass in the output
    rows_as_lanes: bool = False       # simd across a block of rows instead of along each row
    vector_width: int = 0             # 512: ask for AVX-512 registers; 0: the compiler's choice


@functools.cache
def host_has_avx512() -> bool:
    """Whether this machine's CPU has AVX-512 (where `vector_width` 512 can change anything)."""
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def conservative() -> CppOptions:
    """Library maths, double accumulators, every kernel parallel."""
    return CppOptions(vector_math=False, accumulate="double", min_parallel_work=0)


def sweep_singles(options: CppOptions) -> list[dict]:
    """Each knob on its own, around `options`."""
    lane = options.lane_block
    # the vector width first: the knob that moved most on this CPU (0.6x-2x a kernel)
    wide = [{"vector_width": 0 if options.vector_width == 512 else 512}] \
        if host_has_avx512() else []
    return [*wide, {"schedule": "dynamic" if options.schedule == "static" else "static"},
            {"reuse_output": not options.reuse_output},
            *({"accumulate": a} for a in ("float", "double") if a != options.accumulate),
            {"min_parallel_work": 32768 if options.min_parallel_work >= 1 << 30
             else 1 << 30},                        # all on one thread, or back
            {"rows_as_lanes": not options.rows_as_lanes},
            {"lane_block": lane * 2}, {"lane_block": max(32, lane // 2)},
            {"lane_block": lane * 4}, {"lane_block": max(32, lane // 4)}]
