"""A `%%kforge` cell -> a Problem the evaluator's reference worker can run on its own.

Two forms are accepted:

* KernelBench form: the cell defines `class Model`, `get_inputs()` and optionally
  `get_init_inputs()`; its text is the reference, unchanged.
* Any `nn.Module` class plus `--inputs EXPR`: EXPR is evaluated in the notebook's namespace.
  Tensors are saved to `<out>/inputs/<content hash>.pt` and the reference gets a generated
  `get_inputs()` that loads them (so every run of the worker sees exactly the notebook's values);
  Python literals (numbers, strings, None, tuples/lists of them) are written into the source.
  Anything else cannot be reproduced in another process and is refused with a message.

The reference runs in a separate process, so the cell must be self-contained: it is executed
here once in a fresh namespace (never the notebook's), and a name it uses without defining or
importing it is reported before any session starts. What it defines is then copied into the
notebook's namespace, as running the cell normally would.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import io
from pathlib import Path

from ..problem import Problem, ProblemError

CELL_MODULE = "__kforge_cell__"


class CellError(ValueError):
    """The cell cannot become a reference; the message says why and what to do."""


def problem_from_cell(cell: str, user_ns: dict, out: str | Path, inputs: str | None = None,
                      init_inputs: str | None = None, module: str | None = None) -> Problem:
    namespace = run_cell(cell)
    cls = module_class(namespace, module)
    user_ns.update({k: v for k, v in namespace.items() if not k.startswith("__")})
    source = cell.rstrip() + "\n"
    if cls.__name__ != "Model":
        source += f"\n\nModel = {cls.__name__}   # added by %%kforge: the module to optimise\n"
    if inputs is not None:
        source += generated_function("get_inputs", inputs, user_ns, out)
    elif "get_inputs" not in namespace:
        raise CellError(f"the cell defines `{cls.__name__}` but no `get_inputs()`: define it, or "
                        f"pass the forward arguments from the notebook with --inputs EXPR "
                        f"(e.g. --inputs x or --inputs \"(x, y)\").")
    if init_inputs is not None:
        source += generated_function("get_init_inputs", init_inputs, user_ns, out)
    elif "get_init_inputs" not in namespace:
        required = [p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                            p.POSITIONAL_OR_KEYWORD)]
        if required:
            raise CellError(f"`{cls.__name__}(...)` needs {', '.join(required)}: define "
                            f"get_init_inputs() in the cell, or pass --init-inputs EXPR.")
    name = named_by_ops(cell, cls.__name__) if cls.__name__ == "Model" else cls.__name__.lower()
    try:
        return Problem.from_string(source, name=name)
    except ProblemError as err:
        raise CellError(str(err)) from None


# what a forward calls to move or reshape data: not what names it
NOT_AN_OP = {"view", "reshape", "contiguous", "size", "to", "float", "half", "permute",
             "transpose", "unsqueeze", "squeeze", "expand", "flatten", "clone", "super"}
MAX_NAMED_OPS = 3


def named_by_ops(cell: str, class_name: str) -> str:
    """A run's name for a `class Model` cell: the ops its forward calls, in the order they
    appear ("softmax", "pow-mean-rsqrt"), so that `kforge runs` and a view's header tell a
    notebook's runs apart (every one was "cell"); "cell" where the forward calls none."""
    from ..knowledge.ops import op_key
    tree = ast.parse("\n" + cell)
    forward = next((f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == class_name
                    for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward"),
                   None)
    calls = sorted((n for n in ast.walk(forward) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset)) if forward else []
    names = []
    for call in calls:
        func = call.func
        own = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id == "self"              # self.fc(x): a submodule, named elsewhere
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        key = op_key(name)
        if name and not own and not name.startswith("_") and name not in NOT_AN_OP and \
                key.isidentifier() and key not in names:
            names.append(key)
    return "-".join(names[:MAX_NAMED_OPS]) or "cell"


def run_cell(cell: str) -> dict:
    """Execute the cell in a fresh namespace; report its first error as one paragraph."""
    try:
        # one blank line for the `%%kforge` line above the body: line numbers in messages are
        # the ones the notebook's editor shows
        code = compile("\n" + cell, "<%%kforge cell>", "exec")
    except SyntaxError as err:
        raise CellError(f"the cell does not parse: line {err.lineno}: {err.msg} "
                        f"({(err.text or '').strip()!r}).") from None
    namespace = {"__name__": CELL_MODULE}
    try:
        exec(code, namespace)
    except Exception as err:
        line = cell_line(err, cell)
        hint = (" The reference runs in a separate process, so the cell must import or define "
                "everything it uses (e.g. `import torch` and `import torch.nn as nn`)."
                if isinstance(err, NameError) else "")
        raise CellError(f"running the cell raised {type(err).__name__}{line}: {err}.{hint}") \
            from None
    return namespace


def cell_line(err: BaseException, cell: str) -> str:
    frames = [f for f in inspect.getinnerframes(err.__traceback__, 0)
              if f.filename == "<%%kforge cell>"]
    if not frames:
        return ""
    lines = ["%%kforge"] + cell.splitlines()       # as the editor numbers them
    n = frames[-1].lineno
    return f" at line {n} ({lines[n - 1].strip()!r})" if 1 < n <= len(lines) else ""


def module_class(namespace: dict, name: str | None) -> type:
    import torch.nn as nn
    modules = {k: v for k, v in namespace.items() if isinstance(v, type) and
               issubclass(v, nn.Module) and v.__module__ == CELL_MODULE}
    if name:
        if name not in modules:
            raise CellError(f"--module {name}: the cell defines no nn.Module class of that name "
                            f"(it defines: {', '.join(modules) or 'none'}).")
        return modules[name]
    if isinstance(namespace.get("Model"), type) and issubclass(namespace["Model"], nn.Module):
        return namespace["Model"]
    if len(modules) == 1:
        return next(iter(modules.values()))
    if not modules:
        raise CellError("the cell defines no nn.Module class: write the reference as "
                        "`class Model(nn.Module)` with `get_inputs()` (KernelBench form), or any "
                        "nn.Module class plus --inputs EXPR.")
    raise CellError(f"the cell defines several nn.Module classes ({', '.join(modules)}); name "
                    f"the one to optimise with --module NAME, or call it Model.")


def generated_function(function: str, expr: str, user_ns: dict, out: str | Path) -> str:
    """`def get_inputs(): ...` reproducing the value of EXPR in the notebook."""
    flag = "--inputs" if function == "get_inputs" else "--init-inputs"
    try:
        value = eval(expr, user_ns)
    except Exception as err:
        raise CellError(f"{flag} {expr!r} raised {type(err).__name__}: {err}. It is evaluated in "
                        f"the notebook's namespace; run the cell that defines its names first.") \
            from None
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    tensors = [v for v in values if is_tensor(v)]
    for i, v in enumerate(values):
        if not is_tensor(v) and not is_literal(v):
            raise CellError(f"{flag} {expr!r}: item {i} is a {type(v).__name__}, which cannot be "
                            f"passed to the reference process. Use tensors (e.g. "
                            f"torch.as_tensor(...)) and plain numbers, strings, None or tuples.")
    if not tensors:
        return (f"\n\ndef {function}():   # added by %%kforge from {flag} {expr}\n"
                f"    return {values!r}\n")
    path = save_values(values, Path(out))
    return (f"\n\ndef {function}():   # added by %%kforge from {flag} {expr}: the notebook's values\n"
            f"    import torch as _torch\n"
            f"    return list(_torch.load({str(path)!r}, weights_only=True))\n")


def is_tensor(value) -> bool:
    import torch
    return isinstance(value, torch.Tensor)


def is_literal(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(is_literal(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        try:
            return ast.literal_eval(repr(value)) == value or value != value   # nan != nan
        except (ValueError, SyntaxError):
            return False
    return False


def save_values(values: list, out: Path) -> Path:
    """Tensors (detached, contiguous, on the CPU) and literals, named by their content's hash."""
    import torch
    plain = [v.detach().cpu().contiguous().clone() if is_tensor(v) else v for v in values]
    buffer = io.BytesIO()
    torch.save(plain, buffer)
    data = buffer.getvalue()
    path = (out / "inputs" / f"{hashlib.sha256(data).hexdigest()[:20]}.pt").resolve()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path
