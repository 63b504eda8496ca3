"""GEM (Lopez-Paz & Ranzato 2017, "Gradient Episodic Memory for Continual Learning").

Per incoming batch B_t of the current task t:

1. g = grad of l(f_theta; B_t) (memory is not replayed in the loss: replay is null);
2. for every past task k < t with samples in memory: g_k = grad of l(f_theta; M_k),
   M_k = the memory slots with ``memory.t == k``;
3. if some g . g_k < 0, solve the dual QP (eq. 13) with ``quadprog``
       min_v  1/2 v' G G' v + g' G' v   s.t.  v >= margin      (G: rows g_k)
   and step along g~ = G' v + g (eq. 12-13), else along g.

``margin`` = the reference code's ``memory_strength`` (default 0.5), a lower bound on the dual
variables: g~ projects g + margin * sum_k g_k (not g) onto {z: z . g_k >= 0}; margin = 0 is the
paper's exact projection (eq. 10). ``eps`` (1e-3 in the code) regularises G G'.

Departures (online class-IL):
- Memory (``update: task_ring``): GEM's per-task ring buffers, the run's M shared as M // T per task.
- One head over all classes; every loss (B_t, each M_k) is CE over the whole head (the code
  masks outputs per task only on CIFAR100 task-IL).
- The g_k are taken in training mode, as GEM's code.

Under a reading (PROTOCOL 8): |B_t| and the memory budget M follow it; the per-task layout is
GEM's own; no replay batch, so |R|, ``replay_loss`` and ``exclude_current_task`` do not apply.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
import quadprog
import torch
import torch.nn.functional as F

from clsuite.core.methods.base import Plugin
from clsuite.core.models.grads import flat_grad, grad_vector, write_grad
from clsuite.core.spec import Real


def gem_project(g: torch.Tensor, G: torch.Tensor, margin: float = 0.5, eps: float = 1e-3) -> torch.Tensor:
    """Eq. 13: g~ = G' v* + g, v* the solution of the dual QP above (float64).

    The products are torch's (its BLAS, which ``trainer.numerics`` pins), not numpy's: numpy's
    OpenBLAS picks its kernels by CPU when it loads, before a run can choose (clsuite.config.numerics).
    """
    Gd, gd = G.detach().double().cpu(), g.detach().double().cpu()
    k = Gd.shape[0]
    P = Gd @ Gd.T
    P = 0.5 * (P + P.T) + eps * torch.eye(k, dtype=torch.float64)
    # quadprog.solve_qp(P, a, C, b) minimises 1/2 v'Pv - a'v subject to C'v >= b
    v = quadprog.solve_qp(P.numpy(), -(Gd @ gd).numpy(), np.eye(k), np.full(k, float(margin)))[0]
    return (Gd.T @ torch.from_numpy(v) + gd).to(g)


class GEM(Plugin):
    def __init__(
        self,
        memory_strength: Annotated[float, Real(0, None, "margin of the dual QP (GEM's gamma)")] = 0.5,
        eps: Annotated[float, Real(0, None, "ridge added to G G' before the QP", lo_open=True)] = 1e-3,
    ):
        self.margin, self.eps = float(memory_strength), float(eps)

    def before_step(self, learner, x, y, t, idx) -> None:
        mem = learner.memory
        tasks = mem.t[: mem.size]
        past = [k for k in range(learner.current_task) if bool((tasks == k).any())]
        if not past:
            return
        params = list(learner.net.parameters())
        g = flat_grad(params)
        G = []
        for k in past:  # one constraint per past task, from its episodic memory M_k
            mx, my, mt = mem.get((tasks == k).nonzero().squeeze(1))
            G.append(grad_vector(F.cross_entropy(learner.logits(mx, mt), my), params))
        G = torch.stack(G)
        if bool((G @ g < 0).any()):
            write_grad(params, gem_project(g, G, self.margin, self.eps))
