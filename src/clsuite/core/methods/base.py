"""The method-plugin seam: the hooks a method plugs into the learner's step.

A method is three parts, each chosen in its config (``conf/method/<name>.yaml``):
a replay policy (which memory slots to replay: ``clsuite.core.replay.base.ReplayPolicy``),
a memory-update policy (which samples to keep: ``clsuite.core.memory.base.UpdatePolicy``)
and, for methods that change the loss, the gradient or the classifier, a
``Plugin`` from this package. Every hook is optional: the base class does nothing.

Call order::

    plugin.setup(learner)                                # once: net, optimizer, memory exist
    for each task k:
        plugin.on_task_start(learner, k)
        for each incoming batch B_t = (x, y, t), iters_per_batch times:
            idx  = replay.select(learner, x, y, t, |R|)  # None while the memory is empty
            loss = plugin.loss(learner, x, y, t, idx)    # None: CE over R + B_t (Alg. 1 line 10)
            loss = loss + plugin.penalty(learner, x, y, t)   # EWC, SI, ...
            backward
            plugin.before_step(learner, x, y, t, idx)    # may rewrite .grad: GEM, A-GEM, SI, HAL
            optimizer.step()
            plugin.after_step(learner)                   # SI's path integral
        update.update(memory, x, y, t, learner)          # after the batch (if uses_memory)
        update.on_task_end(memory, learner)              # task end (if uses_memory): herding
        plugin.on_task_end(learner, k, datamodule)       # Fisher, anchors, previous network
        (the row R[k, :] is measured, with plugin.predict(learner, x, t) when it returns scores)
        (a task-end checkpoint may be written: plugin.state_dict(), by default its attributes;
         on resume plugin.load_state_dict(state, learner) after the network's weights: clsuite.run.runtime)
"""

from __future__ import annotations

from clsuite.core.state import AttributeState


class Plugin(AttributeState):
    #: the scenarios the plugin supports; None: all (checked before training)
    scenarios: tuple[str, ...] | None = None
    #: False for methods without an episodic memory (no capacity, no update calls)
    uses_memory = True

    def setup(self, learner) -> None:
        """Called once the network, optimizer and memory exist."""

    def on_task_start(self, learner, task: int) -> None:
        """Before the first batch of ``task``."""

    def on_task_end(self, learner, task: int, datamodule) -> None:
        """After the last batch of ``task`` (and the update policy's ``on_task_end``)."""

    def loss(self, learner, x, y, t, idx):
        """Return a loss tensor to replace the default replay loss, or None."""
        return None

    def penalty(self, learner, x, y, t):
        """An extra loss term added to the step's loss (0 by default)."""
        return 0.0

    def before_step(self, learner, x, y, t, idx) -> None:
        """Runs after backward, before optimizer.step(): may rewrite .grad."""

    def after_step(self, learner) -> None:
        """Runs after optimizer.step()."""

    def predict(self, learner, x, t):
        """Return class scores to replace the network's logits at test time, or None."""
        return None


class NoMemory(Plugin):
    """Online fine-tuning and Joint: plain SGD, no memory."""

    uses_memory = False
