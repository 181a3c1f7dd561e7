"""The builtin agent: deterministic kernel generation and analysis without an LLM.

`BuiltinGenerator` captures the reference with torch.fx, fuses elementwise ops and reductions
into groups and writes one readable kernel per group (C++ with OpenMP for `cpp`, Triton for
`triton`); ops it does not lower stay torch calls and are listed in `Generation.kept_ops`.
`BuiltinAnalyst` reads a verdict and its profile summary and returns one recommendation whose
`action` the generator knows how to apply.

The stages, in the order a request meets them:
- `generator.py` the role; `actions.py` what a request asks, as data; `sweep.py` the knob sweep;
  `targets.py` the table of targets (each row: knobs, assembly, template writers);
- `op_records.py` one record per pointwise op (operands, torch names, cost, its formula),
  read by capture, the passes and the language classes;
- `capture/` the reference captured (fx), lowered to the agent's graph and partitioned;
- `assemble.py` the one assemble loop, with `kernel.py` (a group's kernel plan),
  `candidate.py` (the candidate file's parts) and `elementwise.py` (one class per language:
  its primitives and the ops it spells its own way); `templates/` whole-op kernels;
- `cpp/` and `triton/` each target's kernels, knobs and assemble specifics;
- `analyst.py` the rules.
"""
from .analyst import BuiltinAnalyst
from .generator import BuiltinGenerator

__all__ = ["BuiltinGenerator", "BuiltinAnalyst"]
