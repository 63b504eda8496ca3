"""HAL: Hindsight Anchor Learning (Chaudhry et al. 2021, "Using Hindsight to
Anchor Past Knowledge in Continual Learning").

Per update on B_t with replay batch R (Alg. 1), E = the anchors learned so far::

    theta~ = theta - alpha * grad l(theta; B_t + R)                 # temporary ER step
    theta <- theta - alpha * grad [ l(theta; B_t + R)
                                   + lambda * mean_{e,k} (f_theta(e) - f_theta~(e))_k^2 ]   # anchoring
    phi_y <- beta * phi_y + (1 - beta) * mean phi_theta(x), x of class y in B_t   # mean embedding

At the end of each task: theta_M = theta fine-tuned on the memory, then one
anchor per class y of the task (Eq. "hindsight" objective, maximised by SGD)::

    e_y = argmax_e  l(f_theta_M(e), y) - l(f_theta(e), y) - gamma * ||phi_theta(e) - phi_y||^2

Departures (authors' TF code ``HindsightAnchor``, Mammoth ``models/hal.py``; why: docs/notes/PARITY.md):
- The anchoring gradient is added in ``before_step`` to the ER loss's ``.grad``, theta~ =
  theta - lr * grad evaluated functionally (Mammoth's two-step update), so one optimizer step
  applies the paper's update.
- phi_y per class (authors'; Mammoth one per task), from B_t's features at theta~ (Mammoth
  measures phi after its update); reset at each task end (Mammoth).
- Anchor loss: mean over anchors AND logits, lambda = 0.1, first-order gradient (theta~ a
  constant), as Mammoth (``observe`` l.152: ``self.hal_lambda * (pred_anchors ** 2).mean()``,
  f_theta~ under ``no_grad``). The authors' TF code sums over logits but differentiates through
  theta~ (``STOP_GRADIENTS = False`` in ``model.py``), so its scale does not carry over.
- theta_M: ``finetune_steps`` SGD steps (lr) on random memory batches of ``finetune_batch``
  (authors: 50 steps of 10; Mammoth: 1 step), functional.
- Anchor init: the mean of the class's memory samples (authors: a running average of the
  class's images; Mammoth: U[0, 1)); ``anchor_steps`` SGD steps at ``anchor_lr`` (default: the
  learner's lr), one task's anchors together.
- BatchNorm (the ResNet), as Mammoth's spare network: fine-tuning and anchors in training mode
  (batch statistics) on copies of the running statistics, so the network's are untouched; one
  anchor per batch (Mammoth's batch of one); f(anchors) and f(B_t) at theta~ in batches of their
  own. Why not eval mode: docs/METHODS.md, "Where the suite departs from or settles the
  protocol". Without BatchNorm (the MLP) the numbers are the same either way; its runs keep
  one batch for all.
- Memory: per-class FIFO ring buffer (``update: class_ring``: the authors' ER-Ring, M // classes
  slots per class) or reservoir (``update@method.update=reservoir``).

Under a reading (PROTOCOL 8): |B_t|, |R| and the memory budget follow it; the per-class ring
buffer, R from the whole ring (``exclude_current_task: false``) and one loss over B_t + R
(``method.replay_loss: concat``: Alg. 1's ER step, Mammoth's ``observe``) are HAL's own.
"""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from clsuite.core.methods.base import Plugin
from clsuite.core.spec import Real, Whole


class HAL(Plugin):
    scenarios = ("class_il", "task_il")

    def __init__(
        self,
        hal_lambda: Annotated[float, Real(0, None, "weight of the anchor loss")] = 0.1,
        beta: Annotated[float, Real(0, 1, "EMA factor of the mean embedding phi")] = 0.5,
        gamma: Annotated[float, Real(0, None, "weight of ||phi(e) - phi_y||^2 in the anchor objective")] = 0.1,
        anchor_steps: Annotated[int, Whole(0, None, "SGD steps per anchor")] = 100,
        finetune_steps: Annotated[int, Whole(0, None, "fine-tuning steps on the memory for theta_M")] = 50,
        finetune_batch: Annotated[int, Whole(1, None, "memory batch of those steps")] = 10,
        anchor_lr: Annotated[
            float | None, Real(0, None, "anchor SGD learning rate; null = the method's lr", lo_open=True, null=True)
        ] = None,
    ):
        self.hal_lambda, self.beta, self.gamma = hal_lambda, beta, gamma
        self.anchor_steps, self.anchor_lr = anchor_steps, anchor_lr
        self.finetune_steps, self.finetune_batch = finetune_steps, finetune_batch

    def setup(self, learner) -> None:
        net, mem = learner.net, learner.memory
        self.anchors = torch.zeros(0, *mem.x.shape[1:], device=mem.device)  # E
        self.anchor_y = torch.zeros(0, dtype=torch.long, device=mem.device)
        self.phi = torch.zeros(net.head.out_features, net.head.in_features, device=mem.device)
        self.phi_seen = torch.zeros(net.head.out_features, dtype=torch.bool, device=mem.device)
        self.batch_norm = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules())

    def before_step(self, learner, x, y, t, idx) -> None:
        net = learner.net
        theta_tilde = {k: p.detach() - learner.lr * p.grad for k, p in net.named_parameters() if p.grad is not None}
        n = len(self.anchors)
        with torch.no_grad():
            if self.batch_norm:  # each batch its own statistics: f(E) and f(B_t) apart (Mammoth)
                out = functional_call(net, theta_tilde, (self.anchors,)) if n else None
                feats = functional_call(net, theta_tilde, (x,), {"return_features": True})[1]
            else:  # (the same numbers in one forward)
                out, feats = functional_call(
                    net, theta_tilde, (torch.cat([self.anchors, x]),), {"return_features": True}
                )
                out, feats = out[:n], feats[n:]
            for c in y.unique():  # phi_y <- beta phi_y + (1 - beta) phi(B_t of class y)
                f = feats[y == c].mean(0)
                self.phi[c] = torch.where(self.phi_seen[c], self.beta * self.phi[c] + (1 - self.beta) * f, f)
                self.phi_seen[c] = True
        if n:
            anchor_loss = (net(self.anchors) - out).pow(2).mean()  # over anchors and logits (Mammoth)
            (self.hal_lambda * anchor_loss).backward()  # adds to the ER gradient in .grad

    def on_task_end(self, learner, task, datamodule) -> None:
        if learner.memory.size == 0:
            return
        net, was_training = learner.net, learner.net.training
        net.train()  # BatchNorm: batch statistics, on copies of the running ones (learn_anchors)
        try:
            self.anchors = torch.cat([self.anchors, self.learn_anchors(learner, learner.task_classes[task])])
            self.anchor_y = torch.cat([self.anchor_y, learner.task_classes[task]])
        finally:
            net.train(was_training)
        self.phi_seen[:] = False

    def learn_anchors(self, learner, classes) -> torch.Tensor:
        net, mem, lr = learner.net, learner.memory, learner.lr
        stats = {k: b.clone() for k, b in net.named_buffers()}  # BatchNorm's, updated here, then dropped
        theta = {k: p.detach() for k, p in net.named_parameters()}
        theta_m = {k: v.clone().requires_grad_(True) for k, v in theta.items()}
        for _ in range(self.finetune_steps):  # theta_M: fine-tune on the memory
            mx, my, _ = mem.get(mem.sample(self.finetune_batch))
            loss = F.cross_entropy(functional_call(net, {**theta_m, **stats}, (mx,)), my)
            grads = torch.autograd.grad(loss, list(theta_m.values()))
            theta_m = {k: (v - lr * g).detach().requires_grad_(True) for (k, v), g in zip(theta_m.items(), grads)}
        theta_m = {k: v.detach() for k, v in theta_m.items()}
        init = [mem.x[: mem.size][mem.y[: mem.size] == c].mean(0) for c in classes]
        init = torch.stack([i if i.isfinite().all() else torch.rand_like(mem.x[0]) for i in init])
        batches = torch.arange(len(classes)).split(1 if self.batch_norm else len(classes))  # BatchNorm: one anchor
        return torch.cat(
            [self.ascend(net, {**theta, **stats}, {**theta_m, **stats}, init[i], classes[i], lr) for i in batches]
        )

    def ascend(self, net, theta, theta_m, init, classes, lr: float) -> torch.Tensor:
        """``anchor_steps`` SGD steps on anchors ``init`` of ``classes``, maximising the objective."""
        e = init.clone().requires_grad_(True)
        opt = torch.optim.SGD([e], lr=self.anchor_lr or lr)
        for _ in range(self.anchor_steps):  # maximise forgetting, stay near the class's mean embedding
            out_t, feat_t = functional_call(net, theta, (e,), {"return_features": True})
            out_m = functional_call(net, theta_m, (e,))
            objective = (
                F.cross_entropy(out_m, classes, reduction="sum")
                - F.cross_entropy(out_t, classes, reduction="sum")
                - self.gamma * (feat_t - self.phi[classes]).pow(2).sum()
            )
            opt.zero_grad()
            (-objective).backward()
            opt.step()
        return e.detach()
