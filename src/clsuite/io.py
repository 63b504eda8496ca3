"""One home for the suite's file names and file I/O.

Every module that reads or writes a run's files imports these names: the results file of a
run, the failure record of a sweep job, the sweep's expected grid, and atomic JSON writing
(temporary file in the same folder, fsync, rename: a reader never sees half a file, and a
failed write leaves no temporary file behind).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

RESULTS_FILE = "results.json"  # one finished run (written last, atomically)
FAILED_FILE = "failed.json"  # one failed sweep job (error line, traceback, attempts)
GRID_FILE = "grid.json"  # the expected job folders of a sweep
LOG_FILE = "sweep_log.jsonl"  # one line per sweep job: ran / skipped / reused / busy / interrupted / failed
LOCK_FILE = "running.lock"  # a sweep job in progress: holder pid, host, start time (clsuite.sweep.JobLock)
OVERRIDES_FILE = "overrides.json"  # a job folder whose name is hashed (overrides too long) keeps them here
STALE_PREFIX = "results.stale-"  # an older result of the job, kept when its identity no longer matches
CHECKPOINT_DIR = "checkpoints"  # a sweep job's task-end checkpoints, in its folder (clsuite.checkpoint)


def write_json_atomic(path: str | Path, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically; on any error remove the temporary file."""
    write_bytes_atomic(path, json.dumps(obj, indent=1, allow_nan=True, default=str).encode())


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; on any error remove the temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def read_json(path: str | Path) -> dict | None:
    """The parsed file, or None when it is missing, unreadable or not valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
