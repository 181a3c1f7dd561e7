"""The physics floor (`faster-than-hardware`) refuses only what the hardware's guaranteed peaks
cannot explain for the least work any answer needs: the outputs' bytes, written. The
reference's FLOPs (a causal kernel skips half, an algebraic rewrite most) and the measured
ceilings only flag. Scripted numbers, pure functions; one judging end to end."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kforge_nb import devices
from kforge_nb.devices import Guaranteed, cpu_guaranteed, gpu_guaranteed
from kforge_nb.evaluator.parent import physics
from kforge_nb.machine import describe
from kforge_nb.result import CORRECT, REJECTED, Result, Roofline, Timing

# a 2-core AVX-512 box read at its 2.5 GHz base clock: 2 x 2.5e9 x 16 lanes x 2 FMA units x 2
BASE_CLOCK_BOX = cpu_guaranteed(2, 2.5e9, ("avx2", "fma", "avx512f"), "x86_64")
ATTENTION = (2, 8, 256, 64)           # batch, heads, sequence, head dim: issue 35's kernel


def attention_numbers() -> tuple[int, int]:
    """(output bytes, the dense reference's FLOPs) of causal attention at ATTENTION, fp32."""
    b, h, s, d = ATTENTION
    return b * h * s * d * 4, 4 * b * h * s * s * d


def test_guaranteed_cpu_peak_is_the_isa_formula():
    assert BASE_CLOCK_BOX.flops["float32"] == 2 * 2.5e9 * 16 * 2 * 2 == 320e9
    assert BASE_CLOCK_BOX.flops["float64"] == 160e9
    # bytes: cores x clock x (3 loads + 2 stores) x 64 B vectors
    assert BASE_CLOCK_BOX.bandwidth == 2 * 2.5e9 * 5 * 64
    assert "2 cores x 2.5 GHz max clock x 16 fp32 lanes (AVX-512) x 2 FMA units x 2 FLOP" \
        in BASE_CLOCK_BOX.flops_formula
    avx2 = cpu_guaranteed(4, 3e9, ("avx", "avx2", "fma"), "x86_64")
    assert avx2.flops["float32"] == 4 * 3e9 * 8 * 2 * 2 and avx2.bandwidth == 4 * 3e9 * 5 * 32
    sse = cpu_guaranteed(1, 3e9, ("sse4_2",), "x86_64")
    assert sse.flops["float32"] == 3e9 * 4 * 2 * 2
    neon = cpu_guaranteed(8, 3.5e9, ("neon",), "aarch64")      # four 128-bit FMA pipes
    assert neon.flops["float32"] == 8 * 3.5e9 * 4 * 4 * 2
    amx = cpu_guaranteed(2, 3e9, ("avx512f", "amx_tile"), "x86_64")
    assert amx.flops["bfloat16"] == 2 * 3e9 * 2048 > amx.flops["float32"]


def test_guaranteed_cpu_peak_of_this_machine_beats_any_fma_loop():
    """Computed from the real machine: an AVX-512 FMA loop reached 539 GFLOP/s on this 2-core
    box (issue 37), above what its 2.5 GHz base clock gives (320): the max clock is read from
    cpufreq or lscpu, else a bound above any turbo, never /proc/cpuinfo's base or current MHz."""
    machine = describe()
    peak = devices.guaranteed_peaks("cpu")
    clock, source = devices.max_clock_hz()
    cores = max(machine.logical, machine.cores)
    width, units, _ = devices.vector_shape(machine.isa, machine.arch)
    assert peak.flops["float32"] == cores * clock * (width // 4) * units * 2
    assert peak.bandwidth == cores * clock * 5 * width
    current = [float(m) * 1e6 for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)",
                                                   Path("/proc/cpuinfo").read_text(), re.M)]
    assert clock >= max(current, default=0.0), source
    if machine.has("avx512f") and cores >= 2:
        assert peak.flops["float32"] >= 539e9, peak.flops_formula
    assert f"{cores} cores x " in peak.flops_formula and source in peak.flops_formula


def test_causal_attention_above_the_dense_speed_of_light_is_not_refused():
    """Issue 35: 0.48 ms a call, '5x the speed of light (2.539 ms for its compute-bound
    minimum)' on the dense reference's FLOPs at a GEMM peak measured under load."""
    out_bytes, dense_flops = attention_numbers()
    measured_under_load = dense_flops / 2.539e-3          # the 106 GFLOP/s it used
    assert dense_flops / measured_under_load * 1e3 / 0.48 > 5    # what refused it
    assert physics.refusal(0.48, out_bytes, BASE_CLOCK_BOX) is None
    assert physics.refusal(0.48, out_bytes, devices.guaranteed_peaks("cpu")) is None
    # even 1000x faster it would only be 0.3x the floor of writing 1 MiB at the base clock
    floor = physics.floor_ms(out_bytes, BASE_CLOCK_BOX.bandwidth)
    assert floor == pytest.approx(out_bytes / 1.6e12 * 1e3) and 0.48 / floor > 500


def test_algebraic_rewrite_far_above_the_reference_flops_is_not_refused():
    """Issue 37: x @ W then .sum(-1), rewritten as x · ΣW, refused at '31x the speed of light'
    on the reference's 2·M·N·K FLOPs. Its output is M floats."""
    m, k, n = 1024, 4096, 4096
    flops = 2 * m * n * k
    candidate_ms = flops / 221e9 * 1e3 / 31                   # 31x the measured ceiling
    for peak in (BASE_CLOCK_BOX, devices.guaranteed_peaks("cpu")):
        assert physics.refusal(candidate_ms, m * 4, peak) is None
    assert physics.least_bytes({"flops": flops, "input_bytes": (m * k + k * n) * 4,
                                "min_bytes": (m * k + k * n + m) * 4,
                                "output_bytes": m * 4}) == m * 4


def test_a_forged_clock_100x_below_the_bytes_is_refused_with_the_whole_formula():
    out_bytes = attention_numbers()[0]
    for peak in (BASE_CLOCK_BOX, devices.guaranteed_peaks("cpu"),
                 gpu_guaranteed("NVIDIA H100 80GB HBM3", 132)):
        floor = physics.floor_ms(out_bytes, peak.bandwidth)
        message = physics.refusal(floor / 100, out_bytes, peak)
        assert message is not None
        assert message.startswith("faster than the hardware allows: ")
        assert message.endswith("rule `faster-than-hardware`)")        # whole, not cut
        assert "1,048,576" in message and peak.bandwidth_formula in message
        assert f"{floor:.4g} ms" in message and "100x below that floor" in message
        assert f"{floor / 100:.4g} ms a call" in message
    message = physics.refusal(0.0, out_bytes, BASE_CLOCK_BOX)
    assert "infinitely below" in message
    # the margin: 1.9x below the floor stands (a max clock read low), 2.1x below does not
    floor = physics.floor_ms(out_bytes, BASE_CLOCK_BOX.bandwidth)
    assert physics.refusal(floor / 1.9, out_bytes, BASE_CLOCK_BOX) is None
    assert physics.refusal(floor / 2.1, out_bytes, BASE_CLOCK_BOX) is not None


def test_nothing_known_refuses_nothing():
    assert physics.refusal(1e-9, None, BASE_CLOCK_BOX) is None
    assert physics.refusal(1e-9, 1 << 20, Guaranteed("mps")) is None
    assert physics.refusal(None, 1 << 20, BASE_CLOCK_BOX) is None
    assert physics.least_bytes({"min_bytes": 1 << 20}) is None
    assert gpu_guaranteed("", None).bandwidth is None


def judged(candidate_ms: float, roof: Roofline, real: bool = True) -> Result:
    return Result(CORRECT, "matches", timing=Timing(real=real, candidate_ms=candidate_ms),
                  roofline=roof)


def test_check_flags_a_beaten_roofline_and_refuses_only_below_the_floor():
    out_bytes, dense_flops = attention_numbers()
    summary = {"flops": dense_flops, "input_bytes": 3 * out_bytes,
               "min_bytes": 4 * out_bytes, "output_bytes": out_bytes}
    roof = Roofline(flops=dense_flops, min_bytes=4 * out_bytes, device="CPU",
                    peak_flops=106e9, speed_of_light_ms=2.539, fraction_of_sol=2.539 / 0.48,
                    bound="compute", ceiling_exceeded=True, peak_flops_source="measured")
    result = judged(0.48, roof)
    assert physics.check(result, summary, "cpu") is None
    assert "5.29x the roofline's speed of light (2.539 ms, compute-bound)" in result.timing.note
    assert "measured compute ceiling is an underestimate" in result.timing.note
    assert result.timing.note.endswith("flagged, not refused")
    guaranteed = Roofline(**{**roof.__dict__, "peak_flops_source": "guaranteed"})
    result = judged(0.48, guaranteed)
    physics.check(result, summary, "cpu")
    assert "reference's FLOP count overstates the work" in result.timing.note
    honest = judged(0.48, Roofline(fraction_of_sol=0.4, bound="compute"))
    assert physics.check(honest, summary, "cpu") is None and honest.timing.note == ""
    forged = judged(1e-7, roof)
    message = physics.check(forged, summary, "cpu")
    assert message and message.endswith("rule `faster-than-hardware`)")
    assert physics.check(judged(1e-7, roof, real=False), summary, "cpu") is None


def test_cpu_roofline_compute_ceiling_is_the_guaranteed_peak_not_a_probe_under_load(
        monkeypatch):
    sure = devices.guaranteed_peaks("cpu").flops["float32"]
    probe = {"name": "CPU (2 cores, 2 threads)", "bandwidth": 11e9, "cache_bandwidth": 56e9,
             "llc_bytes": 36 << 20, "float32": 114e9, "busy": True}
    monkeypatch.setattr(devices, "cpu_peaks", lambda: probe)
    # an FMA loop at 539 GFLOP/s: 539e6 FLOPs in 1 ms
    roof = devices.roofline(539_000_000, 1 << 10, "float32", "cpu", 1.0)
    assert roof.peak_flops == sure and roof.peak_flops_source == "guaranteed"
    assert roof.peak_bandwidth == 56e9 and roof.peak_bandwidth_source == "measured"
    assert roof.bound == "compute" and roof.fraction_of_sol <= 1 and not roof.ceiling_exceeded
    probe["float32"] = 2 * sure                   # a probe above it (never, but): the larger
    roof = devices.roofline(539_000_000, 1 << 10, "float32", "cpu", 1.0)
    assert roof.peak_flops == 2 * sure and roof.peak_flops_source == "measured"


def test_roofline_fields_round_trip_and_old_records_still_load():
    result = Result(REJECTED, "x", roofline=Roofline(flops=1, peak_flops_source="guaranteed",
                                                     peak_bandwidth_source="measured"))
    assert Result.from_dict(result.to_dict()) == result
    old = result.to_dict()
    for key in ("peak_flops_source", "peak_bandwidth_source"):
        del old["roofline"][key]
    back = Result.from_dict(old)
    assert back.roofline.flops == 1 and back.roofline.peak_flops_source == ""


def test_a_correct_algebraic_rewrite_is_judged_correct_end_to_end(judge):
    """x @ W.T summed over its columns, computed as x · (Σ_o W[o]): ~1/500 of the reference's
    FLOPs, once refused as 'faster than the hardware' at the GEMM peak measured here."""
    result = judge("matmul_row_sum", "cpp_matmul_row_sum_rewrite")
    assert result.state == CORRECT, result.message
    assert "faster-than-hardware" not in result.rules
    assert result.timing.real and result.roofline.bound == "compute"
    assert result.roofline.flops >= 2 * 256 * 1024 * 1024
    assert result.roofline.peak_flops_source == "guaranteed"
