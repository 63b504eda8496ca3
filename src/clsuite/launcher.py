"""``launcher=joblib``: Hydra's joblib launcher, made to survive a worker that dies.

Hydra's own launcher hands every job to one ``joblib.Parallel`` call; when the kernel kills a
worker (out of memory, ``kill -9``) loky kills every other worker and the whole sweep ends with
``TerminatedWorkerError``. Here:

1. the jobs run through ``Parallel(return_as="generator_unordered")``, each result kept as it
   arrives;
2. when a worker dies, the jobs that were running then (their folder holds a ``running.lock`` of
   this sweep whose process is gone) are the suspects; each is rerun alone in a fresh worker, so
   the one that dies again alone is the culprit: it gets ``failed.json`` ("worker process
   died") and the innocent ones finish;
3. the jobs not started yet go on in parallel; every job of the grid ends ran, skipped or failed;
4. a SIGTERM / SIGINT of the sweep (joblib then kills its workers) records the jobs that were
   running as interrupted (``failed.json``, ``status: interrupted``) before the sweep exits.

Each job also watches the sweep's process (``clsuite.cli.run_job``): a worker whose sweep is
gone stops its job (recorded as interrupted) instead of training on unobserved.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher as _HydraJoblibLauncher
from joblib import Parallel, delayed
from joblib.externals.loky.process_executor import BrokenProcessPool
from omegaconf import OmegaConf

from clsuite.io import LOCK_FILE, read_object

log = logging.getLogger(__name__)


def _execute(idx: int, *args) -> tuple[int, JobReturn]:
    return idx, execute_job(*args)


class JoblibLauncher(_HydraJoblibLauncher):
    def _job(self, overrides: Sequence[str]) -> tuple[Path, dict]:
        """The folder and the config of a job (its sweep config resolved as Hydra's run_job resolves it)."""
        from hydra.core.hydra_config import HydraConfig

        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        hc = HydraConfig.instance()
        saved = hc.cfg
        hc.set_config(cfg)  # ${hydra:job.override_dirname} resolves against it
        try:
            folder = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        finally:
            hc.cfg = saved
        return folder, {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}

    def _died_here(self, overrides: Sequence[str], dead_only: bool = True) -> bool:
        """Was this job running (a lock of this sweep whose holder is gone) when the worker died?"""
        from clsuite.sweep import holder_alive

        path = self._job(overrides)[0] / LOCK_FILE
        holder = read_object(path)
        if not holder or holder.get("sweep_id") != os.environ.get("CLSUITE_SWEEP_ID"):
            return False
        try:
            return not dead_only or not holder_alive(holder, path.stat().st_mtime)
        except OSError:
            return False

    def _record_death(self, idx: int, overrides: Sequence[str], error, status: str = "failed") -> JobReturn:
        """``failed.json`` for a job whose worker died (``Job.failed`` never raises)."""
        from clsuite.sweep import Job

        folder, cfg = self._job(overrides)
        exc = error if isinstance(error, BaseException) else RuntimeError(error)
        Job(cfg, folder, sweep_dir=self.config.hydra.sweep.dir, overrides=overrides, job_num=idx).failed(
            exc, status=status
        )
        (folder / LOCK_FILE).unlink(missing_ok=True)
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=exc)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
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
                runs[i] = ret

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
                print(
                    f"error: job {' '.join(job_overrides[i])}: its worker died twice; recorded as failed",
                    file=sys.stderr,
                )
