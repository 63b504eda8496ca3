"""HAL's episodic memory (Chaudhry et al. 2021; the authors' ER-Ring,
``update_fifo_buffer``): one FIFO ring buffer per class.

Each class owns at most m = M // classes slots (the run's budget M shared out
by class, classes = the benchmark's total); an incoming sample of class y is
appended while its class holds fewer than m, else it overwrites the class's
oldest sample. Slots are taken as samples arrive (no slot is reserved for a
class not seen yet), each with an arrival stamp. The layout is HAL's own under
every reading (PROTOCOL section 8).
"""

from __future__ import annotations

import torch

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory


class ClassRingBuffer(UpdatePolicy):
    """Memory update: per class, a FIFO of the last M // classes samples."""

    layout = "class"

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        stamp = memory.declare("arrival", (), torch.long, fill=-1)  # arrival time of each slot's sample
        m = memory.capacity // memory.num_classes
        arrival = memory.seen + torch.arange(len(y), device=y.device)
        memory.seen += len(y)
        if m == 0:
            return
        for c in y.unique():
            src = torch.nonzero(y == c).squeeze(1)[-m:]  # only the last m can stay
            held = torch.nonzero(memory.y[: memory.size] == c).squeeze(1)
            n_new = min(len(src), m - len(held))
            if n_new:
                slots = memory.append(x[src[:n_new]], y[src[:n_new]], t[src[:n_new]])
                stamp[slots] = arrival[src[:n_new]]
            src = src[n_new:]
            if len(src):  # overwrite the oldest
                oldest = held[stamp[held].argsort()[: len(src)]]
                memory.replace(oldest, x[src], y[src], t[src])
                stamp[oldest] = arrival[src]
