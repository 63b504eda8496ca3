"""The memory writes that avoid host-device syncs on a GPU give what one-by-one writes give.

``Memory.place`` (reservoir) writes a whole batch of draws with fixed shapes; E-BRS places its
accepted samples on a host copy and writes the survivors at once. Both must equal the
sequential algorithm exactly, repeated slots included (tests/lab/test_gpu.py checks on a GPU that
no sync is left)."""

from __future__ import annotations

import torch

from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.ebrs import EBRS


def full_memory(capacity=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    mem = Memory(capacity, (2, 3), 5)
    mem.append(
        torch.rand(capacity, 2, 3, generator=g),
        torch.randint(5, (capacity,), generator=g),
        torch.randint(3, (capacity,), generator=g),
    )
    mem.score[:] = torch.randn(capacity, generator=g)
    mem.logits[:] = torch.randn(capacity, 5, generator=g)
    return mem


def test_place_equals_one_by_one_replace_with_repeated_and_rejected_slots():
    for seed in range(30):
        g = torch.Generator().manual_seed(100 + seed)
        n = 12
        slots = torch.randint(-1, 4, (n,), generator=g)  # many repeats (4 slots) and rejections (-1)
        x, y, t = (
            torch.rand(n, 2, 3, generator=g),
            torch.randint(5, (n,), generator=g),
            torch.randint(3, (n,), generator=g),
        )
        fast, ref = full_memory(seed=seed), full_memory(seed=seed)
        fast.place(slots, x, y, t)
        for i, j in enumerate(slots.tolist()):  # the sequential algorithm: sample i, then i + 1, ...
            if j >= 0:
                ref.replace(torch.tensor([j]), x[i : i + 1], y[i : i + 1], t[i : i + 1])
        for name in ("x", "y", "t", "score", "logits"):
            assert torch.equal(getattr(fast, name), getattr(ref, name)), (seed, name)


def test_ebrs_slot_chosen_twice_in_one_batch_keeps_the_later_sample(monkeypatch):
    mem = Memory(3, (1,), 4)
    mem.append(torch.tensor([[0.0], [1.0], [2.0]]), torch.tensor([0, 0, 1]), torch.zeros(3, dtype=torch.long))
    mem.score[:] = torch.tensor([5.0, -1.0, 0.5])
    mem.seen = 3
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.zeros(n, dtype=torch.long)
    )
    # class 0 is the most frequent before and after the first placement; slot 1 (score -1, then
    # the new sample's 0) is its lowest both times
    EBRS().update(mem, torch.tensor([[10.0], [20.0]]), torch.tensor([0, 0]), torch.tensor([1, 2]))
    assert mem.x[:, 0].tolist() == [0.0, 20.0, 2.0]
    assert mem.t.tolist() == [0, 2, 0] and mem.score.tolist() == [5.0, 0.0, 0.5] and mem.seen == 5
