"""Tensors between the candidate worker and the judge, through a file, a chunk at a time.

A KernelBench level-1 output is 6.4 GB; neither side may hold a host copy of it, let alone one
per trial. The writer streams each tensor's bytes from the device in chunks; the reader fills a
tensor on its own device chunk by chunk. Host memory stays at one chunk on each side.

Format: one JSON line (dtype and shape per tensor), then each tensor's raw bytes, contiguous.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat

import torch

CHUNK_BYTES = 128 << 20

DTYPES = {str(d): d for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
                              torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                              torch.bool, torch.complex64, torch.complex128)}


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as a flat uint8 tensor (on its own device)."""
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8,
                                                                  device=flat.device)


def write_tensors(path: str, tensors: list) -> None:
    """Write tensors (None for a non-tensor entry) to `path`, atomically."""
    header = [None if not isinstance(t, torch.Tensor) else
              {"dtype": str(t.dtype), "shape": list(t.shape)} for t in tensors]
    tmp = f"{path}.tmp{os.getpid()}"
    buffer = None
    with open(tmp, "wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            data = raw_bytes(t)
            if data.device.type == "cpu":
                f.write(memoryview(data.numpy()))
                continue
            buffer = buffer if buffer is not None else host_buffer(data.device)
            for start in range(0, data.numel(), CHUNK_BYTES):
                n = min(CHUNK_BYTES, data.numel() - start)
                buffer[:n].copy_(data[start:start + n])
                f.write(memoryview(buffer.numpy())[:n])
    os.replace(tmp, path)


def host_buffer(device: torch.device) -> torch.Tensor:
    """One chunk of host memory, pinned when a GPU copies into it (about twice as fast)."""
    pin = device.type == "cuda"
    return torch.empty(CHUNK_BYTES, dtype=torch.uint8, pin_memory=pin)


class BadOutput(ValueError):
    """An output file that is not what `write_tensors` writes: the candidate's doing."""


class TooLarge(BadOutput):
    """Outputs announced (and perhaps written, sparse) far larger than the reference's."""


def header_of(f, size: int, limit: int | None = None) -> list:
    """The file's header, checked: a list of None or {dtype, shape} whose bytes are exactly
    what follows it (a forged shape cannot make the judge allocate what was never written).
    The header is the candidate's: every part of it is checked for type before it is used."""
    line = f.readline(1 << 20)
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):     # 5,000 `[` make json's parser recurse too deep
        raise BadOutput("its header is not JSON") from None
    if not isinstance(header, list):
        raise BadOutput("its header is not a list of tensors")
    total = 0
    for k, entry in enumerate(header):
        if entry is None:
            continue
        if not is_tensor_entry(entry):
            raise BadOutput(f"its header's entry {k} is not a dtype and a shape")
        numel = 1
        for n in entry["shape"]:
            numel *= n
        total += numel * DTYPES[entry["dtype"]].itemsize
    if total != size - len(line):
        raise BadOutput(f"its header announces {total} bytes but {size - len(line)} follow")
    if limit is not None and total > limit:
        raise TooLarge(f"the outputs announce {total / 2**20:.1f} MiB, more than twice the "
                       f"reference's: not read")
    return header


def is_tensor_entry(entry) -> bool:
    """{"dtype": one of DTYPES, "shape": at most 16 sizes, each below 2**40}."""
    if not isinstance(entry, dict):
        return False
    dtype, shape = entry.get("dtype"), entry.get("shape")
    return isinstance(dtype, str) and dtype in DTYPES and isinstance(shape, list) and \
        len(shape) <= 16 and all(isinstance(n, int) and not isinstance(n, bool) and
                                 0 <= n < 1 << 40 for n in shape)


def open_regular(path: str):
    """A file the candidate made, opened for reading as what it must be: a regular file, not
    a link to elsewhere (yours to read, not its), not a FIFO to hang on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise BadOutput(f"the output file cannot be read ({err.strerror})") from None
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise BadOutput("the output file is not a regular file")
    return f


def copy_out(source: str, dest: str, limit: int = 256 << 20) -> bool:
    """A file the candidate wrote (a trace), copied where your process keeps artifacts, at
    most `limit` bytes; False when it is not a regular file of the candidate's. `dest` is
    made anew, never opened as found: under --no-sandbox the candidate can write the run
    folder too, and a FIFO in its place would block the open, a link would be followed."""
    try:
        with open_regular(source) as f:
            data = f.read(limit)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                      os.O_CLOEXEC, 0o644)
        with os.fdopen(out, "wb") as f:
            f.write(data)
        return True
    except (BadOutput, OSError):
        return False


def read_tensors(path: str, device: str, limit: int | None = None) -> list:
    """Read what `write_tensors` wrote, each tensor allocated once on `device`. A file that is
    not what it wrote raises BadOutput."""
    with open_outputs(path, limit) as outputs:
        return [None if o is None else o.read(device) for o in outputs]


class Streamed:
    """One tensor of an output file, read a chunk at a time where it is compared: the judge
    never holds the candidate's whole output beside the reference's (2 GiB each for a
    KernelBench ReLU)."""

    def __init__(self, fd: int, offset: int, dtype: torch.dtype, shape: list[int]):
        self.fd, self.offset, self.dtype, self.shape = fd, offset, dtype, torch.Size(shape)
        self.numel = self.shape.numel()

    def pieces(self, elements: int, device: torch.device | str):
        """(first element, values) for each chunk in order; a chunk's tensor is reused by the
        next, so use it before asking for another."""
        itemsize = self.dtype.itemsize
        step = max(1, min(elements, CHUNK_BYTES // itemsize))
        buffer = torch.empty(min(step, self.numel), dtype=self.dtype,
                             pin_memory=torch.device(device).type == "cuda")
        raw = memoryview(buffer.view(torch.uint8).numpy()) if buffer.numel() else None
        for start in range(0, self.numel, step):
            n = min(step, self.numel - start)
            got, want = 0, n * itemsize
            while got < want:
                try:
                    read = os.preadv(self.fd, [raw[got:want]],
                                     self.offset + start * itemsize + got)
                except OSError as err:
                    raise BadOutput(f"the output file cannot be read ({err.strerror})") from None
                if not read:
                    raise BadOutput("the output file is truncated")
                got += read
            yield start, buffer[:n].to(device, non_blocking=False)

    def read(self, device: str) -> torch.Tensor:
        t = torch.empty(self.shape, dtype=self.dtype, device=device)
        flat = t.reshape(-1)
        for start, piece in self.pieces(CHUNK_BYTES // self.dtype.itemsize, device):
            flat[start:start + piece.numel()].copy_(piece)
        return t


@contextlib.contextmanager
def open_outputs(path: str, limit: int | None = None):
    """The outputs in a file `write_tensors` wrote, its header checked: a list of Streamed
    (None for a non-tensor entry), readable while the file is open."""
    with open_regular(path) as f:
        header = header_of(f, os.fstat(f.fileno()).st_size, limit)
        offset = f.tell()
        outputs = []
        for entry in header:
            if entry is None:
                outputs.append(None)
                continue
            o = Streamed(f.fileno(), offset, DTYPES[entry["dtype"]], entry["shape"])
            offset += o.numel * o.dtype.itemsize
            outputs.append(o)
        yield outputs
