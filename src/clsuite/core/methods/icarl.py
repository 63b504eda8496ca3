"""iCaRL (Rebuffi et al. 2017, "iCaRL: Incremental Classifier and Representation Learning").

- Representation learning (Alg. 3): sigmoid BCE, one-hot targets for the
  classes of the current and future tasks and the previous network's sigmoid
  outputs q_i^y as targets for the old classes (distillation)::

      l = -sum_i [ sum_{y not old} d_{y=y_i} log g_y(x_i) + d_{y!=y_i} log(1 - g_y(x_i))
                 + sum_{y old} q_i^y log g_y(x_i) + (1 - q_i^y) log(1 - g_y(x_i)) ]

  The previous network is a frozen copy of the net taken at the end of each task.
- Classification (Alg. 1): nearest mean of exemplars, y* = argmin_y ||phi(x) - mu_y||
  with phi L2-normalised and mu_y the renormalised mean of phi over the exemplars
  of class y. Classes without exemplars score -inf. ``classifier: head`` predicts with the
  network's own outputs instead (the paper's "hybrid1", Sec. 4.1), trained the same.
- Exemplars: ``update: herding`` (``clsuite.core.memory.herding``, default: Alg. 4 and 5 at each
  task end, through ``on_task_end``) or ``update: reservoir`` (online iCaRL, Mai et al. 2021).

Departures (why: docs/notes/PARITY.md):
- The BCE is averaged over ALL C outputs (unseen classes with target 0) and over samples, not
  summed over classes as Alg. 3 writes: both reference codes (``iCaRL-TheanoLasagne/
  main_cifar_100_theano.py`` ``loss.mean()``; Mammoth ``models/icarl.py`` l.150, l.155).
- Online: each batch is seen once, so "new data + exemplars" is B_t + a random replay batch R
  (RaptorMai's online iCaRL); R's old-class targets come from the previous network too.
- Herding needs the whole task: ``HerdingMemory`` keeps the task's stream and herds at its end.
- Class means are recomputed from the memory at every prediction (eval mode); no flipped copies.
- Before any training (b) the memory is empty and the network's own head is used.

Under a reading (PROTOCOL 8): |B_t|, |R| and the memory budget follow it; herding
(m = M // classes seen per class) and the loss (BCE over B_t + R, so
``replay_loss`` does not apply) are iCaRL's own, and R is drawn from the whole
memory (``exclude_current_task: false``; with herding it holds past tasks only).
"""

from __future__ import annotations

import copy
from typing import Annotated

import torch
import torch.nn.functional as F

from clsuite.core.memory.herding import features
from clsuite.core.methods.base import Plugin
from clsuite.core.spec import OneOf


class ICaRL(Plugin):
    scenarios = ("class_il", "task_il")

    def __init__(
        self,
        classifier: Annotated[
            str | None,
            OneOf(
                "head", null=True, doc="null: nearest mean of exemplars (Alg. 1) | head: the net's outputs (hybrid1)"
            ),
        ] = None,
    ):
        self.classifier = classifier or "nme"  # null, its one spelling: a key added later keeps earlier identities
        self.old_net = None  # the network at the end of the previous task

    def setup(self, learner) -> None:
        if learner.scenario == "domain_il":
            raise ValueError("iCaRL needs one output per class: use scenario=class_il or task_il")

    def loss(self, learner, x, y, t, idx):
        if idx is not None and idx.numel():
            mx, my, _ = learner.memory.get(idx)
            x, y = torch.cat([x, mx]), torch.cat([y, my])
        k = learner.current_task
        old = learner.task_classes[:k].flatten()
        out = learner.net(x)
        target = F.one_hot(y, out.shape[1]).to(out.dtype)
        if self.old_net is not None and old.numel():
            with torch.no_grad():
                target[:, old] = torch.sigmoid(self.old_net(x))[:, old]  # q_i^y, distillation
        return F.binary_cross_entropy_with_logits(out, target)  # mean over samples and all C outputs

    def on_task_end(self, learner, task, datamodule) -> None:
        # the update policy (HerdingMemory) has herded the task's exemplars just before
        self.old_net = copy.deepcopy(learner.net).eval().requires_grad_(False)

    def state_dict(self) -> dict:
        """The frozen network's weights (the exemplar means are recomputed from the memory)."""
        return {"old_net": None if self.old_net is None else self.old_net.state_dict()}

    def load_state_dict(self, state: dict, learner=None) -> None:
        self.old_net = None
        if state["old_net"] is not None:
            self.old_net = copy.deepcopy(learner.net).eval().requires_grad_(False)
            self.old_net.load_state_dict(state["old_net"])

    @torch.no_grad()
    def class_means(self, learner) -> torch.Tensor:
        """[C, d]: mu_y over the exemplars of y (NaN rows for classes without exemplars)."""
        mem = learner.memory
        phi = features(learner.net, mem.x[: mem.size])
        C = learner.net.head.out_features
        sums = torch.zeros(C, phi.shape[1], device=phi.device).index_add_(0, mem.y[: mem.size], phi)
        counts = torch.bincount(mem.y[: mem.size], minlength=C)
        mu = F.normalize(sums, dim=1)
        return mu.masked_fill((counts == 0)[:, None], float("nan"))

    @torch.no_grad()
    def predict(self, learner, x, t):
        if learner.memory.size == 0 or self.classifier == "head":
            return None
        mu = self.class_means(learner)
        dist = torch.cdist(features(learner.net, x), mu.nan_to_num(0.0))
        scores = (-dist).masked_fill(mu.isnan().any(1)[None, :], float("-inf"))
        return learner.logits(x, t, net_out=scores)  # task-IL: only the task's classes
