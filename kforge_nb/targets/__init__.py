"""Kernel languages. Each target lives in its own module; this is the registry.

Targets are found through the `kforge_nb.targets` entry-point group, so a package can add
TileLang, HIP or CuTe without touching this one:

    [project.entry-points."kforge_nb.targets"]
    tilelang = "my_pkg.tilelang:TileLangTarget"
"""
from __future__ import annotations

from functools import lru_cache
from importlib.metadata import entry_points

from .base import Target

BUILTIN = {
    "cpp": "kforge_nb.targets.cpp:CppTarget",
    "triton": "kforge_nb.targets.triton:TritonTarget",
    "cuda": "kforge_nb.targets.cuda:CudaTarget",
    "metal": "kforge_nb.targets.metal:MetalTarget",
}


class UnknownTarget(ValueError):
    pass


def _load(spec: str) -> type[Target]:
    module, _, attr = spec.partition(":")
    return getattr(__import__(module, fromlist=[attr]), attr)


@lru_cache(maxsize=None)
def registry() -> dict[str, str]:
    specs = dict(BUILTIN)
    for ep in entry_points(group="kforge_nb.targets"):
        specs[ep.name] = ep.value
    return specs


def names() -> list[str]:
    return sorted(registry())


def get_target(name: str) -> Target:
    """A target by name; `auto` is triton where CUDA is available, cpp otherwise."""
    if name == "auto":
        import torch
        name = "triton" if torch.cuda.is_available() else "cpp"
    if name not in registry():
        raise UnknownTarget(f"unknown target {name!r}; choose one of: auto, {', '.join(names())}")
    return _load(registry()[name])()


__all__ = ["Target", "get_target", "names", "UnknownTarget"]
