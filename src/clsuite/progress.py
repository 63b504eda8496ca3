"""Feedback while a run or a sweep goes (what the user sees: docs/WANDB.md, last paragraph): the
task's progress bar (one pass over a task is one Lightning epoch), the sweep's progress line, and a
job's printed report kept in its ``run.log``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from pathlib import Path

from clsuite.io import GRID_FILE, read_log, read_object

DONE = ("ran", "skipped", "reused")
FAILED = ("failed", "interrupted")
RUN_LOG = "run.log"  # Hydra's job log: <job dir>/<job name>.log, the job being src/run.py


def task_progress_bar(refresh_rate: int = 20):
    """A ``TQDMProgressBar`` that names the task ("task 2/5") and shows the loss."""
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf

    class TaskProgressBar(TQDMProgressBar):
        @property
        def train_description(self) -> str:
            learner, dm = self.trainer.lightning_module, self.trainer.datamodule
            if getattr(dm, "task", None) == "joint":
                return "joint (all tasks)"
            return f"task {learner.current_task + 1}/{dm.n_tasks}"

        def on_train_epoch_start(self, trainer, *_):  # Lightning's, labelled by the task, not "Epoch k"
            if self._leave:
                self.train_progress_bar = self.init_train_tqdm()
            bar = self.train_progress_bar
            bar.set_description(self.train_description, refresh=False)
            bar.reset(total=convert_inf(self.total_train_batches))
            bar.initial = 0

        def get_metrics(self, trainer, learner):
            items = super().get_metrics(trainer, learner)
            items.pop("v_num", None)
            if learner.last_loss is not None:  # one device sync per refresh
                items["loss"] = f"{learner.last_loss.item():.3f}"
            return items

    return TaskProgressBar(refresh_rate=refresh_rate)


def _duration(s: float) -> str:
    s = max(0, round(s))
    if s < 90:
        return f"{s}s"
    if s < 5400:
        return f"{round(s / 60)}m"
    return f"{s // 3600}h{round(s % 3600 / 60):02d}m"


def sweep_progress(sweep_dir, sweep_id: str | None = None, now: float | None = None) -> str | None:
    """The line "k/N done, F failed, about T left" of this sweep invocation, or None outside a sweep: N
    from ``grid.json``, k and F from ``sweep_log.jsonl`` (so parallel workers count right), T = the
    jobs left x the wall time so far per finished job."""
    sweep_dir = Path(sweep_dir)
    sweep_id = sweep_id if sweep_id is not None else os.environ.get("CLSUITE_SWEEP_ID")
    grid = read_object(sweep_dir / GRID_FILE)
    if not sweep_id or grid is None or grid.get("sweep_id") != sweep_id:
        return None
    done = failed = 0
    for rec in read_log(sweep_dir, sweep_id):
        done += rec.get("status") in DONE
        failed += rec.get("status") in FAILED
    n = int(grid.get("n_jobs", 0))
    msg = f"sweep {grid.get('experiment')}: {done}/{n} done, {failed} failed"
    left = n - done - failed
    try:
        t0 = dt.datetime.fromisoformat(grid["created"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return msg
    finished = done + failed
    if left > 0 and finished:
        elapsed = (now if now is not None else dt.datetime.now().timestamp()) - t0
        msg += f", about {_duration(elapsed / finished * left)} left"
    return msg


def keep_report(out_dir, text: str) -> None:
    """Append a job's printed report to ``<out_dir>/run.log``."""
    with contextlib.suppress(OSError), open(Path(out_dir) / RUN_LOG, "a") as f:
        f.write(text.rstrip("\n") + "\n")
