"""A round's samples are real alternatives: each asks for something different, recorded per
sample. Driven by the real `anthropic` SDK against the scripted Messages API on 127.0.0.1."""
from __future__ import annotations

import json

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.agents.builtin.generator import kernel_text
from kforge_nb.session import Budget, Session
from tests.test_session_anthropic import FASTER, GOOD, PROBLEM, answer, api, options  # noqa: F401

pytestmark = pytest.mark.slow     # each test runs a session of several samples a round

ALTERNATIVES = {"text": "TITLE: chunk the rows\nRECOMMENDATION: give each thread 4 rows at a "
                        "time (schedule(static, 4)).\nEXPECTED GAIN: ~1.1x\n"
                        "ALTERNATIVE: vectorise the row loop: add #pragma omp simd to the "
                        "inner loops.\n"
                        "ALTERNATIVE: fuse the max and the sum: one pass with an online "
                        "softmax.\n"}


def generation_requests(server) -> list[dict]:
    return [r["body"] for r in server.requests if "ALTERNATIVE" not in str(r["body"]["system"])
            and "performance analyst" not in str(r["body"]["system"])]


def test_the_samples_of_a_round_ask_for_different_things(api, tmp_path):  # noqa: F811
    server = api([answer(GOOD)] * 3 + [ALTERNATIVES] + [answer(FASTER)] * 3)
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=2, samples=3, patience=None), options(tmp_path),
                      out=tmp_path)
    session.run()
    assert len(session.history) == 6, [a.result.message for a in session.history]
    analysis = [r["body"] for r in server.requests if "performance analyst" in
                str(r["body"]["system"])]
    assert len(analysis) == 1 and "up to 2 ALTERNATIVE lines" in str(analysis[0]["system"])
    prompts = [str(b["messages"][-1]["content"]) for b in generation_requests(server)]
    first, second = prompts[:3], prompts[3:]
    assert len(set(first)) == 3 and len(set(second)) == 3      # no two samples alike
    assert sum("## This sample" in p for p in first) == 2       # #0 as asked, #1 and #2 vary
    assert sum("online softmax" in p for p in second) == 1
    assert sum("vectorise the row loop" in p for p in second) == 1
    saved = {a.sample: json.loads((session.folder / "iter-01" / f"sample-{a.sample}" /
                                   "generation.json").read_text())["variation"]
             for a in session.history if a.iteration == 1}
    assert saved[0] == "" and "vectorise the row loop" in saved[1] and "online softmax" in saved[2]
    # Anthropic's Messages API takes no temperature: none is sent, none recorded
    assert all("temperature" not in b for b in generation_requests(server))
    assert all(json.loads((session.folder / "iter-01" / f"sample-{a.sample}" /
                           "generation.json").read_text())["temperature"] is None
               for a in session.history)


def test_one_sample_asks_as_before(api, tmp_path):  # noqa: F811
    """With one sample nothing changes: no alternatives asked for, no variation."""
    server = api([answer(GOOD), ALTERNATIVES, answer(FASTER)])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=2, patience=None), options(tmp_path), out=tmp_path)
    session.run()
    assert "ALTERNATIVE" not in str([r["body"]["system"] for r in server.requests])
    assert all("## This sample" not in p for p in server.user_prompts())


def test_temperatures_asked_of_anthropic_are_refused_with_a_notice(api, tmp_path):  # noqa: F811
    server = api([answer(GOOD)] * 2)
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", temperatures=(0.3,)),
                      Budget(iterations=1, samples=2, patience=None), options(tmp_path),
                      out=tmp_path)
    session.run()
    notices = [e.data["text"] for e in session.events if e.kind == "notice"]
    assert any("--temperatures ignored" in n for n in notices), notices
    assert all("temperature" not in b for b in generation_requests(server))


def test_temperatures_on_the_command_line_are_checked():
    import argparse

    from kforge_nb.options import temperatures
    assert temperatures("1,0.5") == (1.0, 0.5)
    for wrong, said in (("hot", "comma-separated"), ("0.5,3", "from 0 to 2")):
        try:
            temperatures(wrong)
        except argparse.ArgumentTypeError as err:
            assert said in str(err)
        else:
            raise AssertionError(f"{wrong!r} was taken")


def test_the_builtin_agents_samples_are_a_knob_sweep(kforge_cli, tmp_path):
    """--samples 3 with the builtin agent: three different candidates a round (other lane
    blocks or schedules), each sample's knobs recorded."""
    done = kforge_cli("run", str(PROBLEM.path), "--target", "cpp", "--provider", "builtin",
                      "--iterations", "1", "--samples", "3", "--trials", "1",
                      "--no-compile-baseline", "--json", timeout=600)
    assert done.returncode in (0, 1), done.stderr
    folder = tmp_path / json.loads(done.stdout)["artifacts"]
    codes = [(folder / "iter-00" / f"sample-{k}" / "candidate.py").read_text() for k in range(3)]
    headers = {next(line for line in c.splitlines() if line.startswith("# kforge-builtin:"))
               for c in codes}
    assert len(headers) == 3                                  # each written with other knobs
    assert len({kernel_text(c) for c in codes}) == 3          # and each a different kernel
    saved = [json.loads((folder / "iter-00" / f"sample-{k}" / "generation.json").read_text())
             for k in range(3)]
    assert saved[0]["variation"] == ""
    assert all("varies the knobs" in s["variation"] for s in saved[1:])


def test_the_knob_sweep_skips_knobs_that_do_not_change_the_kernel():
    """A row softmax has no lane block: its variants walk the knobs it has (schedule, output
    reuse, accumulator, threads), each a different kernel; numbered across a round's branches,
    later variants go on where earlier ones stopped."""
    from kforge_nb.agents.base import GenerationRequest
    from kforge_nb.agents.builtin.generator import BuiltinGenerator
    generator = BuiltinGenerator()
    made = [generator.generate(GenerationRequest(problem=PROBLEM, target="cpp", kind="initial",
                                                 variant=k)) for k in range(6)]
    assert len({kernel_text(g.code) for g in made}) == 6
    assert not any("lane_block" in g.variation for g in made)
    from kforge_nb.agents.builtin.cpp.knobs import host_has_avx512
    first = "vector_width 512" if host_has_avx512() else "schedule dynamic"   # AVX-512: wide first
    assert first in made[1].variation
    assert any("schedule dynamic" in g.variation for g in made)


def test_the_sweep_never_undoes_the_change_its_branch_tries():
    """An optimise sample told to recompute instead of re-reading the output (reuse_output
    off) varies other knobs: reuse_output on again would be its parent's kernel."""
    from kforge_nb.agents.base import GenerationRequest
    from kforge_nb.agents.builtin.generator import BuiltinGenerator
    generator = BuiltinGenerator()
    parent = generator.generate(GenerationRequest(problem=PROBLEM, target="cpp",
                                                  kind="initial")).code
    told = 'action: {"kind": "reuse_output", "value": false}'
    made = [generator.generate(GenerationRequest(
        problem=PROBLEM, target="cpp", kind="optimise", previous_code=parent, instruction=told,
        variant=k)) for k in range(1, 7)]
    assert all(g.code and '"reuse_output": false' in g.code for g in made)
    assert all("reuse_output" not in g.variation for g in made)
    assert kernel_text(parent) not in {kernel_text(g.code) for g in made}


def test_the_sweep_goes_on_from_the_earlier_rounds(tmp_path):
    """Greedy, 3 samples: each optimisation round's two extra samples try the next knobs of
    the sweep (variants 1-2, then 3-4), not its first two again."""
    session = Session(PROBLEM, "cpp", AgentConfig(provider="builtin"),
                      Budget(iterations=3, samples=3, patience=None, confirm=0),
                      options(tmp_path), out=tmp_path)
    session.run()
    varied = {}
    for e in session.events:
        if e.kind == "candidate_generated" and e.iteration > 0 and e.data["variation"]:
            varied.setdefault(e.iteration, set()).add(e.data["variation"].split(" varies")[0])
    assert varied == {1: {"sample 1", "sample 2"}, 2: {"sample 3", "sample 4"}}, varied
