"""What a training process does around the arithmetic; none of it moves a number.

- :func:`keep_freed_memory`: glibc's malloc serves a request above its mmap threshold with a fresh
  ``mmap`` and returns it with ``munmap`` on free, and trims the heap top above its trim threshold;
  a tensor of a few MB allocated per step (GSS's per-sample gradients, 19 MB per batch for the MLP;
  oEWC's Fisher chunks; GEM's float64 copies) then page-faults every page on every step, which cost
  GSS more than its arithmetic (docs/PERFORMANCE.md). Raising both thresholds (as
  ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` would) keeps freed blocks for reuse; the
  process keeps its peak heap. Elsewhere than glibc (macOS, musl) this does nothing.
- :func:`collect_and_freeze`, at the start of every run: Python's cyclic collector walks every
  tracked object on a full pass (about 430,000 with torch, Lightning, Hydra and OmegaConf loaded:
  0.23 s on this suite's CPU machine), and a joblib (loky) worker without ``psutil`` runs one after
  every job of a sweep (Table II's 280 jobs: about 64 core-seconds, measured 2026-11-26). One
  ``gc.collect()`` (the garbage of the jobs before, cycles included, is freed: nothing leaks), then
  ``gc.freeze()``: what is alive now (modules, decoded data files, Hydra's state) moves to the
  permanent generation, which later passes skip. Objects are still freed by reference counting;
  only cycles among frozen objects (none made after the freeze) would wait.
- :class:`AttributeState`: what a checkpoint keeps of a replay policy, an update policy or a method
  plugin (the three seams inherit it). By default every attribute (tensors, numbers, containers:
  E-BRS's options, HAL's anchors and phi, oEWC's Fisher and anchor, SI's omega / Omega / theta~,
  GEM's per-task ring counts, ...), so a new method's state is checkpointed without a line of code;
  a class whose state holds something else overrides both methods (iCaRL keeps its frozen network
  as a state dict). Per-slot data lives in the memory's declared fields, not here
  (``clsuite.memory.buffer.Memory.declare``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc

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
    asked here: it walks the whole permanent generation, 0.04 s under cProfile)."""
    gc.collect()
    gc.freeze()


class AttributeState:
    def state_dict(self) -> dict:
        """The object's attributes (saved with ``torch.save`` inside the run's checkpoint)."""
        return dict(vars(self))

    def load_state_dict(self, state: dict, learner=None) -> None:
        """Restore :meth:`state_dict`'s attributes (``learner``: the restored learner, for classes
        that rebuild an object from it)."""
        vars(self).update(state)
