"""The builtin agent: deterministic kernel generation and analysis without an LLM.

`BuiltinGenerator` captures the reference with torch.fx, fuses elementwise ops and reductions
into groups and writes one readable kernel per group (C++ with OpenMP for `cpp`, Triton for
`triton`); ops it does not lower stay torch calls and are listed in `Generation.kept_ops`.
`BuiltinAnalyst` reads a verdict and its profile summary and returns one recommendation whose
`action` the generator knows how to apply.
"""
from .analyst import BuiltinAnalyst
from .generator import BuiltinGenerator

__all__ = ["BuiltinGenerator", "BuiltinAnalyst"]
