"""The episodic memory M: one tensor store of (x, y, task id) plus declared per-slot fields.

Slots ``0..size-1`` are filled; ``seen`` counts every stream sample offered to the memory (N in
the paper). Everything lives on one device; every operation is a tensor op over a batch of slots.

Per-slot fields: ``memory.declare(name, shape, dtype, fill)`` (docs/DEVELOPING.md, "Per-slot memory fields") gives
``memory.<name>`` ([capacity, *shape]), reset to ``fill`` by every write of a new sample
(``append`` / ``replace`` / ``place``) and carried by ``state_dict``. ``score`` (E-BRS's) and
``logits`` (MIR's stored logits) are declared here.

``logits_on_overwrite`` (the reading's): ``reset`` writes the fill (0) with the new sample;
``keep`` leaves the previous occupant's logits in an overwritten slot, as MIR's code (commit
35eda78: ``er_main.py`` l.182 ``add_reservoir(data, target, None, task)``, ``buffer.py``
l.146-147 ``if save_logits``). A slot filled for the first time starts at 0 under both (l.39, l.108-109).
"""

from __future__ import annotations

import torch

LOGITS_ON_OVERWRITE = ("reset", "keep")  # the stored logits of an overwritten slot: 0 | the previous occupant's


class Memory:
    def __init__(
        self, capacity: int, x_shape, num_classes: int, device="cpu", dtype=torch.float32, logits_on_overwrite="reset"
    ):
        if logits_on_overwrite not in LOGITS_ON_OVERWRITE:
            raise ValueError(
                f"unknown logits_on_overwrite {logits_on_overwrite!r}; valid: {', '.join(LOGITS_ON_OVERWRITE)}"
            )
        if capacity < 0:
            raise ValueError(f"memory size must be >= 0, got {capacity}")
        self.capacity = int(capacity)
        self.num_classes = int(num_classes)
        self.x = torch.zeros((self.capacity, *x_shape), dtype=dtype, device=device)
        self.y = torch.zeros(self.capacity, dtype=torch.long, device=device)
        self.t = torch.zeros(self.capacity, dtype=torch.long, device=device)
        self.fields: dict[str, torch.Tensor] = {}  # declared per-slot fields: name -> [capacity, *shape]
        self.fills: dict[str, float | int | bool] = {}  # name -> the value a newly written sample starts at
        self.declare("score", ())  # interference scores s(m) (C-CMR / MIR write them, E-BRS reads them)
        self.declare("logits", (num_classes,))  # MIR's stored logits (compare_to_old_logits)
        self.kept = {"logits"} if logits_on_overwrite == "keep" else set()  # fields an overwrite leaves as they were
        self.size = 0
        self.seen = 0

    # -- declared per-slot fields --------------------------------------------
    def declare(self, name: str, shape=(), dtype=torch.float32, fill=0.0) -> torch.Tensor:
        """The per-slot field ``name`` ([capacity, *shape] of ``dtype``), created at ``fill`` everywhere;
        a sample written into a slot starts at ``fill``. Declaring it again with the same spec returns
        the existing tensor (a policy may declare lazily, also after a checkpoint was loaded)."""
        shape = tuple(int(d) for d in shape)
        if name in self.fields:
            f, old = self.fields[name], self.fills[name]
            same_fill = old == fill or (old != old and fill != fill)  # nan == nan here
            if tuple(f.shape[1:]) != shape or f.dtype != dtype or not same_fill:
                raise ValueError(
                    f"memory field {name!r} is declared as {tuple(f.shape[1:])} {f.dtype} fill={old!r}, "
                    f"not {shape} {dtype} fill={fill!r}"
                )
            return f
        if name in vars(self) or hasattr(type(self), name):
            raise ValueError(f"memory field name {name!r} is taken by the memory itself")
        self.fields[name] = torch.full((self.capacity, *shape), fill, dtype=dtype, device=self.x.device)
        self.fills[name] = fill
        return self.fields[name]

    def __getattr__(self, name: str):  # memory.score, memory.logits, memory.<declared field>
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__!r} has no attribute or declared field {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name in self.__dict__.get("fields", {}):  # memory.score = tensor: replaces the field's tensor
            if value.shape != self.fields[name].shape:
                raise ValueError(f"memory field {name!r} has shape {tuple(self.fields[name].shape)}")
            self.fields[name] = value
        else:
            super().__setattr__(name, value)

    # -- state (clsuite.run.checkpoint) ---------------------------------------------
    def state_dict(self) -> dict:
        """Samples, counters and every declared field with its fill."""
        return {"capacity": self.capacity, "size": self.size, "seen": self.seen, "x": self.x, "y": self.y,
                "t": self.t, "fields": dict(self.fields), "fills": dict(self.fills)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity or tuple(state["x"].shape) != tuple(self.x.shape):
            raise ValueError(
                f"memory state of capacity {state['capacity']} and samples {tuple(state['x'].shape[1:])} does not "
                f"fit this memory ({self.capacity}, {tuple(self.x.shape[1:])})"
            )
        for name in ("x", "y", "t"):
            getattr(self, name).copy_(state[name])
        for name, value in state["fields"].items():
            self.declare(name, value.shape[1:], value.dtype, state["fills"][name]).copy_(value)
        self.size, self.seen = int(state["size"]), int(state["seen"])

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
        """Fill the next free slots; returns the slots written (declared fields at their fill)."""
        n = min(len(y), self.capacity - self.size)
        idx = torch.arange(self.size, self.size + n, device=self.device)
        self.replace(idx, x[:n], y[:n], t[:n])
        for name in self.kept:  # a slot filled anew starts at the fill (its content, if any, is no occupant's)
            self.fields[name].index_fill_(0, idx, self.fills[name])
        self.size += n
        return idx

    def replace(self, idx, x, y, t) -> None:
        """Write samples into slots ``idx`` (a new sample's declared fields start at their fill, but for
        the fields ``kept`` from the previous occupant)."""
        self.x[idx] = x.to(self.x.dtype)
        self.y[idx] = y
        self.t[idx] = t
        for name, field in self.fields.items():  # not field[idx] = fill: that copies the fill to the GPU (a sync)
            if name not in self.kept:
                field.index_fill_(0, idx, self.fills[name])

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
        for name, field in self.fields.items():
            if name in self.kept:
                continue
            keep = new.view(-1, *[1] * (field.dim() - 1))
            field[target] = torch.where(keep, self.fills[name], field[target])

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
