"""Names for the values of the builtin agent's graph: an fx node's name made into an identifier
that clashes with nothing the emitters write themselves (their variables, C++ and Triton words).
"""
from __future__ import annotations

import keyword
import re

# Names the emitters use for their own variables; values never take them.
RESERVED = {
    "row", "rows", "col", "cols", "lane", "lanes", "task", "tasks", "i", "n", "shape", "kernels",
    "source", "torch", "nn", "F", "math", "triton", "tl", "cpp", "self", "pid", "offsets", "mask",
    "start", "block", "begin", "end", "grid", "acc", "auto", "char", "const", "default", "delete",
    "double", "float", "int", "long", "new", "register", "short", "signed", "static", "struct",
    "switch", "this", "union", "unsigned", "void", "volatile", "case", "catch", "enum", "extern",
    "friend", "goto", "inline", "mutable", "namespace", "operator", "private", "protected",
    "public", "sizeof", "template", "throw", "typedef", "typename", "using", "virtual", "bool",
    "true", "false", "INFINITY", "NAN", "std", "vexp", "vlog", "vlog1p", "vtanh", "vsigmoid",
    "verf", "where", "LANE_BLOCK", "BLOCK_SIZE", "int64_t", "math_inline", "min", "max", "abs", "exp",
    "log", "sqrt", "erf", "tanh", "floor", "ceil", "sin", "cos", "pow", "fma", "out",
    "r", "j", "q", "l", "kk", "tile_row", "tile_col", "m_index", "n_index", "batch", "batches",
    "row_tiles", "col_tiles", "tiles", "rest", "slot", "elements", "reduce_count", "lane_begin",
    "lane_count", "lane_blocks", "program", "in_range", "product", "block", "panel", "part",
    "block_row", "row_blocks", "rows_here", "cols_here", "rows_in_tile", "k0", "k_here",
    "a_rows", "a_row", "a_batch", "a_value", "lanes_sum", "dot", "t", "m", "k",
}


def sanitise(name: str) -> str:
    name = re.sub(r"\W", "_", name).strip("_") or "v"
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in RESERVED or name.startswith("n_"):
        name += "_v"
    return name
