"""The command line: ``clsuite [overrides]`` = ``python src/run.py [overrides]`` (docs/GUIDE.md, "Commands").

:func:`precheck` checks the overrides before ``hydra.main`` composes once (a refused run leaves no
folder), :func:`run_single` trains one run, :func:`run_job` one sweep job (docs/DEVELOPING.md, "The
path of one run"; exit statuses: docs/GUIDE.md, "Bad input and exit statuses").
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from clsuite.config.check import CONF_DIR, ConfigError, validate
from clsuite.core.data.files import DataError
from clsuite.core.errors import fail
from clsuite.run.io import RESULTS_FILE, os_error_line
from clsuite.run.progress import keep_report
from clsuite.sweep.callback import STARTED
from clsuite.sweep.gpus import gpu_slot
from clsuite.sweep.job import Job, Sweep, sweep_pid


class Interrupted(BaseException):
    """SIGTERM / SIGINT during a run (a BaseException: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        self.signum, self.exit_code = signum, 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


class Invocation:
    """One ``clsuite`` invocation's state, owned by :func:`main` and passed down: its SIGTERM / SIGINT
    (this object is their one handler), the stop, the sweep jobs it began and their sweep
    (:meth:`sweep`; in a joblib worker, a job's own invocation). The first signal raises
    :class:`Interrupted`; a later one must not break the clean-up: it is named in the stop line, or,
    once that line is written (:meth:`stop`), on a line of its own, and ignored."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: list[int] = []  # the signals, in order; the first one stops the invocation
        self.exit_code: int | None = None  # set by stop(): no handler is restored from then on
        self.jobs_started = 0  # sweep jobs of this process that began (a signal before any: nothing ran)
        self.sweeps: dict[tuple[str, str | None], Sweep] = {}  # (folder, sweep id) -> its jobs' Sweep here

    def __reduce__(self):  # (Hydra's task function pickled into a joblib worker: the worker's own signals)
        return Invocation, ()

    def sweep(self, hc) -> Sweep:
        """The sweep of the job whose Hydra config is ``hc``, one object per sweep in this invocation (its
        jobs in this process warn once about a log they cannot write)."""
        new = Sweep.of(hc)
        return self.sweeps.setdefault((str(new.folder), new.sweep_id), new)

    def __call__(self, signum, frame) -> None:
        self.received.append(signum)
        if len(self.received) == 1:
            raise Interrupted(signum)
        if self.exit_code is not None:  # (the stop line is written or being written)
            with contextlib.suppress(Exception):  # the stop line first (a flush inside a write refuses)
                sys.stderr.flush()
            name = signal.Signals(signum).name
            os.write(2, f"warning: {name} received while exiting: ignored (exit status {self.exit_code})\n".encode())

    @contextlib.contextmanager
    def interruptible(self):
        """SIGTERM and SIGINT raise :class:`Interrupted` in the main thread for the duration.

        Lightning chains its own SIGTERM notifier in front of this handler during a fit; its
        ``except BaseException`` tears the fit down and re-raises."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {s: signal.signal(s, self) for s in self.SIGNALS}
        try:
            yield
        finally:
            if self.exit_code is None:  # (stopping: this handler stays, or a later SIGTERM would end the exit with 143)
                for s, h in old.items():
                    signal.signal(s, h)

    def stop(self, e: Interrupted, what: str) -> NoReturn:
        """Exit with the first signal's status and a line saying what it stopped (and any later signal)."""
        self.received = self.received or [e.signum]  # (raised by another invocation's handler: a test's)
        for s in self.SIGNALS:  # nothing may end the process between this line and exit
            signal.signal(s, self)
        later = ", ".join(signal.Signals(n).name for n in self.received[1:])
        self.exit_code = e.exit_code
        sys.exit(fail(f"{e}; {what}" + (f" ({later} received while stopping: ignored)" if later else ""), e.exit_code))


@atexit.register  # at import: it runs after the exit functions of every module imported later
def _ignore_at_last() -> None:
    """From here no Python code runs to name a signal, and the interpreter's finalisation restores the
    default handlers (a SIGTERM would end the exit with 143): a stopped invocation's signals are ignored."""
    handler = signal.getsignal(signal.SIGTERM)
    if isinstance(handler, Invocation) and handler.exit_code is not None:
        for s in Invocation.SIGNALS:
            signal.signal(s, signal.SIG_IGN)


# ----------------------------------------------------------------------------- a single run


def _train(cfg: DictConfig, out_dir, **kw) -> dict:
    """The run (torch is imported only here)."""
    from clsuite.run.experiment import run_experiment

    return run_experiment(cfg, out_dir, **kw)


def _report(results: dict, out_dir) -> float:
    """The run's summary, printed and kept in its run.log; its Acc (Hydra's return value)."""
    from clsuite.run.experiment import format_report

    print(report := format_report(results))
    keep_report(out_dir, report)
    print(f"results: {Path(out_dir) / RESULTS_FILE}")
    return results["metrics"]["acc"]


def _rerun(e: BaseException) -> str:
    """Where a rerun of the stopped run starts (``clsuite.run.experiment.rerun_note``, once it trained)."""
    return "; ".join(getattr(e, "__notes__", ())) or "a rerun starts where this one did (stopped before training)"


def run_single(cfg: DictConfig, out_dir: str, inv: Invocation | None = None) -> float:
    """A single run; its config was validated before Hydra made its folder (``SweepCallback.on_run_start``)."""
    from clsuite.core.callbacks import Diverged
    from clsuite.run.identity import CodeChanged
    from clsuite.run.loggers import LoggerUnavailable

    try:
        results = _train(cfg, out_dir)
    except (ConfigError, DataError, LoggerUnavailable) as e:
        sys.exit(fail(str(e)))
    except OSError as e:  # an output path: read-only, disk full, name too long (no results file written)
        sys.exit(fail(f"{os_error_line(e)}; no results written", 1))
    except (Diverged, CodeChanged) as e:
        sys.exit(fail(str(e), 1))
    except Interrupted as e:
        (inv or Invocation()).stop(e, f"the run stopped before its end, no results written ({out_dir}); {_rerun(e)}")
    return _report(results, out_dir)


# ----------------------------------------------------------------------------- a sweep job


def _watch_sweep(stop: threading.Event, orphaned: threading.Event, pid: int) -> None:
    """In a joblib worker: stop this job (SIGTERM to itself) once the sweep's process (``pid``) is gone."""
    parent = os.getppid()
    while not stop.wait(1.0):
        gone = os.getppid() != parent
        if not gone and pid:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                gone = True
            except OSError:
                pass
        if gone:
            orphaned.set()
            os.kill(os.getpid(), signal.SIGTERM)
            return


def run_job(cfg: DictConfig, hc, inv: Invocation | None = None) -> float | None:
    """One multirun job: lock, resume or train, record the outcome; only a signal stops the sweep."""
    inv = inv or Invocation()
    job = Job(cfg, hc.runtime.output_dir, overrides=hc.overrides.task, job_num=hc.job.num, sweep=inv.sweep(hc))
    try:
        holder = job.lock.acquire()
    except OSError as e:  # its folder cannot be written, or has no locks: its finished run stands, else it failed
        job.unwritable(e)
        return None
    if holder is not None:
        who = f"{holder.get('pid')}@{holder.get('host')}"
        job.log("busy", holder=who)
        print(f"busy {job.name}: being run by {who}; left to it", file=sys.stderr)
        return None
    stop, orphaned, pid = threading.Event(), threading.Event(), sweep_pid(hc)
    joblib_launcher = "joblib" in str(hc.launcher.get("_target_", "")).lower()
    if joblib_launcher and pid != os.getpid():  # in a joblib worker
        threading.Thread(target=_watch_sweep, args=(stop, orphaned, pid), daemon=True).start()
    t0 = time.perf_counter()
    inv.jobs_started += 1
    try:
        with inv.interruptible():
            job.write_overrides()
            if not job.in_grid():  # a job of a grid no one checked (a sweeper other than the basic one)
                validate(cfg)
            done = job.finished()
            if done is not None:
                results, how = done
                shutil.rmtree(job.checkpoint_dir, ignore_errors=True)  # an earlier, interrupted attempt's
                job.log(how)
                print(f"{how} {job.name}: results exist (Acc={results['metrics']['acc']:.2f})")
                from clsuite.run.wandb_run import mirror_finished  # logger=wandb: a W&B run from the results

                mirror_finished(cfg, job.out_dir, how, hc.overrides.task)
                return results["metrics"]["acc"]
            pool = gpu_slot(cfg.trainer, hc.launcher.n_jobs, job.job_num) if joblib_launcher else None
            with pool or contextlib.nullcontext() as gpu:  # joblib assigns no GPU: the job takes one from the pool
                if gpu is not None:
                    cfg.trainer.device_index = gpu  # (an ignored key: the run's identity does not move)
                results = _train(cfg, job.out_dir, checkpoint_dir=job.checkpoint_dir, source=job.source)
            job.succeeded(time.perf_counter() - t0)
    except Interrupted as e:
        why = "its sweep's process is gone" if orphaned.is_set() else str(e)
        job.failed(e, time.perf_counter() - t0, status="interrupted")
        fail(f"{job.name}: {why}; recorded in {job.failed_path}; {_rerun(e)}")
        job.lock.release()
        if orphaned.is_set():
            os._exit(e.exit_code)  # a joblib worker without its sweep: nothing left to report to
        raise
    except Exception as e:  # every other job failure is recorded and the sweep goes on
        line = job.failed(e, time.perf_counter() - t0)
        fail(f"{job.name}: {line} ({job.record})")
        return None
    finally:
        stop.set()
        job.lock.release()
    return _report(results, job.out_dir)


# ----------------------------------------------------------------------------- entry point


def _task(cfg: DictConfig, inv: Invocation) -> float | None:
    """What Hydra runs (:func:`main`'s task function): a single run or one sweep job."""
    hc = HydraConfig.get()
    if hc.job.chdir:  # (a job runs inside its folder) the launch folder's data, as checked
        # (data.root's default looks for ../shared/datasets: clsuite.config.home)
        with contextlib.chdir(hc.runtime.cwd):
            cfg.data.root = str(Path(hc.runtime.cwd) / str(cfg.data.root))
    if hc.mode != RunMode.MULTIRUN:
        return run_single(cfg, hc.runtime.output_dir, inv)
    return run_job(cfg, hc, inv)


def precheck(argv: list[str]) -> argparse.Namespace:
    """The steps before ``hydra.main`` (docs/DEVELOPING.md, "The path of one run", step 2): ``--help``,
    the overrides checked (``clsuite.config.compose.check``); the parsed command line."""
    from clsuite.config.compose import check

    if "--help" in argv or "-h" in argv:
        from clsuite.config.help import help_text

        print(help_text())
        sys.exit(0)
    try:
        return check(argv)[0]
    except ConfigError as e:
        sys.exit(fail(str(e)))


def main(argv: list[str] | None = None) -> None:
    """``clsuite`` / ``python src/run.py``: check and compose, run, set the exit status."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    STARTED.clear()
    args, inv = None, Invocation()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def task(cfg: DictConfig) -> float | None:  # (a closure: pickled into a joblib worker with a fresh inv)
        return _task(cfg, inv)

    with inv.interruptible():  # (the handlers stay ours until inv.stop has made the signals ignored)
        try:
            args = precheck(sys.argv[1:])
            os.environ["HYDRA_FULL_ERROR"] = "1"  # hydra.main raises its errors (printed below) instead of exiting 1
            task()
        except Interrupted as e:
            mode = STARTED[-1] if STARTED else None
            if mode == RunMode.MULTIRUN and (inv.jobs_started or getattr(e, "jobs_recorded", 0)):  # (joblib: workers)
                inv.stop(e, "the sweep stopped, interrupted jobs are recorded (failed.json) and a rerun retries them")
            where = {RunMode.RUN: "the run", RunMode.MULTIRUN: "the sweep"}.get(mode, "clsuite")
            inv.stop(e, f"{where} stopped during start-up, before any training; no results written")
        except Exception as e:
            if STARTED or args is None:  # (the run's own failure, or a bug before composition: traceback, exit 1)
                raise
            from clsuite.config.compose import error_line

            # (Hydra's composition: nothing started)
            sys.exit(fail(error_line(e, args.overrides, args.config_name or "config")))
    # (a sweep's exit status 1, for a failed or interrupted job: SweepCallback.on_multirun_end exits)


if __name__ == "__main__":
    main()
