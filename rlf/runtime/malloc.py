"""Keeps freed memory in the process for reuse, so large tensors are not page-faulted in anew
on every training iteration.

glibc's malloc serves each allocation above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and returns it to the kernel on ``free``; the kernel then zero-fills every 4 KiB
page on first touch. PyTorch allocates CPU tensors with malloc, so a tensor of that size
created each iteration (e.g. the 36 MiB float32 input of a 320-frame Atari batch) pays for
~9,000 page faults each time. PyTorch's CPU performance guide suggests preloading jemalloc or
tcmalloc for this; ``mallopt`` does it in-process, with no extra library:
``M_MMAP_MAX = 0`` serves large blocks from the heap and ``M_TRIM_THRESHOLD`` keeps up to
1 GiB of freed memory there for reuse (glibc still falls back to ``mmap`` when the heap
cannot grow). The cost: the process keeps its peak memory instead of returning it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

__all__ = ["reuse_freed_memory"]

# <malloc.h> parameter numbers (glibc).
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_TRIM_THRESHOLD_BYTES = 1 << 30


def reuse_freed_memory() -> bool:
    """Makes glibc's malloc keep freed memory for reuse (see the module docstring).

    Process-wide and irreversible for the process; call it before the large allocations.

    Returns:
        True when both ``mallopt`` calls succeeded; False (and nothing changed) where the C
        library is not glibc (macOS, Windows, musl) or ``mallopt`` refused a setting.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success and 0 on error.
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                          _TRIM_THRESHOLD_BYTES))
