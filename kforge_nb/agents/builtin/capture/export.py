"""Capture with torch's own tracer where fx symbolic tracing cannot, or would lose a write.

`torch.export.export(model, inputs, strict=False)` runs forward on the example inputs, so Python
control flow on shapes (`min(2, x.shape[-1])`, `for c in range(ids.shape[-1])`) is resolved at
those shapes, and `run_decompositions({})` functionalises the graph without decomposing it: each
in-place write (`index_copy_`, `masked_fill_`, `x[..., 1::2] = v`) becomes an out-of-place op
(`index_copy`, `slice_scatter`, ...) whose result later reads take, while linear, softmax,
layer_norm stay whole for the lowerer's converters.

`as_torch_graph` rewrites the exported ATen graph into the torch-level fx graph the Lowerer
reads (lowerer.py): `aten.add.Tensor` -> `torch.add`, `aten.slice.Tensor` -> `x[:, a:b:c]`,
`aten.view` -> `x.reshape(...)`. What it has no torch spelling for stays the ATen op, which the
keeper refuses by name. Only export APIs present in torch 2.11 and 2.13 are used.
"""
from __future__ import annotations

import operator

import torch
import torch.fx

from .errors import CaptureError
from .mutations import state_refusal

# ATen ops that read as a tensor method in forward (no torch.<name> with the same arguments).
# `view` reads as reshape: export writes a reshape of an expanded tensor as a copy then a view,
# and the copy (a `clone`) is an identity to the lowerer; the graph is functional, so no write
# ever goes through the view, and reshape is a view wherever a view exists
METHODS = {"sym_size": "size", "view": "reshape", "_unsafe_view": "reshape", "reshape": "reshape",
           "expand": "expand",
           "_to_copy": "to", "to": "to", "alias": "view_as", "repeat": "repeat"}
# ATen ops that are the value itself once the graph is functional
IDENTITY = {"lift_fresh_copy", "alias_copy"}
# checks export leaves in the graph; nothing reads them
DROPPED = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size"}
# arguments that pin a value to the capture's device or say nothing to the op's result
DEVICE_KWARGS = {"pin_memory", "layout"}


def export(model: torch.nn.Module, inputs: list) -> torch.fx.GraphModule:
    """The module exported at its example inputs' shapes, functional, as a torch-level graph.
    The batch dim is left free where export can (the judge runs a second batch size too);
    static shapes where it cannot."""
    try:
        program = torch.export.export(model, tuple(inputs), dynamic_shapes=batch_dims(inputs),
                                      strict=False)
    except Exception:
        program = torch.export.export(model, tuple(inputs), strict=False)
    program = program.run_decompositions({})
    state = program.graph_signature.buffers_to_mutate
    if state:
        raise state_refusal(state.values())
    unlifted = program.module()
    return as_torch_graph(unlifted, program.call_spec.out_spec)


def batch_dims(inputs: list) -> tuple:
    """Dim 0 free (Dim.AUTO: export keeps it static where forward needs it) for each input
    whose leading size is the first input's, as the judge's other batch size changes them."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor) and x.dim()]
    batch = tensors[0].shape[0] if tensors else None
    return tuple({0: torch.export.Dim.AUTO} if isinstance(x, torch.Tensor) and x.dim() and
                 x.shape[0] == batch else None for x in inputs)


def as_torch_graph(unlifted: torch.fx.GraphModule, out_spec) -> torch.fx.GraphModule:
    graph, env = torch.fx.Graph(), {}
    tensors = []                            # forward's tensor inputs: (node, dtype)
    for fx in unlifted.graph.nodes:
        if fx.op == "placeholder":
            env[fx] = graph.placeholder(fx.name)
            if isinstance(fx.meta.get("val"), torch.Tensor):
                tensors.append((env[fx], fx.meta["val"].dtype))
        elif fx.op == "get_attr":
            env[fx] = graph.get_attr(fx.target)
        elif fx.op == "call_module":           # export's guard on the input shapes
            continue
        elif fx.op == "output":
            graph.output(returned(env, fx.args[0], out_spec))
        else:
            new = rewrite(graph, fx, env, tensors)
            if new is not None:
                env[fx] = new
    return torch.fx.GraphModule(unlifted, graph)


def returned(env: dict, outputs, out_spec):
    """One tensor where forward returns one (export always returns a flat tuple)."""
    flat = [env[o] if isinstance(o, torch.fx.Node) else o for o in outputs]
    if out_spec.is_leaf():
        return flat[0]
    if out_spec.type is not tuple or any(not child.is_leaf() for child in out_spec.children_specs):
        raise CaptureError("the reference returns a nested structure; the builtin agent writes "
                           "forwards that return a tensor or a tuple of tensors")
    return tuple(flat)


def rewrite(graph: torch.fx.Graph, fx: torch.fx.Node, env: dict, tensors: list):
    """The torch-level node for one exported node (None: nothing to write)."""
    args = tuple(input_dtype(graph, a, tensors) for a in
                 torch.fx.node.map_arg(fx.args, lambda n: env[n]))
    kwargs = {k: input_dtype(graph, v, tensors) for k, v in
              torch.fx.node.map_arg(fx.kwargs, lambda n: env[n]).items()}
    if fx.target is operator.getitem:
        return graph.call_function(operator.getitem, args)
    op = fx.target
    if not isinstance(op, torch._ops.OpOverload):
        return graph.call_function(op, args, kwargs)
    name = op.overloadpacket.__name__
    if name in DROPPED:
        return None
    if name == "copy_" and fx.args[0].op == "placeholder":
        if not fx.users:
            return None   # writes an input back; the judge wants candidates to leave inputs alone
        name = "copy"     # an input written and returned: its new value, the input left alone
    if name.endswith("_"):
        raise CaptureError(f"torch.export left the in-place aten.{name} in the graph; the builtin "
                           "agent refuses rather than drop the write")
    kwargs = {k: v for k, v in kwargs.items() if k not in DEVICE_KWARGS}
    if "device" in kwargs:                      # a factory: on the device of forward's input
        kwargs["device"] = graph.call_function(getattr, (tensors[0][0], "device"))
    if name in IDENTITY:
        return args[0]
    if name == "slice":
        return graph.call_function(operator.getitem, (args[0], sliced(*args[1:])))
    if name == "index":                         # x[:, ids]: None stands for a whole dim
        index = tuple(slice(None) if i is None else i for i in args[1])
        return graph.call_function(operator.getitem, (args[0], index))
    if name == "copy":                          # dst's shape and dtype, src's values
        dst, src = args[:2]
        expanded = graph.call_method("expand_as", (src, dst))
        return graph.call_method("type_as", (expanded, dst))
    if name in METHODS:
        return graph.call_method(METHODS[name], args, kwargs)
    return graph.call_function(torch_spelling(op), args, kwargs)


def input_dtype(graph: torch.fx.Graph, value, tensors: list):
    """A bf16/fp16/int8 dtype export wrote as a constant, as the dtype of the input that has it
    (`cache.dtype`), as the reference wrote it: a literal low precision reads as a precision
    switch to the judge's rules."""
    if not isinstance(value, torch.dtype) or value == torch.float32:
        return value
    source = next((node for node, dtype in tensors if dtype == value), None)
    return value if source is None else graph.call_function(getattr, (source, "dtype"))


def sliced(dim: int = 0, start=None, end=None, step: int = 1) -> tuple:
    """The index of `aten.slice(x, dim, start, end, step)`: `x[:, :, start:end:step]`."""
    end = None if end is not None and end >= 2 ** 62 else end
    start = None if start == 0 else start
    cut = slice(start, end, None if step == 1 else step)
    if dim < 0:
        return (Ellipsis, cut) + (slice(None),) * (-dim - 1)
    return (slice(None),) * dim + (cut,)


def torch_spelling(op):
    """torch.<name> (same arguments as the ATen op), else torch._C._nn.<name> (F.<name>), else
    the ATen op itself, which the keeper names when it refuses it."""
    name = op.overloadpacket.__name__
    for space in (torch, torch._C._nn):
        found = getattr(space, name, None)
        if callable(found):
            return found
    return op
