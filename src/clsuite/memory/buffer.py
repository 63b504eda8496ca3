"""The episodic memory M: one tensor store of (x, y, task id, score).

Slots ``0..size-1`` are filled; ``seen`` counts every stream sample offered to
the memory (N in the paper). Everything lives on one device and every operation
is a tensor op over a batch of slots.
"""

from __future__ import annotations

import torch


class Memory:
    def __init__(self, capacity: int, x_shape, num_classes: int, device="cpu", dtype=torch.float32):
        if capacity < 0:
            raise ValueError(f"memory size must be >= 0, got {capacity}")
        self.capacity = int(capacity)
        self.num_classes = int(num_classes)
        self.x = torch.zeros((self.capacity, *x_shape), dtype=dtype, device=device)
        self.y = torch.zeros(self.capacity, dtype=torch.long, device=device)
        self.t = torch.zeros(self.capacity, dtype=torch.long, device=device)
        self.score = torch.zeros(self.capacity, device=device)
        self.logits = torch.zeros((self.capacity, num_classes), device=device)  # MIR's stored logits
        self.size = 0
        self.seen = 0

    # -- views -------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    @property
    def device(self):
        return self.x.device

    @property
    def full(self) -> bool:
        return self.size >= self.capacity

    def get(self, idx: torch.Tensor):
        """(x, y, t) of the slots ``idx``."""
        return self.x[idx], self.y[idx], self.t[idx]

    def class_counts(self) -> torch.Tensor:
        return torch.bincount(self.y[: self.size], minlength=self.num_classes)

    # -- writes ------------------------------------------------------------
    def append(self, x, y, t) -> torch.Tensor:
        """Fill the next free slots; returns the slots written (score reset to 0)."""
        n = min(len(y), self.capacity - self.size)
        idx = torch.arange(self.size, self.size + n, device=self.device)
        self.replace(idx, x[:n], y[:n], t[:n])
        self.size += n
        return idx

    def replace(self, idx, x, y, t) -> None:
        """Write samples into slots ``idx`` (a new sample's score and stored logits start at 0)."""
        self.x[idx] = x.to(self.x.dtype)
        self.y[idx] = y
        self.t[idx] = t
        self.score.index_fill_(0, idx, 0.0)  # not score[idx] = 0.0: that copies the 0 to the GPU (a sync)
        self.logits.index_fill_(0, idx, 0.0)

    def place(self, slots, x, y, t) -> None:
        """``replace`` sample i into slot ``slots[i]`` where ``slots[i] >= 0`` (-1: not kept); of
        several samples aimed at one slot the last one wins, as if written one by one.

        Fixed shapes, so no host-device sync on a GPU: every sample writes the final content of
        its target slot (slot 0 for -1: its current content), so repeated targets agree."""
        n = len(slots)
        target = slots.clamp_min(0)
        order = torch.where(slots >= 0, torch.arange(n, device=slots.device), -1)
        last = torch.full((self.capacity,), -1, dtype=torch.long, device=slots.device)
        win = last.scatter_reduce_(0, target, order, "amax")[target]  # the write that survives, or -1
        new, src = win >= 0, win.clamp_min(0)
        rows = new.view(-1, *[1] * (self.x.dim() - 1))
        self.x[target] = torch.where(rows, x[src].to(self.x.dtype), self.x[target])
        self.y[target] = torch.where(new, y[src], self.y[target])
        self.t[target] = torch.where(new, t[src], self.t[target])
        self.score[target] = torch.where(new, 0.0, self.score[target])
        self.logits[target] = torch.where(new[:, None], 0.0, self.logits[target])

    # -- sampling ----------------------------------------------------------
    def slots(self, exclude_task: int | None = None) -> torch.Tensor:
        """Filled slots, optionally without those of task ``exclude_task``."""
        if exclude_task is None:
            return torch.arange(self.size, device=self.device)
        return (self.t[: self.size] != exclude_task).nonzero().squeeze(1)

    def sample(self, n: int, exclude_task: int | None = None) -> torch.Tensor:
        """Up to ``n`` distinct filled slots drawn uniformly (without replacement)."""
        pool = self.slots(exclude_task)
        if n >= len(pool):
            return pool
        return pool[torch.randperm(len(pool), device=self.device)[:n]]
