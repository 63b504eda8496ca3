"""The virtual step and the interference scores shared by MIR, C-CMR and E-BRS.

Eq. 3:  theta' = theta - alpha * grad_theta l(f_theta; B_t)
Eq. 4:  s(m)   = l(f_theta'(x_m), y_m) - l(f_theta(x_m), y_m)

One scoring function (:func:`score_slots`) for MIR and C-CMR (and so for the scores E-BRS evicts
by): both pass their ``compare_to_old_logits`` (the reading's, PROTOCOL 8) to it. E-BRS's
``unscored=insertion`` scores an incoming sample with :func:`insertion_scores`.

theta' is a dict of tensors used through ``torch.func.functional_call``: no
copy of the module, no ``optimizer.step()``. Every forward here runs on clones
of the BatchNorm buffers (train-mode batch statistics, as the real step sees),
so the model's parameters, running statistics, optimizer state and
``global_step`` are left exactly as they were.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call


def _buffers(net) -> dict:
    """Clones of the BatchNorm buffers. In train mode the outputs do not depend on the running
    statistics (only the clones' own update does), so the passes of one scoring share one set."""
    return {k: v.clone() for k, v in net.named_buffers()}


def forward_with(learner, params: dict, x, t, buffers: dict | None = None):
    """Logits of the network under ``params`` (theta or theta'), buffers untouched."""
    buffers = _buffers(learner.net) if buffers is None else buffers
    return learner.logits(x, t, net_out=functional_call(learner.net, (params, buffers), (x,)))


def virtual_params(learner, x, y, t, lr: float | None = None, buffers: dict | None = None) -> dict:
    """theta' (Eq. 3): one SGD step of size alpha (the learning rate) on B_t alone."""
    params = dict(learner.net.named_parameters())
    loss = F.cross_entropy(forward_with(learner, params, x, t, buffers), y)
    grads = torch.autograd.grad(loss, list(params.values()))
    alpha = learner.lr if lr is None else lr
    return {k: (p - alpha * g).detach() for (k, p), g in zip(params.items(), grads, strict=True)}


def _losses(learner, theta_prime: dict, x, y, t, buffers: dict | None = None):
    """(logits under theta, per-sample loss under theta, per-sample loss under theta')."""
    theta = {k: p.detach() for k, p in learner.net.named_parameters()}
    buffers = _buffers(learner.net) if buffers is None else buffers
    pre_logits = forward_with(learner, theta, x, t, buffers)
    pre = F.cross_entropy(pre_logits, y, reduction="none")
    post = F.cross_entropy(forward_with(learner, theta_prime, x, t, buffers), y, reduction="none")
    return pre_logits, pre, post


@torch.no_grad()
def interference_scores(
    learner, theta_prime: dict, slots: torch.Tensor, compare_to_old_logits: bool = False, buffers: dict | None = None
):
    """s(m) (Eq. 4) for the memory ``slots``, one batched pass under theta and one under theta'.

    ``compare_to_old_logits`` (MIR's split-MNIST script): score against
    min(current loss, loss of the logits stored with the sample), and store the
    current logits where they give the lower loss."""
    mem = learner.memory
    mx, my, mt = mem.get(slots)
    pre_logits, pre, post = _losses(learner, theta_prime, mx, my, mt, buffers)
    if compare_to_old_logits:
        old = F.cross_entropy(mem.logits[slots], my, reduction="none")
        better = pre < old
        mem.logits[slots] = torch.where(better[:, None], pre_logits, mem.logits[slots])  # slots distinct: no sync
        pre = torch.minimum(pre, old)
    return post - pre


def score_slots(learner, x, y, t, slots: torch.Tensor, compare_to_old_logits: bool = False) -> torch.Tensor:
    """Virtual step on B_t, then s(m) for ``slots``; each slot keeps its latest score."""
    buffers = _buffers(learner.net)  # one set of clones for the three passes
    theta_prime = virtual_params(learner, x, y, t, buffers=buffers)
    s = interference_scores(learner, theta_prime, slots, compare_to_old_logits, buffers)
    learner.memory.score[slots] = s
    return s


def insertion_scores(learner, x, y, t, compare_to_old_logits: bool = False) -> torch.Tensor:
    """s of the incoming samples B_t = (x, y, t) themselves, when they are written into memory
    (E-BRS ``unscored=insertion``): theta = the network now (after B_t's update step), theta' =
    one virtual step on B_t (Eq. 3), s = Eq. 4 on each sample of B_t. Under
    ``compare_to_old_logits`` the logits a new slot stores are 0 (loss log K over the K classes),
    so its score is l(theta') - min(l(theta), log K), as :func:`interference_scores` would give at
    its first scoring; nothing is stored here. Under ``logits_on_overwrite=keep`` the slot a sample
    overwrites keeps its previous occupant's logits, which are not known here (E-BRS chooses the
    victim after this score): this score still takes log K."""
    buffers = _buffers(learner.net)
    with torch.enable_grad():  # the memory update may run under no_grad
        theta_prime = virtual_params(learner, x, y, t, buffers=buffers)
    with torch.no_grad():
        _, pre, post = _losses(learner, theta_prime, x, y, t, buffers)
        if compare_to_old_logits:
            zeros = torch.zeros(len(y), learner.memory.logits.shape[1], device=pre.device)
            pre = torch.minimum(pre, F.cross_entropy(zeros, y, reduction="none"))
    return post - pre
