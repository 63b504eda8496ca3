"""One sweep job's bookkeeping (:class:`Job`, driven by ``clsuite.cli.run_job``): resume or reuse by
identity, failure records, the sweep log (:class:`Sweep`), its checkpoints (docs/GUIDE.md, "Runs and
sweeps"; docs/GUIDE.md, "Sweeps, SLURM and submitit").
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from clsuite.config.check import dotted_get
from clsuite.core.data import sources
from clsuite.core.errors import fail
from clsuite.run import identity as ident
from clsuite.run.identity import config_diff, config_hash, normalize
from clsuite.run.io import (
    CHECKPOINT_DIR,
    FAILED_FILE,
    GRID_FILE,
    LOG_FILE,
    METRICS_CSV,
    OVERRIDES_FILE,
    RESULTS_FILE,
    STALE_PREFIX,
    Unreadable,
    os_error_line,
    read_object,
    read_regular,
    write_bytes_atomic,
    write_json_atomic,
)
from clsuite.run.results import read_run
from clsuite.sweep.index import INDEX_DIR, index_result
from clsuite.sweep.locks import HOST, JobLock

# The keys under ``hydra.job`` by which every job of a sweep knows the sweep: set by the sweep's callback as
# hydra overrides (``clsuite.sweep.callback.SweepCallback.on_multirun_start``), so that Hydra composes them
# into each job's config whatever the launcher (in-process, joblib worker, submitit job); out of folder names.
SWEEP_ID, SWEEP_PID = "sweep_id", "sweep_pid"


def sweep_pid(hydra_cfg) -> int:
    """The pid of the process that launched the sweep of a job (``hydra_cfg``: its ``hydra`` node), else 0."""
    return int(hydra_cfg.job.get(SWEEP_PID) or 0)


@dataclass
class Sweep:
    """One sweep invocation as one process taking part in it sees it: its folder, its id (``grid.json``,
    ``sweep_log.jsonl``, ``running.lock``: None outside a sweep), and whether this process could not
    append to its log (warned once). Held for the sweep by its owner in that process: the ``clsuite``
    invocation (``clsuite.cli.Invocation.sweep``) or the launcher (docs/DEVELOPING.md, "The path of one run")."""

    folder: Path
    sweep_id: str | None = None
    log_lost: bool = False

    @classmethod
    def of(cls, hydra_cfg) -> Sweep:
        """The sweep of a job or of the launching process (``hydra_cfg``: its ``hydra`` node)."""
        return cls(Path(str(hydra_cfg.sweep.dir)), hydra_cfg.job.get(SWEEP_ID))

    def append(self, rec: dict) -> None:
        """``rec`` as one line of ``sweep_log.jsonl``; a log that cannot be written is one warning."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # one short line per write: O_APPEND keeps lines whole; O_NONBLOCK: a FIFO never blocks the job
            fd = os.open(self.folder / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
            with os.fdopen(fd, "a") as f:
                f.write(json.dumps(rec, default=str) + "\n")
        except OSError as e:  # the log only adds to what the jobs' own files say: a warning, once
            if not self.log_lost:
                self.log_lost = True
                print(f"warning: cannot write {self.folder / LOG_FILE} ({os_error_line(e)}): no progress lines "
                      "and no rerun reasons; the summary counts the jobs from their own files", file=sys.stderr)  # fmt: skip


class Job:
    """Lock / resume / reuse / failure bookkeeping of one multirun job (folder ``out_dir``) of ``sweep``
    (by default one in ``sweep_dir``, else the parent of ``out_dir``, with no id)."""

    def __init__(self, cfg, out_dir, sweep_dir=None, overrides=(), job_num: int = 0, sweep: Sweep | None = None):
        self.cfg = ident._container(cfg)
        self.out_dir = Path(out_dir)
        self.sweep = sweep or Sweep(Path(sweep_dir) if sweep_dir is not None else self.out_dir.parent)
        self.sweep_dir = self.sweep.folder
        self.overrides = list(overrides)
        self.job_num = int(job_num or 0)
        self.norm = normalize(self.cfg)
        self.hash = config_hash(self.norm)
        self.name = self.out_dir.name
        self.mode = str(self.cfg["resume"])  # strict, config_only or off
        self.identity: dict | None = None  # the identity this job's run will have (computed once)
        self.source = None  # its bound data source (looked up once, with the identity; handed to the run)
        self.rerun_reasons: list[str] = []
        self.lock = JobLock(self.out_dir, self.sweep.sweep_id)
        self.results_path, self.failed_path = self.out_dir / RESULTS_FILE, self.out_dir / FAILED_FILE
        self.checkpoint_dir = self.out_dir / CHECKPOINT_DIR  # task-end checkpoints: a rerun resumes from them
        self.record = ""  # where failed() recorded the failure ("details: <failed.json>"), or why it could not

    def expected(self) -> dict:
        if self.identity is None:
            self.source = sources.bind(self.cfg["benchmark"])
            self.identity = ident.expected(self.cfg, self.source)
        return self.identity

    def in_grid(self) -> bool:
        """True when this sweep's ``grid.json`` lists this job's config (validated before any job started)."""
        grid = read_object(self.sweep_dir / GRID_FILE) or {}
        if grid.get("sweep_id") != self.sweep.sweep_id:
            return False
        return any(isinstance(j, dict) and j.get("config_hash") == self.hash for j in grid.get("jobs") or ())

    # -- resume
    def mismatch(self, res: dict) -> list[tuple[str, str]]:
        """Why a sealed result (``clsuite.run.results.read_run``) cannot stand for this job ([] when it can).

        ``config_only`` compares the normalised config only: it relaxes the identity, never the seal."""
        if self.mode == "config_only":
            old = normalize(res.get("config", {}))
            return [] if old == self.norm else [("config", "; ".join(config_diff(old, self.norm)[:3]))]
        return ident.differences(res.get("identity"), self.expected())

    def finished(self) -> tuple[dict, str] | None:
        """(results, "skipped" | "reused") when this job already has a result (resume, reuse), else None."""
        if self.mode == "off":
            return None
        run = read_run(self.results_path)
        if run.ok:
            why = self.mismatch(run.data)
            if not why:
                self.failed_path.unlink(missing_ok=True)
                self.register()
                return run.data, "skipped"
            self._set_aside(why)
        elif run.reason != "missing":
            self._set_aside([(rejection_reason(run.data, run.reason), run.reason)])
        if self.cfg["reuse"]:
            return self._reuse()
        return None

    def _set_aside(self, why: list[tuple[str, str]]) -> None:
        self.rerun_reasons = sorted({r for r, _ in why})
        n = 1
        while (stale := self.out_dir / f"{STALE_PREFIX}{n}.json").exists():
            n += 1
        os.replace(self.results_path, stale)
        detail = "; ".join(f"{r} changed ({d})" if r in ident.CHANGES else d for r, d in why)
        print(f"rerun {self.name}: {detail}; old results kept as {stale.name}", file=sys.stderr)

    def _reuse(self) -> tuple[dict, str] | None:
        key = self.hash if self.mode == "config_only" else self.expected()["key"][:20]
        entry = read_object(self.sweep_dir.parent / INDEX_DIR / f"{key}.json")
        if not entry or not isinstance(entry.get("path"), str):
            return None
        src = Path(entry["path"])
        src = src if src.is_absolute() else self.sweep_dir.parent / src
        run = read_run(src)
        if not run.ok or src.resolve() == self.results_path.resolve() or self.mismatch(run.data):
            return None
        res = {k: v for k, v in run.data.items() if k != "digest"}  # verified: only now sealed again
        res["config"] = {**res["config"], "experiment": self.cfg.get("experiment")}
        res["reused_from"] = str(src)
        with contextlib.suppress(OSError, Unreadable):  # its loss rows (W&B's loss curve); none without the CSV logger
            write_bytes_atomic(self.out_dir / METRICS_CSV, read_regular(src.parent / METRICS_CSV))
        write_json_atomic(self.results_path, ident.seal(res))
        self.failed_path.unlink(missing_ok=True)
        return res, "reused"

    def register(self) -> None:
        """Index this job's finished result by identity key and config hash (for reuse elsewhere)."""
        if (run := read_run(self.results_path)).ok:
            index_result(self.sweep_dir.parent, self.results_path, run.data, self.hash, self.cfg.get("experiment"))

    # -- outcome records
    def succeeded(self, wall_s: float) -> None:
        self.failed_path.unlink(missing_ok=True)
        self.register()
        self.log("ran", wall_s=wall_s, reasons=self.rerun_reasons)

    def unwritable(self, exc: OSError) -> None:
        """Its folder cannot be written (``exc``: its lock, Hydra's ``run.log`` or ``.hydra/``): its own
        finished run of this identity stands (skipped, nothing written), else the job failed (recorded
        where possible); one line either way, and the sweep goes on."""
        run = read_run(self.results_path)
        try:
            stands = self.mode != "off" and run.ok and not self.mismatch(run.data)
        except Exception:  # (its identity cannot be computed: no run stands for it)
            stands = False
        if stands:
            self.log("skipped")
            print(f"skipped {self.name}: results exist (Acc={run.data['metrics']['acc']:.2f}); its folder cannot "
                  f"be written ({os_error_line(exc)})")  # fmt: skip
        else:
            fail(f"{self.name}: {self.failed(exc)} ({self.record})")

    def failed(self, exc: BaseException, wall_s: float = 0.0, status: str = "failed") -> str:
        """Record a failure (``failed.json`` + a log line); never raises. Returns the error line; where its
        record is, or why there is none (a read-only folder, a full disk): :attr:`record`."""
        line = error_line(exc)
        try:
            prev = read_object(self.failed_path) or {}
            record = {
                "status": status,
                "error": line,
                "attempt": _attempt(prev) + 1,
                "time": dt.datetime.now().isoformat(timespec="seconds"),
                "host": HOST,
                "overrides": self.overrides,
                "benchmark": dotted_get(self.cfg, "benchmark.name"),
                "method": dotted_get(self.cfg, "method.name"),
                "memory": self.cfg.get("memory"),
                "seed": self.cfg.get("seed"),
                "traceback": "".join(traceback.format_exception(exc)),
                "config": self.cfg,
            }
            write_json_atomic(self.failed_path, record)
            self.record = f"details: {self.failed_path}"
        except Exception as e:  # (no record: the sweep log and the summary count the job failed all the same)
            self.record = f"no {FAILED_FILE}: {error_line(e)}"
        self.log(status, wall_s=wall_s, error=line, reasons=self.rerun_reasons)
        return line

    def log(self, status: str, **extra) -> None:
        rec = {"time": time.time(), "sweep_id": self.sweep.sweep_id, "job": self.name, "status": status}
        rec.update({k: v for k, v in extra.items() if v not in (None, [])})
        self.sweep.append(rec)
        from clsuite.run.progress import sweep_progress  # "k/N done, F failed, about T left", as jobs finish

        if (
            status != "busy"
            and not self.sweep.log_lost
            and (line := sweep_progress(self.sweep_dir, self.sweep.sweep_id))
        ):
            print(line, file=sys.stderr)

    def write_overrides(self) -> None:
        """A hashed folder name: the overrides it stands for, written inside."""
        if self.name.rsplit(",", 1)[-1].startswith("hash="):
            with contextlib.suppress(OSError):
                write_json_atomic(self.out_dir / OVERRIDES_FILE, self.overrides)


def os_cause(exc: BaseException) -> OSError | None:
    """The OS error ``exc`` is, or was raised from (Hydra's logging set-up wraps one in a ValueError)."""
    seen = set()
    while exc is not None and not isinstance(exc, OSError) and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc if isinstance(exc, OSError) else None


def error_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:  # an output path: name it
        return f"{type(exc).__name__}: {os_error_line(exc)}"
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def rejection_reason(data: dict | None, reason: str) -> str:
    """The rerun reason (``clsuite.run.identity.REASONS``) of a results file the reader rejected."""
    if reason.startswith("unsealed") and data is not None and "identity" not in data:
        return "no identity"  # made before identities
    if reason.startswith("unsealed") or reason.startswith("edited"):
        return "edited"
    return "malformed"


def _attempt(prev: dict) -> int:
    try:
        return int(prev.get("attempt", 0))
    except (TypeError, ValueError):
        return 0
