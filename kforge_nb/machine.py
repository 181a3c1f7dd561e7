"""The machine a kernel will run on, as a prompt states it: the CPU's model, the vector ISA that
matters for kernels, its cores and caches, and the GPU where one is asked about.

Read once per process from /proc/cpuinfo, /sys/devices/system/cpu/cpu0/cache and, for a GPU,
torch.cuda.get_device_properties. A `Machine` can also be written by hand (a test, a teacher's
description of another box): the knowledge notes are chosen by what it says, not by the host.
"""
from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
# the /proc/cpuinfo flags a kernel writer acts on (x86, then Arm: asimd is NEON), in this order
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "neon", "sve", "sve2")
ARM_NAMES = {"asimd": "neon"}
# the machine section's lines, as `lines()` writes them, a block at a time: a recording masks
# them, so a recorded session replays on another machine (providers/recording.py)
_ONE = r"- (?:CPU|Cores|Vector ISA|Caches|GPU): [^\n]*"
SECTION = re.compile(rf"^{_ONE}(?:\n{_ONE})*", re.MULTILINE)


@dataclass(frozen=True)
class Gpu:
    name: str
    sms: int
    memory_bytes: int
    capability: tuple[int, int]

    def text(self) -> str:
        major, minor = self.capability
        return (f"{self.name}, {self.sms} SMs, {self.memory_bytes / 2**30:.0f} GiB, compute "
                f"capability {major}.{minor} (sm_{major}{minor})")


@dataclass(frozen=True)
class Machine:
    cpu: str                                  # the model name, as /proc/cpuinfo gives it
    arch: str = ""                            # x86_64, aarch64
    cores: int = 1                            # usable by this process (its affinity)
    logical: int = 1                          # logical CPUs the system has
    isa: tuple[str, ...] = ()                 # those of ISA_FLAGS it has
    caches: tuple[tuple[str, int, str], ...] = ()   # (L1d, bytes, "shared by N CPUs" or "")
    gpu: Gpu | None = None                    # None: none here, or none looked for

    def has(self, flag: str) -> bool:
        return flag.lower() in self.isa

    def widest(self) -> str:
        """What the widest vectors are, where the flags say."""
        if self.has("avx512f"):
            return "512-bit vectors available (__AVX512F__ is defined under -march=native)"
        if self.has("avx2"):
            return "no avx512f: 256-bit vectors at most"
        return ""

    def lines(self, device: str, gpu: bool = False) -> list[str]:
        """The prompt's machine section, one fact a line; the GPU's where the target runs on
        `device` cuda or mps, or is a GPU language (`gpu`: Triton, interpreted on a CPU)."""
        out = [f"- CPU: {self.cpu}" + (f" ({self.arch})" if self.arch else ""),
               f"- Cores: {self.cores} usable by this process (its CPU affinity), of "
               f"{self.logical} logical CPUs"]
        out.append(f"- Vector ISA: {', '.join(self.isa) or 'not known here'}"
                   + (f"; {self.widest()}" if self.widest() else ""))
        if self.caches:
            out.append("- Caches: " + ", ".join(f"{name} {size_text(size)}"
                                                + (f" ({shared})" if shared else "")
                                                for name, size, shared in self.caches))
        if gpu or device in ("cuda", "mps"):
            out.append(f"- GPU: {self.gpu.text() if self.gpu else gpu_absent(device)}")
        return out


def gpu_absent(device: str) -> str:
    return "Apple GPU through MPS" if device == "mps" else "no GPU here"


def size_text(size: int) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's fields of a /proc/cpuinfo text (every CPU repeats them)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        key = key.strip().lower()
        if colon and key and key not in fields:
            fields[key] = value.strip()
    return fields


def isa_of(fields: dict[str, str]) -> tuple[str, ...]:
    words = set((fields.get("flags") or fields.get("features") or "").lower().split())
    words |= {ARM_NAMES[w] for w in words if w in ARM_NAMES}
    return tuple(flag for flag in ISA_FLAGS if flag in words)


def cpu_name(fields: dict[str, str]) -> str:
    return (fields.get("model name") or fields.get("hardware") or fields.get("cpu model")
            or platform.processor() or "unknown CPU")


def read_caches(folder: Path = CACHES) -> tuple[tuple[str, int, str], ...]:
    """(name, bytes, sharing) per cache level cpu0 sees: L1d, L1i, L2, L3."""
    found = []
    for index in sorted(folder.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
            shared = (index / "shared_cpu_list").read_text().strip() \
                if (index / "shared_cpu_list").exists() else ""
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        number = int(size.rstrip("KMG") or 0) * scale
        count = cpu_count(shared)
        found.append((f"L{level}{suffix}", number,
                      f"shared by {count} CPUs" if count > 1 else ""))
    return tuple(found)


def cpu_count(cpu_list: str) -> int:
    """How many CPUs a list such as '0-3,8' names."""
    count = 0
    for part in filter(None, cpu_list.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1 if low.isdigit() else 0
    return count


def read_gpu() -> Gpu | None:
    """The first CUDA device's properties; None without torch or a GPU."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        p = torch.cuda.get_device_properties(0)
    except Exception:         # no torch, a driver that fails: the prompt says "no GPU here"
        return None
    return Gpu(p.name, p.multi_processor_count, p.total_memory, (p.major, p.minor))


@functools.lru_cache(maxsize=2)
def describe(with_gpu: bool = False) -> Machine:
    """This machine (read once per process; the GPU only when asked: it imports torch)."""
    from .devices import usable_cores
    try:
        fields = cpuinfo_fields(CPUINFO.read_text())
    except OSError:           # not Linux: what the platform module says
        fields = {}
    return Machine(cpu_name(fields), platform.machine(), usable_cores(), os.cpu_count() or 1,
                   isa_of(fields), read_caches(), read_gpu() if with_gpu else None)
