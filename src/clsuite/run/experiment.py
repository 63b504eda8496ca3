"""One run's bookkeeping around the core's training (``clsuite.core.train``): numerics, threads and
identity first, the Trainer with its callbacks and loggers, resume from a checkpoint of the run's
identity and task-end checkpoints (docs/GUIDE.md, "Checkpoints"), then the sealed results file."""

from __future__ import annotations

import contextlib
import logging
import platform
import sys
import time
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from clsuite.config.check import ConfigError
from clsuite.config.numerics import apply as apply_numerics
from clsuite.config.numerics import check as check_numerics
from clsuite.config.numerics import summary as numerics_summary
from clsuite.core.callbacks import AccuracyMatrix, DivergenceGuard, MemoryUpdate, TaskStart
from clsuite.core.metrics import FWT_CLASS_IL, METRICS, TASK_IL, all_metrics, task_il_metrics
from clsuite.core.train import build, pick_device, schedule_of, train_tasks
from clsuite.run.checkpoint import (
    WEIGHTS_FILE,
    AtomicCheckpointIO,
    Cadence,
    CheckpointStore,
    TaskCheckpoint,
    structure_problem,
)
from clsuite.run.checkpoint import run_store_dir as default_store
from clsuite.run.identity import check_unchanged, identity, pin_threads, seal, threads_of
from clsuite.run.io import RESULTS_FILE, os_error_line, write_json_atomic
from clsuite.run.loggers import RunLogger
from clsuite.run.progress import RunClock, run_progress, task_progress_bar
from clsuite.run.runtime import collect_and_freeze, keep_freed_memory, peak_memory_mb, reset_peak_memory

for _name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
    logging.getLogger(_name).setLevel(logging.WARNING)  # no per-fit "GPU available" chatter
warnings.filterwarnings("ignore", message=".*LeafSpec.*")  # lightning's own deprecation, not ours
warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
warnings.filterwarnings("ignore", message=".*does not have many workers.*")  # tensors on device: no workers needed


def make_trainer(cfg, device, callbacks, logger, clock: RunClock | None = None) -> L.Trainer:
    """The suite's Trainer; with ``clock``, the run's progress (``trainer.progress_bar``: auto = the bar
    when stderr is a terminal, else the progress lines; ``clsuite.run.progress``)."""
    bar = cfg.trainer.progress_bar
    lines = bar == "auto" and not sys.stderr.isatty() and clock is not None
    bar = (sys.stderr.isatty() if bar == "auto" else bool(bar)) and clock is not None
    if clock is not None:
        callbacks = [*callbacks, run_progress(clock, lines), *([task_progress_bar(clock)] if bar else [])]
    return L.Trainer(
        accelerator="cpu" if device.type == "cpu" else "gpu",
        devices=[device.index or 0] if device.type == "cuda" else 1,
        max_epochs=0,
        logger=logger if logger is not None else False,
        callbacks=callbacks,
        enable_checkpointing=False,  # no ModelCheckpoint: task-end checkpoints are clsuite.run.checkpoint's
        plugins=[AtomicCheckpointIO(map_location=device)],
        enable_model_summary=False,
        enable_progress_bar=bar,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        log_every_n_steps=int(cfg.trainer.log_every_n_steps),
        deterministic=cfg.trainer.deterministic,
        precision=cfg.trainer.precision,
    )


def run_experiment(
    cfg: DictConfig, out_dir: str | Path, logger=None, checkpoint_dir: str | Path | None = None, source=None
) -> dict:
    """Train on the stream, fill R, write ``results.json`` into ``out_dir``.

    Threads (torch and BLAS) are pinned first, so the launcher cannot move the numbers; a
    non-finite loss raises ``Diverged`` (no results file). The results record the run's
    identity (``clsuite.run.identity``) and are sealed against hand edits. A valid checkpoint of the
    same identity in ``checkpoint_dir`` (default: ``clsuite.run.checkpoint.run_store_dir``) is
    resumed from; checkpoints are written there at task ends (``checkpoint``) and deleted once
    the results file is written (``clsuite.run.checkpoint``). Side files (checkpoints, ``model.ckpt``)
    that cannot be written or deleted are a warning: they never cost the results. ``source``: the
    benchmark's bound source where the caller looked it up already (:func:`build`).
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    apply_numerics(cfg.trainer.numerics)  # before the process's first torch computation (clsuite.config.numerics)
    check_numerics(cfg.trainer.numerics)
    pin_threads(threads_of(cfg))
    keep_freed_memory()  # large per-step CPU tensors reuse freed memory (clsuite.run.runtime)
    collect_and_freeze()  # later garbage-collector passes skip what is alive now (clsuite.run.runtime)
    reset_peak_memory(pick_device(cfg.trainer))  # the run's own peaks, data included (clsuite.run.runtime)
    dm, learner, device = build(cfg, source)
    empty = [k for k, task in enumerate(dm.tasks) if len(task.train[1]) == 0]
    if empty:
        raise ConfigError(
            f"task {empty[0] + 1} of {dm.n_tasks} has no training samples (data.val_fraction={cfg.data.val_fraction}, "
            f"benchmark.train_per_class={cfg.benchmark.train_per_class}); lower data.val_fraction"
        )
    ident = identity(cfg, device.type, dm.source)
    saver = TaskCheckpoint(ident["key"], t0)
    run_log = RunLogger(logger, every=int(cfg.trainer.log_every_n_steps)) if logger is not None else None
    acc_cb = AccuracyMatrix(dm, split=cfg.eval_split, on_row=run_log.log_row if run_log else None)
    guard = DivergenceGuard(check_every=int(cfg.trainer.log_every_n_steps))
    callbacks = [TaskStart(), guard, MemoryUpdate(), acc_cb, *([run_log] if run_log else []), saver]
    schedule, passes = schedule_of(cfg, dm)
    what = f"{cfg.benchmark.name}, {cfg.method.name}, seed {cfg.seed}"  # (the progress lines' first)
    trainer = make_trainer(cfg, device, callbacks, logger, RunClock(*_batches_and_names(dm, schedule, passes), what))
    store = CheckpointStore(checkpoint_dir or default_store(cfg, ident["key"]), ident["key"])
    cadence, start, ckpt_path = Cadence(cfg, len(schedule)), 0, None
    if found := store.latest(map_location=device, fits=lambda ckpt: structure_problem(ckpt, learner)):
        ckpt_path, start = found[0], int(found[1]["next_task"])  # the first fit restores it (train_tasks)
        done = "task 1" if start == 1 else f"tasks 1-{start}"
        print(f"resuming at task {start + 1} of {len(schedule)} ({done} done) from {found[0]}", file=sys.stderr)

    def task_done(done: int) -> None:  # after each task: the run's clock, and a checkpoint when due
        saver.next_task = done
        if cadence.due(done) and store.save(trainer, done):  # (a failed write: a warning, once)
            cadence.saved()

    try:
        train_tasks(trainer, learner, dm, schedule, passes, guard, start, task_done, ckpt_path)
    except BaseException as e:  # a stop or a failure: what a rerun does (clsuite.cli prints it on a stop)
        e.add_note(rerun_note(store, len(schedule)))
        raise
    if cfg.get("keep_weights"):  # the final model (and memory), beside the results (written last)
        try:
            trainer.save_checkpoint(out_dir / WEIGHTS_FILE)
        except OSError as e:  # a side file: it never costs the results
            print(f"warning: cannot write {WEIGHTS_FILE} ({os_error_line(e)}); the results follow", file=sys.stderr)
    R, b = acc_cb.R, np.asarray(acc_cb.b)
    results = {
        "status": "finished",
        "benchmark": cfg.benchmark.name,
        "method": cfg.method.name,
        "reading": cfg.get("reading"),
        "memory": int(cfg.memory),
        "memory_capacity": learner.memory.capacity,
        "seed": int(cfg.seed),
        "eval_split": cfg.eval_split,
        "R": R.tolist(),
        "R_task_il": acc_cb.R_task_il.tolist(),  # the same scores, masked to the evaluated task's classes
        "b": b.tolist(),
        "metrics": {**all_metrics(R, b), **task_il_metrics(acc_cb.R_task_il)},
        "per_class": acc_cb.per_class,
        "steps_per_task": acc_cb.steps_per_task,
        "wall_time_s": saver.wall_time_s,  # over every process of the run (resumed ones too)
        "resumed_at_task": start + 1 if start else None,  # the first task of 1..T this process trained
        "train_time_s": acc_cb.train_time_s,
        **peak_memory_mb(device),  # of this process (a resumed run: the last one's)
        "device": str(device),
        "identity": ident,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "versions": versions(),
    }
    check_unchanged(ident)  # outside code edited while the run ran: no results (clsuite.run.identity)
    write_json_atomic(out_dir / RESULTS_FILE, seal(results))
    store.clear()  # the run is finished: its checkpoints are no longer needed (an OS error: a warning)
    return results


def _batches_and_names(dm, schedule: list, passes: int) -> tuple[list[int], list[str]]:
    """Per task of ``schedule``: its batches (``TensorStream``'s, times the passes) and its name."""
    if schedule == ["joint"]:
        return [-(-sum(len(t.train[1]) for t in dm.tasks) // dm.batch_size) * passes], ["joint (all tasks)"]
    sizes = [len(dm.tasks[k].train[1]) for k in schedule]
    return [-(-n // dm.batch_size) * passes for n in sizes], [f"task {k + 1}/{len(schedule)}" for k in schedule]


def rerun_note(store: CheckpointStore, n_tasks: int) -> str:
    """Where a rerun of a stopped run starts: at the task after its newest checkpoint, else at task 1."""
    with contextlib.suppress(OSError):
        if files := store.files():
            done = int(files[0].stem.rsplit("-", 1)[1])
            return f"a rerun resumes at task {done + 1} of {n_tasks} from {files[0]}"
    return "a rerun starts again at task 1 (no checkpoint yet)"


def versions() -> dict:
    import hydra
    import lightning

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "hydra": hydra.__version__,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu": cpu_model(),  # read by the report (clsuite.analysis): the machine comes from the results files
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


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
