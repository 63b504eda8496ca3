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
        self.logits = torch.zeros((self.capacity, num_classes), device=device)  # MIR old logits, HAL/iCaRL
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

    def to(self, device) -> Memory:
        for name in ("x", "y", "t", "score", "logits"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def get(self, idx: torch.Tensor):
        """(x, y, t) of the slots ``idx``."""
        return self.x[idx], self.y[idx], self.t[idx]

    def class_counts(self) -> torch.Tensor:
        return torch.bincount(self.y[: self.size], minlength=self.num_classes)

    # -- writes ------------------------------------------------------------
    def append(self, x, y, t, logits=None) -> torch.Tensor:
        """Fill the next free slots; returns the slots written (score reset to 0)."""
        n = min(len(y), self.capacity - self.size)
        idx = torch.arange(self.size, self.size + n, device=self.device)
        self.replace(idx, x[:n], y[:n], t[:n], None if logits is None else logits[:n])
        self.size += n
        return idx

    def replace(self, idx, x, y, t, logits=None) -> None:
        """Write samples into slots ``idx`` (a new sample's score starts at 0)."""
        self.x[idx] = x.to(self.x.dtype)
        self.y[idx] = y
        self.t[idx] = t
        self.score[idx] = 0.0
        self.logits[idx] = 0.0 if logits is None else logits.detach()

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
