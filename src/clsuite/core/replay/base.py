"""The replay-policy seam: which memory slots become the replay batch R.

Call order (``ContinualLearner.training_step``), for every update on an incoming
batch B_t = (x, y, t), ``iters_per_batch`` times per batch:

1. the learner skips replay while the memory is empty (``select`` is not called);
2. ``idx = policy.select(learner, x, y, t, n)`` with n = |R| (``replay_size``);
3. the learner (or the method's ``Plugin.loss``) trains on R + B_t;
4. after the optimizer step, the update policy (``clsuite.core.memory.base``) writes
   B_t into the memory.

A policy may read anything on the learner (``learner.memory``, ``learner.net``,
``learner.lr``, ``learner.current_task``, ``learner.logit_mask(t)``) and may
write ``learner.memory.score`` (the interference scores E-BRS reads),
``learner.memory.logits`` (stored logits) or a per-slot field it declares
(``memory.declare``); it must not change the network, the optimizer or the
memory's samples. Randomness comes from torch's global generator (seeded per
run, saved in checkpoints), so a policy is reproducible for a seed; its
attributes are its checkpointed state (``clsuite.run.runtime``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from clsuite.core.state import AttributeState


class ReplayPolicy(AttributeState, ABC):
    @abstractmethod
    def select(self, learner, x, y, t, n: int) -> torch.Tensor | None:
        """Up to ``n`` distinct filled slots of ``learner.memory`` (a long tensor of
        slot indices on the memory's device), possibly empty; None means no replay."""
