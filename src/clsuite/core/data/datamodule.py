"""A LightningDataModule that streams one task per fit stage.

``set_task(k)`` chooses what the next ``trainer.fit`` sees; ``set_task("joint")``
streams the shuffled union of all tasks (the Joint baseline). Every split is a
pair of tensors moved once to the training device; batches are slices of a
seeded permutation, so there is no per-sample decoding or collation and no
host-to-device copy per batch.
"""

from __future__ import annotations

import lightning as L
import torch

from clsuite.core.data.benchmarks import split_tasks
from clsuite.core.data.sources import Source

SCENARIOS = ("class_il", "task_il", "domain_il")
INPUT_RANGES = ("unit", "symmetric")  # data.input_range: [0, 1] | [-1, 1]


class TensorStream:
    """Iterable of (x, y, t) mini-batches over tensors, reshuffled each pass."""

    def __init__(self, x, y, t, batch_size: int, shuffle: bool, seed: int):
        self.x, self.y, self.t = x, y, t
        self.batch_size, self.shuffle = batch_size, shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return -(-len(self.y) // self.batch_size)

    def __iter__(self):
        n = len(self.y)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        order = order.to(self.y.device)
        for i in range(0, n, self.batch_size):
            idx = order[i : i + self.batch_size]
            yield self.x[idx], self.y[idx], self.t[idx]


class ContinualDataModule(L.LightningDataModule):
    def __init__(self, source: Source, data: dict, scenario: str = "class_il", batch_size: int = 20, seed: int = 0):
        """``source``: the benchmark's source bound to its config (``clsuite.core.data.sources.bind``)."""
        super().__init__()
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; valid: {', '.join(SCENARIOS)}")
        self.source, self.bench, self.data_cfg = source, source.benchmark, dict(data)
        self.scenario, self.batch_size, self.seed = scenario, batch_size, seed
        self.n_tasks = int(self.bench["n_tasks"])
        self.classes_per_task = int(self.bench["classes_per_task"])
        self.tasks = None
        self.task = 0
        self.device = torch.device("cpu")

    # -- shape facts the model needs ---------------------------------------
    @property
    def num_classes(self) -> int:
        """Output units: all classes (class-/task-IL) or classes per task (domain-IL)."""
        return self.classes_per_task if self.scenario == "domain_il" else self.n_tasks * self.classes_per_task

    def prepare(self) -> ContinualDataModule:
        """Read and split the files once (also validates them: raises DataError)."""
        if self.tasks is None:
            d = self.data_cfg
            self.tasks = split_tasks(
                self.source.read(
                    d["root"], bool(d.get("download", False)), bool(d.get("verify_md5", True)), d.get("cache_dir")
                ),
                self.n_tasks,
                self.classes_per_task,
                self.bench.get("train_per_class"),
                self.seed,
                order=d.get("class_order", "natural"),
                val_fraction=float(d.get("val_fraction", 0.0)),
                imbalance=float(d.get("imbalance", 0.0)),
                imbalance_semantics=d.get("imbalance_semantics", "keep"),
            )
            self._rescale(d.get("input_range") or "unit")
            self._normalise(d.get("normalize", False))
            self.input_shape = tuple(self.tasks[0].test[0].shape[1:])
            self.label_map = torch.arange(self.n_tasks * self.classes_per_task)
            self.task_classes = torch.tensor([tk.classes for tk in self.tasks])
            if self.scenario == "domain_il":
                for classes in self.task_classes:
                    self.label_map[classes] = torch.arange(self.classes_per_task)
        return self

    def _rescale(self, input_range: str) -> None:
        """``unit``: x / 255 in [0, 1] (split_tasks' own); ``symmetric``: (x / 255 - 0.5) * 2 in [-1, 1], in
        MIR's order of operations (data.py l.34 ``x.float() / 255.``, l.43 ``(x - 0.5) * 2``, commit 35eda78)."""
        if input_range not in INPUT_RANGES:
            raise ValueError(f"unknown data.input_range {input_range!r}; valid: {', '.join(INPUT_RANGES)}")
        if input_range == "symmetric":
            for tk in self.tasks:
                for split in ("train", "val", "test"):
                    xs, ys = getattr(tk, split)
                    setattr(tk, split, (xs.sub_(0.5).mul_(2.0), ys))

    def _normalise(self, on: bool) -> None:
        if not on:
            return
        x = torch.cat([tk.train[0] for tk in self.tasks])
        dims = [0, *range(2, x.dim())]
        mean, std = x.mean(dims, keepdim=True)[0], x.std(dims, keepdim=True)[0].clamp_min(1e-6)
        for tk in self.tasks:
            for split in ("train", "val", "test"):
                xs, ys = getattr(tk, split)
                setattr(tk, split, ((xs - mean) / std, ys))

    def to(self, device) -> ContinualDataModule:
        """Move every split once to ``device`` (the model's device)."""
        self.device = torch.device(device)
        for tk in self.tasks:
            for split in ("train", "val", "test"):
                xs, ys = getattr(tk, split)
                setattr(tk, split, (xs.to(self.device), ys.to(self.device)))
        self.label_map = self.label_map.to(self.device)
        self.task_classes = self.task_classes.to(self.device)
        return self

    # -- what a fit stage and an evaluation see ------------------------------
    def set_task(self, task) -> None:
        self.task = task

    def split(self, k: int, name: str):
        """(x, y, t) of task k's ``train`` / ``val`` / ``test`` split, labels per scenario."""
        x, y = getattr(self.tasks[k], name)
        return x, self.label_map[y], torch.full_like(y, k)

    def train_dataloader(self):
        if self.task == "joint":
            parts = [self.split(k, "train") for k in range(self.n_tasks)]
            x, y, t = (torch.cat(p) for p in zip(*parts, strict=True))
        else:
            x, y, t = self.split(self.task, "train")
        stream_seed = self.seed * 1000 + (self.n_tasks if self.task == "joint" else self.task)
        return TensorStream(x, y, t, self.batch_size, shuffle=True, seed=stream_seed)
