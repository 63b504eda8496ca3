"""One run's bookkeeping: the Lightning callbacks that conf/callbacks/ declares, each built with the run
(:class:`Run`), and the run's record, the sealed results file (docs/GUIDE.md, "Identity"; docs/INTEGRITY.md).
The numerics and threads set-up (:func:`prepare`) is a call before the core builds anything, not a
callback: torch reads its variables at the process's first computation, and building the network computes.
"""

from __future__ import annotations

import contextlib
import platform
import sys
from pathlib import Path

import lightning as L
import numpy as np
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from clsuite.config.home import CONF_DIR
from clsuite.config.numerics import apply as apply_numerics
from clsuite.config.numerics import check as check_numerics
from clsuite.core.callbacks import AccuracyMatrix
from clsuite.core.errors import ConfigError
from clsuite.core.metrics import all_metrics, task_il_metrics
from clsuite.core.train import pick_device
from clsuite.run.checkpoint import WEIGHTS_FILE, TaskCheckpoint
from clsuite.run.identity import check_unchanged, pin_threads, seal, threads_of
from clsuite.run.io import RESULTS_FILE, os_error_line, write_json_atomic
from clsuite.run.runtime import collect_and_freeze, keep_freed_memory, peak_memory_mb, reset_peak_memory


def prepare(cfg) -> None:
    """Before the process's first torch computation: the kernels (clsuite.config.numerics), the threads,
    the allocator and the garbage collector, and the run's own memory peaks (clsuite.run.runtime)."""
    apply_numerics(cfg.trainer.numerics)
    check_numerics(cfg.trainer.numerics)
    pin_threads(threads_of(cfg))
    keep_freed_memory()  # large per-step CPU tensors reuse freed memory
    collect_and_freeze()  # later garbage-collector passes skip what is alive now
    reset_peak_memory(pick_device(cfg.trainer))  # the run's own peaks, data included


class Run:
    """What the bookkeeping callbacks share (not a dataclass: ``instantiate`` would read one as config)."""

    def __init__(
        self, cfg, out_dir, t0, dm, learner, device, ident, store, schedule, passes, logger, cpu0=None, wandb=None
    ):
        self.cfg, self.out_dir, self.t0, self.cpu0, self.wandb = cfg, Path(out_dir), t0, cpu0, wandb
        self.dm, self.learner, self.device, self.ident = dm, learner, device, ident
        self.store, self.schedule, self.passes, self.logger = store, schedule, passes, logger
        self.start = 0  # the first task this process trains (a resumed run: the one after its checkpoint)
        self.results: dict | None = None  # RunRecord's, once written

    def last_fit(self, trainer) -> bool:
        return trainer.fit_loop.max_epochs == len(self.schedule) * self.passes


def callbacks_of(run: Run) -> list[L.Callback]:
    """conf/callbacks' nodes, in order, each of the suite's instantiated with ``run`` (a node may give a list),
    a stock Lightning one with its own arguments only;
    a config without the group (a results file's, written before it) gets conf/callbacks/default.yaml."""
    nodes = run.cfg.get("callbacks") or OmegaConf.load(CONF_DIR / "callbacks" / "default.yaml")
    out = []
    for name, node in nodes.items():
        suites = node is not None and str(node.get("_target_", "")).startswith("clsuite.")
        try:
            made = (instantiate(node, run=run) if suites else instantiate(node)) if node is not None else []
        except InstantiationException as e:  # a bad argument (save_top_k=-2): one error line, before training
            raise ConfigError(f"callbacks.{name}: {e.__cause__ or e}") from e
        out += made if isinstance(made, list) else [made]
    return out


class RunRecord(L.Callback):
    """At the end of the run's last task: the final weights (``keep_weights``), the results dict, the
    check that outside code did not change, the sealed ``results.json`` (written atomically), and the
    run's checkpoints deleted."""

    def __init__(self, run: Run):
        self.run = run

    def on_fit_end(self, trainer, learner):
        run = self.run
        if not run.last_fit(trainer):
            return
        if run.cfg.get("keep_weights"):
            try:
                trainer.save_checkpoint(run.out_dir / WEIGHTS_FILE)
            except OSError as e:  # a side file: it never costs the results
                print(f"warning: cannot write {WEIGHTS_FILE} ({os_error_line(e)}); the results follow", file=sys.stderr)
        results = self.results(trainer)
        check_unchanged(run.ident)  # outside code edited while the run ran: no results (clsuite.run.identity)
        write_json_atomic(run.out_dir / RESULTS_FILE, seal(results))
        run.store.clear()  # the run is finished: its checkpoints are no longer needed (an OS error: a warning)
        run.results = results

    def results(self, trainer) -> dict:
        run, cfg = self.run, self.run.cfg
        acc = next(cb for cb in trainer.callbacks if isinstance(cb, AccuracyMatrix))
        saver = next(cb for cb in trainer.callbacks if isinstance(cb, TaskCheckpoint))
        R, b = acc.R, np.asarray(acc.b)
        return {
            "status": "finished",
            "benchmark": cfg.benchmark.name,
            "method": cfg.method.name,
            "reading": cfg.get("reading"),
            "memory": int(cfg.memory),
            "memory_capacity": run.learner.memory.capacity,
            "seed": int(cfg.seed),
            "eval_split": cfg.eval_split,
            "R": R.tolist(),
            "R_task_il": acc.R_task_il.tolist(),  # the same scores, masked to the evaluated task's classes
            "b": b.tolist(),
            "metrics": {**all_metrics(R, b), **task_il_metrics(acc.R_task_il)},
            "per_class": acc.per_class,
            "steps_per_task": acc.steps_per_task,
            "wall_time_s": saver.wall_time_s,  # over every process of the run (resumed ones too)
            "cpu_time_s": saver.cpu_time_s,  # the same, CPU seconds of the run's process (all its threads)
            "resumed_at_task": run.start + 1 if run.start else None,  # the first task of 1..T this process trained
            "train_time_s": acc.train_time_s,
            **peak_memory_mb(run.device),  # of this process (a resumed run: the last one's)
            "device": str(run.device),
            "identity": run.ident,
            "config": OmegaConf.to_container(cfg, resolve=True),
            "versions": versions(),
        }


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
