"""The virtual step and the interference scores shared by MIR, C-CMR and E-BRS.

Eq. 3:  theta' = theta - alpha * grad_theta l(f_theta; B_t)
Eq. 4:  s(m)   = l(f_theta'(x_m), y_m) - l(f_theta(x_m), y_m)

One scoring function (:func:`score_slots`) for MIR and C-CMR (and so for the scores E-BRS evicts
by): both pass their ``compare_to_old_logits`` and ``scoring_updates_bn`` (the reading's, PROTOCOL 8)
to it. E-BRS's ``unscored=insertion`` scores an incoming sample with :func:`insertion_scores`.

theta' is a dict of tensors used through ``torch.func.functional_call``: no copy of the module, no
``optimizer.step()``; the parameters, the optimizer state and ``global_step`` are left as they were.
Its gradient is the step's own on B_t where the learner shares it (``ContinualLearner.shared_batch_grads``:
the split loss, as MIR's code, one forward and backward of B_t for both), else that of a forward
on clones of the BatchNorm buffers. BatchNorm (docs/METHODS.md, "Readings"):

1. every forward normalises by its own batch's statistics (train mode, as the real step and MIR's
   code: ``er_main.py`` l.152);
2. the forwards of the candidates run on clones of the running statistics, except, with
   ``scoring_updates_bn``, the one under theta, which updates the network's (MIR's ``model(bx)``,
   ``mir.py`` l.328): after B_t's forward when the step shares it, as in MIR's code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

BN_DOC = "the candidates' forward under theta updates BatchNorm's running statistics"  # scoring_updates_bn


def _buffers(net) -> dict:
    """Clones of the BatchNorm buffers. In train mode the outputs do not depend on the running
    statistics (only the clones' own update does), so the passes of one scoring share one set."""
    return {k: v.clone() for k, v in net.named_buffers()}


def forward_with(learner, params: dict, x, t, buffers: dict | None = None):
    """Logits of the network under ``params`` (theta or theta'), on ``buffers`` (default: clones)."""
    buffers = _buffers(learner.net) if buffers is None else buffers
    return learner.logits(x, t, net_out=functional_call(learner.net, (params, buffers), (x,)))


def virtual_params(learner, x, y, t, lr: float | None = None, buffers: dict | None = None) -> dict:
    """theta' (Eq. 3): one SGD step of size alpha (the learning rate) on B_t alone."""
    params = dict(learner.net.named_parameters())
    grads = learner.shared_batch_grads(x, y, t)  # the step's own forward and backward of B_t (split loss)
    if grads is None:
        loss = F.cross_entropy(forward_with(learner, params, x, t, buffers), y)
        grads = torch.autograd.grad(loss, list(params.values()))
    alpha = learner.lr if lr is None else lr
    return {k: (p - alpha * g).detach() for (k, p), g in zip(params.items(), grads, strict=True)}


def _losses(learner, theta_prime: dict, x, y, t, buffers: dict | None = None, pre_buffers: dict | None = None):
    """(logits under theta, per-sample loss under theta, per-sample loss under theta'); the pass under
    theta on ``pre_buffers`` (default: ``buffers``)."""
    theta = {k: p.detach() for k, p in learner.net.named_parameters()}
    buffers = _buffers(learner.net) if buffers is None else buffers
    pre_logits = forward_with(learner, theta, x, t, buffers if pre_buffers is None else pre_buffers)
    pre = F.cross_entropy(pre_logits, y, reduction="none")
    post = F.cross_entropy(forward_with(learner, theta_prime, x, t, buffers), y, reduction="none")
    return pre_logits, pre, post


@torch.no_grad()
def interference_scores(
    learner,
    theta_prime: dict,
    slots: torch.Tensor,
    compare_to_old_logits: bool = False,
    buffers: dict | None = None,
    updates_bn: bool = False,
):
    """s(m) (Eq. 4) for the memory ``slots``, one batched pass under theta and one under theta'.

    ``compare_to_old_logits`` (MIR's split-MNIST script): score against
    min(current loss, loss of the logits stored with the sample), and store the
    current logits where they give the lower loss. ``updates_bn``: the pass under theta
    updates the network's BatchNorm running statistics (MIR's code)."""
    mem = learner.memory
    mx, my, mt = mem.get(slots)
    pre_buffers = dict(learner.net.named_buffers()) if updates_bn else None
    pre_logits, pre, post = _losses(learner, theta_prime, mx, my, mt, buffers, pre_buffers)
    if compare_to_old_logits:
        old = F.cross_entropy(mem.logits[slots], my, reduction="none")
        better = pre < old
        mem.logits[slots] = torch.where(better[:, None], pre_logits, mem.logits[slots])  # slots distinct: no sync
        pre = torch.minimum(pre, old)
    return post - pre


def score_slots(
    learner, x, y, t, slots: torch.Tensor, compare_to_old_logits: bool = False, updates_bn: bool = False
) -> torch.Tensor:
    """Virtual step on B_t, then s(m) for ``slots``; each slot keeps its latest score."""
    buffers = _buffers(learner.net)  # one set of clones for the passes
    theta_prime = virtual_params(learner, x, y, t, buffers=buffers)
    s = interference_scores(learner, theta_prime, slots, compare_to_old_logits, buffers, updates_bn)
    learner.memory.score[slots] = s
    return s


def insertion_scores(learner, x, y, t, compare_to_old_logits: bool = False) -> torch.Tensor:
    """s of the incoming samples B_t = (x, y, t) themselves, when they are written into memory
    (E-BRS ``unscored=insertion``): theta = the network now (after B_t's update step), theta' =
    one virtual step on B_t (Eq. 3), s = Eq. 4 on each sample of B_t, every pass on clones of the
    BatchNorm buffers. Under ``compare_to_old_logits`` the logits a new slot stores are 0 (loss
    log K over the K classes), so its score is l(theta') - min(l(theta), log K), as
    :func:`interference_scores` would give at its first scoring; nothing is stored here. Under
    ``logits_on_overwrite=keep`` the slot a sample overwrites keeps its previous occupant's logits,
    which are not known here (E-BRS chooses the victim after this score): this score still takes log K."""
    buffers = _buffers(learner.net)
    with torch.enable_grad():  # the memory update may run under no_grad
        theta_prime = virtual_params(learner, x, y, t, buffers=buffers)
    with torch.no_grad():
        _, pre, post = _losses(learner, theta_prime, x, y, t, buffers)
        if compare_to_old_logits:
            zeros = torch.zeros(len(y), learner.memory.logits.shape[1], device=pre.device)
            pre = torch.minimum(pre, F.cross_entropy(zeros, y, reduction="none"))
    return post - pre
