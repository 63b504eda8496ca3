"""GEM's episodic memory (Lopez-Paz & Ranzato 2017; reference code ``GEM/model/gem.py``):
one ring buffer per task.

GEM's code keeps, for every task, a ring buffer of the last ``n_memories``
samples of that task, filled online as the task streams by. Here the total M
(``memory`` / ``memory_per_class``: the run's budget, as every method) is shared
out by task: task k owns the slots [k n, (k+1) n), n = M // T, and its i-th
sample goes to slot k n + (i mod n), overwriting the oldest once full. The
layout is GEM's own under every reading (PROTOCOL section 8). Mammoth's GEM
instead rebalances the buffer at each task end from the whole task's data,
which the online protocol does not allow.
"""

from __future__ import annotations

from typing import Annotated

import torch

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory
from clsuite.core.spec import Whole


class TaskRingBuffer(UpdatePolicy):
    """Memory update: one ring buffer of M // T slots per task (GEM's ``n_memories``).

    T comes from ``n_tasks`` or the learner's ``task_classes``.
    """

    layout = "task"

    def __init__(
        self,
        n_tasks: Annotated[
            int | None, Whole(1, None, "T of the ring layout; null = benchmark.n_tasks (at least that)", null=True)
        ] = None,
    ):
        self.n_tasks = n_tasks
        self.count: dict[int, int] = {}  # samples of task k written so far

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        memory.seen += len(y)
        n_tasks = self.n_tasks or len(learner.task_classes)
        n = memory.capacity // n_tasks
        if n == 0:
            return
        for k in torch.unique(t).tolist():
            sel = (t == k).nonzero().squeeze(1)
            c = self.count.get(k, 0)  # the i-th sample of task k goes to slot k*n + i mod n
            slots = k * n + (c + torch.arange(len(sel), device=memory.device)) % n
            self.count[k] = c + len(sel)
            slots, sel = slots[-n:], sel[-n:]  # a batch longer than n: only its last n survive
            memory.replace(slots, x[sel], y[sel], t[sel])
            end = k * n + min(self.count[k], n)
            if end > memory.size:
                memory.t[memory.size : k * n] = -1  # slots of a skipped task: no task's memory
                memory.size = end
