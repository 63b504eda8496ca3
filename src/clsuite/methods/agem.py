"""A-GEM (Chaudhry et al. 2019, "Efficient Lifelong Learning with A-GEM").

Per incoming batch B_t:

1. g = grad of l(f_theta; B_t) (the loss is B_t only: memory is not replayed in it);
2. g_ref = grad of l(f_theta; R), R a random batch of |R| memory samples of past tasks;
3. if g . g_ref < 0, replace g by its projection (paper eq. 11)
       g~ = g - (g . g_ref / g_ref . g_ref) g_ref,
   else keep g; then the SGD step.

Adaptations to the online class-IL protocol (each one a config choice):
- Memory: reservoir sampling over the stream (``clsuite.memory.reservoir``),
  updated after every batch. The reference code (facebookresearch/agem) fills a
  ring buffer per class during the task; Mammoth adds M // T samples per task at
  the task end (``end_task``); the online reproductions and this suite's ER use
  reservoir, which needs no task boundary.
- R is drawn only from slots of past tasks (``RandomReplay(exclude_current_task)``):
  as in both reference codes, whose reference batch never holds the current task.
- |R| = ``method.replay_size`` = 256, A-GEM's own under every reading (not the reading's
  ``replay_size``): the value of the setting that reproduces its own paper,
  github.com/facebookresearch/agem at 4542149, fc_permute_mnist.py l.58 ``EPS_MEM_BATCH_SIZE =
  256``, the default of ``--eps-mem-batch`` (l.116; conv_split_cifar.py l.60), which
  replicate_results_iclr19.sh (l.38 MNIST, l.65 CIFAR) does not override; fewer past-task slots
  than 256: all of them (as fc_permute_mnist.py l.294-295). Mammoth uses 128 (utils/best_args.py,
  seq-mnist agem ``minibatch_size``). ``method.replay_size=null`` gives the reading's |R|.
- One head over all classes (class-IL): both losses are plain CE over the head.

What the paper and the reference codes leave open, each an option (``make cell-agem`` measures
each alone against the default above, paired by seed; the report's Table II notes):
- the reference batch size: 256 (A-GEM's code, default) | 128 (Mammoth's best_args,
  ``method.replay_size=128``) | the reading's |R| (``method.replay_size=null``);
- how R is drawn: uniformly over past tasks' slots (A-GEM's code ``np.random.choice`` over the
  filled episodic memory, Mammoth ``buffer.get_data``; default) | equal shares per past task
  (Avalanche ``AGEMPlugin``'s ``GroupBalancedInfiniteDataLoader``:
  ``replay@method.replay=task_balanced``) | uniformly over the whole memory, the current task's
  slots included (Mammoth ``models/agem_r.py``, A-GEM over a reservoir buffer:
  ``method.replay.exclude_current_task=false``);
- the memory layout per task: reservoir over the stream (default; Mammoth ``agem_r``) | a ring
  buffer per class of the last M // classes samples, filled during the task (A-GEM's code,
  ``fc_permute_mnist.py`` l.307-316 ``count_cls``: ``update@method.update=class_ring``) | a
  random M // T of each task (Avalanche ``patterns_per_experience`` at the experience's end:
  ``update@method.update=task_reservoir``) | one batch of |B_t| per task (Mammoth
  ``models/agem.py`` ``end_task``, which computes ``buffer_size // N_TASKS`` and stores
  ``next(iter(loader))``: ``update@method.update=task_reservoir method.update.per_task=10``).

Under a reading (PROTOCOL 8): |B_t| and the memory budget follow it; |R| (256) and R from
past tasks only are A-GEM's own under every reading; ``replay_loss`` does not
apply (the loss is B_t's alone, R enters through g_ref).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clsuite.methods.base import Plugin
from clsuite.models.grads import flat_grad, grad_vector, write_grad


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
