"""The command line: ``clsuite [overrides]`` (console script) = ``python src/run.py [overrides]``.

    clsuite                                        # AdaER on split-MNIST, M=100, seed 0
    clsuite method=mir memory=200 seed=3           # any key of conf/ can be overridden
    clsuite -m method=adaer,mir,er memory=50,100   # a sweep (Hydra multirun; clsuite.sweep)
    clsuite --config-dir sweeps --config-name table2 launcher=joblib   # a paper sweep

Steps of one invocation:

1. the overrides are checked (``clsuite.config.check_overrides``: unknown group option, unknown
   key) and Hydra composes the config (``CONF_DIR``: the packaged ``clsuite/conf`` when installed);
2. a single run is validated (``clsuite.config.validate``), trained (``run_experiment``) and
   written into its own folder ``outputs/<experiment>/<time>_<benchmark>_<method>_<run id>``;
   a sweep validates every job first (``clsuite.sweep.SweepCallback``), then each job takes its
   lock, resumes or trains, and records a failure without stopping the others (:func:`run_job`);
   a run continues from its latest task-end checkpoint of the same identity (``clsuite.checkpoint``:
   ``outputs/.checkpoints/<identity key>/`` for a single run, the job folder's ``checkpoints/``
   for a sweep job); a SLURM / submitit job requeued on time-out does the same;
3. exit status: 0 done; 2 bad input (one ``error:`` line, before any training); 1 a run failed
   (a non-finite loss, a broken file) or a sweep job failed; 128 + n when stopped by signal n
   (SIGTERM: 143, SIGINT: 130), with a message, no results file for the interrupted run, and
   the interrupted sweep jobs recorded (``failed.json``, ``status: interrupted``) for a rerun.
"""

from __future__ import annotations

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

from clsuite import sweep
from clsuite.config import CONF_DIR, ConfigError, check_overrides, validate
from clsuite.data.files import DataError
from clsuite.progress import keep_report


class Interrupted(BaseException):
    """SIGTERM / SIGINT during a run (a BaseException: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_interrupted(signum, frame):
    for s in (signal.SIGTERM, signal.SIGINT):  # a second signal must not break the clean-up
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


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
        for s, h in old.items():
            signal.signal(s, h)


def fail(msg: str, status: int = 2):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(status)


# ----------------------------------------------------------------------------- a single run


def run_single(cfg: DictConfig, out_dir: str) -> float:
    from clsuite.callbacks import Diverged
    from clsuite.experiment import format_report, run_experiment
    from clsuite.loggers import make_logger

    try:
        validate(cfg)
        with make_logger(cfg, out_dir) as logger:
            results = run_experiment(cfg, out_dir, logger=logger)
    except (ConfigError, DataError) as e:
        fail(str(e))
    except Diverged as e:
        fail(str(e), status=1)
    except Interrupted as e:
        fail(f"{e}; the run stopped before its end, no results written ({out_dir})", status=e.exit_code)
    print(report := format_report(results))
    keep_report(out_dir, report)  # also in the run's run.log
    print(f"results: {Path(out_dir) / 'results.json'}")
    return results["metrics"]["acc"]


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


def run_job(cfg: DictConfig, hc) -> float | None:
    """One multirun job: lock, resume or train, record the outcome; only a signal stops the sweep."""
    job = sweep.Job(cfg, hc.runtime.output_dir, sweep_dir=hc.sweep.dir, overrides=hc.overrides.task, job_num=hc.job.num)
    holder = job.lock.acquire()
    if holder is not None:
        job.log("busy", holder=f"{holder.get('pid')}@{holder.get('host')}")
        print(
            f"busy {job.name}: being run by pid {holder.get('pid')} on {holder.get('host')}; left to it",
            file=sys.stderr,
        )
        return None
    stop = threading.Event()
    in_worker = "joblib" in str(hc.launcher.get("_target_", "")).lower() and os.environ.get("CLSUITE_SWEEP_PID") != str(
        os.getpid()
    )
    if in_worker:
        threading.Thread(target=_watch_sweep, args=(stop,), daemon=True).start()
    t0 = time.perf_counter()
    try:
        with interruptible():
            job.write_overrides()
            validate(cfg)
            done = job.finished()
            if done is not None:
                results, how = done
                shutil.rmtree(job.checkpoint_dir, ignore_errors=True)  # an earlier, interrupted attempt's
                job.log(how)
                print(f"{how} {job.name}: results exist (Acc={results['metrics']['acc']:.2f})")
                from clsuite.wandb_sync import mirror_finished  # logger=wandb: a W&B run from the results

                mirror_finished(cfg, job.out_dir, how, hc.overrides.task)
                return results["metrics"]["acc"]
            from clsuite.experiment import format_report, run_experiment  # torch: only for a job that trains
            from clsuite.loggers import make_logger

            with sweep.gpu_slot(cfg.trainer, job_num=job.job_num), make_logger(cfg, job.out_dir) as logger:
                # task-end checkpoints in the job's folder (stable across reruns): a rerun resumes
                results = run_experiment(cfg, job.out_dir, logger=logger, checkpoint_dir=job.checkpoint_dir)
            job.succeeded(time.perf_counter() - t0)
    except Interrupted as e:
        why = "its sweep's process is gone" if _ORPHANED.is_set() else str(e)
        job.failed(e, time.perf_counter() - t0, status="interrupted")
        print(f"error: {job.name}: {why}; recorded in {job.failed_path} for a rerun", file=sys.stderr)
        job.lock.release()
        if _ORPHANED.is_set():
            os._exit(e.exit_code)  # a joblib worker without its sweep: nothing left to report to
        raise
    except Exception as e:  # every other job failure is recorded and the sweep goes on
        line = job.failed(e, time.perf_counter() - t0)
        print(f"error: {job.name}: {line} (details: {job.failed_path})", file=sys.stderr)
        return None
    finally:
        stop.set()
        job.lock.release()
    print(report := format_report(results))
    keep_report(job.out_dir, report)  # also in the job's run.log
    print(f"results: {job.results_path}")
    return results["metrics"]["acc"]


# ----------------------------------------------------------------------------- entry point


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return run_single(cfg, hc.runtime.output_dir)
    return run_job(cfg, hc)


def main(argv: list[str] | None = None) -> None:
    """``clsuite`` / ``python src/run.py``: check the overrides, run, set the exit status."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        fail(str(e))
    try:
        with interruptible():
            _hydra_main()
    except Interrupted as e:
        fail(
            f"{e}; the sweep stopped, interrupted jobs are recorded (failed.json) and a rerun retries them", e.exit_code
        )
    s = sweep.LAST_SUMMARY
    if s and (s.get("failed") or s.get("interrupted")):
        sys.exit(1)


if __name__ == "__main__":
    main()
