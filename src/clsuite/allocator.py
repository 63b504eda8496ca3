"""Keep freed memory in the process: no page faults on every large CPU tensor.

glibc's malloc serves a request above its mmap threshold with a fresh ``mmap`` and returns it
with ``munmap`` on free, and trims the heap top above its trim threshold; a tensor of a few MB
allocated per step (GSS's per-sample gradients, 19 MB per batch for the MLP; oEWC's Fisher
chunks; GEM's float64 copies) then page-faults every page on every step, which cost GSS more
than its arithmetic (scripts/bench.py, docs/PERFORMANCE.md). Raising both thresholds (as
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` would) keeps freed blocks for reuse; the
process keeps its peak heap. Numbers are unchanged: only where tensors live moves. Elsewhere
than glibc (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
THRESHOLD = 1 << 30  # 1 GiB: larger than any per-step tensor of the suite's benchmarks


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; True when it applied."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD))
