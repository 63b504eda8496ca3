"""One run around the core's training (``clsuite.core.train``): the process prepared (numerics, threads:
a call, not a callback, ``clsuite.run.record``), the Trainer, the logger and the bookkeeping callbacks from
conf/, resume from a checkpoint of the run's identity (docs/GUIDE.md, "Checkpoints"), and the run's printed
summary. conf/trainer/ also holds the suite's own trainer keys (:data:`SUITE_KEYS`): docs/GUIDE.md, "Trainer".
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from pathlib import Path

import lightning as L
import numpy as np
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from omegaconf import DictConfig, OmegaConf

from clsuite.config.check import ConfigError
from clsuite.config.home import CONF_DIR
from clsuite.config.numerics import summary as numerics_summary
from clsuite.core.callbacks import AccuracyMatrix, DivergenceGuard, MemoryUpdate, TaskStart
from clsuite.core.metrics import FWT_CLASS_IL, METRICS, TASK_IL
from clsuite.core.train import build, schedule_of, train_tasks
from clsuite.run.checkpoint import AtomicCheckpointIO, CheckpointStore, structure_problem
from clsuite.run.checkpoint import run_store_dir as default_store
from clsuite.run.identity import identity
from clsuite.run.loggers import RunLogger, make_logger
from clsuite.run.record import Run, callbacks_of, prepare

for _name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
    logging.getLogger(_name).setLevel(logging.WARNING)  # no per-fit "GPU available" chatter
warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # lightning's own deprecation, not ours
warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
warnings.filterwarnings("ignore", message=".*does not have many workers.*")  # tensors on device: no workers needed


# conf/trainer/'s keys that are the suite's, not the Trainer's: the kernels and threads (clsuite.run.record.prepare),
# the progress display (clsuite.run.progress) and the GPU index (clsuite.core.train.pick_device)
SUITE_KEYS = ("device_index", "numerics", "progress_bar", "threads")


def trainer_node(cfg) -> DictConfig:
    """conf/trainer/ less :data:`SUITE_KEYS`; a recorded config made before the node named the Trainer
    (no ``_target_``) gets today's conf/trainer/default.yaml under its own keys."""
    node = OmegaConf.merge(OmegaConf.load(CONF_DIR / "trainer" / "default.yaml"), cfg.trainer)
    return OmegaConf.masked_copy(node, [k for k in node if k not in SUITE_KEYS])


def make_trainer(cfg, device, callbacks, logger) -> L.Trainer:
    """conf/trainer/'s Trainer (:func:`trainer_node`) on ``device``, with the run's own arguments; its progress
    bar is the one among ``callbacks``, if any (``clsuite.run.progress``)."""
    return instantiate(trainer_node(cfg), _partial_=True)(  # the run's arguments as they are, not as config
        accelerator="cpu" if device.type == "cpu" else "gpu",
        devices=[device.index or 0] if device.type == "cuda" else 1,
        logger=logger if logger is not None else False,
        callbacks=callbacks,
        enable_checkpointing=any(isinstance(cb, ModelCheckpoint) for cb in callbacks),  # (else Lightning adds one)
        plugins=[AtomicCheckpointIO(map_location=device)],
        enable_progress_bar=any(isinstance(cb, ProgressBar) for cb in callbacks),
    )


def run_experiment(cfg: DictConfig, out_dir: str | Path, checkpoint_dir: str | Path | None = None, source=None) -> dict:
    """Train on the stream, fill R, write ``results.json`` into ``out_dir``; the results dict.

    The process is prepared first (``clsuite.run.record.prepare``: kernels, threads), so the launcher cannot
    move the numbers; a non-finite loss raises ``Diverged`` (no results file). The logger (conf/logger/)
    and the bookkeeping callbacks (conf/callbacks/: ``clsuite.run.record``) come from the config. A valid
    checkpoint of the run's identity in ``checkpoint_dir`` (default:
    ``clsuite.run.checkpoint.run_store_dir``) is resumed from. ``source``: the benchmark's bound source
    where the caller looked it up already (:func:`build`).
    """
    t0, cpu0 = time.perf_counter(), time.process_time()
    prepare(cfg)
    dm, learner, device = build(cfg, source)
    empty = [k for k, task in enumerate(dm.tasks) if len(task.train[1]) == 0]
    if empty:
        raise ConfigError(
            f"task {empty[0] + 1} of {dm.n_tasks} has no training samples (data.val_fraction="
            f"{cfg.data.val_fraction}, benchmark.train_per_class={cfg.benchmark.train_per_class}); lower data.val_fraction"
        )
    ident = identity(cfg, device.type, dm.source)
    with make_logger(cfg, out_dir, ident["key"]) as (logger, wandb):  # (W&B: its run's id is of the identity)
        store = CheckpointStore(checkpoint_dir or default_store(cfg, ident["key"]), ident["key"])
        schedule, passes = schedule_of(cfg, dm)
        run = Run(cfg, out_dir, t0, dm, learner, device, ident, store, schedule, passes, logger, cpu0, wandb)
        book = callbacks_of(run)
        rows = [cb.log_row for cb in book if isinstance(cb, RunLogger)]
        acc_cb = AccuracyMatrix(
            dm, split=cfg.eval_split, on_row=rows[0] if rows else None, eval_bn=cfg.get("eval_bn") or "running"
        )
        guard = DivergenceGuard(check_every=int(cfg.trainer.log_every_n_steps))
        callbacks = [TaskStart(), guard, MemoryUpdate(), acc_cb, *book]  # (TaskStart first: after a restore)
        trainer, start, ckpt_path = make_trainer(cfg, device, callbacks, logger), 0, None
        if found := store.latest(map_location=device, fits=lambda ckpt: structure_problem(ckpt, learner)):
            ckpt_path, start = found[0], int(found[1]["next_task"])  # the first fit restores it (train_tasks)
            run.start = start
            done = "task 1" if start == 1 else f"tasks 1-{start}"
            print(f"resuming at task {start + 1} of {len(schedule)} ({done} done) from {found[0]}", file=sys.stderr)
        try:
            train_tasks(trainer, learner, dm, schedule, passes, guard, start, ckpt_path)
        except BaseException as e:  # a stop or a failure: what a rerun does (clsuite.cli prints it on a stop)
            e.add_note(rerun_note(store, len(schedule)))
            raise
    return run.results


def rerun_note(store: CheckpointStore, n_tasks: int) -> str:
    """Where a rerun of a stopped run starts: at the task after its newest checkpoint, else at task 1."""
    with contextlib.suppress(OSError):
        if files := store.files():
            done = int(files[0].stem.rsplit("-", 1)[1])
            return f"a rerun resumes at task {done + 1} of {n_tasks} from {files[0]}"
    return "a rerun starts again at task 1 (no checkpoint yet)"


def memory_phrase(results: dict) -> str:
    """``M=100 per class (1,000 slots)``, ``M=100 in total (100 slots)``, or ``no memory`` (Online, Joint, oEWC, SI)."""
    slots = int(results.get("memory_capacity") or 0)
    unit = "per class" if (results.get("config") or {}).get("memory_per_class") else "in total"
    return f"M={results['memory']} {unit} ({slots:,} slots)" if slots else "no memory"


def format_report(results: dict) -> str:
    R = np.asarray(results["R"])
    found = ((results.get("identity") or {}).get("env") or {}).get("numerics")
    lines = [
        f"{results['method']} on {results['benchmark']}: {memory_phrase(results)}, seed={results['seed']}, "
        f"reading={results.get('reading') or 'unlabelled'}",
        *([f"numerics: {numerics_summary(found, results.get('device', 'cpu'))}"] if found else []),
        "accuracy matrix R[i, j] (%, row i = after task i, column j = task j):",
    ]
    lines += ["  " + " ".join(f"{v:6.1f}" for v in row) for row in R]
    lines.append("b (random init): " + " ".join(f"{v:6.1f}" for v in results["b"]))
    m = results["metrics"]
    lines.append(" ".join(f"{metric.label}={m[key]:.2f}" for key, metric in METRICS.items()))
    if R.ndim == 2 and R.shape[0] == R.shape[1] > 1 and not np.diagonal(R, 1).any():  # R[j-1, j] = 0: class-IL
        lines.append(f"FWT: {FWT_CLASS_IL}")
    if "R_task_il" in results:  # (results files made before it lack it)
        final = " ".join(f"{v:6.1f}" for v in results["R_task_il"][-1])
        task_il = " ".join(f"{METRICS[k].label}={m[k + TASK_IL]:.2f}" for k in ("acc", "forget", "bwt"))
        lines.append(f"task-IL (the logits masked to the evaluated task's classes), after the last task: {final}")
        lines.append(f"task-IL: {task_il}")
    lines.append(f"wall time {results['wall_time_s']:.1f}s" + _peaks(results))
    return "\n".join(lines)


def _peaks(results: dict) -> str:
    """``, peak RAM 812 MB`` (and the GPU's); nothing for results files made before they were recorded."""
    names = {"peak_ram_mb": "peak RAM", "peak_gpu_mb": "peak GPU memory"}
    return "".join(f", {name} {results[k]:.0f} MB" for k, name in names.items() if results.get(k) is not None)
