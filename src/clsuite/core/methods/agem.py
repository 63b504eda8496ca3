"""A-GEM (Chaudhry et al. 2019, "Efficient Lifelong Learning with A-GEM").

Per incoming batch B_t:

1. g = grad of l(f_theta; B_t) (the loss is B_t only: memory is not replayed in it);
2. g_ref = grad of l(f_theta; R), R a random batch of |R| memory samples of past tasks;
3. if g . g_ref < 0, replace g by its projection (paper eq. 11)
       g~ = g - (g . g_ref / g_ref . g_ref) g_ref,
   else keep g; then the SGD step.

Departures (online class-IL), each a config choice:
- Memory: reservoir over the stream, updated after every batch (no task boundary needed; the
  online reproductions and ER), not A-GEM's ring buffer per class nor Mammoth's task-end M // T.
- R only from past tasks' slots (``exclude_current_task``), as both reference codes.
- |R| = ``method.replay_size`` = 256 under every reading: facebookresearch/agem at 4542149,
  fc_permute_mnist.py l.58 ``EPS_MEM_BATCH_SIZE = 256``, default of ``--eps-mem-batch`` (l.116;
  conv_split_cifar.py l.60), not overridden by replicate_results_iclr19.sh (l.38, l.65); fewer
  past-task slots: all (l.294-295). ``method.replay_size=null``: the reading's |R|.
- One head over all classes (class-IL): both losses are plain CE over the head.

Left open by the paper and the codes, each an option (``make cell-agem``; measured in docs/REPRODUCTION.md,
"Table II cells checked by measurement"):
- |R|: 256 (default) | 128 (Mammoth's best_args seq-mnist ``minibatch_size``) | the reading's (null);
- R: uniform over past tasks' slots (A-GEM's ``np.random.choice``, Mammoth ``buffer.get_data``;
  default) | equal shares per past task (Avalanche ``AGEMPlugin``: ``replay@method.replay=
  task_balanced``) | the whole memory (Mammoth ``agem_r``: ``exclude_current_task=false``);
- memory: reservoir (default; Mammoth ``agem_r``) | ring buffer per class of M // classes
  (A-GEM's fc_permute_mnist.py l.307-316: ``update@method.update=class_ring``) | a random
  M // T per task (Avalanche ``patterns_per_experience``: ``update@method.update=task_reservoir``)
  | one batch of |B_t| per task (Mammoth ``models/agem.py`` ``end_task``, ``next(iter(loader))``:
  ``update@method.update=task_reservoir method.update.per_task=10``).

Under a reading (PROTOCOL 8): |B_t| and the memory budget follow it; |R| (256) and R from
past tasks only are A-GEM's own; ``replay_loss`` does not apply (R enters through g_ref).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clsuite.core.methods.base import Plugin
from clsuite.core.models.grads import flat_grad, grad_vector, write_grad


def agem_project(g: torch.Tensor, g_ref: torch.Tensor) -> torch.Tensor:
    """Eq. 11: g - (g.g_ref / g_ref.g_ref) g_ref when g.g_ref < 0, else g unchanged."""
    dot = torch.dot(g, g_ref)
    if dot >= 0:
        return g
    return g - (dot / torch.dot(g_ref, g_ref).clamp_min(1e-12)) * g_ref


class AGEM(Plugin):
    def loss(self, learner, x, y, t, idx):
        """l(f_theta; B_t) only: the memory batch R enters through g_ref."""
        return F.cross_entropy(learner.logits(x, t), y)

    def before_step(self, learner, x, y, t, idx) -> None:
        if idx is None or idx.numel() == 0:
            return  # no past-task memory yet: plain SGD
        params = list(learner.net.parameters())
        g = flat_grad(params)
        mx, my, mt = learner.memory.get(idx)
        g_ref = grad_vector(F.cross_entropy(learner.logits(mx, mt), my), params)
        write_grad(params, agem_project(g, g_ref))
