"""Reservoir sampling (Vitter 1985), as ER uses it (Rolnick et al. 2019).

After N stream samples every one of them is in memory with probability M/N.
Vectorised over the incoming batch: sample i (the (N+i)-th seen) draws
j ~ U[0, N+i) and replaces slot j when j < M; when two samples of one batch
draw the same slot the later one wins, exactly as the sequential algorithm.
Under a reading (PROTOCOL 8) only the capacity changes (``memory_per_class``).
"""

from __future__ import annotations

import torch

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory


def reservoir_slots(seen_before: int, n: int, capacity: int, device) -> torch.Tensor:
    """For n incoming samples after ``seen_before`` seen ones: the slot each one
    replaces, or -1 (not kept). Counts start at 1: the k-th sample seen (k > M)
    draws j ~ U[0, k)."""
    k = torch.arange(seen_before + 1, seen_before + n + 1, device=device, dtype=torch.float64)
    j = (torch.rand(n, device=device, dtype=torch.float64) * k).long()
    return torch.where(j < capacity, j, torch.full_like(j, -1))


def fill_then_draw(memory: Memory, x, y, t, draw_device=None):
    """The part every reservoir-style update shares: append what fits in the
    free slots, then draw j ~ U[0, N) for each remaining sample and count it
    as seen. Returns (index of the first remaining sample, their draws: the slot
    each would replace or -1, on ``draw_device``, default the memory's), or None
    when every sample was appended."""
    if memory.capacity == 0:
        memory.seen += len(y)
        return None
    n_free = min(len(y), memory.capacity - memory.size)
    if n_free:
        memory.append(x[:n_free], y[:n_free], t[:n_free])
    memory.seen += n_free
    rest = len(y) - n_free
    if rest == 0:
        return None
    slots = reservoir_slots(memory.seen, rest, memory.capacity, draw_device or memory.device)
    memory.seen += rest
    return n_free, slots


class Reservoir(UpdatePolicy):
    """Memory update policy: classic reservoir sampling."""

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        drawn = fill_then_draw(memory, x, y, t)
        if drawn is None:
            return
        start, slots = drawn
        memory.place(slots, x[start:], y[start:], t[start:])  # the later of two draws of one slot wins
