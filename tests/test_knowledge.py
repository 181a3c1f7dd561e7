"""The knowledge base (kforge_nb/knowledge): its notes, which of them a prompt gets, and
`--knowledge DIR` from the command line to the request a model receives."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_nb import knowledge as kb
from kforge_nb.targets import BUILTIN, get_target
from tests.support.fake_anthropic import FakeAnthropic
from tests.test_magic import ip, usage_error  # noqa: F401  (a real IPython shell)

EXAMPLES = Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples"
SOFTMAX = (EXAMPLES / "softmax.py").read_text()
MATMUL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(64, 32), torch.randn(32, 16)]
'''
GPU_ONLY = {"gpu_memory_coalescing", "gpu_gemm_tiling", "gpu_reductions",
            "gpu_tensor_cores_precision", "cuda_warp_shuffles_shared_memory",
            "metal_threadgroups_simd"}
USER_NOTE = """---
targets: [cpp]
ops: [softmax]
---
Row softmax on the CPU: keep each row's exp values in the output buffer and scale in place.
"""


# where each target runs, as a GPU machine and an AVX2-only CPU would say (not this host)
WHERE = {"triton": kb.Where(device="cuda"), "cuda": kb.Where(device="cuda"),
         "metal": kb.Where(device="mps"), "cpp": kb.Where(("avx", "avx2", "fma"), "cpu")}


def pick(source: str, target: str, bound: str | None = None, user=(),
         where: kb.Where | None = None) -> list[str]:
    notes = kb.pool(get_target(target).knowledge(), target, kb.user_notes(user))
    where = where or kb.Where(WHERE[target].isa, WHERE[target].device, kb.row_length(source))
    return [p.note.name for p in kb.choose(notes, target, kb.problem_ops(source), bound,
                                           where=where)]


# --- the built-in notes ----------------------------------------------------------------------

def test_every_builtin_note_has_valid_front_matter_and_each_target_two_notes():
    paths = kb.builtin_paths()
    assert len(paths) >= 10
    for path in paths:
        note = kb.read_note(path)             # raises on a malformed block
        assert note.front_matter and note.text, path.name
        assert note.targets and set(note.targets) <= set(BUILTIN), path.name
        assert set(note.bottleneck) <= set(kb.BOUNDS), path.name
        assert 15 <= len(note.text.splitlines()) <= 45, path.name
        # the lead: the title, then its rules in short
        lead = " ".join(note.text.split("\n\n")[0].split())
        assert "In short: " in lead and len(lead) <= 400, path.name
    for target in BUILTIN:
        assert len(get_target(target).knowledge()) >= 2, target


def test_ops_are_read_from_the_source_without_running_it():
    source = ("import torch.nn as nn\nimport torch.nn.functional as F\n"
              "class Model(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.norm = nn.LayerNorm(8)\n        self.fc = nn.Linear(8, 8)\n"
              "    def forward(self, x):\n"
              "        return F.softmax(self.fc(self.norm(x)), dim=-1).sum(1)\n"
              "def get_inputs():\n    raise SystemExit('never run')\n")
    ops = kb.problem_ops(source)
    assert {"layernorm", "linear", "matmul", "softmax", "sum"} <= ops
    assert "matmul" in kb.problem_ops(MATMUL) and "randn" not in kb.problem_ops(MATMUL)


# --- choosing ---------------------------------------------------------------------------------

def test_a_softmax_on_triton_gets_the_reduction_note_first():
    chosen = pick(SOFTMAX, "triton")
    assert chosen[0] == "gpu_reductions" and len(chosen) == kb.LIMIT
    assert "gpu_gemm_tiling" not in chosen and "gpu_tensor_cores_precision" not in chosen


def test_a_matmul_on_triton_gets_the_tiling_and_tensor_core_notes():
    chosen = pick(MATMUL, "triton")
    assert {"gpu_gemm_tiling", "gpu_tensor_cores_precision"} <= set(chosen)
    assert "gpu_reductions" not in chosen


def test_the_profiles_bottleneck_changes_the_pick():
    compute, memory = pick(MATMUL, "triton", "compute"), pick(MATMUL, "triton", "memory")
    assert "gpu_tensor_cores_precision" in compute and "gpu_memory_coalescing" not in compute
    assert "gpu_memory_coalescing" in memory and "gpu_tensor_cores_precision" not in memory
    assert pick(MATMUL, "triton", "compute") == compute         # deterministic


def test_cpp_gets_cpu_notes_only():
    for source in (SOFTMAX, MATMUL):
        for bound in (None, "memory", "compute"):
            chosen = pick(source, "cpp", bound)
            assert chosen and not set(chosen) & GPU_ONLY, (bound, chosen)
            assert all("cpp" in kb.read_note(kb.HERE / f"{n}.md").targets for n in chosen)
    assert "cpu_cache_blocking" in pick(MATMUL, "cpp")
    assert "cpu_cache_blocking" not in pick(SOFTMAX, "cpp")


def test_the_reasons_name_the_ops_and_the_bottleneck():
    why = kb.choose(kb.pool(get_target("triton").knowledge(), "triton"), "triton",
                    kb.problem_ops(SOFTMAX), "memory", where=WHERE["triton"])[0].why
    assert why == "gpu_reductions (ops: softmax; bottleneck: memory)"


# --- the user's folders -----------------------------------------------------------------------

def test_a_user_note_is_used_when_it_applies_and_replaces_a_builtin_of_its_name(tmp_path):
    (tmp_path / "softmax_cpu.md").write_text(USER_NOTE)
    (tmp_path / "gpu_reductions.md").write_text(       # same name as a built-in note
        "---\ntargets: [triton]\nops: [softmax]\n---\nMY OWN reduction advice.\n")
    (tmp_path / "plain.md").write_text("No front matter: every target, lowest priority.\n")
    assert pick(SOFTMAX, "cpp", user=[tmp_path])[0] == "softmax_cpu"
    assert "softmax_cpu" not in pick(MATMUL, "cpp", user=[tmp_path])      # other ops
    assert "softmax_cpu" not in pick(SOFTMAX, "triton", user=[tmp_path])  # other target
    notes = kb.pool(get_target("triton").knowledge(), "triton", kb.user_notes([tmp_path]))
    chosen = kb.choose(notes, "triton", kb.problem_ops(SOFTMAX), where=WHERE["triton"])
    assert chosen[0].note.name == "gpu_reductions" and "MY OWN" in chosen[0].note.text
    notes = kb.pool(get_target("metal").knowledge(), "metal", kb.user_notes([tmp_path]))
    everything = kb.choose(notes, "metal", kb.problem_ops(SOFTMAX), limit=99)
    assert everything[-1].note.name == "plain"                # applies, ranked last


def test_a_malformed_user_note_is_named(tmp_path):
    (tmp_path / "bad.md").write_text("---\ntargets: [cpp]\nspeed: fast\n---\ntext\n")
    with pytest.raises(kb.KnowledgeError, match=r"bad\.md, line 3"):
        kb.user_notes([tmp_path])
    (tmp_path / "bad.md").write_text("---\nbottleneck: [latency]\n---\ntext\n")
    with pytest.raises(ValueError, match="latency"):
        kb.user_notes([tmp_path])


def test_a_missing_folder_is_a_usage_error(kforge_main, tmp_path):
    done = kforge_main("run", str(EXAMPLES / "softmax.py"), "--knowledge", "missing/",
                      "--provider", "builtin", "--target", "cpp")
    assert done.returncode == 2
    assert "--knowledge" in done.stderr and "'missing/' is not a folder" in done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(ValueError, match="is not a folder"):     # a namespace built by hand
        from kforge_nb.session.config import agents_from_args, run_defaults
        args = run_defaults()
        args.knowledge = [str(tmp_path / "nowhere")]
        agents_from_args(args)


def test_a_missing_folder_in_the_magic_is_a_usage_error(ip, capsys):  # noqa: F811
    shown = usage_error(ip, capsys, f"%%kforge --knowledge missing/ --provider builtin\n"
                                    f"{SOFTMAX}")
    assert "'missing/' is not a folder" in shown


# --- a session: the notes reach the model ------------------------------------------------------

GOOD = (EXAMPLES / "cpp_softmax.py").read_text()
FASTER = GOOD.replace("schedule(static)", "schedule(static, 4)")
RECOMMENDATION = {"text": "TITLE: chunk the rows\nRECOMMENDATION: give each thread 4 rows at a "
                          "time (schedule(static, 4)).\nEXPECTED GAIN: ~1.1x"}


def answer(code: str) -> dict:
    return {"text": f"Here is the kernel.\n\n```python\n{code}```\n"}


@pytest.mark.slow
def test_a_session_sends_the_chosen_notes_to_the_model(kforge_cli, tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "softmax_cpu.md").write_text(USER_NOTE)
    with FakeAnthropic([answer(GOOD), RECOMMENDATION, answer(FASTER)]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        done = kforge_cli("run", str(EXAMPLES / "softmax.py"), "--target", "cpp",
                          "--provider", "anthropic", "--knowledge", str(notes),
                          "--iterations", "2", "--trials", "2", "--no-compile-baseline",
                          "--out", str(tmp_path / "runs"), "--json")
    assert done.returncode == 0, done.stderr
    first, optimise = server.user_prompts()[0], server.user_prompts()[2]
    for prompt in (first, optimise):   # the optimise prompt's pick also weighs the bottleneck
        assert "- softmax_cpu (ops: softmax)" in prompt
        assert "## Knowledge: cpu_openmp_threads" in prompt
        assert not [name for name in GPU_ONLY if name in prompt]
    assert "- cpu_vectorisation (general cpp advice)" in first
    # each note whole in every prompt: a request stands alone, its model never saw the last
    whole = kb.read_note(kb.HERE / "cpu_openmp_threads.md")
    assert first.count(whole.text) == 1 and optimise.count(whole.text) == 1
    assert "Sent in full in an earlier request" not in optimise
    run = Path(json.loads(done.stdout)["artifacts"])
    saved = json.loads((run / "iter-00" / "sample-0" / "generation.json").read_text())
    assert saved["knowledge"] == ["softmax_cpu", "cpu_openmp_threads", "cpu_vectorisation"]
    assert "softmax_cpu" in (run / "iter-00" / "sample-0" / "prompt.json").read_text()
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    generated = [e["data"] for e in events if e["kind"] == "candidate_generated"]
    assert generated[0]["knowledge"] == saved["knowledge"]


# --- chosen by ISA, device and shape ------------------------------------------------------------

GATED = '''import torch
import torch.nn as nn

batch, dim = 16, {dim}


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x * torch.sigmoid(x), dim=-1)


def get_inputs():
    return [torch.randn(batch, dim)]
'''


def prompt_for(source: str, isa: tuple[str, ...]) -> str:
    """The first generation prompt for `source` on a CPU described by hand (not this host)."""
    from kforge_nb.agents.base import GenerationRequest
    from kforge_nb.agents.llm import LLMGenerator
    from kforge_nb.machine import Machine
    from kforge_nb.problem import Problem
    machine = Machine("Scripted CPU 9000", "x86_64", 4, 8, isa)
    generator = LLMGenerator(None, machine=machine, notes=99)
    system, messages = generator.messages(
        GenerationRequest(Problem.from_string(source, "gated"), "cpp", "initial"))
    return system + messages[0]["content"]


def test_the_avx512_note_goes_only_to_a_cpu_with_avx512f():
    avx2, avx512 = ("avx", "avx2", "fma"), ("avx", "avx2", "fma", "avx512f")
    without = prompt_for(GATED.format(dim=2048), avx2)
    with_it = prompt_for(GATED.format(dim=2048), avx512)
    assert "- CPU: Scripted CPU 9000" in without and "no avx512f" in without
    assert "cpu_avx512_vectors" not in without and "prefer-vector-width=512" not in without
    assert "- cpu_avx512_vectors (ops: sigmoid; isa: avx512f)" in with_it
    assert "prefer-vector-width=512" in with_it


def test_the_short_rows_note_goes_only_to_short_rows():
    assert kb.row_length(GATED.format(dim=4)) == 4
    short = prompt_for(GATED.format(dim=4), ("avx2",))
    assert "- cpu_short_rows (ops: softmax; rows of 4 <= 32)" in short
    assert "cpu_short_rows" not in prompt_for(GATED.format(dim=2048), ("avx2",))
    unknown = GATED.format(dim="load_dim()")        # a shape the source does not state
    assert kb.row_length(unknown) is None
    assert "cpu_short_rows" not in prompt_for(unknown, ("avx2",))


def test_row_length_reads_the_largest_inputs_last_dimension_without_running():
    source = ("import torch\nB = 8\nN = 2 * 16\n"
              "def get_inputs():\n    k = N // 2\n"
              "    return [torch.rand((B, k, N)), torch.randint(0, 5, (B, 3)), torch.randn(N)]\n"
              "raise SystemExit('never run')\n")
    assert kb.input_shapes(source) == [(8, 16, 32), (8, 3), (32,)]
    assert kb.row_length(source) == 32
    assert kb.row_length(SOFTMAX) == 1000


def test_a_note_with_a_bad_max_row_is_named(tmp_path):
    (tmp_path / "rows.md").write_text("---\nmax_row: short\n---\ntext\n")
    with pytest.raises(kb.KnowledgeError, match=r"rows\.md: max_row must be a whole number"):
        kb.user_notes([tmp_path])


# --- the example follows the notes (issue 38) ---------------------------------------------------

def test_the_cpp_example_vectorises_the_loops_its_notes_say_need_a_simd_reduction(tmp_path):
    """The prompt's example does what cpu_vectorisation says: no std::fmax, and g++ (with the
    flags candidates are built with) vectorises its max and sum reductions."""
    import re
    import subprocess

    from kforge_nb.runtime.cpp import FLAGS, compiler
    source = re.search(r'source = r"""(.*?)"""', GOOD, re.S).group(1)
    assert "std::fmax(" not in source
    kernel = tmp_path / "example.cpp"
    kernel.write_text(source)
    done = subprocess.run([compiler(), *FLAGS, "-fopt-info-vec-optimized", str(kernel), "-o",
                           str(tmp_path / "example.so")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    vectorised = {int(n) for n in re.findall(r"example\.cpp:(\d+):\d+: optimized: loop "
                                             r"vectorized", done.stderr)}
    lines = source.splitlines()
    for reduction in ("reduction(max:row_max)", "reduction(+:row_sum)"):
        pragma = next(i for i, line in enumerate(lines, 1) if reduction in line)
        # g++ names the loop by its pragma's line or by the loop's own
        assert {pragma, pragma + 1} & vectorised, (reduction, done.stderr)
