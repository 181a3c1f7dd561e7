"""The machine a kernel will run on, as a prompt states it: the CPU's model and its core (the
microarchitecture, its FMA units), its max clock, the vector ISA that matters for kernels, its
cores and caches, the C++ compiler's version, and the GPU where one is asked about.

Read once per process from /proc/cpuinfo (the core from vendor, family and model, or an Arm
part number: `CORES`), the max clock as devices.py reads it for the guaranteed peaks,
/sys/devices/system/cpu/cpu0/cache, `$CXX --version` and, for a GPU,
torch.cuda.get_device_properties. A `Machine` can also be written by hand (a test, a teacher's
description of another box): the knowledge notes are chosen by what it says, not by the host.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
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
_ONE = r"- (?:CPU|Clock|Cores|Vector ISA|FMA|Caches|Compiler|GPU): [^\n]*"
SECTION = re.compile(rf"^{_ONE}(?:\n{_ONE})*", re.MULTILINE)


@dataclass(frozen=True)
class Core:
    """A microarchitecture as a kernel writer needs it: its FMA units a core and their width,
    the -march name g++ knows it by and the GCC release that brought it, what else matters."""
    name: str
    fma_units: int = 0                 # 0: not known for this core
    fma_bits: int = 0
    march: str = ""
    gcc: int = 0                       # the GCC major release that knows `march`
    note: str = ""

    def fma_text(self) -> str:
        lanes = self.fma_bits // 32
        flops = self.fma_units * lanes * 2
        text = (f"{self.fma_units} x {self.fma_bits}-bit FMA units a core ({self.name}): "
                f"{flops} fp32 FLOP a cycle a core")
        return text + (f"; {self.note}" if self.note else "")


HALVES = "AVX-512 instructions run as two 256-bit halves (no more FLOPs than AVX2, no clock drop)"
SKX = ("1 unit on Xeon Bronze, Silver and some Gold 5000 parts; 512-bit code runs at a lower "
       "clock than 256-bit code")
# (vendor, family) -> [(first model, last model, Core)]; Arm: ("arm", implementer) keyed by part
CORES = {
    ("GenuineIntel", 6): [
        (0x3C, 0x3C, Core("Haswell", 2, 256, "haswell", 5)),
        (0x3F, 0x3F, Core("Haswell", 2, 256, "haswell", 5)),
        (0x45, 0x46, Core("Haswell", 2, 256, "haswell", 5)),
        (0x3D, 0x3D, Core("Broadwell", 2, 256, "broadwell", 5)),
        (0x47, 0x47, Core("Broadwell", 2, 256, "broadwell", 5)),
        (0x4F, 0x4F, Core("Broadwell", 2, 256, "broadwell", 5)),
        (0x56, 0x56, Core("Broadwell", 2, 256, "broadwell", 5)),
        (0x4E, 0x4E, Core("Skylake", 2, 256, "skylake", 6)),
        (0x5E, 0x5E, Core("Skylake", 2, 256, "skylake", 6)),
        (0x8E, 0x8E, Core("Kaby/Coffee Lake", 2, 256, "skylake", 6)),
        (0x9E, 0x9E, Core("Kaby/Coffee Lake", 2, 256, "skylake", 6)),
        (0xA5, 0xA6, Core("Comet Lake", 2, 256, "skylake", 6)),
        (0x55, 0x55, Core("Skylake-SP / Cascade Lake", 2, 512, "skylake-avx512", 6, SKX)),
        (0x6A, 0x6A, Core("Ice Lake-SP", 2, 512, "icelake-server", 8)),
        (0x6C, 0x6C, Core("Ice Lake-SP", 2, 512, "icelake-server", 8)),
        (0x7D, 0x7E, Core("Ice Lake", 1, 512, "icelake-client", 8)),
        (0x8C, 0x8D, Core("Tiger Lake", 1, 512, "tigerlake", 10)),
        (0xA7, 0xA7, Core("Rocket Lake", 1, 512, "rocketlake", 11)),
        (0x8F, 0x8F, Core("Sapphire Rapids", 2, 512, "sapphirerapids", 11)),
        (0xCF, 0xCF, Core("Emerald Rapids", 2, 512, "emeraldrapids", 13)),
        (0xAD, 0xAE, Core("Granite Rapids", 2, 512, "graniterapids", 13)),
        (0x97, 0x9A, Core("Alder Lake (P-cores)", 2, 256, "alderlake", 11)),
        (0xB7, 0xB7, Core("Raptor Lake (P-cores)", 2, 256, "raptorlake", 13)),
        (0xBA, 0xBA, Core("Raptor Lake (P-cores)", 2, 256, "raptorlake", 13)),
        (0xBF, 0xBF, Core("Raptor Lake (P-cores)", 2, 256, "raptorlake", 13)),
        (0xAA, 0xAC, Core("Meteor Lake (P-cores)", 2, 256, "meteorlake", 13)),
        (0xC5, 0xC6, Core("Arrow Lake (P-cores)", 2, 256, "arrowlake", 14)),
    ],
    ("AuthenticAMD", 0x17): [
        (0x00, 0x2F, Core("Zen / Zen+", 2, 128, "znver1", 6,
                          "AVX2 instructions run as two 128-bit halves")),
        (0x30, 0xFF, Core("Zen 2", 2, 256, "znver2", 9)),
    ],
    ("AuthenticAMD", 0x19): [
        (0x00, 0x0F, Core("Zen 3", 2, 256, "znver3", 11)),
        (0x10, 0x1F, Core("Zen 4", 2, 256, "znver4", 13, HALVES)),
        (0x20, 0x5F, Core("Zen 3", 2, 256, "znver3", 11)),
        (0x60, 0x7F, Core("Zen 4", 2, 256, "znver4", 13, HALVES)),
        (0xA0, 0xAF, Core("Zen 4", 2, 256, "znver4", 13, HALVES)),
    ],
    ("AuthenticAMD", 0x1A): [
        (0x00, 0x1F, Core("Zen 5", 2, 512, "znver5", 14)),
        (0x20, 0x2F, Core("Zen 5 (mobile)", 2, 256, "znver5", 14, HALVES)),
        (0x40, 0x4F, Core("Zen 5", 2, 512, "znver5", 14)),
        (0x60, 0x6F, Core("Zen 5 (mobile)", 2, 256, "znver5", 14, HALVES)),
    ],
    ("arm", 0x41): [
        (0xD08, 0xD08, Core("Cortex-A72", 2, 128)),
        (0xD0B, 0xD0B, Core("Cortex-A76", 2, 128)),
        (0xD0C, 0xD0C, Core("Neoverse N1", 2, 128)),
        (0xD40, 0xD40, Core("Neoverse V1", 2, 256, note="SVE 256-bit; NEON as 4 x 128-bit")),
        (0xD49, 0xD49, Core("Neoverse N2", 2, 128)),
        (0xD4F, 0xD4F, Core("Neoverse V2", 4, 128)),
        (0xD84, 0xD84, Core("Neoverse V3", 4, 128)),
        (0xD8E, 0xD8E, Core("Neoverse N3", 2, 128)),
    ],
    ("arm", 0x46): [(0x001, 0x001, Core("A64FX", 2, 512, note="SVE 512-bit"))],
}


def core_of(fields: dict[str, str]) -> tuple[Core | None, str]:
    """(the core, how /proc/cpuinfo names it: "family 26, model 2") where the table knows it;
    (None, that text) where it does not; (None, "") where cpuinfo says neither."""
    def number(key: str) -> int | None:
        text = fields.get(key, "")
        try:
            return int(text, 0) if text.startswith("0x") else int(text)
        except ValueError:
            return None
    if "cpu implementer" in fields:                           # Arm
        key, model = ("arm", number("cpu implementer")), number("cpu part")
        named = f"implementer {fields.get('cpu implementer')}, part {fields.get('cpu part', '?')}"
    else:
        key, model = (fields.get("vendor_id", ""), number("cpu family")), number("model")
        named = f"family {key[1]}, model {model}" if key[1] is not None else ""
    for first, last, core in CORES.get(key, []):
        if model is not None and first <= model <= last:
            return core, named
    return None, named


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
    core: Core | None = None                  # the microarchitecture, where CORES knows it
    named: str = ""                           # how cpuinfo names it: "family 26, model 2"
    clock: str = ""                           # the max clock and where it was read
    compiler: str = ""                        # `$CXX --version`'s first line

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
        out = [f"- CPU: {self.cpu}" + (f" ({self.arch})" if self.arch else "") +
               self.core_text(),
               f"- Clock: {self.clock or 'no max clock published here'}",
               f"- Cores: {self.cores} usable by this process (its CPU affinity), of "
               f"{self.logical} logical CPUs"]
        out.append(f"- Vector ISA: {', '.join(self.isa) or 'not known here'}"
                   + (f"; {self.widest()}" if self.widest() else ""))
        if self.core and self.core.fma_units:
            out.append(f"- FMA: {self.core.fma_text()}")
        if self.caches:
            out.append("- Caches: " + ", ".join(f"{name} {size_text(size)}"
                                                + (f" ({shared})" if shared else "")
                                                for name, size, shared in self.caches))
        if self.compiler:
            out.append(f"- Compiler: {self.compiler}{self.tuning_text()}")
        if gpu or device in ("cuda", "mps"):
            out.append(f"- GPU: {self.gpu.text() if self.gpu else gpu_absent(device)}")
        return out

    def core_text(self) -> str:
        if self.core:
            return f"; core: {self.core.name}" + (f" ({self.named})" if self.named else "")
        return f"; core: not in kforge's table ({self.named})" if self.named else ""

    def tuning_text(self) -> str:
        """Where the compiler is a GCC older than the one that knows this core by name."""
        version = gcc_major(self.compiler)
        if not (self.core and self.core.gcc and version) or version >= self.core.gcc:
            return ""
        return (f"; it predates -march={self.core.march} (GCC {self.core.gcc}): -march=native "
                "turns on every ISA flag this CPU reports but tunes for an older core")


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


def gcc_major(version_line: str) -> int | None:
    """GCC's major version in a `--version` first line ("g++ (Debian 12.2.0-14) 12.2.0");
    None for another compiler (clang) or none."""
    if not version_line or "clang" in version_line.lower():
        return None
    found = re.findall(r"\b(\d+)\.\d+(?:\.\d+)?\b", version_line)
    return int(found[-1]) if found else None


def compiler_version() -> str:
    """The first line of `$CXX --version` (the compiler runtime/cpp.py builds with); "" where
    it cannot be run."""
    from .runtime.cpp import compiler
    try:
        done = subprocess.run([compiler(), "--version"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.splitlines()[0].strip() if done.returncode == 0 and done.stdout else ""


def clock_text() -> str:
    """The max clock as the guaranteed peaks read it (devices.published_max_clock)."""
    from .devices import published_max_clock
    found = published_max_clock()
    return f"{found[0] / 1e9:.3g} GHz max ({found[1]})" if found else ""


@functools.lru_cache(maxsize=2)
def describe(with_gpu: bool = False) -> Machine:
    """This machine (read once per process; the GPU only when asked: it imports torch)."""
    from .devices import usable_cores
    try:
        fields = cpuinfo_fields(CPUINFO.read_text())
    except OSError:           # not Linux: what the platform module says
        fields = {}
    core, named = core_of(fields)
    return Machine(cpu_name(fields), platform.machine(), usable_cores(), os.cpu_count() or 1,
                   isa_of(fields), read_caches(), read_gpu() if with_gpu else None,
                   core, named, clock_text(), compiler_version())
