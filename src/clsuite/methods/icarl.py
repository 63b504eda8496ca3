"""iCaRL (Rebuffi et al. 2017, "iCaRL: Incremental Classifier and Representation Learning").

- Representation learning (Alg. 3): sigmoid BCE over the classes seen so far,
  one-hot targets for the current task's classes and the previous network's
  sigmoid outputs q_i^y as targets for the old classes (distillation)::

      l = -sum_i [ sum_{y new} d_{y=y_i} log g_y(x_i) + d_{y!=y_i} log(1 - g_y(x_i))
                 + sum_{y old} q_i^y log g_y(x_i) + (1 - q_i^y) log(1 - g_y(x_i)) ]

  (summed over classes, averaged over samples). The previous network is a
  frozen copy of the net taken at the end of each task.
- Classification (Alg. 1): nearest mean of exemplars, y* = argmin_y ||phi(x) - mu_y||
  with phi L2-normalised and mu_y the renormalised mean of phi over the exemplars
  of class y. Classes without exemplars score -inf.
- Exemplars: ``selection=herding`` (default, the paper's Alg. 4: greedily add the
  sample that brings the exemplar mean closest to the class mean; reduce old
  classes to their first m = M / classes-seen exemplars, Alg. 5) or
  ``selection=reservoir`` (online iCaRL of Mai et al. 2021 / RaptorMai).

Adaptations to the online class-IL protocol:
- Each batch is seen once, so iCaRL's training set "new data + exemplars"
  becomes B_t + a random replay batch R from the memory (RaptorMai's online
  iCaRL); old-class targets of R come from the previous network as well.
- Herding needs the whole task: the ``ICaRLMemory`` update policy keeps the
  current task's stream (each batch as it arrives) and herds over it at the
  task end (as Mammoth does over the task's train set at end_task), before
  the task's row of R is measured. During task k the memory therefore holds
  only exemplars of tasks < k (Mammoth's behaviour).
- Class means are recomputed from the memory at every prediction call (at most
  M forward passes, in eval mode), so they always match the current network;
  no horizontally flipped copies (no augmentation online).
- Before any training (b, the random-init accuracy) the memory is empty and the
  network's own head is used.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from clsuite.memory.buffer import Memory
from clsuite.memory.reservoir import Reservoir
from clsuite.methods.base import Plugin

SELECTIONS = ("herding", "reservoir")


@torch.no_grad()
def features(net, x, chunk: int = 1000) -> torch.Tensor:
    """phi(x), L2-normalised, computed in eval mode."""
    was_training = net.training
    net.eval()
    f = torch.cat([net(x[i : i + chunk], return_features=True)[1] for i in range(0, len(x), chunk)])
    net.train(was_training)
    return F.normalize(f.flatten(1), dim=1)


def herding(phi: torch.Tensor, m: int) -> torch.Tensor:
    """Alg. 4: indices p_1..p_m, p_k = argmin_x || mu - (phi(x) + sum_{j<k} phi(p_j)) / k ||."""
    mu, running = phi.mean(0), torch.zeros_like(phi[0])
    free = torch.ones(len(phi), dtype=torch.bool, device=phi.device)
    chosen = []
    for k in range(1, min(m, len(phi)) + 1):
        cost = (mu - (running + phi) / k).norm(dim=1).masked_fill(~free, float("inf"))
        i = int(cost.argmin())
        chosen.append(i)
        running += phi[i]
        free[i] = False
    return torch.tensor(chosen, dtype=torch.long, device=phi.device)


class ICaRLMemory:
    """Memory-update policy: reservoir per batch, or herding over the task's stream."""

    def __init__(self, selection: str = "herding"):
        if selection not in SELECTIONS:
            raise ValueError(f"unknown selection {selection!r}; valid: {', '.join(SELECTIONS)}")
        self.selection = selection
        self.reservoir = Reservoir()
        self.stream: list[tuple[torch.Tensor, ...]] = []  # the current task's batches

    def update(self, memory: Memory, x, y, t, learner=None, logits=None) -> None:
        if self.selection == "reservoir":
            self.reservoir.update(memory, x, y, t)
            return
        self.stream.append((x.detach(), y, t))
        memory.seen += len(y)

    @torch.no_grad()
    def select(self, memory: Memory, learner) -> None:
        """Alg. 5 then Alg. 4: keep m exemplars per old class, herd m per new class."""
        if self.selection != "herding" or not self.stream or memory.capacity == 0:
            return
        x, y, t = (torch.cat(a) for a in zip(*self.stream, strict=True))
        new = y.unique()
        mx, my, mt = memory.get(torch.arange(memory.size, device=memory.device))
        keep_old = ~torch.isin(my, new)
        mx, my, mt = mx[keep_old], my[keep_old], mt[keep_old]
        old = my.unique()
        m = memory.capacity // (len(old) + len(new))
        parts = [torch.nonzero(my == c).squeeze(1)[:m] for c in old]  # Alg. 5: first m, herding order
        parts = [(mx[i], my[i], mt[i]) for i in parts]
        for c in new:  # Alg. 4 on the task's stream
            i = torch.nonzero(y == c).squeeze(1)
            i = i[herding(features(learner.net, x[i]), m)]
            parts.append((x[i], y[i], t[i]))
        nx, ny, nt = (torch.cat(a) for a in zip(*parts, strict=True))
        memory.size = 0
        memory.append(nx, ny, nt)
        self.stream = []  # the task is closed


class ICaRL(Plugin):
    def __init__(self):
        self.old_net = None  # the network at the end of the previous task

    def setup(self, learner) -> None:
        if learner.scenario == "domain_il":
            raise ValueError("iCaRL needs one output per class: use scenario=class_il or task_il")

    def loss(self, learner, x, y, t, idx):
        if idx is not None and idx.numel():
            mx, my, _ = learner.memory.get(idx)
            x, y = torch.cat([x, mx]), torch.cat([y, my])
        k = learner.current_task
        seen, old = learner.task_classes[: k + 1].flatten(), learner.task_classes[:k].flatten()
        out = learner.net(x)
        target = F.one_hot(y, out.shape[1]).to(out.dtype)
        if self.old_net is not None and old.numel():
            with torch.no_grad():
                target[:, old] = torch.sigmoid(self.old_net(x))[:, old]  # q_i^y, distillation
        bce = F.binary_cross_entropy_with_logits(out[:, seen], target[:, seen], reduction="none")
        return bce.sum(dim=1).mean()

    def on_task_end(self, learner, task, datamodule) -> None:
        if isinstance(learner.update_policy, ICaRLMemory):
            learner.update_policy.select(learner.memory, learner)  # herding over the task's stream
        self.old_net = copy.deepcopy(learner.net).eval().requires_grad_(False)

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
        if learner.memory.size == 0:
            return None
        mu = self.class_means(learner)
        dist = torch.cdist(features(learner.net, x), mu.nan_to_num(0.0))
        scores = (-dist).masked_fill(mu.isnan().any(1)[None, :], float("-inf"))
        return learner.logits(x, t, net_out=scores)  # task-IL: only the task's classes
