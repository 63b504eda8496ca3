"""Callbacks: the task's start, the memory update after each batch, and the accuracy matrix.

``TaskStart`` starts the datamodule's task on the learner when a fit starts.
``MemoryUpdate`` applies the method's update policy (reservoir, E-BRS, GSS, ...)
to each incoming batch after its update step (PROTOCOL section 2).
``AccuracyMatrix`` measures b (random-init accuracy per task) at the first fit
start and one row of R at the end of every fit, on every task's test (or
validation) split, micro-averaged, with per-class accuracies and the row of the
task-IL matrix from the same scores (:func:`evaluate`; docs/PROTOCOL.md, section 5).
``DivergenceGuard`` stops the run at a non-finite loss (``Diverged``).
``eval_bn="memory"`` (:func:`bn_from_memory`): each evaluation uses BatchNorm statistics re-estimated over
the memory instead of the training's running averages, which are restored afterwards (docs/METHODS.md, "BatchNorm").
"""

from __future__ import annotations

import contextlib
import time

import lightning as L
import numpy as np
import torch

EVAL_BN = ("running", "memory")
BN_BATCH = 100  # samples per forward of the re-estimation pass (the memory in near-equal chunks of at most this)


@contextlib.contextmanager
def bn_from_memory(learner):
    """BatchNorm's running statistics re-estimated from the memory for the ``with`` body, then restored.

    One pass over the filled slots in slot order, in train mode and without gradients, each BatchNorm
    layer reset and set to a cumulative average (``momentum=None``: every chunk weighs the same, as
    SWA's ``update_bn``), in ``ceil(size / BN_BATCH)`` near-equal chunks. The memory holds every seen
    task (the current one too, under every update policy that writes the stream), so the statistics
    are those of all seen tasks, not of the last forwards. The training's statistics, counters and
    momenta come back after the body: the training is the same as without it, only the evaluation differs.
    An empty memory (b, before any training) leaves the statistics as they are.
    """
    bns = [m for m in learner.net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    size = int(learner.memory.size) if learner.memory is not None else 0
    if not bns or size == 0:
        yield
        return
    saved = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone(), m.momentum) for m in bns]
    was_training = learner.net.training
    try:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        learner.net.train()
        with torch.no_grad():
            for x in torch.tensor_split(learner.memory.x[:size], -(-size // BN_BATCH)):
                learner.net(x)
        learner.net.train(was_training)
        yield
    finally:
        learner.net.train(was_training)
        for m, (mean, var, count, momentum) in zip(bns, saved, strict=True):
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
            m.num_batches_tracked.copy_(count)
            m.momentum = momentum


class TaskStart(L.Callback):
    """``learner.start_task`` of the datamodule's task (Joint: the last) when a fit starts: after
    Lightning restored a checkpoint (``trainer.fit(ckpt_path=)``), so that the restored counters and
    method state never overwrite the task's, and before the other callbacks, which read it (list it first)."""

    def on_fit_start(self, trainer, learner):
        dm = trainer.datamodule
        learner.start_task(dm.n_tasks - 1 if dm.task == "joint" else dm.task)


class MemoryUpdate(L.Callback):
    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        if learner.update_policy is not None and learner.plugin.uses_memory:
            x, y, t = batch
            learner.update_policy.update(learner.memory, x, y, t, learner)


class Diverged(RuntimeError):
    """The training loss became non-finite (a run failure: no results file is written)."""


class DivergenceGuard(L.Callback):
    """Stops the run when the loss (``learner.last_loss``) is nan or inf.

    No host-device sync per step: a device-side step counter and the first non-finite step
    (and its loss) are updated with tensor ops on every batch; the flag is read every
    ``check_every`` batches and at the end of every task, then ``Diverged`` names the step
    and the task (an lr of 1e6 or nan used to finish with Acc at chance and status finished).
    """

    def __init__(self, check_every: int = 50):
        self.check_every = max(1, int(check_every))
        self._step = self._first = self._value = None
        self._batches = 0

    def on_train_start(self, trainer, learner):  # every task: counters on the learner's device
        dev = learner.device
        self._step = torch.zeros((), dtype=torch.long, device=dev)
        self._first = torch.full((), -1, dtype=torch.long, device=dev)
        self._value = torch.zeros((), device=dev)
        self._batches = 0

    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        loss = learner.last_loss
        if loss is None or self._step is None:
            return
        self._step += 1
        newly = ~torch.isfinite(loss) & (self._first < 0)
        self._first = torch.where(newly, self._step, self._first)
        self._value = torch.where(newly, loss.float(), self._value)
        self._batches += 1
        if self._batches % self.check_every == 0:
            self.check(learner)

    def on_train_epoch_end(self, trainer, learner):
        self.check(learner)

    def check(self, learner) -> None:
        if self._first is not None and (step := int(self._first)) >= 0:
            raise Diverged(
                f"loss is {float(self._value)} at step {step} of task {learner.current_task + 1} "
                f"(lr={learner.lr}): training diverged; no results written"
            )


@torch.no_grad()
def evaluate(learner, datamodule, split: str = "test", chunk: int = 2000):
    """Per task: (accuracy %, {class: accuracy %}, task-IL accuracy %) over ``split`` of every task.

    The counts come from torchmetrics' ``multiclass_stat_scores`` per label (true positives and
    support); the task's accuracy is micro-averaged, sum(tp) / sum(support) = correct / total (not
    torchmetrics' default macro average over classes, a known pitfall in CL), and a class's is its
    tp / support. Both divisions are done in double precision from the integer counts, so the
    numbers equal correct / total exactly (torchmetrics' own accuracy divides in float32).
    Per-class keys are the original class ids (labels may be remapped per scenario).

    Task-IL (Mammoth's ``mask_classes``): the same scores, argmax over the evaluated task's labels
    only (ascending, so ties break as in a masked argmax over the whole head); no second forward.
    """
    from torchmetrics.functional.classification import multiclass_stat_scores

    was_training = learner.training
    # Lightning's teardown at the end of every fit, before on_fit_end, moves the module to the
    # CPU: on a GPU the net must come back to the data's device (the next fit moves it anyway)
    learner.to(datamodule.device)
    learner.eval()
    accs, per_class, task_il = [], [], []
    for k in range(datamodule.n_tasks):
        x, y, t = datamodule.split(k, split)
        if len(y) == 0:
            accs.append(float("nan"))
            per_class.append({})
            task_il.append(float("nan"))
            continue
        scores = [learner.predict(x[i : i + chunk], t[i : i + chunk]) for i in range(0, len(y), chunk)]
        pred = torch.cat([s.argmax(1) for s in scores])
        labels = datamodule.label_map[datamodule.task_classes[k]].sort().values  # task k's labels
        pred_task = labels[torch.cat([s[:, labels].argmax(1) for s in scores])]
        task_il.append(100.0 * int((pred_task == y).sum()) / len(y))
        counts = multiclass_stat_scores(pred, y, scores[0].shape[1], average=None, validate_args=False)
        tp, support = counts[:, 0].double(), counts[:, 4].double()  # per label: (tp, fp, tn, fn, support)
        accs.append(100.0 * int(tp.sum()) / int(support.sum()))  # micro: correct / total
        cls = getattr(datamodule.tasks[k], split)[1].to(y.device)  # original class ids, y's order
        n_labels = scores[0].shape[1]
        pairs = torch.unique(cls * n_labels + y).tolist()  # (class id, its label) of the task, as one number
        per_class.append({c // n_labels: 100.0 * float(tp[c % n_labels] / support[c % n_labels]) for c in pairs})
    learner.train(was_training)
    return accs, per_class, task_il


class AccuracyMatrix(L.Callback):
    """Fills b before training and a row of R (and of the task-IL matrix) after each task (each fit)."""

    def __init__(self, datamodule, split: str = "test", on_row=None, eval_bn: str = "running"):
        if eval_bn not in EVAL_BN:
            raise ValueError(f"unknown eval_bn {eval_bn!r}; valid: {', '.join(EVAL_BN)}")
        self.dm, self.split, self.on_row, self.eval_bn = datamodule, split, on_row, eval_bn
        self.b: list[float] | None = None
        self.rows: list[list[float]] = []
        self.rows_task_il: list[list[float]] = []
        self.per_class: list[list[dict]] = []
        self.steps_per_task: list[int] = []
        self.train_time_s = 0.0  # time inside fits, evaluations excluded
        self._steps_at_start = 0
        self._t0 = 0.0

    def on_fit_start(self, trainer, learner):
        if self.b is None:
            self.b = self._evaluate(learner)[0]
        self._steps_at_start = learner.train_steps
        self._t0 = time.perf_counter()

    def on_fit_end(self, trainer, learner):
        if learner.device.type == "cuda":
            torch.cuda.synchronize(learner.device)
        self.train_time_s += time.perf_counter() - self._t0
        accs, per_class, task_il = self._evaluate(learner)
        self.rows.append(accs)
        self.per_class.append(per_class)
        self.rows_task_il.append(task_il)
        self.steps_per_task.append(learner.train_steps - self._steps_at_start)
        if self.on_row is not None:
            self.on_row(len(self.rows) - 1, accs)

    def _evaluate(self, learner):
        learner.to(self.dm.device)  # (evaluate's reason: Lightning's teardown moved the module to the CPU)
        with bn_from_memory(learner) if self.eval_bn == "memory" else contextlib.nullcontext():
            return evaluate(learner, self.dm, self.split)

    def state_dict(self) -> dict:  # in the run's checkpoint (clsuite.run.checkpoint)
        keys = ("b", "rows", "rows_task_il", "per_class", "steps_per_task", "train_time_s")
        return {k: getattr(self, k) for k in keys}

    def load_state_dict(self, state: dict) -> None:
        vars(self).update(state)

    @property
    def R(self) -> np.ndarray:
        return np.asarray(self.rows, dtype=float)

    @property
    def R_task_il(self) -> np.ndarray:
        return np.asarray(self.rows_task_il, dtype=float)
