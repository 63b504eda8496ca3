"""What a training process does around the arithmetic; none of it moves a number: freed memory reused and
the garbage collector frozen (docs/notes/PERFORMANCE.md, "What the profile showed", items 1 and 6), and the run's
peak memory (docs/PROTOCOL.md, section 5).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import sys
from pathlib import Path

import torch

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


def collect_and_freeze() -> None:
    """Collect the garbage so far, then freeze the survivors (``gc.get_freeze_count()`` is not
    asked here: it walks the whole permanent generation)."""
    gc.collect()
    gc.freeze()


def reset_peak_memory(device: torch.device) -> None:
    """Start the peaks afresh, so that a process running several runs (a sweep's basic launcher)
    gives each its own: the process's peak RSS (Linux 4.0+: ``5`` to ``/proc/self/clear_refs``;
    elsewhere the peak since the process started) and torch's peak allocation on ``device``."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> dict[str, float | None]:
    """``peak_ram_mb``: the process's peak resident set size since :func:`reset_peak_memory`
    (``getrusage``' max RSS); ``peak_gpu_mb``: torch's peak allocation on ``device`` (None on the
    CPU). MB = 2^20 bytes."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    gpu = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return {"peak_ram_mb": rss / 2**20, "peak_gpu_mb": None if gpu is None else gpu / 2**20}
