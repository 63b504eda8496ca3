"""MIR (Aljundi et al. 2019, "Online Continual Learning with Maximally Interfered
Retrieval"; official ``mir.py``): score C random memory candidates by the
increase of their loss under a virtual SGD step on B_t (Eq. 3-4), replay the
top |R|.

Options from the official code that the paper is silent on (PROTOCOL section 8):
- ``exclude_current_task``: candidates only from past tasks (``buffer.sample(..., exclude_task=task)``);
- ``compare_to_old_logits``: its split-MNIST script, not its CIFAR-10 one;
- ``scoring_updates_bn``: its forward of the candidates under theta (``model(bx)``, train mode)
  updates BatchNorm's running statistics; false keeps them out (``clsuite.core.replay.virtual``);
- ``logits_on_overwrite`` (``clsuite.core.memory.buffer``): ``keep`` leaves the previous occupant's
  stored logits in an overwritten slot, as its ``buffer.add_reservoir(data, target, None, task)``
  (``er_main.py`` l.182); ``reset`` starts them at 0 (``make cell-logits``);
- the replay-loss form (mean over R + B_t, or mean(B_t) + mean(R) as its code): ``replay_loss``.

Under a reading (PROTOCOL 8) all of these, |B_t|, |R| and the memory budget follow it; C = 50
(the paper's and the scripts' ``--subsample 50``) is MIR's own. C-CMR scores with the same
function (``score_slots``), so the E-BRS ablation and AdaER evict by one score.
"""

from __future__ import annotations

from typing import Annotated

from clsuite.core.replay.base import ReplayPolicy
from clsuite.core.replay.virtual import BN_DOC, score_slots
from clsuite.core.spec import Flag, Whole


class MIRReplay(ReplayPolicy):
    def __init__(
        self,
        candidates: Annotated[int, Whole(1, None, "C: random candidates scored by the virtual step")] = 50,
        exclude_current_task: Annotated[bool, Flag("candidates only from past tasks' slots")] = False,
        compare_to_old_logits: Annotated[bool, Flag("score against the logits stored with the sample")] = False,
        scoring_updates_bn: Annotated[bool, Flag(BN_DOC)] = False,
    ):
        self.candidates = candidates
        self.exclude_current_task = exclude_current_task
        self.compare_to_old_logits, self.scoring_updates_bn = compare_to_old_logits, scoring_updates_bn

    def select(self, learner, x, y, t, n: int):
        exclude = learner.current_task if self.exclude_current_task else None
        cand = learner.memory.sample(self.candidates, exclude_task=exclude)  # C random candidates
        if len(cand) == 0:
            return cand
        s = score_slots(learner, x, y, t, cand, self.compare_to_old_logits, self.scoring_updates_bn)  # kept for E-BRS
        return cand[s.topk(min(n, len(cand))).indices]  # the |R| most interfered
