"""GSS-greedy (Aljundi et al. 2019, "Gradient based sample selection for online
continual learning", Alg. 2): a memory-update policy; replay is random (ER).

For every incoming sample (x, y), with g = grad l(x, y) and G the gradients of
a random subset of the memory (Alg. 2 lines 5-7)::

    c = max_j cos(g, G_j) + 1                      # in [0, 2]: 2 = redundant
    memory not full:  M <- M + (x, y),  C <- C + c
    else if c_B < 1:  i ~ P(i) = C_i / sum_j C_j   # gate of the batch (below); redundant slots first
                      replace M_i by (x, y), C_i <- c  with probability C_i / (C_i + c)

with c_B = max_j cos(g_B, G_j) + 1 for g_B = grad of the batch's mean loss.

Departures (authors' ``GSS_Greedy.py``, Mammoth ``utils/gss_buffer.py``, RaptorMai's
``gss_greedy_update.py``; why, and what each moved: docs/notes/PARITY.md):
- G_j: the gradient of one random memory sample (``mem_batch=1``, n = ``n_mem_grads``: the
  paper's "random subset of n samples", as Mammoth); the authors' code averages 10 samples.
- One gate per incoming batch, c_B < 1, not per sample as Alg. 2 reads (authors' ``observe``
  ``if (batch_sim) < self.sim_th``; Mammoth ``gss_buffer.py`` l.112, l.65 ``elif batch_c < 1``);
  the per-sample c_i stay the scores of the replacement draw and of the slots written.
- Gradients in eval mode (authors' code), all at once with ``torch.func.vmap(grad(...))``, or
  for the MLP with ``mem_batch=1`` from one batched backward (``models.grads``); G drawn once per batch.
- ``cosines: gram`` (default, MLP with ``mem_batch=1``): cosines from per-layer Gram products
  <g_i, G_j> = sum_layers (delta_i . delta_j)(a_i . a_j + 1); ``exact``: flattened per-sample
  gradients, as the references. The same sums in another order (last bits differ:
  docs/notes/PERFORMANCE.md, "GSS: `cosines: gram` by default"); other networks: ``exact``.
- The samples that find the memory full draw their slots i at once, without replacement
  (authors' code), in chunks of at most ``len(M)``; each then makes the accept/reject draw.
- A sample that enters an empty memory (no G yet) gets cos = 0.1 (authors' code).
- One loss over R + B_t (the suite's ER step; RaptorMai's GSS = ER agent + GSS update), not
  the authors' separate steps on B_t and on the memory batch.

Under a reading (PROTOCOL 8): |B_t|, |R|, the memory budget and ``replay_loss`` follow it;
R from the whole memory (``exclude_current_task: false``) is GSS's own.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory
from clsuite.core.models.grads import linear_factors, per_sample_grads
from clsuite.core.spec import OneOf, Real, Whole

COSINES = ("exact", "gram")
COSINES_DOC = "gram: per-layer Gram products (MLP) | exact: flattened per-sample gradients; last bits"


def flat_grads(learner, x, y, t, groups: int = 0) -> torch.Tensor:
    """[n, P] gradients of the CE loss: one per sample (``groups=0``) or, with
    x of shape [groups * b, ...], one per consecutive mini-batch of b samples."""
    net = learner.net
    allowed = learner.logit_mask(t)  # the scenario's mask (task-IL: the sample's task's classes)
    was_training = net.training
    net.eval()
    try:
        if groups in (0, len(y)):  # one sample per gradient: one batched backward (MLP), same bits
            found = per_sample_grads(
                net, x, lambda out: F.cross_entropy(out.masked_fill(~allowed, float("-inf")), y, reduction="none")
            )
            if found is not None:
                return found[0]
        return _vmap_grads(net, x, y, allowed, groups)
    finally:
        net.train(was_training)


def _vmap_grads(net, x, y, allowed, groups: int) -> torch.Tensor:
    params = {k: v.detach() for k, v in net.named_parameters()}
    buffers = dict(net.named_buffers())

    def loss(p, xb, yb, mb):
        out = functional_call(net, (p, buffers), (xb,)).masked_fill(~mb, float("-inf"))
        return F.cross_entropy(out, yb)

    def split(a):
        return a.unsqueeze(1) if groups == 0 else a.reshape(groups, -1, *a.shape[1:])

    g = vmap(grad(loss), in_dims=(None, 0, 0, 0))(params, split(x), split(y), split(allowed))
    return torch.cat([v.reshape(v.shape[0], -1) for v in g.values()], dim=1)


def _layer_factors(learner, x, y, t):
    """[(a, delta)] per Linear layer with a bias (weight and bias gradients share them), in eval
    mode; None when the network is not an MLP of biased Linear layers."""
    net = learner.net
    allowed = learner.logit_mask(t)
    was_training = net.training
    net.eval()
    try:
        found = linear_factors(
            net, x, lambda out: F.cross_entropy(out.masked_fill(~allowed, float("-inf")), y, reduction="none")
        )
    finally:
        net.train(was_training)
    if found is None:
        return None
    factors = found[0]
    layers = [(a, d) for _, a, d in factors if a is not None]
    return layers if 2 * len(layers) == len(factors) else None


class GSSGreedy(UpdatePolicy):
    """Memory-update policy: GSS-greedy (Alg. 2), vectorised over the incoming batch."""

    def __init__(
        self,
        n_mem_grads: Annotated[int, Whole(1, None, "n: memory gradient vectors G_j per incoming batch")] = 10,
        mem_batch: Annotated[int, Whole(1, None, "memory samples per G_j")] = 1,
        empty_score: Annotated[float, Real(-1, 1, "cosine given to a sample entering an empty memory")] = 0.1,
        cosines: Annotated[str, OneOf(*COSINES, doc=COSINES_DOC)] = "gram",
    ):
        if cosines not in COSINES:
            raise ValueError(f"unknown GSS cosines {cosines!r}; valid: {', '.join(COSINES)}")
        self.n_mem_grads, self.mem_batch, self.empty_score = n_mem_grads, mem_batch, empty_score
        self.cosines = cosines

    def memory_grads(self, learner, memory: Memory) -> torch.Tensor:
        """G: gradients of ``n_mem_grads`` random disjoint mini-batches of the memory."""
        b = min(self.mem_batch, memory.size)
        k = min(self.n_mem_grads, memory.size // b)
        idx = torch.randperm(memory.size, device=memory.device)[: k * b]
        mx, my, mt = memory.get(idx)
        return flat_grads(learner, mx, my, mt, groups=k)

    def scores(self, learner, memory: Memory, x, y, t) -> tuple[torch.Tensor, torch.Tensor]:
        """(c, c_B): c_i = max_j cos(g_i, G_j) + 1 (Alg. 2 line 7) and the gate's batch score
        c_B = max_j cos(g_B, G_j) + 1, g_B = mean_i g_i = the gradient of the batch's mean loss
        (eval mode: the same network for every sample), both against one draw of G."""
        if memory.size == 0:
            c = torch.full((len(y),), 1.0 + self.empty_score, device=memory.device)
            return c, c[0]
        if self.cosines == "gram" and self.mem_batch == 1:
            found = self.gram_scores(learner, memory, x, y, t)
            if found is not None:
                return found
        G = self.memory_grads(learner, memory)
        g = flat_grads(learner, x, y, t)
        g_B = F.normalize(g.mean(0, keepdim=True), dim=1)  # before g is normalised in place
        G, g = F.normalize(G, dim=1, out=G), F.normalize(g, dim=1, out=g)  # in place: the same bits
        return (g @ G.T).max(dim=1).values + 1.0, (g_B @ G.T).max() + 1.0

    def gram_scores(self, learner, memory: Memory, x, y, t) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``scores`` from per-layer Gram products (MLP, ``mem_batch=1``); None for other nets.
        Draws the same memory samples as ``memory_grads`` (the same random stream)."""
        k = min(self.n_mem_grads, memory.size)
        idx = torch.randperm(memory.size, device=memory.device)[:k]
        parts = [_layer_factors(learner, *memory.get(idx)), _layer_factors(learner, x, y, t)]
        if parts[0] is None or parts[1] is None:
            return None
        (mem, new) = parts
        dots = sum((dn @ dm.T) * (an @ am.T + 1.0) for (am, dm), (an, dn) in zip(mem, new, strict=True))
        norm_new = sum((dn * dn).sum(1) * ((an * an).sum(1) + 1.0) for an, dn in new).sqrt().clamp_min(1e-12)
        norm_mem = sum((dm * dm).sum(1) * ((am * am).sum(1) + 1.0) for am, dm in mem).sqrt().clamp_min(1e-12)
        c = (dots / norm_new[:, None] / norm_mem[None, :]).max(dim=1).values + 1.0
        n = len(y)  # g_B: per layer the weight gradient delta^T a / n and the bias gradient sum(delta) / n
        norm_b = sum((dn.T @ an).pow(2).sum() + dn.sum(0).pow(2).sum() for an, dn in new).sqrt() / n
        return c, (dots.mean(0) / norm_b.clamp_min(1e-12) / norm_mem).max() + 1.0

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        if learner is None:
            raise ValueError("GSS needs the learner (its network) to score samples")
        n = len(y)
        if memory.capacity == 0:
            memory.seen += n
            return
        c, c_B = self.scores(learner, memory, x, y, t)
        c = c.to(memory.score.dtype)
        n_free = min(n, memory.capacity - memory.size)
        if n_free:  # Alg. 2 line 17: M <- M + (x, y), C <- C + c
            slots = memory.append(x[:n_free], y[:n_free], t[:n_free])
            memory.score[slots] = c[:n_free]
        memory.seen += n
        # Alg. 2 line 9, decided for the whole batch (GSS_Greedy.py, gss_buffer.py l.65): cos(g_B, G_j) < 0 for all j
        cand = torch.arange(n_free if c_B < 1.0 else n, n, device=c.device)
        for chunk in cand.split(memory.size) if len(cand) else ():
            C = memory.score[: memory.size]
            i = torch.multinomial(C.clamp_min(1e-6), len(chunk), replacement=False)  # line 10
            accept = torch.rand(len(chunk), device=C.device) < C[i] / (C[i] + c[chunk])  # lines 11-12
            src, dst = chunk[accept], i[accept]
            memory.replace(dst, x[src], y[src], t[src])  # line 13
            memory.score[dst] = c[src]
