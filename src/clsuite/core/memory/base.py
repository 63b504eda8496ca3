"""The memory-update seam: which incoming samples the memory M keeps.

Call order (``clsuite.core.callbacks.MemoryUpdate`` and ``ContinualLearner``), for a
method whose plugin ``uses_memory``:

1. after every incoming batch B_t = (x, y, t) has been trained on (all its
   ``iters_per_batch`` updates): ``policy.update(memory, x, y, t, learner)``;
2. at the end of every task, before the task's row of R is measured and before
   the plugin's ``on_task_end``: ``policy.on_task_end(memory, learner)``
   (iCaRL's herding selects its exemplars there; the others do nothing).

``update`` must count every offered sample in ``memory.seen`` (N in the paper)
and write only through ``memory.append`` / ``memory.replace`` / ``memory.place``
(which reset a new sample's per-slot fields). It may read the learner (its network,
``learner.logit_mask(t)``, ``learner.task_classes``) but must not train it.
Per-slot data of its own goes into a field it declares (``memory.declare``, e.g.
``ClassRingBuffer``'s arrival times): checkpointed with the memory. Its other state
(its attributes) is checkpointed through ``state_dict`` (``clsuite.run.runtime``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from clsuite.core.memory.buffer import Memory
from clsuite.core.state import AttributeState


class UpdatePolicy(AttributeState, ABC):
    #: what the memory layout needs one slot of: "task" | "class" | None (checked against M before training)
    layout: str | None = None

    @abstractmethod
    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        """Offer the incoming batch to the memory (after its update step)."""

    def on_task_end(self, memory: Memory, learner) -> None:
        """Task boundary: nothing by default."""
