"""The table of targets the builtin agent writes for: each one's knobs, its conservative
version, its sweep's single steps, its assembly and its template writers (op family -> the
function writing that family's kernel, templates/). The generator looks a target up here;
adding a target is adding a row."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .assemble import Assembly, Built
from .capture import Captured, Schedule
from .cpp import knobs as cpp_knobs
from .cpp.assemble import CppAssembly
from .op_records import mark_bool_outputs, mark_divisions
from .templates import Writer, attention, conv, indexing, pool
from .triton import knobs as triton_knobs
from .triton.assemble import TritonAssembly


@dataclass(frozen=True)
class Target:
    name: str
    defaults: Callable[[str], object]          # precision policy -> the default options
    conservative: Callable[[], object]          # the options a "fix" writes with
    sweep_singles: Callable[[object], list[dict]]   # each knob on its own, around options
    assembly: type[Assembly]
    templates: dict[str, Writer]               # template family (a node's fn) -> its writer

    def write(self, title: str, source: str, captured: Captured, plan: Schedule, options) -> Built:
        mark_divisions(captured.graph.nodes)      # each division as torch divides
        mark_bool_outputs(captured.graph)         # comparisons returned as torch.bool
        return self.assembly(title, source, captured, plan, options, self.templates).build()


TARGETS = {t.name: t for t in (
    Target("cpp", lambda precision: cpp_knobs.CppOptions(), cpp_knobs.conservative,
           cpp_knobs.sweep_singles, CppAssembly,
           {"conv": conv.cpp, "pool": pool.cpp, "attention": attention.cpp,
            "gather": indexing.cpp, "scatter": indexing.cpp}),
    Target("triton", triton_knobs.TritonOptions.for_precision, triton_knobs.conservative,
           triton_knobs.sweep_singles, TritonAssembly,
           {"conv": conv.triton, "pool": pool.triton, "attention": attention.triton,
            "gather": indexing.triton, "scatter": indexing.triton}),
)}
