"""What a checkpoint keeps of a replay policy, an update policy or a method plugin.

The three seams (``ReplayPolicy``, ``UpdatePolicy``, ``Plugin``) inherit :class:`AttributeState`:
by default the state is every attribute of the object (tensors, numbers, containers: E-BRS's
options, HAL's anchors and phi, oEWC's Fisher and anchor, SI's omega / Omega / theta~, GEM's
per-task ring counts, ...), so a new method's state is checkpointed without a line of code. A
class whose state holds something else overrides both methods (iCaRL keeps its frozen network
as a state dict). Per-slot data lives in the memory's declared fields, not here
(``clsuite.memory.buffer.Memory.declare``).
"""

from __future__ import annotations


class AttributeState:
    def state_dict(self) -> dict:
        """The object's attributes (saved with ``torch.save`` inside the run's checkpoint)."""
        return dict(vars(self))

    def load_state_dict(self, state: dict, learner=None) -> None:
        """Restore :meth:`state_dict`'s attributes (``learner``: the restored learner, for classes
        that rebuild an object from it)."""
        vars(self).update(state)
