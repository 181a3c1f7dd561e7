"""What the prompts say about the machine (kforge_nb/machine.py) and about earlier attempts
(kforge_nb/agents/history.py), read from real files and real session records."""
from __future__ import annotations

from kforge_nb.agents import history
from kforge_nb.agents.base import Recommendation
from kforge_nb.machine import Gpu, Machine, cpuinfo_fields, cpu_name, isa_of, read_caches
from kforge_nb.providers.recording import request_digest
from kforge_nb.result import Result, Timing
from kforge_nb.session.records import Attempt

ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm sve sve2\n" \
      "CPU implementer\t: 0x41\nHardware\t: Scripted Arm board\n\nprocessor\t: 1\n" \
      "Features\t: fp\n"


def test_an_arm_cpuinfo_gives_its_name_and_neon_and_sve():
    fields = cpuinfo_fields(ARM)
    assert cpu_name(fields) == "Scripted Arm board"
    assert isa_of(fields) == ("neon", "sve", "sve2")        # the first processor's features


def test_caches_are_read_from_sysfs_with_their_sharing(tmp_path):
    for index, (level, kind, size, shared) in enumerate(
            [("1", "Data", "48K", "0"), ("2", "Unified", "2048K", "0-1"),
             ("3", "Unified", "32M", "0-7,16-23")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size),
                           ("shared_cpu_list", shared)):
            (folder / name).write_text(text + "\n")
    caches = read_caches(tmp_path)
    assert caches == (("L1d", 48 * 2**10, ""), ("L2", 2 * 2**20, "shared by 2 CPUs"),
                      ("L3", 32 * 2**20, "shared by 16 CPUs"))
    lines = Machine("X", "x86_64", 2, 2, ("avx2",), caches).lines("cpu")
    assert "- Caches: L1d 48 KiB, L2 2 MiB (shared by 2 CPUs), L3 32 MiB (shared by 16 CPUs)" \
        in lines


def test_a_gpu_target_is_told_the_gpu_or_that_there_is_none():
    none = Machine("X", "x86_64", 2, 2, ("avx2",))
    assert "- GPU: no GPU here" in none.lines("cuda")
    assert "- GPU: no GPU here" in none.lines("cpu", gpu=True)     # Triton, interpreted
    assert not [line for line in none.lines("cpu") if "GPU" in line]
    h100 = Machine("X", "x86_64", 16, 32, ("avx2",), (),
                   Gpu("NVIDIA H100 80GB HBM3", 132, 80 * 2**30, (9, 0)))
    assert "- GPU: NVIDIA H100 80GB HBM3, 132 SMs, 80 GiB, compute capability 9.0 (sm_90)" \
        in h100.lines("cuda")


def test_a_recording_replays_on_another_machine():
    def prompt(machine: Machine) -> list[dict]:
        return [{"role": "user", "content": "\n".join(
            ["## This machine", *machine.lines("cpu"), "## Kernel", "x = 1"])}]
    from kforge_nb.machine import core_of
    zen5, named = core_of(cpuinfo_fields(EPYC_ZEN5))
    laptop = Machine("Laptop CPU", "x86_64", 4, 8, ("avx", "avx2"), (("L2", 2**20, ""),),
                     compiler="g++ (GCC) 14.2.1")
    server = Machine("Server CPU", "x86_64", 64, 128, ("avx", "avx2", "avx512f"), core=zen5,
                     named=named, clock="4.1 GHz max (cpufreq)", compiler="g++ 12.2.0")
    assert request_digest("s", prompt(laptop)) == request_digest("s", prompt(server))
    other = [{"role": "user", "content": prompt(laptop)[0]["content"].replace("x = 1", "x = 2")}]
    assert request_digest("s", prompt(laptop)) != request_digest("s", other)


def attempt(iteration: int, state: str, speedup: float | None = None, parent=None,
            change: str | None = None) -> Attempt:
    timing = Timing(candidate_ms=2.0 / speedup, eager_ms=2.0, speedup_vs_eager=speedup,
                    speedup_vs_eager_ci=(speedup * 0.9, speedup * 1.1)) if speedup else Timing()
    advice = Recommendation(change, change) if change else None
    return Attempt(iteration, 0, "optimise" if parent else "initial", "code", Result(
        state, "bad values\nmore" if state != "correct" else "ok", timing=timing),
        recommendation=advice, parent=parent, applied=advice)


def fastest(attempts):
    correct = [a for a in attempts if a.result.state == "correct"]
    return min(correct, key=lambda a: a.speed, default=None)


def test_outcomes_say_each_attempts_change_verdict_speedup_and_fate():
    attempts = [attempt(0, "correct", 1.25), attempt(1, "correct", 1.0, "0.0", "tile it"),
                attempt(2, "mismatch", None, "0.0", "unroll"), attempt(3, "correct", 2.5, "0.0",
                                                                       "fuse")]
    found = history.outcomes(attempts, fastest, before_iteration=3)
    assert [o.id for o in found] == ["0.0", "1.0", "2.0"]       # the round under way: not yet
    assert history.lines(found, to_analyst=True) == [
        "- 0.0 (written from scratch): correct at 1.6 ms (1.25x ±10% vs eager); kept as the "
        "best; the best now",
        "- 1.0 (from 0.0 on your advice 'tile it'): correct at 2 ms (1.00x ±10% vs eager); "
        "0.80x of 0.0, not kept",
        "- 2.0 (from 0.0 on your advice 'unroll'): mismatch: bad values; not kept"]
    assert history.lines(found)[-1].startswith(         # as the generation agent reads it
        "- 2.0 (from 0.0 on the analyst's advice 'unroll'): mismatch")
    assert history.seen_again("0.0", found) == [
        "candidate 1.0, made from 0.0 on your advice 'tile it', was correct at 2 ms (1.00x ±10% "
        "vs eager) (0.80x of 0.0), not kept; candidate 2.0, made from 0.0 on your advice "
        "'unroll', was mismatch: bad values, not kept; you are looking at 0.0 again."]
    assert history.with_outcomes(["tile it", "split K"], found) == [
        "- tile it: 1.0 correct at 2 ms (1.00x ±10% vs eager), 0.80x of 0.0, not kept",
        "- split K: no candidate came of it"]
    start = history.starting_point("0.0", "optimise", found)
    assert start.startswith("You start from candidate 0.0 (the best so far: correct at 1.6 ms")
    assert "Earlier changes to it were not kept: 1.0 on 'tile it'" in start
    everything = history.outcomes(attempts, fastest)
    assert everything[-1].kept and everything[-1].best_now and not everything[0].best_now
    assert history.seen_again("0.0", everything) == []            # 3.0 was kept


def test_a_branch_of_a_beam_sees_its_own_line():
    seeds = [attempt(0, "correct", 1.0), attempt(0, "correct", 1.1)]
    seeds[1].sample = 1
    children = [attempt(1, "correct", 1.2, "0.0", "tile it"),
                attempt(1, "correct", 1.3, "0.1", "unroll")]
    children[1].sample = 1
    failed = attempt(0, "compile_failure")
    failed.sample = 2
    for a, line in zip([*seeds, *children, failed], ["0.0", "0.1", "0.0", "0.1", None]):
        a.lineage = line
    found = history.outcomes([*seeds, *children, failed], fastest)
    assert [o.id for o in history.on_line(found, "1.0")] == ["0.0", "0.2", "1.0"]
    assert [o.id for o in history.on_line(found, None)] == [o.id for o in found]


def test_prompts_of_two_runs_that_kept_different_candidates_replay_alike():
    """Which candidate was kept is decided by its timing: a replay (another run of the same
    session) must not diverge on it. Here 1.0 beats 0.0 in one run and loses in the other."""
    from kforge_nb.agents.prompts import Prompts
    from kforge_nb.targets import get_target

    def prompts(child_speedup: float) -> list[str]:
        attempts = [attempt(0, "correct", 1.25),
                    attempt(1, "correct", child_speedup, "0.0", "tile it")]
        found = history.outcomes(attempts, fastest)
        analyse = Prompts().render(
            "analyse", target=get_target("cpp"), code="x", summary={"device": "cpu"}, summary_text="",
            machine=[], contract=[], pictures=[], objective=None, candidate="0.0", outcomes=history.lines(found, to_analyst=True),
            recommended=history.with_outcomes(["tile it"], found),
            again=history.seen_again("0.0", found), elsewhere=["unroll"])
        generate = history.starting_point("0.0", "optimise", found)
        return [analyse, generate]

    slower, faster = prompts(1.0), prompts(2.0)
    assert slower != faster and "Why you see 0.0 again" in slower[0]
    for one, other in zip(slower, faster):
        assert request_digest("s", [{"role": "user", "content": one}]) == \
            request_digest("s", [{"role": "user", "content": other}])
    other_change = prompts(1.0)[0].replace("tile it", "split K")
    assert request_digest("s", [{"role": "user", "content": other_change}]) != \
        request_digest("s", [{"role": "user", "content": slower[0]}])


# --- the core, its clock, its FMA units and the compiler (issue 38) ----------------------------

EPYC_ZEN5 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n" \
            "model name\t: AMD EPYC\nflags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw\n"


def test_an_amd_family_26_cpu_is_told_as_zen_5_with_its_512_bit_fma_units():
    from kforge_nb.machine import core_of
    fields = cpuinfo_fields(EPYC_ZEN5)
    core, named = core_of(fields)
    lines = Machine(cpu_name(fields), "x86_64", 2, 2, isa_of(fields), core=core, named=named,
                    clock="4.1 GHz max (cpufreq cpuinfo_max_freq)").lines("cpu")
    assert "- CPU: AMD EPYC (x86_64); core: Zen 5 (family 26, model 2)" in lines
    assert "- FMA: 2 x 512-bit FMA units a core (Zen 5): 64 fp32 FLOP a cycle a core" in lines
    assert "- Clock: 4.1 GHz max (cpufreq cpuinfo_max_freq)" in lines


def test_a_gcc_older_than_the_core_is_said_to_tune_for_an_older_one():
    from kforge_nb.machine import core_of
    core, named = core_of(cpuinfo_fields(EPYC_ZEN5))
    old = Machine("AMD EPYC", "x86_64", 2, 2, core=core, named=named,
                  compiler="g++ (Debian 12.2.0-14+deb12u1) 12.2.0").lines("cpu")
    assert "- Compiler: g++ (Debian 12.2.0-14+deb12u1) 12.2.0; it predates -march=znver5 " \
        "(GCC 14): -march=native turns on every ISA flag this CPU reports but tunes for an " \
        "older core" in old
    new = Machine("AMD EPYC", "x86_64", 2, 2, core=core, named=named,
                  compiler="g++ (GCC) 14.2.1 20240912").lines("cpu")
    assert "- Compiler: g++ (GCC) 14.2.1 20240912" in new


def test_zen_4_and_a_neoverse_part_are_read_and_an_unknown_model_said_unknown():
    from kforge_nb.machine import core_of
    zen4, _ = core_of({"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17"})
    assert zen4.name == "Zen 4" and zen4.fma_bits == 256 and "two 256-bit halves" in zen4.note
    n1, named = core_of(cpuinfo_fields(ARM.replace("CPU implementer\t: 0x41\n",
                                                   "CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n")))
    assert n1.name == "Neoverse N1" and named == "implementer 0x41, part 0xd0c"
    unknown, named = core_of({"vendor_id": "GenuineIntel", "cpu family": "6", "model": "1"})
    assert unknown is None
    assert Machine("X", named=named).lines("cpu")[0] == \
        "- CPU: X; core: not in kforge's table (family 6, model 1)"


def test_this_hosts_clock_is_the_one_the_guaranteed_peaks_use():
    """One reading of the max clock: the prompt says the figure the physics floor uses, or
    that none is published (then the floor takes its bound above any turbo)."""
    from kforge_nb.devices import guaranteed_peaks, published_max_clock
    from kforge_nb.machine import describe
    clock = next(line for line in describe().lines("cpu") if line.startswith("- Clock: "))
    found = published_max_clock()
    if found is None:
        assert clock == "- Clock: no max clock published here"
    else:
        assert clock.startswith(f"- Clock: {found[0] / 1e9:.3g} GHz max")
        assert f"{found[0] / 1e9:.3g} GHz max clock" in guaranteed_peaks("cpu").flops_formula


def test_this_hosts_compiler_is_the_one_candidates_are_built_with():
    import subprocess
    from kforge_nb.machine import describe
    from kforge_nb.runtime.cpp import compiler
    first = subprocess.run([compiler(), "--version"], capture_output=True,
                           text=True).stdout.splitlines()[0]
    assert f"- Compiler: {first}" in "\n".join(describe().lines("cpu"))
