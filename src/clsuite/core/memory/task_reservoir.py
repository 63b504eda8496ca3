"""A per-task memory of random samples: each task keeps a uniform random subset of its stream.

Each task k, at its first sample, gets the next n free slots (n = ``per_task``, or M // T when
null, T from ``n_tasks`` or the benchmark) and fills them by reservoir sampling over its own
samples (Vitter 1985): the first n are written, the i-th (i > n, from 1 within the task) replaces
a uniform slot of its task with probability n / i. At the task's end its slots hold a uniform
random n-subset, what a task-end draw gives, while the update stays online (PROTOCOL section 2).

A-GEM's layouts (``clsuite.core.methods.agem``), each from a reference:
- ``per_task: null`` (M // T): Avalanche ``AGEMPlugin.update_memory`` (a random
  ``patterns_per_experience`` subset of each experience) and Mammoth ``models/agem.py``
  ``end_task``'s ``samples_per_task = buffer_size // N_TASKS``;
- ``per_task: |B_t|``: what Mammoth's ``end_task`` stores, ``next(iter(loader))``.
"""

from __future__ import annotations

from typing import Annotated

import torch

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.reservoir import reservoir_slots
from clsuite.core.spec import Whole


class TaskReservoir(UpdatePolicy):
    """Memory update: ``per_task`` slots per task (null: M // T), a reservoir over each task's samples."""

    layout = "task"

    def __init__(
        self,
        per_task: Annotated[
            int | None, Whole(1, None, "slots per task, a reservoir over the task; null = M // T", null=True)
        ] = None,
        n_tasks: Annotated[
            int | None, Whole(1, None, "T of M // T; null = benchmark.n_tasks (at least that)", null=True)
        ] = None,
    ):
        self.per_task, self.n_tasks = per_task, n_tasks
        self.start: dict[int, int] = {}  # task -> its first slot
        self.count: dict[int, int] = {}  # task -> samples of the task seen so far

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        memory.seen += len(y)
        n = self.per_task or memory.capacity // (self.n_tasks or len(learner.task_classes))
        for k in torch.unique(t).tolist():
            if k not in self.start:
                if memory.size + n > memory.capacity:
                    raise ValueError(f"task {k} needs {n} more memory slots; M = {memory.capacity} holds {memory.size}")
                self.start[k] = memory.size
            sel = (t == k).nonzero().squeeze(1)
            c, start = self.count.get(k, 0), self.start[k]
            if c < n and start != max(self.start.values()):  # its free slots now belong to a later task
                raise ValueError(f"task {k} came back after a later task started: TaskReservoir needs tasks in turn")
            free = max(0, min(len(sel), n - c))  # samples that take the task's still-empty slots
            slots = torch.full((len(sel),), -1, dtype=torch.long, device=memory.device)
            slots[:free] = c + torch.arange(free, device=memory.device)
            if len(sel) > free:  # the rest: j ~ U[0, i) over the task's count i, kept when j < n
                slots[free:] = reservoir_slots(c + free, len(sel) - free, n, memory.device)
            self.count[k] = c + len(sel)
            memory.place(torch.where(slots >= 0, start + slots, slots), x[sel], y[sel], t[sel])
            memory.size = max(memory.size, start + min(self.count[k], n))
