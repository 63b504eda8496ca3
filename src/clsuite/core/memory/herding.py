"""iCaRL's exemplar memory (Rebuffi et al. 2017, Alg. 4 and 5): herding at each task end.

Steps, at the end of task k (``on_task_end``, before the task's row of R is measured):

1. m = M // (classes seen so far), M the memory's capacity (the run's budget);
2. Alg. 5: every old class keeps its first m exemplars (they are stored in
   herding order, so these are the best m);
3. Alg. 4: for every class of task k, herd m exemplars from the task's stream:
   p_k = argmin_x || mu - (phi(x) + sum_{j<k} phi(p_j)) / k ||, with phi the
   L2-normalised features of the current network and mu their class mean.

Departure (online): ``update`` keeps the task's batches as they arrive and herds over them at
the task end (Mammoth over the task's training set at ``end_task``), so during task k the memory
holds exemplars of tasks < k only. The layout is iCaRL's own under every reading (PROTOCOL 8);
online iCaRL with reservoir (Mai et al. 2021): ``update@method.update=reservoir``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory


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


class HerdingMemory(UpdatePolicy):
    """Memory update: keep the task's stream, herd m exemplars per class at its end."""

    layout = "class"

    def __init__(self):
        self.stream: list[tuple[torch.Tensor, ...]] = []  # the current task's batches

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        self.stream.append((x.detach(), y, t))
        memory.seen += len(y)

    @torch.no_grad()
    def on_task_end(self, memory: Memory, learner) -> None:
        """Alg. 5 then Alg. 4: keep m exemplars per old class, herd m per new class."""
        if not self.stream or memory.capacity == 0:
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
