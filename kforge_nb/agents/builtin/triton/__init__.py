"""The Triton target of the builtin agent.

`knobs.py` holds its options (`TritonOptions`), the conservative fix and the sweep's steps;
`group.py` writes one fused group's kernel and launcher, `split.py` the split-row variant for
long rows, `gemm.py` the tiled matrix product with its epilogue, and `assemble.py` what the
shared assemble loop asks of this target.
"""
