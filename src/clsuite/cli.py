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

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from clsuite.config.check import CONF_DIR, ConfigError, validate
from clsuite.core.data.files import DataError
from clsuite.run.io import RESULTS_FILE, os_error_line
from clsuite.run.progress import keep_report
from clsuite.sweep.callback import STARTED, callback_failed, last_summary
from clsuite.sweep.gpus import gpu_slot
from clsuite.sweep.job import Job


class Interrupted(BaseException):
    """SIGTERM / SIGINT during a run (a BaseException: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        self.signum, self.exit_code = signum, 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


_SIGNALS: list[int] = []  # signals received by this invocation; the first one stops it


def _raise_interrupted(signum, frame):
    _SIGNALS.append(signum)
    if len(_SIGNALS) == 1:  # a second signal must not break the clean-up: noted, reported, ignored
        raise Interrupted(signum)


_EXITING: list[int] = []  # the exit status, once _stopped has its line: no handler is restored from then on


def _name_while_exiting(signum, frame):
    """A signal during the stop: named in the stop line, or after it on a line of its own; ignored."""
    _SIGNALS.append(signum)
    if _EXITING:  # (the stop line is written or being written)
        with contextlib.suppress(Exception):  # the stop line first (a flush inside a write refuses)
            sys.stderr.flush()
        name = signal.Signals(signum).name
        os.write(2, f"warning: {name} received while exiting: ignored (exit status {_EXITING[0]})\n".encode())


@atexit.register  # at import: it runs after the exit functions of every module imported later
def _ignore_at_last() -> None:
    """From here no Python code runs to name a signal, and the interpreter's finalisation restores the
    default handlers (a SIGTERM would end the exit with 143): the signals are ignored."""
    if _EXITING:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)


def _stopped(e: Interrupted, what: str) -> None:
    """Exit with the first signal's status and a line saying what it stopped (and any later signal)."""
    for s in (signal.SIGTERM, signal.SIGINT):  # nothing may end the process between this line and exit
        signal.signal(s, _name_while_exiting)
    later = ", ".join(signal.Signals(n).name for n in _SIGNALS[1:])
    _EXITING.append(e.exit_code)
    fail(f"{e}; {what}" + (f" ({later} received while stopping: ignored)" if later else ""), e.exit_code)


@contextlib.contextmanager
def interruptible():
    """SIGTERM and SIGINT raise :class:`Interrupted` in the main thread for the duration.

    Lightning chains its own SIGTERM notifier in front of this handler during a fit; its
    ``except BaseException`` tears the fit down and re-raises."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        if not _EXITING:  # (stopping: _stopped's handler stays, or a later SIGTERM would kill the exit with 143)
            for s, h in old.items():
                signal.signal(s, h)


def fail(msg: str, status: int = 2):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(status)


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


def run_single(cfg: DictConfig, out_dir: str) -> float:
    """A single run; its config was validated before Hydra made its folder (``SweepCallback.on_run_start``)."""
    from clsuite.core.callbacks import Diverged
    from clsuite.run.identity import CodeChanged
    from clsuite.run.loggers import LoggerUnavailable

    try:
        results = _train(cfg, out_dir)
    except (ConfigError, DataError, LoggerUnavailable) as e:
        fail(str(e))
    except OSError as e:  # an output path: read-only, disk full, name too long (no results file written)
        fail(f"{os_error_line(e)}; no results written", status=1)
    except (Diverged, CodeChanged) as e:
        fail(str(e), status=1)
    except Interrupted as e:
        _stopped(e, f"the run stopped before its end, no results written ({out_dir}); {_rerun(e)}")
    return _report(results, out_dir)


# ----------------------------------------------------------------------------- a sweep job


def _watch_sweep(stop: threading.Event) -> None:
    """In a joblib worker: stop this job (SIGTERM to itself) once the sweep's process is gone."""
    pid = int(os.environ.get("CLSUITE_SWEEP_PID", "0"))
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
            _ORPHANED.set()
            os.kill(os.getpid(), signal.SIGTERM)
            return


_ORPHANED = threading.Event()
_JOBS_STARTED: list[str] = []  # jobs of this sweep process that began (a signal before any: nothing ran)


def run_job(cfg: DictConfig, hc) -> float | None:
    """One multirun job: lock, resume or train, record the outcome; only a signal stops the sweep."""
    job = Job(cfg, hc.runtime.output_dir, sweep_dir=hc.sweep.dir, overrides=hc.overrides.task, job_num=hc.job.num)
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
    stop = threading.Event()
    joblib_launcher = "joblib" in str(hc.launcher.get("_target_", "")).lower()
    if joblib_launcher and os.environ.get("CLSUITE_SWEEP_PID") != str(os.getpid()):  # in a joblib worker
        threading.Thread(target=_watch_sweep, args=(stop,), daemon=True).start()
    t0 = time.perf_counter()
    _JOBS_STARTED.append(job.name)
    try:
        with interruptible():
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
        why = "its sweep's process is gone" if _ORPHANED.is_set() else str(e)
        job.failed(e, time.perf_counter() - t0, status="interrupted")
        print(f"error: {job.name}: {why}; recorded in {job.failed_path}; {_rerun(e)}", file=sys.stderr)
        job.lock.release()
        if _ORPHANED.is_set():
            os._exit(e.exit_code)  # a joblib worker without its sweep: nothing left to report to
        raise
    except Exception as e:  # every other job failure is recorded and the sweep goes on
        line = job.failed(e, time.perf_counter() - t0)
        print(f"error: {job.name}: {line} ({job.record})", file=sys.stderr)
        return None
    finally:
        stop.set()
        job.lock.release()
    return _report(results, job.out_dir)


# ----------------------------------------------------------------------------- entry point


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    if hc.job.chdir:  # (a job runs inside its folder) the launch folder's data, as checked
        with contextlib.chdir(
            hc.runtime.cwd
        ):  # (data.root's default looks for ../shared/datasets: clsuite.config.home)
            cfg.data.root = str(Path(hc.runtime.cwd) / str(cfg.data.root))
    if hc.mode != RunMode.MULTIRUN:
        return run_single(cfg, hc.runtime.output_dir)
    return run_job(cfg, hc)


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
        fail(str(e))


def main(argv: list[str] | None = None) -> None:
    """``clsuite`` / ``python src/run.py``: check and compose, run, set the exit status."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    _SIGNALS.clear()
    _JOBS_STARTED.clear()
    _EXITING.clear()
    STARTED.clear()
    args = None
    with interruptible():  # (the handlers stay ours until _stopped has made the signals ignored)
        try:
            args = precheck(sys.argv[1:])
            os.environ["HYDRA_FULL_ERROR"] = "1"  # hydra.main raises its errors (printed below) instead of exiting 1
            _hydra_main()
        except Interrupted as e:
            mode = STARTED[-1] if STARTED else None
            if mode == RunMode.MULTIRUN and (_JOBS_STARTED or getattr(e, "jobs_recorded", 0)):  # (joblib: in workers)
                _stopped(e, "the sweep stopped, interrupted jobs are recorded (failed.json) and a rerun retries them")
            where = {RunMode.RUN: "the run", RunMode.MULTIRUN: "the sweep"}.get(mode, "clsuite")
            _stopped(e, f"{where} stopped during start-up, before any training; no results written")
        except Exception as e:
            if STARTED or args is None:  # (the run's own failure, or a bug before composition: traceback, exit 1)
                raise
            from clsuite.config.compose import error_line

            fail(error_line(e, args.overrides, args.config_name or "config"))  # (Hydra's composition: nothing started)
    s = last_summary()
    if callback_failed() or (s and (s.get("failed") or s.get("interrupted"))):
        sys.exit(1)


if __name__ == "__main__":
    main()
