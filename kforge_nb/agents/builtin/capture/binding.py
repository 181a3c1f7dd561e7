"""Bind a call's positional and keyword arguments to the names of a signature spec."""
from __future__ import annotations

import ast

REQUIRED = object()


def bind(args: tuple, kwargs: dict, spec: str) -> dict:
    """Bind positional/keyword arguments to the names in `spec` ("input, dim=None, ...")."""
    names, defaults = [], {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, default = part.partition("=")
        names.append(name.strip())
        defaults[name.strip()] = ast.literal_eval(default.strip()) if default else REQUIRED
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    for name in names:
        bound.setdefault(name, defaults[name])
        if bound[name] is REQUIRED:
            raise TypeError(f"missing argument {name}")
    return bound
