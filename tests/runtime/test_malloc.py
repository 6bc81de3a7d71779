"""reuse_freed_memory: a large tensor allocated again after being freed is not page-faulted
in anew (counted with getrusage's minor faults, in fresh processes)."""

import platform
import subprocess
import sys

import pytest

_PROGRAM = """
import resource, sys, torch
from rlf.runtime.malloc import reuse_freed_memory
if sys.argv[1] == "1":
    assert reuse_freed_memory()
faults = []
for _ in range(40):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(16 << 20)  # 64 MiB, above glibc's largest mmap threshold (32 MiB)
    del x
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(" ".join(map(str, faults)))
"""


def _faults_per_allocation(reuse: bool):
    out = subprocess.run([sys.executable, "-c", _PROGRAM, "1" if reuse else "0"],
                         capture_output=True, text=True, check=True).stdout
    return [int(n) for n in out.split()]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_reused_memory_is_not_page_faulted_again():
    pages = (64 << 20) // 4096  # 16,384 pages of 4 KiB
    default = _faults_per_allocation(reuse=False)
    # glibc's default: every 64 MiB tensor is a fresh mmap, faulted in page by page.
    assert all(n >= pages for n in default[-3:]), default
    # Kept in the heap, the freed blocks are reused without faulting, once the heap has
    # grown to fit the aligned request (here within 10 allocations).
    reused = _faults_per_allocation(reuse=True)
    assert sum(reused[-5:]) < pages // 16, reused
