"""A run's progress over all its tasks (clsuite.run.progress.RunClock): the lines a run prints when stderr is
not a terminal, and the time left that the bar shows on one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from clsuite.run.progress import RunClock, run_progress

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_is_the_rest_of_the_run_at_the_current_tasks_rate():
    t = Clock()
    c = RunClock([10, 10, 20], ["task 1/3", "task 2/3", "task 3/3"], clock=t)
    c.begin(0)
    assert c.left() is None and c.eta() is None and c.line() == "task 1/3: 0% of the run, 0s elapsed"
    for _ in range(5):
        t.now += 2.0
        c.step()
    assert c.left() == 70.0  # 35 batches at task 1's 2 s
    assert c.line() == (
        "task 1/3: 12% of the run, 10s elapsed, at least 70s left (at task 1's rate; later tasks are slower)"
    )
    t.now = 20.0
    for _ in range(5):
        c.step()
    c.end()
    t.now = 25.0  # the evaluation after task 1: not a batch
    assert c.left() == 60.0 and c.line().startswith("task 1/3 done: 25% of the run, 25s elapsed, at least 60s left")
    c.begin(1)
    t.now = 31.0
    for _ in range(2):
        c.step()
    assert c.left() == 84.0  # 28 batches at task 2's 3 s (replay: slower)
    assert c.line() == "task 2/3: 30% of the run, 31s elapsed, about 84s left" and c.eta() == "about 84s"
    c.begin(2)
    c.n = 20
    c.end()
    assert c.line() == "task 3/3 done: 100% of the run, 31s elapsed"


def test_a_long_task_has_a_line_every_tenth_of_the_run_at_most_once_a_minute(capsys):
    """A line when training starts (a long run's first progress line came at its first tenth); besides
    every task's end, a line when the run enters another tenth of its batches and the last line is a
    minute old; a resumed run counts the tasks done before it."""
    t = Clock()
    c = RunClock([100, 100, 100, 100, 100], [f"task {k}/5" for k in range(1, 6)], "cifar, mir, seed 0", clock=t)
    cb = run_progress(c, lines=True)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(task=3))  # resumed after 3 tasks
    cb.on_train_start(trainer, None)
    for _ in range(100):
        t.now += 1.0
        cb.on_train_batch_end(trainer, None)
    cb.on_train_end(trainer, None)
    assert capsys.readouterr().err.splitlines() == [
        "training: 5 tasks, 500 incoming batches (cifar, mir, seed 0); a line per task and per tenth of the run follows",
        "task 4/5: 72% of the run, 60s elapsed, about 2m left",  # 70% at 50 s: the line waits for the minute
        "task 4/5 done: 80% of the run, 2m elapsed, about 2m left",  # (80% at its last batch: the end's line)
    ]
    cb.on_train_start(SimpleNamespace(datamodule=SimpleNamespace(task=4)), None)  # the next task: no first line
    assert capsys.readouterr().err == ""
    quiet = run_progress(c, lines=False)
    quiet.on_train_start(SimpleNamespace(datamodule=SimpleNamespace(task=4)), None)
    quiet.on_train_end(None, None)
    assert capsys.readouterr().err == "" and c.task == 4


def test_a_run_redirected_to_a_file_prints_a_line_per_task_with_the_time_left(tmp_path):
    """`python src/run.py ... > log 2>&1` printed nothing until the summary, then nothing until the first
    tenth of the run; the bar is for terminals."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLSUITE_")}
    args = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.threads=1", "method=er"]
    with open(tmp_path / "log", "w") as log:
        p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=tmp_path, env=env,
                           stdout=log, stderr=subprocess.STDOUT, timeout=600)  # fmt: skip
    lines = (tmp_path / "log").read_text().splitlines()
    assert p.returncode == 0, lines[-20:]
    d = r"\d+(s|m|h\d\dm)"
    assert [re.sub(d, "T", line) for line in lines[:4]] == [
        "training: 3 tasks, 60 incoming batches (synthetic, er, seed 0); a line per task and per tenth of the run "
        "follows",
        "task 1/3 done: 33% of the run, T elapsed, at least T left (at task 1's rate; later tasks are slower)",
        "task 2/3 done: 67% of the run, T elapsed, about T left",
        "task 3/3 done: 100% of the run, T elapsed",
    ]
    assert lines[4].startswith("er on synthetic: M=100 per class")  # the summary follows


def test_the_bar_shows_the_runs_share_and_time_left_in_place_of_the_tasks(tmp_path, monkeypatch):
    import clsuite.run.experiment as ex
    from tests.conftest import run_cfg

    trainers, make = [], ex.make_trainer
    monkeypatch.setattr(ex, "make_trainer", lambda *a, **k: trainers.append(make(*a, **k)) or trainers[-1])
    run_cfg(tmp_path, "benchmark.n_tasks=2", "method=er", "trainer.progress_bar=true")
    bar = trainers[0].progress_bar_callback
    assert "{remaining}" not in bar.BAR_FORMAT
    line = str(bar.train_progress_bar)
    assert re.fullmatch(r"task 2/2: 100%\|█+\| 20/20 \[\d\d:\d\d, .*, run=100%, left=about 0s\]", line), line


def test_a_null_callback_of_the_config_is_not_built(tmp_path, monkeypatch):
    """conf/callbacks/ declares the run's bookkeeping: `callbacks.progress=null` leaves out the bar and the lines."""
    import clsuite.run.experiment as ex
    from tests.conftest import run_cfg

    trainers, make = [], ex.make_trainer
    monkeypatch.setattr(ex, "make_trainer", lambda *a, **k: trainers.append(make(*a, **k)) or trainers[-1])
    res = run_cfg(tmp_path, "benchmark.n_tasks=2", "method=er", "trainer.progress_bar=true", "callbacks.progress=null")
    names = {type(cb).__name__ for cb in trainers[0].callbacks}
    assert trainers[0].progress_bar_callback is None and len(res["R"]) == 2
    assert "RunProgress" not in names and {"TaskCheckpoint", "RunRecord"} <= names


def test_an_archive_being_decoded_says_so_once(tmp_path, capsys):
    """The decode of CIFAR-10's JPEG copy (about half a minute) was a silent start: a line names it, and
    a run that reads the cache prints nothing."""
    from clsuite.core.data import imagefolder
    from tests.core.test_imagefolder import bench, members, read, write_archive

    arc = write_archive(tmp_path / "data" / "tiny", "tar.gz", members())
    imagefolder._MEMO.clear()
    read(bench(arc.name), tmp_path / "data", False, True, tmp_path / "cache")
    folder = tmp_path / "cache" / "image_folder"
    assert capsys.readouterr().err == f"decoding {arc} (once, cached in {folder})\n"
    imagefolder._MEMO.clear()  # a new process: the disk cache
    read(bench(arc.name), tmp_path / "data", False, True, tmp_path / "cache")
    imagefolder._MEMO.clear()
    assert capsys.readouterr().err == ""
