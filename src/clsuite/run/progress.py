"""Feedback while a run or a sweep goes (what the user sees: docs/GUIDE.md, "Progress"): the run's
clock over all its tasks (:class:`RunClock`), read by the task's progress bar on a terminal and by
the progress lines elsewhere (:func:`run_progress`: a line when training starts, then per task and
per tenth of the run), the sweep's progress line, and a job's printed report kept in its ``run.log``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import time
from pathlib import Path

from clsuite.run.io import GRID_FILE, read_log, read_object

DONE = ("ran", "skipped", "reused")
FAILED = ("failed", "interrupted")
RUN_LOG = "run.log"  # Hydra's job log: <job dir>/<job name>.log, the job being src/run.py


LINES_PER_RUN = 10  # a progress line at every tenth of the run's batches ...
LINE_QUIET_S = 60.0  # ... when the last line is at least this old (a task's end always has its line)


class RunClock:
    """Where a run stands among all its batches and how long the rest takes. Every batch left is timed
    at the current task's rate so far (seconds per batch; between two tasks, the last one's). The
    first task of the stream replays nothing, and every later task does the first one's work and more
    (replay, a regulariser's penalty): during it, the time left is a lower bound."""

    def __init__(self, batches: list[int], names: list[str], what: str = "", clock=time.monotonic):
        self.batches, self.names, self.what, self.clock = list(batches), list(names), what, clock
        self.total = max(1, sum(self.batches))
        self.task, self.n = 0, 0  # the task training now (or last trained) and its batches so far
        self.t0 = self.task_t0 = None  # this process's first task's start; the current task's (None: ended)
        self.rate = None  # seconds per batch of the last task that ended

    def begin(self, task: int) -> None:
        self.task, self.n, self.task_t0 = task, 0, self.clock()
        self.t0 = self.task_t0 if self.t0 is None else self.t0

    def step(self) -> None:
        self.n += 1

    def end(self) -> None:
        self.rate, self.task_t0 = self.seconds_per_batch(), None

    def seconds_per_batch(self) -> float | None:
        if self.task_t0 is None or not self.n:
            return self.rate
        return (self.clock() - self.task_t0) / self.n

    @property
    def ended(self) -> bool:
        return self.task_t0 is None

    def done(self) -> int:
        """The run's batches done (an earlier process's tasks included)."""
        return sum(self.batches[: self.task]) + self.n

    def part(self) -> int:
        """Which of the run's :data:`LINES_PER_RUN` parts it is in."""
        return self.done() * LINES_PER_RUN // self.total

    def left(self) -> float | None:
        """Seconds left, None before a first batch has been timed."""
        rate = self.seconds_per_batch()
        return None if rate is None else rate * (self.total - self.done())

    @property
    def lower_bound(self) -> bool:
        return self.task == 0 and len(self.batches) > 1

    def eta(self) -> str | None:
        """The time left, "about 8m" (during the first task "at least 4m"); None while unknown."""
        left = self.left()
        return None if left is None else f"{'at least' if self.lower_bound else 'about'} {_duration(left)}"

    def start_line(self) -> str:
        """The line when training starts: ``training: 5 tasks, 5,000 incoming batches (split_cifar10_jpeg,
        mir, seed 0); a line per task and per tenth of the run follows`` (``what``: in the brackets)."""
        tasks = self.names[0] if len(self.names) == 1 else f"{len(self.names)} tasks"  # (Joint: its one name)
        what = f" ({self.what})" if self.what else ""
        return f"training: {tasks}, {self.total:,} incoming batches{what}; a line per task and per tenth of the run follows"

    def line(self) -> str:
        """The progress line: ``task 2/5 done: 40% of the run, 4m elapsed, about 6m left``."""
        head = f"{self.names[self.task]}{' done' if self.ended else ''}: {self.done() / self.total:.0%} of the run"
        msg = f"{head}, {_duration(0 if self.t0 is None else self.clock() - self.t0)} elapsed"
        if self.done() == self.total or (eta := self.eta()) is None:
            return msg
        return f"{msg}, {eta} left" + (" (at task 1's rate; later tasks are slower)" if self.lower_bound else "")


def for_run(run) -> list:
    """conf/callbacks' ``progress``: the run's clock, moved by the progress lines and, by
    ``trainer.progress_bar`` (auto: the bar when stderr is a terminal, else the lines), the bar."""
    cfg, bar = run.cfg, run.cfg.trainer.progress_bar
    lines = bar == "auto" and not sys.stderr.isatty()
    bar = sys.stderr.isatty() if bar == "auto" else bool(bar)
    what = f"{cfg.benchmark.name}, {cfg.method.name}, seed {cfg.seed}"  # (the progress lines' first)
    clock = RunClock(*batches_and_names(run.dm, run.schedule, run.passes), what)
    return [run_progress(clock, lines), *([task_progress_bar(clock)] if bar else [])]


def batches_and_names(dm, schedule: list, passes: int) -> tuple[list[int], list[str]]:
    """Per task of ``schedule``: its batches (``TensorStream``'s, times the passes) and its name."""
    if schedule == ["joint"]:
        return [-(-sum(len(t.train[1]) for t in dm.tasks) // dm.batch_size) * passes], ["joint (all tasks)"]
    sizes = [len(dm.tasks[k].train[1]) for k in schedule]
    return [-(-n // dm.batch_size) * passes for n in sizes], [f"task {k + 1}/{len(schedule)}" for k in schedule]


def run_progress(clock: RunClock, lines: bool, out=None):
    """The callback that moves ``clock``; with ``lines``, it prints (to stderr) :meth:`RunClock.start_line`
    when this process starts training, then :meth:`RunClock.line` at every task's end and at every part
    of the run (:data:`LINES_PER_RUN`) when the last line is :data:`LINE_QUIET_S` old (a long task)."""
    from lightning.pytorch.callbacks import Callback

    class RunProgress(Callback):
        mark, printed = 0, None  # the part of the run of the last line, and its time

        def say(self, line: str) -> None:
            print(line, file=out or sys.stderr, flush=True)
            self.mark, self.printed = clock.part(), clock.clock()

        def on_train_start(self, trainer, learner):
            task = trainer.datamodule.task
            clock.begin(0 if task == "joint" else int(task))
            if lines and self.printed is None:  # this process's first task
                self.say(clock.start_line())
            self.mark, self.printed = clock.part(), self.printed or clock.clock()

        def on_train_batch_end(self, trainer, learner, *_):
            clock.step()
            inside = clock.n < clock.batches[clock.task]  # (a task's last batch: its end's line follows)
            if lines and inside and clock.part() > self.mark and clock.clock() - self.printed >= LINE_QUIET_S:
                self.say(clock.line())

        def on_train_end(self, trainer, learner):
            clock.end()
            if lines:
                self.say(clock.line())

    return RunProgress()


def task_progress_bar(clock: RunClock, refresh_rate: int = 20):
    """A ``TQDMProgressBar`` that names the task ("task 2/5") and shows the loss, the run's share done
    and its time left (:meth:`RunClock.eta`), in place of the task's own."""
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf

    class TaskProgressBar(TQDMProgressBar):
        BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_noinv_fmt}{postfix}]"

        @property
        def train_description(self) -> str:
            return clock.names[clock.task]

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
            items["run"] = f"{clock.done() / clock.total:.0%}"
            items["left"] = clock.eta() or "?"
            return items

    return TaskProgressBar(refresh_rate=refresh_rate)


def _duration(s: float) -> str:
    s = max(0, round(s))
    if s < 90:
        return f"{s}s"
    if s < 5400:
        return f"{round(s / 60)}m"
    return f"{s // 3600}h{round(s % 3600 / 60):02d}m"


def sweep_progress(sweep_dir, sweep_id: str | None, now: float | None = None) -> str | None:
    """The line "k/N done, F failed, about T left" of sweep invocation ``sweep_id``, or None outside one: N
    from ``grid.json``, k and F from ``sweep_log.jsonl`` (so parallel workers count right), T = the
    jobs left x the wall time so far per job that trained or failed (a skipped or reused job takes none:
    counted, a restarted sweep's skips made the time left look a fraction of what it is)."""
    sweep_dir = Path(sweep_dir)
    grid = read_object(sweep_dir / GRID_FILE)
    if not sweep_id or grid is None or grid.get("sweep_id") != sweep_id:
        return None
    done = failed = ran = 0
    for rec in read_log(sweep_dir, sweep_id):
        done += rec.get("status") in DONE
        failed += rec.get("status") in FAILED
        ran += rec.get("status") == "ran"
    n = int(grid.get("n_jobs", 0))
    msg = f"sweep {grid.get('experiment')}: {done}/{n} done, {failed} failed"
    left = n - done - failed
    try:
        t0 = dt.datetime.fromisoformat(grid["created"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return msg
    timed = ran + failed
    if left > 0 and timed:
        elapsed = (now if now is not None else dt.datetime.now().timestamp()) - t0
        msg += f", about {_duration(elapsed / timed * left)} left"
    return msg


def keep_report(out_dir, text: str) -> None:
    """Append a job's printed report to ``<out_dir>/run.log``."""
    with contextlib.suppress(OSError), open(Path(out_dir) / RUN_LOG, "a") as f:
        f.write(text.rstrip("\n") + "\n")
