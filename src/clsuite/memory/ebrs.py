"""E-BRS: entropy-balanced reservoir sampling (AdaER paper, Sec. IV-B, Algorithm 2).

Per incoming sample (x, y) with N samples seen (PROTOCOL section 3):
  - memory not full: append it (score 0 until scored);
  - else draw j ~ U[0, N); if j < M (classic reservoir acceptance, probability M/N):
    y~ = the most frequent class in memory (ties: lowest label, or random),
    m  = the slot of class y~ with the lowest stored score s(m) (ties: random),
    and (x, y, t) replaces slot m.
Acceptance draws are vectorised over the batch (``fill_then_draw``, shared with reservoir); only the
accepted samples, few once memory is full, are placed one by one, since each
placement changes the class counts that choose the next victim. The draws and
the placement run on the host (CPU generator) on a copy of the labels and
scores, and the survivors are written in one batch: on a GPU a batch without
an accepted sample costs no host-device sync, one with some costs three, not
about six per sample; on a CPU the result is the same, bit for bit.

Under a reading (PROTOCOL 8) only the capacity changes (``memory_per_class``);
the policy has no other reading key.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from clsuite.memory.base import UpdatePolicy
from clsuite.memory.buffer import Memory
from clsuite.memory.reservoir import fill_then_draw


class EBRS(UpdatePolicy):
    def __init__(self, class_ties: str = "lowest"):
        if class_ties not in ("lowest", "random"):
            raise ValueError(f"unknown class_ties {class_ties!r}; valid: lowest, random")
        self.class_ties = class_ties

    def victim(self, memory: Memory, counts: torch.Tensor) -> int:
        """Alg. 2 lines 7-8: lowest-score slot of the most frequent class."""
        top = counts.max()
        if self.class_ties == "lowest":
            y_tilde = int(torch.argmax((counts == top).int()))  # first (lowest) label at the max
        else:
            tied = (counts == top).nonzero().squeeze(1)
            y_tilde = int(tied[torch.randint(len(tied), (1,), device=tied.device)])
        slots = (memory.y[: memory.size] == y_tilde).nonzero().squeeze(1)
        s = memory.score[slots]
        lowest = slots[s == s.min()]
        return int(lowest[torch.randint(len(lowest), (1,), device=lowest.device)])

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        drawn = fill_then_draw(memory, x, y, t, draw_device="cpu")  # Alg. 2 lines 2-3 (append), 5 (j ~ U[0, N))
        if drawn is None:
            return
        start, slots = drawn
        accepted = ((slots >= 0).nonzero().squeeze(1) + start).tolist()  # Alg. 2 line 6: j < M
        if not accepted:
            return
        labels = torch.cat([memory.y[: memory.size], y]).cpu()
        host = SimpleNamespace(y=labels[: memory.size], score=memory.score[: memory.size].to("cpu", copy=True))
        host.size, y_host = memory.size, labels[memory.size :]
        counts = torch.bincount(host.y, minlength=memory.num_classes)
        placed = {}  # slot -> the sample that ends there (a later one in the same slot wins)
        for i in accepted:
            m = self.victim(host, counts)
            counts[host.y[m]] -= 1
            counts[y_host[i]] += 1
            host.y[m], host.score[m] = y_host[i], 0.0  # as memory.replace: the new sample's score is 0
            placed[m] = i
        idx, src = torch.tensor([list(placed), list(placed.values())]).to(memory.device)
        memory.replace(idx, x[src], y[src], t[src])
