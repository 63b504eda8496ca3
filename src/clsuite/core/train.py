"""The run's science: the data module, network, memory and method built from the composed config, and
the stream trained task by task (docs/DEVELOPING.md, "The path of one run").

Per task: ``set_task(k)``, raise the fit loop's epoch budget by the task's passes (a reused Trainer
would otherwise train zero steps on every task after the first), ``trainer.fit`` (whose ``TaskStart``
callback starts the task on the learner). Joint is one "task", the union of all tasks, trained for
``method.epochs`` passes (1 by default, as every method; each pass reshuffles the union) and measured
once after the last.
The callbacks (``clsuite.core.callbacks``) update the memory and fill R.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from clsuite.core.data import sources
from clsuite.core.data.datamodule import ContinualDataModule
from clsuite.core.errors import ConfigError
from clsuite.core.learner import ContinualLearner
from clsuite.core.memory.buffer import Memory
from clsuite.core.models.nets import build_model


def pick_device(trainer_cfg) -> torch.device:
    acc = str(trainer_cfg.get("accelerator", "auto"))
    if acc == "cpu" or (acc == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={acc} but no CUDA device is available; valid here: cpu (trainer=cpu)")
    return torch.device("cuda", int(trainer_cfg.get("device_index") or 0))


def memory_capacity(cfg, num_classes: int) -> int:
    """M total, or M per class (MIR's ``--mem_size``) times the number of classes."""
    return int(cfg.memory) * (num_classes if cfg.memory_per_class else 1)


def method_lr(cfg) -> float:
    """The method's own ``lr`` when its config sets one, else the run's ``lr`` (the reading's)."""
    lr = cfg.method.get("lr")
    lr = float(cfg.lr if lr is None else lr)
    if not lr > 0:
        raise ValueError(f"learning rate must be > 0, got {lr!r} (method.lr or lr)")
    return lr


def _build(method_cfg, slot: str):
    """``method.<slot>`` instantiated (None when null); a class that refuses its arguments is a ``ConfigError``."""
    from hydra.errors import InstantiationException

    node = method_cfg.get(slot)
    if not node:
        return None
    try:
        return instantiate(node)
    except InstantiationException as e:
        why = " ".join(str(e).split("\n")[0].split())
        raise ConfigError(f"method.{slot} could not be built: {why}") from None


def build(cfg: DictConfig, source=None):
    """(datamodule, learner, device) from a composed config: the benchmark's source is looked up
    once (``dm.source``, also the run's data identity) unless the caller hands it down (a sweep's
    job looked it up for its expected identity: ``source``); the method's replay policy
    (``method.replay``), update policy (``method.update``) and plugin (``method.plugin``)
    are instantiated from their config groups (conf/replay, conf/update, conf/method)."""
    dm = ContinualDataModule(
        source or sources.bind(OmegaConf.to_container(cfg.benchmark, resolve=True)),
        {**OmegaConf.to_container(cfg.data, resolve=True), "imbalance": float(cfg["lambda"])},
        scenario=cfg.scenario,
        batch_size=int(cfg.batch_size),
        seed=int(cfg.seed),
    ).prepare()
    device = pick_device(cfg.trainer)
    if cfg.trainer.get("threads"):
        torch.set_num_threads(int(cfg.trainer.threads))
    dm.to(device)
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    arch = cfg.model.arch if cfg.model.arch != "auto" else cfg.benchmark.backbone
    model_kw = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "arch"}
    net = build_model(arch, dm.input_shape, dm.num_classes, **model_kw)
    m = cfg.method
    plugin = _build(m, "plugin")
    uses_memory = plugin.uses_memory if plugin is not None else True
    capacity = memory_capacity(cfg, dm.n_tasks * dm.classes_per_task) if uses_memory else 0
    memory = Memory(
        capacity, dm.input_shape, dm.num_classes, device=device, logits_on_overwrite=cfg.logits_on_overwrite
    )
    learner = ContinualLearner(
        net,
        memory=memory,
        replay=_build(m, "replay"),
        update=_build(m, "update"),
        plugin=plugin,
        lr=method_lr(cfg),
        momentum=float(cfg.momentum),
        weight_decay=float(cfg.weight_decay),
        iters_per_batch=int(cfg.benchmark.iters_per_batch),
        replay_size=int(cfg.method.get("replay_size") or cfg.replay_size),  # a method's own (A-GEM), else the reading's
        replay_loss=cfg.method.get("replay_loss") or cfg.replay_loss,  # a method's own, else the reading's
        scenario=cfg.scenario,
        task_classes=dm.task_classes,
        eval_mask=cfg.eval_mask,
    ).to(device)
    learner.plugin.setup(learner)
    return dm, learner, device


def schedule_of(cfg, dm) -> tuple[list, int]:
    """(the tasks in training order, the passes over each): ``["joint"]`` and ``method.epochs`` for
    Joint, else tasks 0..T-1 once each."""
    schedule = ["joint"] if cfg.method.get("joint", False) else list(range(dm.n_tasks))
    return schedule, int(cfg.method.get("epochs") or 1)


def train_tasks(
    trainer, learner, dm, schedule: list, passes: int, guard, start: int = 0, ckpt_path: Path | None = None
) -> None:
    """Train ``schedule`` from its task ``start`` (0: the first; a resumed run: the one after its
    checkpoint ``ckpt_path``, which the first fit restores); what follows a task's end is its
    callbacks' ``on_fit_end``. ``trainer`` lists ``TaskStart`` first. A crash after a non-finite loss
    is reported as the divergence (``guard``: ``DivergenceGuard``)."""
    for epoch, task in enumerate(schedule):
        if epoch < start:
            continue
        dm.set_task(task)
        trainer.fit_loop.max_epochs = (epoch + 1) * passes  # the next task's passes (one per task; Joint: epochs)
        resume = ckpt_path if epoch == start else None  # (a Path: never Lightning's "last", "best", ...)
        try:
            trainer.fit(learner, datamodule=dm, ckpt_path=resume)  # learner.on_train_end: the task-end hooks
        except Exception:
            guard.check(learner)  # a crash after a non-finite loss (nan scores, ...) is the divergence
            raise
