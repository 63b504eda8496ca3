"""Loggers: CSV (default), W&B (offline unless asked), TensorBoard or none, and what a run logs to them
(docs/GUIDE.md, "What a run logs"); a logger failure never costs a result (docs/INTEGRITY.md, section 6).
"""

from __future__ import annotations

import contextlib
import csv
import sys

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from omegaconf import OmegaConf

from clsuite.config.check import CONF_DIR
from clsuite.config.schema import logger_kind
from clsuite.run.wandb_run import STEP_AXIS, finishing, log_results, open_run, row_metrics, run_args, run_id, sealed

# conf/logger/'s keys that are the suite's, not the logger's: taken out before it is instantiated
SUITE_KEYS = ("required",)


class _ResumedWriter(ExperimentWriter):
    """Lightning's CSV writer, which deletes an existing ``metrics.csv`` on open, keeping instead the rows
    an earlier process of the run wrote before the step this one starts at (a resumed run: the rows up to
    its checkpoint; a run started again from step 0: none)."""

    def _check_log_dir_exists(self) -> None:
        self._earlier: list[dict] = []
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as f:
                self._earlier = [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(f)]
            self._fs.rm_file(self.metrics_file_path)

    def save(self) -> None:
        if self._earlier and self.metrics:
            first = min(float(m["step"]) for m in self.metrics)
            self.metrics = [*(r for r in self._earlier if float(r.get("step", first)) < first), *self.metrics]
            self._earlier = []
        super().save()


class RunCSVLogger(CSVLogger):
    """``logger=csv``: Lightning's CSVLogger whose rows survive a resume (:class:`_ResumedWriter`)."""

    @property
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ResumedWriter(log_dir=self.log_dir)
        return self._experiment


class LoggerUnavailable(RuntimeError):
    """``logger.required=true`` and the logger cannot start: the run must not train."""


def _warn(what: str, exc: BaseException) -> None:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(f"warning: W&B {what} failed ({type(exc).__name__}: {msg}); the run goes on, its results file is "
          "written (logger.required=true makes this an error)", file=sys.stderr)  # fmt: skip


class WandbRun:
    """``logger=wandb``'s run, held by Lightning's ``WandbLogger`` (the Trainer's logger): opened before
    training on the suite's axes, written by :class:`RunLogger`, closed at the run's end. A write cannot
    end the run: the first failure is a warning and turns W&B logging off (``ok`` False) for the rest of it."""

    def __init__(self, logger: WandbLogger):
        self.logger, self.ok = logger, True
        init = {k: v for k, v in logger._wandb_init.items() if v is not None}  # (anonymous=None: wandb warns)
        self.out_dir, self.mode = init.pop("dir"), init["mode"]
        self.init = init

    def start(self) -> WandbRun:
        """Open the W&B run now, before training (a failure: :func:`_start_wandb`), with the arguments
        Lightning keeps for ``wandb.init``, on the suite's axes (``clsuite.run.wandb_run.open_run``),
        where Lightning's own start would add its ``trainer/global_step`` axis."""
        self.logger._experiment = open_run(self.out_dir, self.init)
        return self

    def log(self, metrics: dict) -> None:
        if self.ok:
            try:
                self.logger.experiment.log(metrics)
            except Exception as e:
                self.ok = False
                _warn("write", e)

    def close(self, failed: bool) -> None:
        """The run's end: the results file's facts (a finished run), finish, and, when every write went
        through, the folder's mirror record (an incomplete W&B run is left to scripts/wandb_sync.py)."""
        try:
            res, sha = sealed(self.out_dir) if not failed and self.ok else (None, None)
            with finishing(self.logger.experiment, self.out_dir, sha, self.mode, int(failed)) as run:
                if res is not None:
                    log_results(run, res)
        except Exception as e:
            _warn("finish", e)


class RunTensorBoardLogger(TensorBoardLogger):
    """Lightning's TensorBoard logger, one events file for the whole run: Lightning finalizes its
    logger at the end of every fit (one per task), which here only flushes; :meth:`close` at the
    run's end closes (a closed writer would reopen a file of the same name within the second)."""

    def finalize(self, status: str) -> None:
        if self._experiment is not None:
            self.experiment.flush()

    def close(self, failed: bool) -> None:
        super().finalize("failed" if failed else "success")


def _overrides() -> list[str]:
    """The Hydra overrides of this job (they name the run), or none outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):
        return []


def _start_wandb(logger: WandbLogger, required: bool, save_dir: str):
    """``(logger, its WandbRun)``, the run opened before training; one that cannot start:
    ``LoggerUnavailable`` when ``required``, else a warning and conf/logger/csv.yaml's logger."""
    try:
        return logger, WandbRun(logger).start()
    except Exception as e:
        if required:
            line = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise LoggerUnavailable(f"W&B is required (logger.required=true) but cannot start: "
                                    f"{type(e).__name__}: {line}; nothing trained") from None  # fmt: skip
        _warn("start", e)
        return instantiate(OmegaConf.load(CONF_DIR / "logger" / "csv.yaml"), save_dir=save_dir), None


@contextlib.contextmanager
def make_logger(cfg, out_dir, key: str):
    """``(logger, wandb)``: conf/logger's node less :data:`SUITE_KEYS` instantiated into ``out_dir`` (None
    for a node without ``_target_``: ``logger=none``), and its :class:`WandbRun` under W&B (else None). W&B
    also gets, where its node leaves them null, the name, group and tags of the run's config and overrides,
    its resolved config and an id of its identity ``key`` (``clsuite.run.wandb_run.run_args``, ``run_id``),
    and opens its run here. After the run, ``close(failed)`` of the W&B run or the logger, where it has one."""
    node = cfg.get("logger") or {}
    if (kind := logger_kind(node)) == "none":
        yield None, None
        return
    args = OmegaConf.masked_copy(node, [k for k in node if k not in SUITE_KEYS])
    extra = {}
    if kind == "wandb":
        config = OmegaConf.to_container(cfg, resolve=True)
        own = OmegaConf.to_container(node, resolve=True)
        extra = run_args(config, _overrides(), own) | {"id": node.get("id") or run_id(out_dir, cfg.experiment, key)}
    logger = instantiate(args, _partial_=True)(save_dir=str(out_dir), **extra)  # (the config: not instantiated)
    wandb = None
    if isinstance(logger, WandbLogger):
        logger, wandb = _start_wandb(logger, bool(node.get("required")), str(out_dir))
    failed = True
    try:
        yield logger, wandb
        failed = False
    finally:
        if (close := getattr(wandb or logger, "close", None)) is not None:
            close(failed)


class RunLogger(L.Callback):
    """Training loss every ``every`` incoming batches; per-task accuracies after each task. To W&B they are
    written to its run (``logger.experiment``) on the suite's axes (``train/step``, ``task``): Lightning's
    ``log_metrics`` would add its ``trainer/global_step``, which counts optimiser steps, not incoming batches."""

    def __init__(self, logger, every: int = 50, wandb: WandbRun | None = None):
        self.logger, self.every, self.wandb = logger, max(1, int(every)), wandb  # W&B: logged on our own axes
        self.learner = None

    @classmethod
    def for_run(cls, run) -> list:
        """conf/callbacks' ``losses``: to the run's logger, every ``trainer.log_every_n_steps`` (none without one)."""
        return [cls(run.logger, int(run.cfg.trainer.log_every_n_steps), run.wandb)] if run.logger is not None else []

    def on_fit_start(self, trainer, learner):
        self.learner = learner

    def _log(self, metrics: dict, step: int) -> None:
        if self.wandb is not None:
            self.wandb.log(metrics)
        else:
            self.logger.log_metrics(metrics, step=step)

    def on_train_batch_start(self, trainer, learner, batch, batch_idx):
        learner.want_loss_parts = (learner.train_steps + 1) % self.every == 0  # the concat form's parts

    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        step = learner.train_steps
        if step % self.every or learner.last_loss is None:
            return
        parts = getattr(learner, "last_loss_parts", None) or {}
        names = ["train/loss", *(f"train/loss_{k}" for k in parts)]
        values = torch.stack([learner.last_loss, *parts.values()]).float().tolist()  # one device sync
        self._log({STEP_AXIS: step, **dict(zip(names, values))}, step)

    def log_row(self, i: int, accs) -> None:
        """AccuracyMatrix's ``on_row``: row i of R, measured after the task just trained."""
        seen = self.learner.seen_tasks if self.learner is not None else i + 1
        self._log(row_metrics(i, accs, seen), self.learner.train_steps if self.learner is not None else i)
