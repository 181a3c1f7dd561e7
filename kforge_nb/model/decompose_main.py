"""The decomposition's child process: trace the user's model, write its parts, check and time.

    python -m kforge_nb.model.decompose_main JOB.json

JOB: {"source", "name", "device", "folder", "repeats"}. Writes FOLDER/parts/part_KK.py (one per
distinct part) and FOLDER/decomposition.json:
  parts:  [{id, file, label, ops, occurrences, where, glue, torch_functions, ms, share,
           other_batch: [{file, shapes}]}]   other_batch: the part at the shapes the model
           hands it at the evaluator's other batch size (FOLDER/parts/part_KK_batchB.py)
  batch:  {build, other}: the model's batch sizes ("error" where it rejects the other)
  steps:  [{part, inputs, output, ties}]   the model's forward as calls of parts, in order
  args:   the forward's argument names;  output: the returned expression
  check:  the parts' reference code run in order against the model itself (max abs error)
The model runs here, not in the caller's process: it is the user's code, run as the evaluator's
judge runs it (same constructor seed).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
import types
from pathlib import Path

import torch
import torch.fx
from torch.overrides import TorchFunctionMode

from ..evaluator.worker import harness
from .graph import DecomposeError, Info, Recorder, group_nodes, trace
from .partfile import build_part

INIT_SEED = 0          # the evaluator's default EvalOptions.seed: the weights the judge sees


def load(source: str, name: str, filename: str = "") -> types.ModuleType:
    return harness.load_module(source, filename or f"<{name}>", name)


def decompose(job: dict) -> dict:
    device, folder = job["device"], Path(job["folder"])
    reference = load(job["source"], "kforge_whole_model")
    torch.manual_seed(INIT_SEED)
    init = harness.argument_list(reference.get_init_inputs(), "get_init_inputs()")
    torch.manual_seed(INIT_SEED)
    model = reference.Model(*init).to(device)
    torch.manual_seed(INIT_SEED)
    inputs = harness.to_device(harness.argument_list(reference.get_inputs()), device)
    gm, rebuild = trace(model)
    recorder = Recorder(gm)
    with torch.no_grad():
        recorder.run(*inputs)
    groups = group_nodes(gm, recorder.infos)
    if not groups:
        raise DecomposeError("the model's forward computes nothing torch.fx can see")
    specs = [build_part(i, g, gm, recorder.infos, rebuild)
             for i, g in enumerate(groups)]
    parts, steps, ids, first = [], [], {}, {}
    (folder / "parts").mkdir(parents=True, exist_ok=True)
    for spec in specs:
        if spec.key not in ids:
            ids[spec.key], first[spec.key] = len(parts), spec
            path = folder / "parts" / f"part_{len(parts):02d}.py"
            parts.append({"id": len(parts), "file": str(path), "label": spec.label,
                          "ops": spec.ops, "occurrences": 0, "where": [], "glue": spec.glue})
        part = parts[ids[spec.key]]
        part["occurrences"] += 1
        part["where"] += spec.where
        steps.append({"part": ids[spec.key], "inputs": spec.inputs, "output": spec.output,
                      "ties": spec.ties_as(first[spec.key])})
    for key, spec in first.items():
        part = parts[ids[key]]
        Path(part["file"]).write_text(docstring(part, job["name"]) + spec.source)
    args = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    output = render_output(gm, steps, args)
    runner = Recomposed(parts, steps, model, args, output)
    check = runner.check(model, inputs)
    runner.time(inputs, device, job.get("repeats", 5))
    total = sum(runner.step_ms) or 1.0
    for part in parts:
        ms = [t for s, t in zip(steps, runner.step_ms) if s["part"] == part["id"]]
        part.update(ms=sum(ms), share=sum(ms) / total,
                    torch_functions=sorted(runner.functions[part["id"]]))
    batch = write_other_batch(reference, runner, inputs, parts, first, ids, job)
    return {"parts": parts, "steps": steps, "args": args, "output": output, "check": check,
            "total_ms": sum(runner.step_ms), "device": device, "batch": batch,
            "nodes": sum(len(g.nodes) for g in groups)}


def write_other_batch(reference, runner: "Recomposed", inputs: list, parts: list[dict],
                      first: dict, ids: dict, job: dict) -> dict:
    """Each part's file again at the shapes the model hands it at the evaluator's other batch
    size (its own rule: harness.trial_inputs), where they differ from the part's own: a
    part's kernel is judged there before the recomposed model keeps it. Each part gets
    `other_batch`: [{file, shapes}] (none where the shapes are the same or the model
    rejects that batch). Returns {"build", "other"} batch sizes, and "error" where the model
    rejects the other one."""
    for part in parts:
        part["other_batch"] = []
    trial = {"seed": INIT_SEED, "distribution": "given", "batch": "auto"}
    try:
        at_build = runner.step_inputs(inputs)
        at_other = runner.step_inputs(harness.trial_inputs(reference, trial, job["device"]))
    except Exception as exc:           # the evaluator skips that batch for the model too
        first_line = (str(exc).splitlines() or [""])[0][:300]
        return {"build": batch_of(inputs), "other": trial.get("batch"),
                "error": f"{type(exc).__name__}: {first_line}"}
    folder = Path(job["folder"]) / "parts"
    specs = {ids[key]: spec for key, spec in first.items()}
    for step, built, other in zip(runner.steps, at_build, at_other):
        part, shapes = parts[step["part"]], [list(i.shape) for i in other]
        if shapes == [list(i.shape) for i in built] or \
                any(v["shapes"] == shapes for v in part["other_batch"]):
            continue
        suffix = f"_{len(part['other_batch']) + 1}" if part["other_batch"] else ""
        path = folder / f"part_{part['id']:02d}_batch{trial['batch']}{suffix}.py"
        path.write_text(docstring(part, job["name"], at_batch=trial["batch"]) +
                        specs[part["id"]].source_with(other))
        part["other_batch"].append({"file": str(path), "shapes": shapes})
    return {"build": batch_of(inputs), "other": trial["batch"]}


def batch_of(inputs: list) -> int | None:
    """The model's batch size as the evaluator reads it: its first tensor input's leading
    dimension."""
    return next((x.shape[0] for x in inputs if isinstance(x, torch.Tensor) and x.dim()), None)


def docstring(part: dict, model_name: str, at_batch: int | None = None) -> str:
    uses = f"{part['occurrences']} times" if part["occurrences"] > 1 else "once"
    where = ", ".join(part["where"][:6]) + (", ..." if len(part["where"]) > 6 else "")
    shapes = "the shapes and value ranges of a real run" if at_batch is None else \
        (f"the shapes and value ranges the model hands it at batch size {at_batch} (the "
         "evaluator's other batch size for the model)")
    return (f'"""Part {part["id"]} of {model_name}: {part["label"]} (used {uses} in its forward'
            f'{"; layers " + where if where else ""}).\n\nWritten by `kforge model` from the '
            f'model\'s forward (torch.fx), with {shapes}.\n"""\n')


def render_output(gm: torch.fx.GraphModule, steps: list[dict], args: list[str]) -> str:
    known = set(args) | {s["output"] for s in steps}
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]

    def render(value):
        if isinstance(value, torch.fx.Node):
            if value.name not in known:
                raise DecomposeError(f"the model returns `{value.name}`, which is not a tensor "
                                     "computed by its parts (a size or a Python value?)")
            return value.name
        if isinstance(value, (tuple, list)):
            inner = ", ".join(render(v) for v in value)
            return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else \
                (f"({inner})" if isinstance(value, tuple) else f"[{inner}]")
        if value is None or isinstance(value, (int, float, bool, str)):
            return repr(value)
        raise DecomposeError(f"the model returns a {type(value).__name__}; whole-model mode "
                             "handles tensors and tuples or lists of them")
    return render(out)


class FunctionLog(TorchFunctionMode):
    """The outermost torch functions a part calls: what its reference code needs allowed."""

    def __init__(self):
        super().__init__()
        self.names, self.depth = set(), 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.depth == 0:
            self.names.add(getattr(func, "__name__", str(func)))
        self.depth += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.depth -= 1


class Recomposed:
    """The parts' own reference code called in the model's order with the model's weights:
    proves the split is exact, and times each part inside the whole forward."""

    def __init__(self, parts, steps, model, args, output):
        classes = [load(Path(p["file"]).read_text(), f"kforge_part_{p['id']}", p["file"]).Model
                   for p in parts]
        self.modules = []
        for step in steps:
            module = classes[step["part"]]().to(next(iter(model.state_dict().values()),
                                                     torch.empty(0)).device)
            for mine, theirs in step["ties"]:
                tie(module, mine, model, theirs)
            self.modules.append(module)
        self.steps, self.args, self.output = steps, args, output
        self.functions = {p["id"]: set() for p in parts}
        self.step_ms = [0.0] * len(steps)

    def run(self, inputs, clock=None, seen: list | None = None):
        """The model's output from the parts; `clock` times each step, `seen` gets what
        each step was handed (an Info per input)."""
        env = dict(zip(self.args, inputs))
        for k, (step, module) in enumerate(zip(self.steps, self.modules)):
            args = [env[name] for name in step["inputs"]]
            if seen is not None:
                seen.append([Info.of(a) for a in args])
            before = clock() if clock else 0.0
            env[step["output"]] = module(*args)
            if clock:
                self.laps[k].append(clock() - before)
        return eval(self.output, {}, env)   # noqa: S307 - our own rendering of fx names

    def step_inputs(self, inputs) -> list[list[Info]]:
        """What each step is handed in a forward with these inputs."""
        seen: list = []
        with torch.no_grad():
            self.run(inputs, seen=seen)
        return seen

    def check(self, model, inputs) -> dict:
        with torch.no_grad():
            torch.manual_seed(1)
            expected = model(*inputs)
            torch.manual_seed(1)
            log = FunctionLog()
            env = dict(zip(self.args, inputs))
            for step, module in zip(self.steps, self.modules):
                log.names = set()
                with log:
                    env[step["output"]] = module(*[env[name] for name in step["inputs"]])
                self.functions[step["part"]] |= log.names
            got = eval(self.output, {}, env)   # noqa: S307
        errors = [(a.float() - b.float()).abs().max().item() if a.numel() else 0.0
                  for a, b in zip(harness.as_tensor_list(got), harness.as_tensor_list(expected))]
        return {"max_abs_error": max(errors, default=0.0), "outputs": len(errors)}

    def time(self, inputs, device: str, repeats: int) -> None:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

        def clock():
            sync()
            return time.perf_counter()
        self.laps = [[] for _ in self.steps]
        with torch.no_grad():
            self.run(inputs)                   # warm-up
            for _ in range(repeats):
                self.run(inputs, clock)
        self.step_ms = [statistics.median(lap) * 1e3 for lap in self.laps]


def tie(part: torch.nn.Module, mine: str, model: torch.nn.Module, theirs: str) -> None:
    """The part's attribute `mine` becomes the model's tensor `theirs` (the same object)."""
    owner_path, _, leaf = mine.rpartition(".")
    owner = part.get_submodule(owner_path) if owner_path else part
    value = model.get_parameter(theirs) if theirs in dict(model.named_parameters()) else \
        attr(model, theirs)
    if leaf in owner._parameters:
        owner._parameters[leaf] = value
    else:
        owner._buffers[leaf] = value


def attr(model, path: str):
    for name in path.split("."):
        model = getattr(model, name)
    return model


def main(path: str) -> int:
    job = json.loads(Path(path).read_text())
    try:
        found = decompose(job)
    except DecomposeError as err:
        found = {"error": str(err)}
    out = Path(job["folder"]) / "decomposition.json"
    out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
