"""What every target tells the rest of kforge-nb: one place for everything language-specific."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..guardrails import Rule

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Availability:
    runs: bool            # candidates can be executed and judged here
    compiles: bool        # candidates can at least be built here (compile errors reported)
    reason: str = ""      # why not, and what to do about it


class Target:
    name: str = ""
    language: str = ""            # the code-fence tag a model writes the kernel in
    summary: str = ""
    required: list[Rule] = []     # patterns a candidate for this target must contain

    # -- where candidates run ---------------------------------------------------------------
    def device(self) -> str:
        """'cuda', 'cpu' or 'mps': where inputs live and kernels run."""
        raise NotImplementedError

    def availability(self) -> Availability:
        return Availability(True, True)

    def worker_env(self) -> dict[str, str]:
        """Environment for the candidate's worker process (set before its imports)."""
        return {}

    def timing_note(self) -> str:
        """Empty when timings are real performance figures; otherwise why they are not."""
        return ""

    # -- what happened when it ran ----------------------------------------------------------
    def is_compile_error(self, exc: BaseException) -> bool:
        """Whether an exception raised while importing/running the candidate is a build error."""
        from ..runtime.native import CompileError
        # SyntaxError: Python code the candidate compiles at import (e.g. a jit'd kernel's
        # duplicate argument) is a build error too.
        return isinstance(exc, (CompileError, SyntaxError))

    # -- what a prompt or a person needs ----------------------------------------------------
    def example_path(self) -> Path:
        """A complete, tested candidate for examples/softmax.py: the one-shot example."""
        return HERE / "examples" / f"{self.name}_softmax.py"

    def example(self) -> str:
        return self.example_path().read_text()

    def knowledge(self) -> list[Path]:
        """Knowledge notes a prompt may draw on (Markdown, see kforge_nb/knowledge): the
        built-in notes whose front matter names this target. A plug-in target may return
        documents of its own; those without front matter apply to it."""
        from ..knowledge import builtin_paths
        return builtin_paths(self.name)

    def describe(self) -> dict:
        a = self.availability()
        return {"name": self.name, "device": self.device(), "runs": a.runs,
                "compiles": a.compiles, "reason": a.reason, "timing_note": self.timing_note()}
