"""Whole-op kernels written from templates: convolutions, pooling, attention, gathers and
scatters by index tensors (indexing.py).

A `template` node (capture/ops_templates.py) is one op whose kernel is not a fused sweep of
pointwise and reduce steps but a known loop nest: a convolution's window over its input, a
pool's window, attention's online softmax over keys. Each family is one module here with one
writer per target, registered in that target's row (targets.py); a writer takes the node and returns a `Written` (the kernel's text, its
Python launcher, the launcher's arguments and outputs, one line for the story), or None when
the call is one it does not cover, and the candidate keeps the vendor's call.

Which template nodes get the agent's own kernel is the assembly's choice (assemble.py): every
one it can write when no other kernel is left (a module that is one vendor op races the agent's
kernel against the vendor's; the session keeps the faster), the vendor's otherwise, so that the
fused kernels around a cuDNN / oneDNN convolution are what is measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..capture.ir import Node


# Families the candidate writes itself even beside fused kernels: torch's kernel for a gather or
# a scatter is a generic copy of rows, no vendor library the fused kernels should be measured by.
OWN_BESIDE_GROUPS = frozenset({"gather", "scatter"})


@dataclass
class Written:
    kernel: str                       # the kernel's text (Triton: with its decorator; C++: a function)
    launcher: list[str]               # the Python wrapper's lines (def <function>(...): ...)
    arguments: list[Node]             # what forward passes the wrapper, in order
    outputs: list[Node]
    what: str                         # the story's line: what the kernel does
    helpers: set[str] = field(default_factory=set)   # C++ maths helpers it uses
    libm: set[str] = field(default_factory=set)      # C++: the library maths it calls
    openmp: bool = False                             # C++: it runs loops on the thread team


Writer = Callable[[Node, str, str, object], "Written | None"]   # (node, name, function, options)


def write(node: Node, writers: dict[str, Writer], name: str, function: str,
          options) -> Written | None:
    """The kernel of `node`'s family from the target's `writers`, or None (a family the
    target has no writer for, or a call the writer does not cover: the vendor call)."""
    writer = writers.get(node.fn)
    return writer(node, name, function, options) if writer else None


def vendor_lines(node: Node) -> list[str]:
    """forward's line computing `node` with the vendor's kernel."""
    from ..candidate import python_ref
    call = node.attrs["vendor"].format(*[python_ref(a) for a in node.args])
    return [f"{node.name} = {call}  # kept in torch: {node.attrs['label'] or node.fn}"]
