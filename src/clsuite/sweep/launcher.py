"""The launchers, Hydra's basic and joblib ones, made so that one job's trouble ends only that job: a job
folder that cannot be written, a joblib worker killed by the kernel, a signal to the sweep
(docs/INTEGRITY.md, sections 5 and 7).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra._internal.core_plugins.basic_launcher import BasicLauncher as _HydraBasicLauncher
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher as _HydraJoblibLauncher
from joblib import Parallel, delayed
from joblib.externals.loky.process_executor import BrokenProcessPool
from omegaconf import DictConfig, open_dict, read_write

from clsuite.core.errors import fail
from clsuite.run.io import LOCK_FILE, read_object
from clsuite.sweep.job import Sweep, os_cause

log = logging.getLogger(__name__)


def _execute(idx: int, *args) -> tuple[int, JobReturn | OSError]:
    """A job in a worker: its return, or the OS error that kept Hydra from starting it."""
    try:
        return idx, execute_job(*args)
    except Exception as e:
        if (cause := os_cause(e)) is None:
            raise
        return idx, cause  # (its cause alone: pickling drops the chain)


class _Recording:
    """What both launchers share: a job's folder and config, and a job Hydra could not start."""

    _sweep: Sweep | None = None

    @property
    def sweep(self) -> Sweep:
        """The sweep (its folder and id: ``SweepCallback.on_multirun_start``) of the jobs this launcher
        records, one object for the launch (a log it cannot write is one warning)."""
        if self._sweep is None:
            self._sweep = Sweep.of(self.config.hydra)
        return self._sweep

    def _job(self, overrides: Sequence[str]) -> tuple[Path, DictConfig]:
        """The folder and the config of a job (its sweep config resolved as Hydra's run_job resolves it)."""
        from hydra.core.hydra_config import HydraConfig

        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        hc = HydraConfig.instance()
        saved = hc.cfg
        hc.set_config(cfg)  # ${hydra:job.override_dirname} resolves against it
        try:
            folder = Path(str(cfg.hydra.sweep.dir)).absolute() / str(cfg.hydra.sweep.subdir)  # (as Hydra makes it)
        finally:
            hc.cfg = saved
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]  # (the job's config, as Hydra hands it to the job)
        return folder, cfg

    def _not_started(self, idx: int, overrides: Sequence[str], error: OSError) -> JobReturn:
        """Hydra could not make the job's folder or write its ``run.log`` or ``.hydra/`` (``error``)."""
        from clsuite.sweep.job import Job

        folder, cfg = self._job(overrides)
        Job(cfg, folder, overrides=overrides, job_num=idx, sweep=self.sweep).unwritable(error)
        return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=None)


class BasicLauncher(_Recording, _HydraBasicLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Hydra's ``BasicLauncher.launch``, a job Hydra cannot start recorded (docs/INTEGRITY.md, section 7)."""
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally")
        runs: list[JobReturn] = []
        for idx, overrides in enumerate(job_overrides, initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(cfg):
                cfg.hydra.job.id = cfg.hydra.job.num = idx
            try:
                runs.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function, config=cfg,
                                    job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir"))  # fmt: skip
            except Exception as e:
                if (cause := os_cause(e)) is None:
                    raise
                runs.append(self._not_started(idx, overrides, cause))
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return runs


class JoblibLauncher(_Recording, _HydraJoblibLauncher):
    def _died_here(self, overrides: Sequence[str], dead_only: bool = True) -> bool:
        """Was this job running (a lock of this sweep whose holder is gone) when the worker died?"""
        from clsuite.sweep.locks import live_holder

        path = self._job(overrides)[0] / LOCK_FILE
        holder = read_object(path)
        if not holder or holder.get("sweep_id") != self.sweep.sweep_id:
            return False
        return not dead_only or live_holder(path) is None

    def _record_death(self, idx: int, overrides: Sequence[str], error, status: str = "failed") -> JobReturn:
        """``failed.json`` for a job whose worker died (``Job.failed`` never raises)."""
        from clsuite.sweep.job import Job

        folder, cfg = self._job(overrides)
        exc = error if isinstance(error, BaseException) else RuntimeError(error)
        Job(cfg, folder, overrides=overrides, job_num=idx, sweep=self.sweep).failed(exc, status=status)
        (folder / LOCK_FILE).unlink(missing_ok=True)
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=exc)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Hydra's joblib launch, a dead worker ending only its own job: each result kept as it arrives;
        the jobs running when a worker died are rerun alone, the one that dies again failed
        (:meth:`_after_broken_pool`), the others going on in parallel; a SIGTERM / SIGINT of the sweep
        records the jobs running then as interrupted."""
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        joblib_cfg = dict(self.joblib)
        joblib_cfg["backend"] = "loky"
        process_joblib_cfg(joblib_cfg)
        joblib_cfg["return_as"] = "generator_unordered"
        state = Singleton.get_state()

        def run(indices: list[int], n_jobs=None):
            kw = {**joblib_cfg, **({"n_jobs": n_jobs} if n_jobs else {})}
            args = (self.hydra_context, self.config, self.task_function, state)
            for i, ret in Parallel(**kw)(
                delayed(_execute)(i, initial_job_idx + i, job_overrides[i], *args) for i in indices
            ):
                runs[i] = (
                    ret if isinstance(ret, JobReturn) else self._not_started(initial_job_idx + i, job_overrides[i], ret)
                )

        runs: dict[int, JobReturn] = {}
        pending = list(range(len(job_overrides)))
        rounds_without_progress = 0
        while pending:
            if rounds_without_progress >= 3:  # the pool breaks with no job to blame: give up on the rest
                for i in pending:
                    runs[i] = self._record_death(i, job_overrides[i], "joblib workers keep dying; job not run")
                break
            done_before = len(runs)
            try:
                run(pending)
            except BrokenProcessPool as e:
                self._after_broken_pool(e, pending, runs, job_overrides, run)
            except BaseException as e:  # SIGTERM / SIGINT of the sweep: joblib has killed the workers
                recorded = [
                    self._record_death(i, job_overrides[i], e, status="interrupted")
                    for i in pending
                    if i not in runs and self._died_here(job_overrides[i], dead_only=False)
                ]
                if recorded:  # the jobs began in workers: the sweep process's message must say they are recorded
                    e.jobs_recorded = len(recorded)
                raise
            pending = [i for i in pending if i not in runs]
            rounds_without_progress = 0 if len(runs) > done_before else rounds_without_progress + 1
        return [runs[i] for i in range(len(job_overrides))]

    def _after_broken_pool(self, e, pending, runs, job_overrides, run) -> None:
        """A worker died: rerun each job that was running then alone; the one that dies again failed."""
        lost = [i for i in pending if i not in runs]
        suspects = [i for i in lost if self._died_here(job_overrides[i])]
        print(
            f"warning: a joblib worker died ({type(e).__name__}); rerunning the {len(suspects)} job(s) "
            f"it may have held one at a time, then the {len(lost) - len(suspects)} not started",
            file=sys.stderr,
        )
        for i in suspects:
            try:
                run([i], n_jobs=2)  # alone in a fresh worker (n_jobs=1 would run it in this process)
            except BrokenProcessPool:
                runs[i] = self._record_death(
                    i, job_overrides[i], "worker process died (killed by a signal or out of memory)"
                )
                fail(f"job {' '.join(job_overrides[i])}: its worker died twice; recorded as failed")
