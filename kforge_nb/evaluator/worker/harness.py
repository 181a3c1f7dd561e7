"""Helpers both worker processes share: loading source as a module, trial inputs, timing, profiling.

Runs only inside worker children. The clocks, synchronisation and serialisation it uses are bound
at import, before any candidate code exists, so a candidate that patches `time.perf_counter` or
`torch.cuda.Event` afterwards cannot change what is measured (and `integrity` reports the patch).
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

from .trial_values import TAILS, with_tails

perf_counter_ns = time.perf_counter_ns
torch_save = torch.save
torch_load = torch.load
CudaEvent = torch.cuda.Event
event_record = torch.cuda.Event.record
event_elapsed = torch.cuda.Event.elapsed_time
cuda_synchronize = torch.cuda.synchronize
cuda_sleep = getattr(torch.cuda, "_sleep", lambda cycles: None)
HOLD_CYCLES = 1_000_000     # about 0.5 ms at GPU clocks: longer than a call's launches
tensor_clone = torch.Tensor.clone
blake2b = hashlib.blake2b

# --- source as a module -------------------------------------------------------------------------


def load_module(source: str, filename: str, name: str) -> types.ModuleType:
    """Execute source as a fresh module whose tracebacks point at `filename`."""
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def as_tensor_list(value) -> list[torch.Tensor]:
    """Normalise a forward's result (tensor, tuple, list, number) to a flat list of tensors."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in as_tensor_list(v)]
    if isinstance(value, (int, float, bool)):
        return [torch.tensor(value)]
    raise TypeError(f"forward returned {describe_value(value)} where a tensor was expected "
                    "(outputs are tensors, numbers, or tuples and lists of them)")


class BadInputs(TypeError):
    """get_inputs() or get_init_inputs() returned something that is not a list of arguments."""


def describe_value(value) -> str:
    """A value as a person reads it in a message: its type, and its shape or a short repr."""
    if value is None:
        return "None"
    kind = type(value).__name__
    article = "an" if kind[0].lower() in "aeiou" else "a"
    if isinstance(value, torch.Tensor):
        return f"{article} {kind} of shape {tuple(value.shape)} " \
               f"({str(value.dtype).replace('torch.', '')})"
    if isinstance(getattr(value, "shape", None), tuple):      # a NumPy array
        return f"{article} {kind} of shape {value.shape}"
    if isinstance(value, dict):
        return f"a dict with keys {list(value)[:5]}"
    text = repr(value)
    return f"{article} {kind} ({text[:40] + '...' if len(text) > 40 else text})"


def argument_list(value, name: str = "get_inputs()") -> list:
    """What `get_inputs()` (or `get_init_inputs()`) returned, as the list of positional
    arguments it stands for. Tensors, numbers, bools, strings and None are all legitimate
    items (KernelBench passes ints such as `dim`); the container must be a list or a tuple. A
    bare tensor, a string or a dict would be silently split into rows, characters or keys by
    `list()`: said plainly instead."""
    if isinstance(value, (list, tuple)):
        return list(value)
    whose = "forward's" if name == "get_inputs()" else "the constructor's"
    if isinstance(value, torch.Tensor):
        fix = "wrap it: `return [x]`"
    elif isinstance(value, dict):
        fix = f"arguments are positional: return their values as a list, in {whose} order"
    else:
        fix = "e.g. `return [x]`" if name == "get_inputs()" else \
            "e.g. `return [in_features, out_features]`, or `return []`"
    missing = " (is its `return` missing?)" if value is None else ""
    raise BadInputs(f"{name} returned {describe_value(value)}{missing}, not a list of {whose} "
                    f"arguments in order; {fix}")


def to_device(values, device: str):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def release(device: str) -> None:
    """Give cached device memory back: the judge and the candidate share one GPU, and blocks
    one process's allocator keeps are blocks the other cannot have."""
    if device == "cuda":
        cuda_synchronize()
        torch.cuda.empty_cache()


def synchronize(device: str) -> None:
    if device == "cuda":
        cuda_synchronize()
    elif device == "mps":
        torch.mps.synchronize()


# --- trial inputs -------------------------------------------------------------------------------


def reshape_inputs(inputs: list, new_batch: int) -> list:
    """Change the leading dimension of every tensor input that shares the first input's."""
    batch = next((x.shape[0] for x in inputs if isinstance(x, torch.Tensor) and x.dim()), None)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] == batch:
            reps = -(-new_batch // x.shape[0])
            x = x.repeat(reps, *([1] * (x.dim() - 1)))[:new_batch].clone()
        out.append(x)
    return out


RESCALED = "rescaled"      # a trial drawn as a timed call is (TimingSets)


def redistribute(inputs: list, distribution: str) -> list:
    """Other value distributions for floating inputs, same signs as the originals'."""
    if distribution == RESCALED:
        return rescaled(inputs)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            if distribution == "scaled":
                x = x * 4.0
            elif distribution == "uniform":
                low = 0.0 if x.min() >= 0 else -1.0
                x = torch.empty_like(x).uniform_(low, 1.0)
        out.append(x)
    return out


def trial_inputs(module, trial: dict, device: str = "cpu", seed_with=torch.manual_seed) -> list:
    """A trial's inputs, drawn from its seed directly on `device`: both workers draw the same
    values, and nothing the size of an input passes through host memory or a file.
    `seed_with`: what seeds the generators (a timed call's redraw: seed_generators)."""
    seed_with(trial["seed"])
    try:
        with torch.device(device):
            returned = module.get_inputs()
    except Exception:
        if device == "cpu":
            raise
        seed_with(trial["seed"])               # get_inputs that insists on host tensors
        returned = module.get_inputs()
    inputs = to_device(argument_list(returned), device)
    distribution = trial.get("distribution", "given")
    inputs = with_tails(inputs) if distribution == TAILS else redistribute(inputs, distribution)
    if trial.get("batch") == "auto":   # another batch size: half plus one, or 2 for a batch of 1
        batch = next((x.shape[0] for x in inputs if isinstance(x, torch.Tensor) and x.dim()), 1)
        trial["batch"] = batch // 2 + 1 if batch >= 2 else 2
    if trial.get("batch"):
        inputs = reshape_inputs(inputs, trial["batch"])
    return inputs


def fresh_copies(inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def fingerprint(t: torch.Tensor, chunk: int = 1 << 26) -> list[int]:
    """Two 63-bit numbers that change with any in-place write an honest kernel could make to
    `t`: the judge checks the candidate left its inputs alone without the inputs (gigabytes at
    KernelBench sizes) crossing over. Host tensors: a BLAKE2 digest of the bytes (~1 GB/s;
    the byte sums this replaced took 65 s for 2 GiB on two cores); GPU tensors: two sums over
    the bytes (plain and position-weighted) on the device, a chunk at a time."""
    flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
    if flat.device.type == "cpu":
        digest = blake2b(memoryview(flat.numpy()), digest_size=16).digest()
        return [int.from_bytes(digest[:8], "little") >> 1, int.from_bytes(digest[8:], "little") >> 1]
    plain = weighted = 0
    for start in range(0, flat.numel(), chunk):
        words = flat[start:start + chunk].to(torch.int64)
        weights = torch.arange(start, start + words.numel(), device=words.device) % 65521 + 1
        plain += int(words.sum())
        weighted += int((words * weights).sum())
    return [plain, weighted]


def fingerprints(values: list) -> list:
    """Each value's fingerprint (None where it is not a tensor): what the judge compares to
    tell that a call left its inputs alone."""
    return [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in values]


def tensor_bytes(values) -> int:
    return int(sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor)))


# --- timing -------------------------------------------------------------------------------------


class Refresh:
    """What makes a timed call's inputs new, and its random draws the same on both sides.

    Each floating input is refilled with its pristine values times factors of each element's
    own: a window of WINDOW factors, the product of two windows of a pool of random numbers in
    [FACTOR_LOW, 1) (signs and domains hold), repeated along the input. Where the two windows
    start, and the seed the generators get, are drawn for the call from the evaluation's
    secret key. So no two calls share their values (SHIFTS**2 pairs of windows), nor a scale:
    a memo keyed on x[0] / x[1] misses as one keyed on x does, and a stored answer becomes
    another call's only through a pass over every element (their factors differ one by one).
    The seed looks like a trial's, nothing a call sees tells the next call's values, and the
    judge redraws any call from (key, k). One multiplication over the inputs, as the rescale
    by one factor it replaced;
    the windows are small enough to leave the caches to the call (a window as long as the
    input slowed the next call of a 256 KiB softmax by 6 us, 8 %)."""

    def __init__(self, key: int):
        self.key = key.to_bytes(8, "little")
        numbers = torch.Generator().manual_seed(int.from_bytes(self.key, "little"))
        self.pool = torch.rand(WINDOW + SHIFTS, generator=numbers) * (1 - FACTOR_LOW) + \
            FACTOR_LOW
        self.pools: dict = {}            # (dtype, device) -> the pool in that dtype, there

    def apply(self, k: int, live: list, pristine: list, redraw=None) -> None:
        """Refill `live` from `pristine` (the same list to refresh in place) for call k; its
        integer inputs drawn anew by `redraw(seed)` where given (TimingSets)."""
        drawn = self.draws(k)
        for x, p in zip(live, pristine):
            if refreshed(x):
                refill(x, p, self.factors(x, next(drawn) % SHIFTS, next(drawn) % SHIFTS))
        if redraw is not None:
            renew_integers(live, redraw(next(drawn) >> 2))
        seed_generators(next(drawn) >> 2, live)

    def factors(self, x: torch.Tensor, first: int, second: int) -> torch.Tensor:
        """The window of factors for x: the pool's windows at `first` and `second`, times."""
        where = (x.dtype, x.device)
        if where not in self.pools:
            self.pools[where] = self.pool.to(device=x.device, dtype=x.dtype)
        pool, window = self.pools[where], min(x.numel(), WINDOW)
        return pool[first:first + window] * pool[second:second + window]

    def draws(self, k: int, purpose: str = ""):
        """Call k's random numbers (64-bit) for `purpose` (its refill: ""), keyed: unknowable
        without the key."""
        for block in itertools.count():
            digest = blake2b(f"{purpose}{k}:{block}".encode(), key=self.key,
                             digest_size=64).digest()
            for i in range(0, 64, 8):
                yield int.from_bytes(digest[i:i + 8], "little")

    def sample(self, k: int, x: torch.Tensor) -> torch.Tensor:
        """SAMPLED of x's elements at places drawn for call k (all of a smaller x)."""
        if x.numel() <= SAMPLED:
            return x
        places = torch.randint(x.numel(), (SAMPLED,), generator=torch.Generator().manual_seed(
            next(self.draws(k, "sample:")) >> 1))
        return flat(x)[places.to(x.device)]


REDRAW_BYTES = 64 << 20  # a set's inputs up to this are drawn anew where integers are among them
# ... always up to REDRAW_ALWAYS; above it, where the judge's draw took at most REDRAW_MS of its
# CPU time (the least of REDRAW_TRIES): get_inputs() of a RoPE module's 40 MiB took 176-264 ms
# on an H100's host, per timed call, on each side, and its judging did not end in 11 minutes
REDRAW_ALWAYS = 1 << 20
REDRAW_MS = 2.0
REDRAW_TRIES = 3
MOVE_BYTES = 256 << 20   # live sets up to this are moved to fresh memory before each CPU block
FACTOR_LOW = 0.75       # each of a factor's two parts lies in [FACTOR_LOW, 1)
SHIFTS = 1 << 16        # where in the pool a window may start
WINDOW = 1 << 12        # factors a window holds (16 KiB of float32)
SAMPLED = 1 << 12       # elements of each input a kept timed call's check reads


def refreshed(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0


def integer(x) -> bool:
    """An input of whole numbers (ids, indices, counts, masks): no factor keeps it valid."""
    return isinstance(x, torch.Tensor) and not x.is_floating_point() and not x.is_complex() \
        and x.numel() > 0


def renew_integers(live: list, fresh: list) -> None:
    """The integer inputs of `live` given the values of a fresh draw of get_inputs()
    (`fresh`), where it drew them in the same shape and dtype."""
    for x, y in zip(live, fresh):
        if integer(x) and isinstance(y, torch.Tensor) and y.shape == x.shape and \
                y.dtype == x.dtype:
            x.copy_(y)


def refill(live: torch.Tensor, source: torch.Tensor, factors: torch.Tensor) -> None:
    """live = source * factors repeated, over memory in order (both are dense with the same
    strides: TimingSets' copies), a window's length at a time, as one broadcast."""
    n, window = live.numel(), factors.numel()
    rows = n // window
    out, src = flat(live), flat(source)
    torch.mul(src[:rows * window].view(rows, window), factors,
              out=out[:rows * window].view(rows, window))
    if rows * window < n:
        torch.mul(src[rows * window:], factors[:n - rows * window], out=out[rows * window:])


def flat(x: torch.Tensor) -> torch.Tensor:
    """A dense tensor's elements in memory order (a clone is dense: TimingSets' copies are)."""
    return x.as_strided((x.numel(),), (1,), x.storage_offset())


class TimingSets:
    """The input sets timed calls rotate over: before call k (untimed) set k mod n is
    refreshed for it (Refresh). The sets are copied twice (pristine and live), dense, so a
    refresh is a pass over memory in order whatever strides get_inputs() gave.

    No factor keeps integer inputs valid (ids in range, sorted offsets), so where a set has
    any, they are drawn anew for each call by `redraw(seed)` (get_inputs() under a seed of the
    call's): else a problem whose answer depends on its ids alone repeated n answers over the
    whole timing, and a memo keyed on the ids (or on what they pick) served every call after
    the first n. A set of floating inputs only pays nothing for it; nor does one of more than
    REDRAW_BYTES, where a draw of every input per call would cost as much as the calls and
    hold a third copy of the inputs (its integer inputs stay as drawn), nor one whose draw the
    judge found slow (redraw_is_cheap: the plan's "redraw", the judge's word, which the
    candidate's worker follows)."""

    def __init__(self, sets: list[list], key: int = 0, redraw=None):
        self.pristine = [fresh_copies(s) for s in sets]
        self.sets = [fresh_copies(s) for s in self.pristine]
        self.refresh = Refresh(key)
        self.redraw = redraw if any(integer(x) and tensor_bytes(s) <= REDRAW_BYTES
                                    for s in sets for x in s) else None
        self.calls = 0

    def move(self) -> None:
        """The live sets copied into fresh memory (the copies made before the old ones go),
        where they hold at most MOVE_BYTES. Where a buffer's pages lie moves a memory-bound
        call's time on a CPU: the same x * 2 over 4 MB, in fresh processes on this project's
        2-core VM, ran 0.25-0.43 ms from one process to the next, each process steady within
        itself, so two workers timing the same kernel differed by up to 25 % and no interval
        of one judging's rounds showed it. Moved before every block, the placements vary
        within a judging as they do between judgings: the rounds' spread shows it and their
        median averages over it (the per-process medians then ranged 0.36-0.42 ms)."""
        if sum(tensor_bytes(s) for s in self.sets) <= MOVE_BYTES:
            self.sets = [fresh_copies(s) for s in self.sets]

    def inputs(self, k: int) -> list:
        """Set k mod n, refreshed for call k; the random generators are seeded for call k
        too, so a module that draws random numbers (dropout) draws the same on both sides."""
        j = k % len(self.sets)
        self.refresh.apply(k, self.sets[j], self.pristine[j], self.redraw)
        return self.sets[j]

    def left(self, k: int, inputs: list) -> list:
        """Fingerprints of call k's inputs as they stand, each over SAMPLED elements at places
        drawn for the call (Refresh.sample): the judge's of the inputs as drawn, the
        candidate's as its call left them. A kernel that writes its answer or its scratch over
        an input changes a good part of it, and so some of the sample; a fingerprint of every
        byte is the trials' (here it took 16 times a 16 MiB ReLU's own time, inside the block
        the parent's clock brackets, and read as a clock that lies)."""
        return fingerprints([self.refresh.sample(k, x) if isinstance(x, torch.Tensor) else x
                             for x in inputs])


def timing_sets(module, plan: list[dict], device: str) -> TimingSets:
    """The timing's input sets, drawn as `plan` says (EvalOptions.timing_sets: seeds and the
    refresh's key); integer inputs drawn anew for each call as a trial's are."""
    sets = [trial_inputs(module, t, device) for t in plan]
    if plan and plan[0].get("redraw") is False:
        return TimingSets(sets, plan[0].get("key", 0))

    def redraw(seed: int) -> list:      # seeded as a timed call is: microseconds, not ~1 ms
        # drawn on the host, then moved: `with torch.device(...)` is a torch-function mode, off
        # inside the timed loop (QUIET) and on where the judge checks a kept call, so a draw
        # "on the device" came from the GPU's generator on one side and the host's on the
        # other, and every kept call of a GPU problem with integer inputs read as a mismatch
        drawn = trial_inputs(module, {"seed": seed, "distribution": "given"}, "cpu",
                             lambda s: seed_generators(s, sets[0]))
        return to_device(drawn, device)
    return TimingSets(sets, plan[0].get("key", 0) if plan else 0, redraw)


def redraw_is_cheap(sets: TimingSets, device: str) -> tuple[bool, float | None]:
    """The judge's word on drawing a set's inputs anew for each timed call: (whether to, the
    least CPU time of REDRAW_TRIES draws in ms, None where there is no redraw). Small sets are
    (REDRAW_ALWAYS); larger ones where a draw takes at most REDRAW_MS of the judge's CPU time:
    not its wall time, which a busy machine (or a candidate keeping the cores busy while the
    judge draws, to have ids left as drawn and a memo on them served) would stretch."""
    if sets.redraw is None:
        return False, None
    times = []
    for i in range(REDRAW_TRIES):
        begin = time.process_time_ns()
        sets.redraw(i)
        synchronize(device)
        times.append((time.process_time_ns() - begin) / 1e6)
    small = max(tensor_bytes(s) for s in sets.pristine) <= REDRAW_ALWAYS
    return small or min(times) <= REDRAW_MS, min(times)


def rescaled(inputs: list) -> list:
    """A trial's draw refreshed as a timed call's is, copies included (the key drawn from the
    trial's seed, so both workers agree): no statistic of the values, their ratios or their
    layout tells a timed call from this trial."""
    key = int(torch.randint(1 << 62, (1,)))
    copies = fresh_copies(inputs)
    Refresh(key).apply(0, copies, copies)
    return copies


def seed_generators(seed: int, inputs: list) -> None:
    """The CPU generator and the generator of the inputs' GPU: what torch.manual_seed does,
    at a few microseconds instead of ~200 (it visits every backend)."""
    torch.default_generator.manual_seed(seed)
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda), None)
    if device is not None:
        torch.cuda.default_generators[device.index or 0].manual_seed(seed)


def time_calls(call, sets: "TimingSets", calls: int, device: str, untimed=None,
               keep: list[int] = (), kept: dict | None = None, watch=None,
               fastest: bool = False) -> dict:
    """Time `calls` calls of `call(inputs)`; each call gets the next rotated, refreshed set.
    GPU: device events around each call, the L2 flushed between calls; then a wall-clock loop
    over the sets as they stand (through `untimed`, default `call`), which work hidden on other
    streams cannot escape. CPU: the monotonic clock around each call, and around reading a
    byte of every page of its outputs (pages_of, read_pages; what finds the pages is not
    timed): an answer computed when first read (its pages protected, a fault handler
    computing) is timed with its call, on both sides alike.

    The outputs of the calls in `keep` are copied for the judge the moment the call returns
    (read_out), into `kept` with their inputs' fingerprints as the call left them
    (TimingSets.left: a kernel may write over its inputs only where nobody compares them, the
    refill undoing it before the set's next call); every call's outputs are freed as soon as
    it is done with, kept or not, so which calls were kept cannot be read off what stays alive.
    With `fastest` (CPU), the fastest call so far is kept too, each new one in place of the
    last, and named in the reply: the block's time is its fastest call (stats.FASTEST), which
    the judge then checks. Without `kept` the copies are made and dropped: the reference's
    blocks pay what the candidate's pay between calls.

    `watch` (a TorchFunctionMode) is active for the whole block, and the harness's own work
    between calls runs with torch-function handling off: the calls themselves pay only for the
    torch functions the candidate calls, and the watch sees nothing but those."""
    samples = []
    first = sets.calls
    best = None                 # the fastest call so far, where `fastest`
    if device == "cpu" and calls > len(sets.sets):
        # only where the block comes back to a set itself: a memo keyed on an input's address
        # then meets its stale answer inside the block (the judge checks every call of a short
        # one); blocks of a call or two (the Triton interpreter's) keep the sets where they are,
        # so the next block comes back to them
        with QUIET():
            sets.move()
    with QUIET():
        flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda") \
            if device == "cuda" else None
    with watch if watch is not None else contextlib.nullcontext():
        for k in range(first, first + calls):
            with QUIET():
                inputs = sets.inputs(k)
                if flush is not None:
                    flush.zero_()
                    # hold the stream a while after the flush, so the host has launched the
                    # whole call before the GPU reaches it: the call is timed from its first
                    # kernel to its last, never with the host's launch gaps. Without it, a call
                    # whose launches take the host about as long as the flush takes the GPU was
                    # timed one way or the other by chance, and one kernel's speedup swung
                    # 0.64x-1.98x between judgings on an H100.
                    cuda_sleep(HOLD_CYCLES)
                    start, end = CudaEvent(enable_timing=True), CudaEvent(enable_timing=True)
                    event_record(start)
                else:
                    synchronize(device)
            begin = perf_counter_ns()
            out = call(inputs)
            if flush is None:
                synchronize(device)
                returned = perf_counter_ns()
                with QUIET():
                    pages = pages_of(out)
                reading = perf_counter_ns()
                read_pages(pages)       # a protected page faults here: timed with the call
                samples.append((returned - begin + perf_counter_ns() - reading) / 1e6)
                del pages
            with QUIET():
                if flush is not None:
                    event_record(end)
                    cuda_synchronize()
                    samples.append(event_elapsed(start, end))
                faster = fastest and (best is None or samples[-1] < samples[best - first])
                if faster and kept is not None and best is not None and best - first not in keep:
                    del kept[best]
                if faster:
                    best = k
                if k - first in keep or faster:
                    copied = (read_out(out), sets.left(k, inputs))
                    if kept is not None:
                        kept[k] = copied
                    del copied
                del out
        sets.calls = first + calls
        wall_ms = None
        if flush is not None:
            begin = perf_counter_ns()
            for k in range(calls):
                (untimed or call)(sets.sets[k % len(sets.sets)])
            cuda_synchronize()
            wall_ms = (perf_counter_ns() - begin) / calls / 1e6
    return {"samples": samples, "wall_ms": wall_ms, "kept": [first + i for i in keep],
            "fastest": best}


QUIET = torch._C.DisableTorchFunction     # the harness's own torch calls: not the candidate's
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# A tensor's pointer and size through torch's own C accessors, bound before any candidate code
# exists: finding an output's pages is not timed, so no code of the candidate's may run there
# (a subclass's Python attributes, a patched class's, a list's own __iter__)
TENSOR_ATTRIBUTES = vars(torch._C.TensorBase)
raw_is_cpu, raw_layout, raw_nbytes, raw_shape = (
    TENSOR_ATTRIBUTES[name].__get__ for name in ("is_cpu", "layout", "nbytes", "shape"))
raw_data_ptr, raw_is_contiguous, raw_stride, raw_element_size = (
    TENSOR_ATTRIBUTES[name] for name in ("data_ptr", "is_contiguous", "stride", "element_size"))


def pages_of(value) -> list[memoryview]:
    """Views of one byte of every memory page the CPU tensors of `value` cover (and of their
    last byte), through each tensor's own pointer, whatever its dtype or its type. Making them
    reads nothing: reading them (read_pages) is what a protected page faults on."""
    kind = type(value)          # never value.__class__, which an object may say it is
    if issubclass(kind, torch.Tensor):
        span = byte_span(value)
        if span is None:
            return []
        whole = memoryview((ctypes.c_ubyte * span[1]).from_address(span[0])).cast("B")
        return [whole[::PAGE], whole[-1:]]
    if issubclass(kind, (list, tuple)):
        items = list.__iter__(value) if issubclass(kind, list) else tuple.__iter__(value)
        return [view for v in items for view in pages_of(v)]
    return []


def read_pages(views: list[memoryview]) -> None:
    for view in views:
        view.tobytes()


def byte_span(t: torch.Tensor) -> tuple[int, int] | None:
    """(address, length) of the bytes a CPU tensor's elements lie in; None where it has no
    host memory of its own to read (empty, on a device, not strided, a wrapper)."""
    try:
        if not raw_is_cpu(t) or raw_layout(t) != torch.strided:
            return None
        start, length = raw_data_ptr(t), raw_nbytes(t)
        if length and not raw_is_contiguous(t):
            length = (1 + sum((n - 1) * s for n, s in zip(raw_shape(t), raw_stride(t)))) * \
                raw_element_size(t)
        return (start, length) if start and length else None
    except (RuntimeError, NotImplementedError):
        return None


def read_out(value):
    """A timed call's output as it is the moment its call returns: copied before any more of
    the candidate's code runs, so neither a later call reusing its buffer, an input refilled
    for the next call, nor work the candidate finishes afterwards (a thread filling the buffer
    late) changes what the judge sees. Never a subclass's clone: that could compute."""
    if type(value) is torch.Tensor:
        return tensor_clone(value)
    if isinstance(value, (list, tuple)):
        return [read_out(x) for x in value]
    return value


def time_callable(fn, device: str, calls: int = 20) -> dict:
    """A plain median (the cached baselines shown beside the paired measurement)."""
    fn()
    synchronize(device)
    timed = time_calls(lambda _: fn(), TimingSets([[]]), calls, device)
    return summarise(timed["samples"], timed["wall_ms"])


def summarise(samples: list[float], wall_ms: float | None) -> dict:
    median = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [median, median, median]
    return {"median_ms": median, "spread": (q[2] - q[0]) / median if median else None,
            "repeats": len(samples), "min_ms": min(samples), "wall_ms": wall_ms}


# --- profiling ----------------------------------------------------------------------------------


def profile_callable(fn, device: str, trace_path: str, calls: int = 3) -> list[dict]:
    """Run fn under torch.profiler, keep the Chrome trace, return its kernel events."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        synchronize(device)
    prof.export_chrome_trace(trace_path)
    return kernel_events(trace_path, device)


def profile_call(fn, device: str):
    """One call of fn under torch.profiler: (the profiler, the call's duration in ms, the
    profiler's own overhead included, the same for every call profiled so)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        begin = perf_counter_ns()
        fn()
        synchronize(device)
        ms = (perf_counter_ns() - begin) / 1e6
    return prof, ms


def kernel_events(trace_path: str, device: str, limit: int = 2000) -> list[dict]:
    """GPU kernels (and copies) on a GPU; top-level CPU ops and our annotations on the CPU."""
    with open(trace_path) as f:
        events = json.load(f).get("traceEvents", [])
    wanted = {"kernel", "gpu_memcpy", "gpu_memset"} if device == "cuda" else {
        "cpu_op", "user_annotation"}
    picked = [e for e in events if e.get("ph") == "X" and e.get("cat") in wanted]
    if device != "cuda":
        picked = outermost(picked)
    if not picked:
        return []
    t0 = min(float(e["ts"]) for e in picked)
    return [{"name": e["name"], "start_us": float(e["ts"]) - t0, "duration_us": float(e["dur"]),
             "stream": (e.get("args") or {}).get("stream", e.get("tid")),
             "category": e["cat"]} for e in picked[:limit]]


def outermost(events: list[dict]) -> list[dict]:
    """Drop events nested inside another on the same thread (CPU ops call other ops)."""
    events = sorted(events, key=lambda e: (e.get("tid"), float(e["ts"]), -float(e["dur"])))
    kept, end_by_thread = [], {}
    for e in events:
        start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if start < end_by_thread.get(e.get("tid"), -1.0):
            continue
        kept.append(e)
        end_by_thread[e.get("tid")] = end
    return sorted(kept, key=lambda e: float(e["ts"]))


def save_tensors(path: str | Path, data) -> None:
    """Written by the judge where the candidate can read but not write (the run folder):
    readable by the sandbox's unprivileged user whatever the umask."""
    tmp = f"{path}.tmp{os.getpid()}"
    torch_save(data, tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
