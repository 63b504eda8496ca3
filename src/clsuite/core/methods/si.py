"""SI (Zenke et al. 2017, "Continual Learning Through Synaptic Intelligence").

- Path integral (eq. 3): during task mu, after every update,
      omega_k += -g_k * delta_theta_k,   g = grad of the task loss l(f_theta; B_t) alone.
- At the end of task mu (eq. 5):
      Omega_k += omega_k / ((theta_k(mu) - theta~_k)^2 + xi),   theta~ <- theta(mu), omega <- 0,
  so Omega accumulates over tasks.
- Surrogate loss (eq. 4):  c * sum_k Omega_k (theta_k - theta~_k)^2, added to the task loss.

Departures (Mammoth's ``si``, whose c and xi we use; Chaudhry's SI in facebookresearch/agem):
- The surrogate's gradient 2 c Omega (theta - theta~) is added in closed form in ``before_step``
  (Mammoth), so omega sees the task-loss gradient only (``penalty`` 0; ``surrogate``: its value).
- The total gradient is clipped elementwise to [-clip, clip] (Mammoth: 1.0) before the step.
- Each task's contribution to Omega is clipped at 0 (``relu``, facebookresearch/agem): the
  surrogate's pull can make -g.delta_theta negative, and a negative importance rewards moving.
- theta~ starts at the initial parameters; no memory (``uses_memory = False``).

Under a reading (PROTOCOL 8) only |B_t| and lr change; SI has no memory.
"""

from __future__ import annotations

from typing import Annotated

import torch

from clsuite.core.methods.base import Plugin
from clsuite.core.models.grads import flat_grad, flat_params, write_grad
from clsuite.core.spec import Real


class SI(Plugin):
    uses_memory = False

    def __init__(
        self,
        c: Annotated[float, Real(0, None, "weight of the surrogate loss")],
        xi: Annotated[float, Real(0, None, "damping of Omega's denominator", lo_open=True)],
        clip: Annotated[
            float | None,
            Real(0, None, "gradient entries clipped to [-clip, clip]; null = no clipping", lo_open=True, null=True),
        ] = 1.0,
    ):
        self.c, self.xi, self.clip = float(c), float(xi), clip
        self.omega = self.big_omega = self.anchor = None  # omega (this task), Omega, theta~

    def setup(self, learner) -> None:
        theta = flat_params(learner.net.parameters()).detach()
        self.anchor = theta.clone()
        self.omega, self.big_omega = torch.zeros_like(theta), torch.zeros_like(theta)

    def surrogate(self, learner) -> torch.Tensor:
        """Eq. 4: c * sum_k Omega_k (theta_k - theta~_k)^2."""
        return self.c * (self.big_omega * (flat_params(learner.net.parameters()) - self.anchor) ** 2).sum()

    def before_step(self, learner, x, y, t, idx) -> None:
        params = list(learner.net.parameters())
        theta = flat_params(params).detach()
        self.g = flat_grad(params)  # task-loss gradient, for omega
        total = self.g + 2 * self.c * self.big_omega * (theta - self.anchor)
        if self.clip is not None:
            total = total.clamp(-self.clip, self.clip)
        write_grad(params, total)
        self.theta_before = theta.clone()

    def after_step(self, learner) -> None:
        delta = flat_params(learner.net.parameters()).detach() - self.theta_before
        self.omega -= self.g * delta  # eq. 3

    def on_task_end(self, learner, task: int, datamodule) -> None:
        theta = flat_params(learner.net.parameters()).detach()
        self.big_omega += torch.relu(self.omega / ((theta - self.anchor) ** 2 + self.xi))  # eq. 5
        self.anchor = theta.clone()
        self.omega.zero_()
