"""The seams' checkpointed state: a policy's or plugin's attributes, saved and restored with the run
(docs/GUIDE.md, "What a checkpoint holds")."""


class AttributeState:
    def state_dict(self) -> dict:
        """The object's attributes (saved with ``torch.save`` inside the run's checkpoint)."""
        return dict(vars(self))

    def load_state_dict(self, state: dict, learner=None) -> None:
        """Restore :meth:`state_dict`'s attributes (``learner``: the restored learner, for classes
        that rebuild an object from it)."""
        vars(self).update(state)
