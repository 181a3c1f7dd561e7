"""A strided transposed convolution's implicit GEMM, split by output phase.

In the gather form output o reads input (o + p - k*d) / s only for the taps k where that
division is exact: with stride s, about one tap in s along each axis. Masking the others
would spend s_d * s_h * s_w times the products. So outputs are taken by phase r = o mod s
(one phase per group of programs): within a phase the taps that reach an input are fixed,
k = first[r] + j * step for j < count[r] (step = s / gcd(s, d)), and K walks only those.
"""
from __future__ import annotations

from math import gcd


def phased(w: dict) -> bool:
    return w["transposed"] and any(s > 1 for s in w["s"])


def taps(w: dict, i: int) -> tuple[list[int], list[int], int]:
    """(first tap, number of taps) per phase along axis i, and the step between taps."""
    s, p, d, k = w["s"][i], w["p"][i], w["d"][i], w["k"][i]
    firsts, counts = [], []
    for r in range(s):
        valid = [t for t in range(k) if (r + p - t * d) % s == 0]
        firsts.append(valid[0] if valid else 0)
        counts.append(len(valid))
    return firsts, counts, s // gcd(s, d)


def pick(phase: str, values: list[int]) -> str:
    """A Triton expression: values[phase] for a phase known only at run time."""
    text = str(values[-1])
    for r in range(len(values) - 2, -1, -1):
        text = f"tl.where({phase} == {r}, {values[r]}, {text})" if values[r] != values[-1] \
            else text
    return text


def row_lines(w: dict) -> list[str]:
    """Program -> (phase, tile); rows are the phase's outputs (n, qd, qh, qw), o = r + s*q."""
    sd, sh, sw = w["s"]
    return [f"    phase = tl.program_id(0) // tl.cdiv(M, BLOCK_M)   # one of {sd * sh * sw}",
            "    offs_m = (tl.program_id(0) % tl.cdiv(M, BLOCK_M)).to(tl.int64) * BLOCK_M + "
            "tl.arange(0, BLOCK_M)",
            f"    rd, rh, rw = phase // {sh * sw}, (phase // {sw}) % {sh}, phase % {sw}",
            f"    ow = rw + {sw} * (offs_m % QW)",
            f"    oh = rh + {sh} * ((offs_m // QW) % QH)",
            f"    od = rd + {sd} * ((offs_m // (QW * QH)) % QD)",
            "    n = offs_m // (QW * QH * QD)",
            "    m_ok = (offs_m < M) & (od < OD) & (oh < OH) & (ow < OW)"]


def count_lines(w: dict) -> list[str]:
    """Before the K loop: this phase's first tap and tap count along each axis, and KP."""
    lines, raw = [], []
    for i, name in enumerate("dhw"):
        firsts, counts, _ = taps(w, i)
        raw.append(pick("r" + name, counts))
        # the divisors of the K loop are never 0 (a phase with no tap runs no slice): a
        # division by a count that may be 0 is undefined, and LLVM folds the select away
        count = raw[-1] if min(counts) > 0 else f"tl.maximum({raw[-1]}, 1)"
        lines += [f"    first_{name} = {pick('r' + name, firsts)}",
                  f"    count_{name} = {count}"]
    return lines + [f"    KP = CIG * {' * '.join(f'({r})' for r in raw)}   # this phase's K"]


def tap_lines(w: dict) -> tuple[list[str], list[str]]:
    """In the K loop: the slice's channel and tap, the input position each row reads (exact
    by construction) and the masks saying it is inside the input."""
    kd, kh, kw = w["k"]
    lines = ["        ci = offs_k // (count_d * count_h * count_w)",
             "        j = offs_k % (count_d * count_h * count_w)",
             f"        kd = first_d + (j // (count_h * count_w)) * {taps(w, 0)[2]}",
             f"        kh = first_h + ((j // count_w) % count_h) * {taps(w, 1)[2]}",
             f"        kw = first_w + (j % count_w) * {taps(w, 2)[2]}",
             f"        r = (kd * {kh} + kh) * {kw} + kw   # the tap's place in the window"]
    masks = []
    for i, (name, size) in enumerate(zip("dhw", "DHW")):
        s, p, d = w["s"][i], w["p"][i], w["d"][i]
        # o + p - k*d is a multiple of s here: // is exact, whatever its rounding
        lines.append(f"        z{name} = (o{name}[:, None] + {p} - k{name}[None, :] * {d}) // {s}")
        if i >= 3 - w["dims"]:                      # a dim the conv has
            masks.append(f"(z{name} >= 0) & (z{name} < {size})")
    return lines, masks


def launch_lines(w: dict) -> list[str]:
    """The launcher's row count and grid for the phases."""
    sd, sh, sw = w["s"]
    return [f"    QD, QH, QW = -(-OD // {sd}), -(-OH // {sh}), -(-OW // {sw})",
            "    M = N * QD * QH * QW",
            f"    grid = lambda meta: ({sd * sh * sw} * triton.cdiv(M, meta['BLOCK_M']), "
            "triton.cdiv(COG, meta['BLOCK_N']), G)"]
