"""The suite's side of a parity run: its config, the materials the reference is driven with (split,
initial weights, batches, read from the suite itself), and its own R and Acc (docs/notes/PARITY.md, "Making
the record"). Nothing here imports the reference: a test runs it on synthetic data (tests/analysis/test_parity.py).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clsuite import api
from clsuite.core.train import build
from clsuite.run.experiment import run_experiment

THREADS = ["trainer.threads=1", "logger=none", "trainer.progress_bar=false"]


def compose(method: str, benchmark: str, seed: int, reading: str = "mir_code", extra=()):
    """The suite's config of one parity cell (validated as the CLI validates it)."""
    return api.compose([f"reading={reading}", f"method={method}", f"benchmark={benchmark}", f"seed={seed}",
                        *THREADS, *extra])  # fmt: skip


@dataclass
class Task:
    classes: list[int]
    train: tuple[torch.Tensor, torch.Tensor]  # x [n, *shape] in [0, 1], y [n]
    test: tuple[torch.Tensor, torch.Tensor]
    batches: list[tuple[torch.Tensor, torch.Tensor]]  # the suite's stream of this task, in order


@dataclass
class Materials:
    cfg: object
    tasks: list[Task]
    init: dict[str, torch.Tensor]  # the suite network's initial state_dict
    memory_capacity: int  # M in slots (per class x classes under memory_per_class)
    batch_size: int
    replay_size: int
    lr: float
    num_classes: int
    extra: dict = field(default_factory=dict)


def materials(cfg) -> Materials:
    """Samples, initial weights and batches of ``cfg``'s run, from the suite's own data module and net."""
    dm, learner, _ = build(cfg)
    tasks = []
    for k in range(dm.n_tasks):
        dm.set_task(k)
        x, y, _ = dm.split(k, "train")
        batches = [(bx.clone(), by.clone()) for bx, by, _ in dm.train_dataloader()]
        tasks.append(Task(dm.tasks[k].classes, (x.clone(), y.clone()), dm.split(k, "test")[:2], batches))
    return Materials(
        cfg=cfg,
        tasks=tasks,
        init={k: v.detach().clone() for k, v in learner.net.state_dict().items()},
        memory_capacity=learner.memory.capacity,
        batch_size=int(cfg.batch_size),
        replay_size=int(learner.replay_size),
        lr=float(learner.lr),
        num_classes=dm.num_classes,
    )


def suite_acc(cfg, out_dir: str | Path | None = None) -> dict:
    """The suite's run of ``cfg``: {"acc": final Acc, "R": R, "b": b}."""
    with tempfile.TemporaryDirectory() as tmp:
        res = run_experiment(cfg, Path(out_dir or tmp))
    return {"acc": float(res["metrics"]["acc"]), "R": res["R"], "b": res["b"]}
