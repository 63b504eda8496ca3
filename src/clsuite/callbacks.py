"""Callbacks: the memory update after each batch, and the accuracy matrix.

``MemoryUpdate`` applies the method's update policy (reservoir, E-BRS, GSS, ...)
to each incoming batch after its update step (PROTOCOL section 2).
``AccuracyMatrix`` measures b (random-init accuracy per task) at the first fit
start and one row of R at the end of every fit, on every task's test (or
validation) split, micro-averaged, with per-class accuracies.
"""

from __future__ import annotations

import time

import lightning as L
import numpy as np
import torch


class MemoryUpdate(L.Callback):
    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        if learner.update_policy is not None and learner.plugin.uses_memory:
            x, y, t = batch
            learner.update_policy.update(learner.memory, x, y, t, learner)


@torch.no_grad()
def evaluate(learner, datamodule, split: str = "test", chunk: int = 2000):
    """Per task: (accuracy %, {class: accuracy %}) over ``split`` of every task."""
    was_training = learner.training
    learner.eval()
    accs, per_class = [], []
    for k in range(datamodule.n_tasks):
        x, y, t = datamodule.split(k, split)
        if len(y) == 0:
            accs.append(float("nan"))
            per_class.append({})
            continue
        pred = torch.cat(
            [learner.predict(x[i : i + chunk], t[i : i + chunk]).argmax(1) for i in range(0, len(y), chunk)]
        )
        correct = pred == y
        accs.append(100.0 * int(correct.sum()) / len(y))  # micro: correct / total
        cls = getattr(datamodule.tasks[k], split)[1]  # original class ids
        n = torch.bincount(cls).double()
        c = torch.bincount(cls, weights=correct.double())
        per_class.append({int(i): 100.0 * float(c[i] / n[i]) for i in torch.nonzero(n).flatten().tolist()})
    learner.train(was_training)
    return accs, per_class


class AccuracyMatrix(L.Callback):
    """Fills b before training and a row of R after each task (each fit)."""

    def __init__(self, datamodule, split: str = "test", on_row=None):
        self.dm, self.split, self.on_row = datamodule, split, on_row
        self.b: list[float] | None = None
        self.rows: list[list[float]] = []
        self.per_class: list[list[dict]] = []
        self.steps_per_task: list[int] = []
        self.train_time_s = 0.0  # time inside fits, evaluations excluded
        self._steps_at_start = 0
        self._t0 = 0.0

    def on_fit_start(self, trainer, learner):
        if self.b is None:
            self.b, _ = evaluate(learner, self.dm, self.split)
        self._steps_at_start = learner.train_steps
        self._t0 = time.perf_counter()

    def on_fit_end(self, trainer, learner):
        if learner.device.type == "cuda":
            torch.cuda.synchronize(learner.device)
        self.train_time_s += time.perf_counter() - self._t0
        accs, per_class = evaluate(learner, self.dm, self.split)
        self.rows.append(accs)
        self.per_class.append(per_class)
        self.steps_per_task.append(learner.train_steps - self._steps_at_start)
        if self.on_row is not None:
            self.on_row(len(self.rows) - 1, accs)

    @property
    def R(self) -> np.ndarray:
        return np.asarray(self.rows, dtype=float)
