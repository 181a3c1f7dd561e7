"""Default bans on kernel source (C/C++/CUDA) that does not compute itself: libtorch or
BLAS/DNN library calls, symbols loaded or code run at load time."""
from __future__ import annotations

import re

from .source import Source, native_hits


# What C++/CUDA source may name in libtorch's namespaces (at::, torch::, c10::): types,
# dtype/device constants, allocation of outputs and workspaces, the current stream and device
# guards, and the thread pool; everything else there (at::matmul, torch::mm, at::cpu::_softmax,
# at::native::...) is libtorch computing, and a direct at::cpu:: or at::native:: call is not
# even seen by the run-time audit.
LIBTORCH_ALLOWED = {
    "Tensor", "TensorOptions", "TensorList", "Scalar", "ScalarType", "IntArrayRef", "ArrayRef",
    "OptionalIntArrayRef", "Half", "BFloat16", "Device", "DeviceType", "DeviceGuard", "Layout",
    "MemoryFormat", "optional", "nullopt", "TensorAccessor", "PackedTensorAccessor",
    "PackedTensorAccessor32", "PackedTensorAccessor64", "GenericPackedTensorAccessor",
    "RestrictPtrTraits", "DefaultPtrTraits", "empty", "empty_like", "empty_strided", "zeros",
    "zeros_like", "cuda", "getCurrentCUDAStream", "getDefaultCUDAStream", "CUDAStream",
    "CUDAGuard", "OptionalCUDAGuard", "getCurrentDeviceProperties", "current_device",
    "parallel_for", "get_num_threads", "irange", "elementSize", "toString", "Error",
    "TypeMeta", "from_blob", "data_ptr", "numel", "size", "sizes", "stride", "strides", "dim",
    "scalar_type", "is_contiguous", "is_cuda",
}
ENUMS = {"ScalarType", "DeviceType", "Layout", "MemoryFormat"}
LIBTORCH_NAME = re.compile(r"(?<![\w:])(?:at|torch|c10|aten)(?:\s*::\s*\w+)+")
LIBRARY_CALLS = re.compile(r"\b(?:cblas_\w+|[sdcz](?:gemm|gemv|syrk|trsm)_|cublas\w*|cudnn\w+|"
                           r"mkl_\w+|dnnl_\w+|dnnl\s*::|mkldnn\w*|cusparse\w*|cusolver\w*|"
                           r"cufft\w*)(?!\w)")
LIBTORCH_ALIAS = re.compile(r"\busing\s+namespace\s+(?:at|torch|c10|aten)\b|"
                            r"\bnamespace\s+\w+\s*=\s*(?:at|torch|c10|aten)\b")


def libtorch_allowed(name: str) -> bool:
    parts = [p.strip() for p in name.split("::")][1:]
    for i, part in enumerate(parts):
        if part in LIBTORCH_ALLOWED or re.fullmatch(r"k[A-Z]\w*", part) or \
                (i and parts[i - 1] in ENUMS):
            continue
        return False
    return True


def native_calls_libtorch(src: Source) -> list[str]:
    found = [hit for hit in native_hits(src, LIBTORCH_NAME, skip_includes=True)
             if not libtorch_allowed(hit.split(": ", 1)[1])]
    found += native_hits(src, LIBTORCH_ALIAS, skip_includes=True)
    found += native_hits(src, LIBRARY_CALLS, skip_includes=True)
    return found


DYNAMIC_SYMBOLS = re.compile(
    r"\b(?:dlopen|dlmopen|dlsym|dlvsym|dladdr1?|dlinfo|RTLD_\w+)\b|"
    r"__attribute__\s*\(\(\s*(?:__)?(?:constructor|destructor|section|ifunc|alias|weakref)\b|"
    r"\[\[\s*gnu\s*::\s*(?:constructor|destructor|section|ifunc|alias)\b|"
    r"#\s*pragma\s+init\b|\b__libc_\w+")


def native_dynamic_symbols(src: Source) -> list[str]:
    return native_hits(src, DYNAMIC_SYMBOLS, skip_includes=True)


# The interpreter and the loader from inside a kernel: the Python C API (the harness's frames
# and locals hold what the judge has not yet told anyone, such as which timed calls it keeps),
# the loader's own tables (symbols found without dlsym), and asm labels that bind a declaration
# to another symbol (`void* f() __asm__("dlsym")`). A kernel needs none of them: it gets
# pointers and sizes. Scanned with string literals left in, where an asm label spells its name.
INTERPRETER_ACCESS = re.compile(
    r"\b_?Py(?!Torch\b)[A-Z_]\w*|"
    r"\b(?:_r_debug|link_map|dl_iterate_phdr|getauxval|__ehdr_start|_DYNAMIC|"
    r"_GLOBAL_OFFSET_TABLE_)\b|"
    r"[)\w\]]\s*(?:__asm__|__asm|asm)\s*\(\s*\"")


def native_interpreter_access(src: Source) -> list[str]:
    return native_hits(src, INTERPRETER_ACCESS, strings=False, skip_includes=True)

