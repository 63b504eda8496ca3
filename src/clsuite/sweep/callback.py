"""The Hydra callback of every run and multirun (conf/config.yaml ``hydra.callbacks.sweep``): a single
run's folder; a sweep's id for its jobs, its grid checked before any job, ``grid.json``, the reuse index
and, at the end, the summary and the exit status (docs/DEVELOPING.md, "The path of one run";
docs/INTEGRITY.md, sections 4 and 5).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

from clsuite.config.check import ConfigError, check_names, validate
from clsuite.core.errors import fail
from clsuite.run import identity as ident
from clsuite.run.io import GRID_FILE, RESULTS_FILE, os_error_line, probe_folder, write_json_atomic
from clsuite.sweep.grid import check_folders, expand_grid, validate_grid
from clsuite.sweep.index import reindex
from clsuite.sweep.job import SWEEP_ID, SWEEP_PID, error_line
from clsuite.sweep.locks import HOST
from clsuite.sweep.summary import summarize


def _refuse(check, *args) -> None:
    """Run ``check(*args)``: a ``ConfigError`` is one ``error:`` line and exit 2, an ``OSError`` (an
    output folder that cannot be made) one line and exit 1."""
    try:
        check(*args)
    except ConfigError as e:
        sys.exit(fail(str(e)))
    except OSError as e:
        sys.exit(fail(f"{os_error_line(e)}; nothing run", 1))


def _check_run_dir(run_dir: Path) -> None:
    """A single run's folder (:meth:`SweepCallback.on_run_start`), made and written to before Hydra
    writes ``.hydra/`` there; an OS error names it."""
    if (run_dir / RESULTS_FILE).exists():
        raise ConfigError(
            f"hydra.run.dir {str(run_dir)!r} already holds another run's results ({RESULTS_FILE}); "
            "choose a new folder (the default makes one per run)"
        )
    probe_folder(run_dir)


STARTED: list[RunMode] = []  # the run mode once this process's run or sweep has begun (clsuite.cli clears it)


def _counted(stage: str):
    """A callback method whose failure counts (Hydra would only warn): at the start of a run or a sweep
    nothing runs, at the end the sweep exits 1."""

    def deco(fn):
        @functools.wraps(fn)
        def wrapped(self, config: DictConfig, **kwargs: Any) -> None:
            try:
                fn(self, config, **kwargs)
            except Exception as e:
                if stage == "start":
                    what = "sweep" if config.hydra.mode == RunMode.MULTIRUN else "run"
                    sys.exit(fail(f"the {what} could not start ({error_line(e)}); nothing run", 1))
                sys.exit(fail(f"the sweep's summary failed ({error_line(e)}); the sweep exits 1", 1))

        return wrapped

    return deco


def _tell_jobs(config: DictConfig, sweep_id: str, pid: int) -> None:
    """The sweep's id and the launching pid under ``hydra.job`` (``clsuite.sweep.job.SWEEP_ID``): set in this
    process's config (its launcher reads them) and added to its hydra overrides, from which Hydra composes
    every job's config, in this process, a joblib worker or a submitit job alike (hydra overrides name no
    folder: ``hydra.job.override_dirname`` is made of the task's)."""
    with read_write(config), open_dict(config.hydra.job):
        config.hydra.job[SWEEP_ID], config.hydra.job[SWEEP_PID] = sweep_id, pid
        config.hydra.overrides.hydra.extend([f"+hydra.job.{SWEEP_ID}='{sweep_id}'", f"+hydra.job.{SWEEP_PID}={pid}"])


class SweepCallback(Callback):
    """Hydra callback (conf/config.yaml ``hydra.callbacks.sweep``): sweep id + grid check + grid.json +
    summary and exit status."""

    def __init__(self) -> None:
        self.grid: list[dict] | None = None
        self.sweep_id: str | None = None

    @_counted("start")
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run, before Hydra makes its folder: its config validated; refused when its folder holds
        another run's results; made now and written to once (a full disk is one line, not Hydra's traceback)."""
        STARTED.append(RunMode.RUN)
        _refuse(validate, config)
        _refuse(_check_run_dir, Path(str(config.hydra.run.dir)))

    @_counted("start")
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        STARTED.append(RunMode.MULTIRUN)
        _refuse(check_names, config)  # the sweep's folder (its jobs' names: validate_grid)
        self.sweep_id = sweep_id = uuid.uuid4().hex[:12]
        _tell_jobs(config, sweep_id, os.getpid())  # joblib workers stop when this process is gone
        sweeper = str(config.hydra.sweeper.get("_target_", ""))
        if not sweeper.endswith("BasicSweeper"):
            return
        try:
            grid = expand_grid(config)
        except Exception as e:  # a sweep that is not checked is not run
            sys.exit(fail(f"could not expand the sweep grid ({error_line(e)})"))
        _refuse(validate_grid, config, grid)  # a bad value is named first (checkpoint_every=0), then folders
        _refuse(check_folders, config, grid)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not grid:
            print(f"sweep {config.get('experiment')}: no jobs (an empty sweep): nothing run, {sweep_dir}/ unchanged",
                  file=sys.stderr)  # fmt: skip
            sys.exit(0)
        self.grid = grid  # every job composed and validated: only now is the grid the sweep's
        _refuse(probe_folder, sweep_dir)
        _refuse(
            write_json_atomic,
            sweep_dir / GRID_FILE,
            {
                "experiment": config.get("experiment"),
                "sweep_id": sweep_id,
                "created": dt.datetime.now().isoformat(timespec="seconds"),
                "host": HOST,
                "argv": sys.argv,
                "launcher": str(config.hydra.launcher.get("_target_", "")),
                "n_jobs": len(grid),
                "jobs": grid,
            },
        )
        print(f"sweep {config.get('experiment')}: {len(grid)} jobs -> {sweep_dir}/", file=sys.stderr)
        if config.reuse:
            try:
                n = reindex(sweep_dir.parent)
            except Exception as e:  # the index only saves training: without it, jobs train
                n = 0
                print(f"warning: could not index earlier results for reuse ({error_line(e)})", file=sys.stderr)
            if n:
                print(f"sweep {config.get('experiment')}: indexed {n} earlier results for reuse", file=sys.stderr)

    @_counted("end")
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The summary; exit status 1 when a job failed or was interrupted (a ``SystemExit`` passes Hydra's
        callback runner, which turns an ``Exception`` into a warning, and ends ``clsuite.cli.main``)."""
        s = summarize(str(config.hydra.sweep.dir), self.sweep_id, self.grid)
        exp = config.get("experiment")
        msg = (
            f"sweep {exp}: {s['ran']} ran, {s['skipped']} skipped (results match), {s['reused']} reused "
            f"(same identity in another experiment), {s['busy']} busy (running elsewhere), "
            f"{s['interrupted']} interrupted, {s['failed']} failed"
        )
        if s.get("log_lost"):  # no job's line reached the log: how many ran or were skipped is unknown
            msg = f"sweep {exp}: {s['busy']} busy, {s['interrupted']} interrupted, {s['failed']} failed (no sweep log)"
        if "expected" in s:
            msg += f"; {s['finished_total']}/{s['expected']} of the grid have results"
            if s.get("kept_earlier"):
                msg += f" ({s['kept_earlier']} of them from earlier sweeps: their jobs failed in this one)"
        print(msg, file=sys.stderr)
        if s["reruns"]:
            why = ", ".join(
                f"{r} changed: {n}" if r in ident.CHANGES else f"{r}: {n}" for r, n in sorted(s["reruns"].items())
            )
            print(f"  reran because {why}", file=sys.stderr)
        for line in s["failed_jobs"][:20]:
            print(f"  failed: {line}", file=sys.stderr)
        from clsuite.config.home import hint

        print(f"  tables and figures: {hint('aggregate', str(exp))}", file=sys.stderr)
        from clsuite.run.wandb_run import log_sweep_aggregate  # logger=wandb: the experiment's aggregate W&B run

        log_sweep_aggregate(config)
        if s["failed"] or s["interrupted"]:
            sys.exit(1)
