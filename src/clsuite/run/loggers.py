"""Loggers: CSV (default), W&B (offline unless asked), TensorBoard or none, and what a run logs to them
(docs/GUIDE.md, "What a run logs"); a logger failure never costs a result (docs/INTEGRITY.md, section 6).
"""

from __future__ import annotations

import contextlib
import sys

import lightning as L
import torch
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from omegaconf import OmegaConf

from clsuite.config.check import wandb_settings
from clsuite.run.wandb_run import STEP_AXIS, finishing, init_run, log_results, row_metrics, sealed

KINDS = ("csv", "wandb", "tensorboard", "none")


class LoggerUnavailable(RuntimeError):
    """``logger.required=true`` and the logger cannot start: the run must not train."""


def _warn(what: str, exc: BaseException) -> None:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(f"warning: W&B {what} failed ({type(exc).__name__}: {msg}); the run goes on, its results file is "
          "written (logger.required=true makes this an error)", file=sys.stderr)  # fmt: skip


class SafeWandbLogger(WandbLogger):
    """Lightning's W&B logger whose writes cannot end the run: the first failure is a warning and
    turns W&B logging off (``ok`` False) for the rest of the run."""

    ok = True

    def _guard(self, what: str, fn, *args, **kwargs):
        if not self.ok:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            self.ok = False
            _warn(what, e)
            return None

    def log_metrics(self, metrics, step=None):
        self._guard("write", super().log_metrics, metrics, step)

    def log_hyperparams(self, params, *args, **kwargs):
        self._guard("write", super().log_hyperparams, params, *args, **kwargs)

    def save(self):
        self._guard("write", super().save)

    def finalize(self, status):
        self._guard("write", super().finalize, status)


class RunTensorBoardLogger(TensorBoardLogger):
    """Lightning's TensorBoard logger, one events file for the whole run: Lightning finalizes its
    logger at the end of every fit (one per task), which here only flushes; :meth:`close` at the
    run's end closes (a closed writer would reopen a file of the same name within the second)."""

    def finalize(self, status: str) -> None:
        if self._experiment is not None:
            self.experiment.flush()

    def close(self) -> None:
        super().finalize("success")


def _overrides() -> list[str]:
    """The Hydra overrides of this job (they name the run), or none outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):
        return []


@contextlib.contextmanager
def make_logger(cfg, out_dir):
    """The Lightning logger of a run (None for ``logger=none``), closed after the run."""
    kind = cfg.logger.name
    if kind not in KINDS:
        raise ValueError(f"unknown logger {kind!r}; valid: {', '.join(KINDS)}")
    if kind == "none":
        yield None
        return
    if kind == "tensorboard":
        logger = RunTensorBoardLogger(out_dir, name="tensorboard", version="", default_hp_metric=False)
        try:
            yield logger
        finally:
            logger.close()
        return
    run = None
    if kind == "wandb":
        config = OmegaConf.to_container(cfg, resolve=True)
        try:
            run = init_run(config, out_dir, source="ran", overrides=_overrides(), lc=config["logger"])
        except Exception as e:
            if config["logger"].get("required"):
                line = str(e).strip().splitlines()[0] if str(e).strip() else ""
                raise LoggerUnavailable(f"W&B is required (logger.required=true) but cannot start: "
                                        f"{type(e).__name__}: {line}; nothing trained") from None  # fmt: skip
            _warn("start", e)
    if run is None:  # csv, or W&B that could not start
        from lightning.pytorch.loggers import CSVLogger

        yield CSVLogger(out_dir, name="csv", version="")
        return
    logger = SafeWandbLogger(experiment=run)  # a given run: Lightning adds no trainer/global_step axis
    exit_code = 1
    try:
        yield logger
        exit_code = 0
    finally:
        try:
            _finish(logger, out_dir, exit_code, wandb_settings(config["logger"])["mode"])
        except Exception as e:
            _warn("finish", e)


def _finish(logger: SafeWandbLogger, out_dir, exit_code: int, mode: str) -> None:
    """The run's end: the results file's facts (a finished run), finish, and, when every write went
    through, the folder's mirror record (an incomplete W&B run is left to scripts/wandb_sync.py)."""
    res, sha = sealed(out_dir) if exit_code == 0 and logger.ok else (None, None)
    with finishing(logger.experiment, out_dir, sha, mode, exit_code) as run:
        if res is not None:
            log_results(run, res)


class RunLogger(L.Callback):
    """Training loss every ``every`` incoming batches; per-task accuracies after each task."""

    def __init__(self, logger, every: int = 50):
        self.logger, self.every = logger, max(1, int(every))
        self.wandb = logger if isinstance(logger, SafeWandbLogger) else None  # log on our own axes
        self.learner = None

    def on_fit_start(self, trainer, learner):
        self.learner = learner

    def _log(self, metrics: dict, step: int) -> None:
        if self.wandb is not None:
            self.wandb._guard("write", self.wandb.experiment.log, metrics)
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
