"""Unknown targets, providers and models: a usage error naming the choices, never a run."""
import pytest

from tests.support.evaluator import CANDIDATES, PROBLEMS

RELU = str(PROBLEMS / "relu.py")


@pytest.mark.parametrize("args, says", [
    (["eval", RELU, str(CANDIDATES / "cpp_relu.py"), "--target", "vulkan"],
     "unknown target 'vulkan'"),
    (["run", RELU, "--target", "vulkan"], "unknown target 'vulkan'"),
    (["run", RELU, "--provider", "gemini", "--target", "cpp"],
     "unknown provider 'gemini'; choose one of: auto, anthropic, builtin, openai, replay"),
    (["run", RELU, "--provider", "openai", "--target", "cpp"],
     "the openai provider needs --model"),
    (["run", RELU, "--replay", "nowhere.jsonl", "--target", "cpp"],
     "replay file 'nowhere.jsonl' does not exist"),
])
def test_unknown_names_are_usage_errors(kforge_main, args, says):
    done = kforge_main(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
