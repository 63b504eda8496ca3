"""Online EWC (Schwarz et al. 2018, "Progress & Compress", Sec. 2.4, eq. 8).

Loss on every incoming batch:  l(f_theta; B_t) + e_lambda * sum_i F_i (theta_i - theta*_i)^2,
theta* = the parameters at the end of the last task, F the online Fisher:
at the end of task k,  F <- gamma * F + F_k  (F_k the diagonal Fisher of task k).

Departures (following Mammoth's ``ewc_on``):
- F_k: the empirical Fisher over task k's training samples, one gradient per sample, weighted
  by p(y|x) (Mammoth): F_k = 1/N sum_n p(y_n|x_n) (d log p(y_n|x_n) / d theta)^2; per-sample
  gradients by ``torch.func.vmap`` in eval mode, or for the MLP from one batched backward
  (``linear_factors``), the same numbers bit for bit.
- No 1/2 in the penalty, gamma decays F (Mammoth's form, which its e_lambda values assume);
  ``e_lambda``, since top-level ``lambda`` is the imbalance degree.
- No memory (``uses_memory = False``); one head, p(y|x) the softmax over it.
- The penalty's gradient is added in ``before_step`` (the products autograd forms, bit for bit).

Under a reading (PROTOCOL 8) only |B_t| and lr change; oEWC has no memory.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap

from clsuite.core.methods.base import Plugin
from clsuite.core.models.grads import flat_params, linear_factors
from clsuite.core.spec import Real, Whole


def empirical_fisher(learner, x, y, t, chunk: int = 128) -> torch.Tensor:
    """1/N sum_n p(y_n|x_n) g_n^2, g_n = d log p(y_n|x_n) / d theta, as one vector."""
    net = learner.net
    names = [n for n, _ in net.named_parameters()]
    params = {n: p.detach() for n, p in net.named_parameters()}
    buffers = dict(net.named_buffers())
    # the scenario's logit mask as an additive 0 / -inf term, computed outside vmap
    mask = torch.zeros(len(y), net.head.out_features, device=x.device).masked_fill(
        ~learner.logit_mask(t), float("-inf")
    )

    def log_p(p, xi, yi, mi):  # yi one-hot: indexing by a tensor is data-dependent under vmap
        out = functional_call(net, (p, buffers), (xi.unsqueeze(0),))[0] + mi
        return torch.where(yi, F.log_softmax(out, dim=0), 0.0).sum()  # where, not *: masked logits are -inf

    per_sample = vmap(grad_and_value(log_p), in_dims=(None, 0, 0, 0))
    onehot = F.one_hot(y, mask.shape[1]).bool()
    fisher = {n: torch.zeros(p.numel(), device=x.device) for n, p in params.items()}
    was_training = net.training
    net.eval()
    try:
        for i in range(0, len(y), chunk):
            xc, oc, mc = x[i : i + chunk], onehot[i : i + chunk], mask[i : i + chunk]
            found = linear_factors(  # MLP: vmap's per-sample gradients and values, bit for bit
                net, xc, lambda out, oc=oc, mc=mc: torch.where(oc, F.log_softmax(out + mc, dim=1), 0.0).sum(1)
            )
            if found is not None:
                factors, logp = found
                w = logp.exp()
                for n, (_, a, d) in zip(names, factors, strict=True):
                    _add_weighted_squares(fisher[n], w, a, d)
                continue
            grads, logp = per_sample(params, xc, oc, mc)
            w = logp.exp()
            for n in names:  # sum_n w_n g_n^2, parameter by parameter
                fisher[n] += w @ grads[n].reshape(len(w), -1).pow_(2)
    finally:
        net.train(was_training)
    return torch.cat([fisher[n] for n in names]) / len(y)


def _add_weighted_squares(acc, w, a, d, block_bytes: int = 1 << 21) -> None:
    """acc += w @ g^2 for a Linear layer's per-sample gradients g_n = d_n a_n^T (a None: the
    bias, g_n = d_n), built and squared a few output rows at a time (``block_bytes``, in cache)
    instead of as one [c, out * in] tensor. Each entry of w @ g^2 is the same dot product over
    the c samples whatever the block, so the sum is bit-identical to the unblocked one
    (tests/core/test_perf_exact.py)."""
    if a is None:
        acc += w @ d.pow(2)
        return
    c, n_out, n_in = len(w), d.shape[1], a.shape[1]
    rows = max(1, block_bytes // (4 * c * n_in))
    buf = torch.empty(c, min(rows, n_out), n_in, device=d.device, dtype=d.dtype)
    for r in range(0, n_out, rows):
        k = min(rows, n_out - r)
        sq = torch.mul(d[:, r : r + k, None], a[:, None, :], out=buf[:, :k]).pow_(2)
        acc[r * n_in : (r + k) * n_in] += w @ sq.reshape(c, -1)


class OnlineEWC(Plugin):
    uses_memory = False

    def __init__(
        self,
        e_lambda: Annotated[float, Real(0, None, "weight of the EWC penalty")],
        gamma: Annotated[float, Real(0, 1, "decay of the online Fisher at each task end")] = 1.0,
        chunk: Annotated[int, Whole(1, None, "samples per vmap call for the Fisher (memory vs speed only)")] = 128,
    ):
        self.e_lambda, self.gamma, self.chunk = float(e_lambda), float(gamma), int(chunk)
        self.fisher: torch.Tensor | None = None  # F, the online (decayed) Fisher
        self.anchor: torch.Tensor | None = None  # theta*, parameters at the last task end

    def penalty(self, learner, x=None, y=None, t=None):
        """e_lambda * sum_i F_i (theta_i - theta*_i)^2 (0 before the first task ends): its value, in the
        step's loss (logged, checked for divergence); its gradient is added by :meth:`before_step`."""
        if self.fisher is None:
            return 0.0
        with torch.no_grad():
            self._diff = flat_params(learner.net.parameters()) - self.anchor  # theta - theta*, for before_step
            return self.e_lambda * (self.fisher * self._diff**2).sum()

    def before_step(self, learner, x, y, t, idx) -> None:
        """Adds the penalty's gradient to the loss's, as the very products autograd forms for it:
        the scalar's and the sum's backward give e_lambda (float32) times F, pow's backward times
        2 (theta - theta*); one addition to each ``.grad`` as autograd's accumulation (bit-identical,
        tests/core/test_perf_exact.py), without the graph and its backward passes."""
        diff = vars(self).pop("_diff", None)  # (never part of the plugin's checkpointed state)
        if diff is None:
            return
        e = torch.tensor(self.e_lambda, dtype=self.fisher.dtype, device=self.fisher.device)
        grad = (e * self.fisher).mul_(diff.mul_(2.0))
        offset = 0
        for p in learner.net.parameters():
            g = grad[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
            if p.grad is None:
                p.grad = g.clone()
            else:
                p.grad.add_(g)

    def on_task_end(self, learner, task: int, datamodule) -> None:
        x, y, t = datamodule.split(task, "train")
        fisher_k = empirical_fisher(learner, x, y, t, self.chunk)
        self.fisher = fisher_k if self.fisher is None else self.gamma * self.fisher + fisher_k
        self.anchor = flat_params(learner.net.parameters()).detach().clone()
