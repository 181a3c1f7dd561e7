"""Tensors between the candidate worker and the judge, through a file, a chunk at a time.

A KernelBench level-1 output is 6.4 GB; neither side may hold a host copy of it, let alone one
per trial. The writer streams each tensor's bytes from the device in chunks; the reader fills a
tensor on its own device chunk by chunk. Host memory stays at one chunk on each side.

Format: one JSON line (dtype and shape per tensor), then each tensor's raw bytes, contiguous.
"""
from __future__ import annotations

import json
import os

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


def read_tensors(path: str, device: str) -> list:
    """Read what `write_tensors` wrote, each tensor allocated once on `device`."""
    out = []
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        buffer = host_buffer(torch.device(device))
        view = memoryview(buffer.numpy())
        for entry in header:
            if entry is None:
                out.append(None)
                continue
            t = torch.empty(entry["shape"], dtype=DTYPES[entry["dtype"]], device=device)
            dest = raw_bytes(t) if t.numel() else None
            total = dest.numel() if dest is not None else 0
            done = 0
            while done < total:
                n = f.readinto(view[:min(CHUNK_BYTES, total - done)])
                if not n:
                    raise EOFError(f"{path}: truncated")
                dest[done:done + n].copy_(buffer[:n])
                done += n
            out.append(t)
    return out
