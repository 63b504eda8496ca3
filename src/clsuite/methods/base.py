"""The hooks a method plugs into the learner's step (all optional).

A method is a replay policy (which memory slots to replay, ``clsuite.replay``),
a memory-update policy (``clsuite.memory``) and, for methods that change the
loss, the gradient or the classifier, a ``Plugin`` from this package. The
learner calls, for every update on an incoming batch B_t::

    idx  = replay.select(learner, x, y, t, n)          # R, slots of M
    loss = plugin.loss(...) or CE over R + B_t         # Alg. 1 line 10
    loss = loss + plugin.penalty(...)                  # EWC, SI, ...
    backward; plugin.before_step(...)                  # GEM / A-GEM projection
    optimizer.step(); plugin.after_step(...)           # SI path integral

and ``on_task_start`` / ``on_task_end`` around each task, ``predict`` at test
time (iCaRL's nearest-mean classifier).
"""

from __future__ import annotations


class Plugin:
    #: True when the method keeps and replays an episodic memory
    uses_memory = True

    def setup(self, learner) -> None:
        """Called once the network, optimizer and memory exist."""

    def on_task_start(self, learner, task: int) -> None:
        pass

    def on_task_end(self, learner, task: int, datamodule) -> None:
        pass

    def loss(self, learner, x, y, t, idx):
        """Return a loss tensor to replace the default replay loss, or None."""
        return None

    def penalty(self, learner, x, y, t):
        """An extra loss term added to the step's loss (0 by default)."""
        return 0.0

    def before_step(self, learner, x, y, t, idx) -> None:
        """Runs after backward, before optimizer.step(): may rewrite .grad."""

    def after_step(self, learner) -> None:
        pass

    def predict(self, learner, x, t):
        """Return class scores to replace the network's logits at test time, or None."""
        return None


class NoMemory(Plugin):
    """Online fine-tuning and Joint: plain SGD, no memory."""

    uses_memory = False
