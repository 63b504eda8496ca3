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
    """Write ``obj`` as JSON to ``path`` atomically (:func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, json.dumps(obj, indent=1, allow_nan=True, default=str).encode())


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; on any error remove the temporary file.

    An OS error (read-only folder, full disk, a name too long, a parent that is a file) is
    re-raised as ``OSError(errno, strerror, path)``: its message names the file that was to be
    written, not a temporary name."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def os_error_line(e: OSError) -> str:
    """``<reason>: <path>``: one line for an OS error on an output path (``Read-only file system: ...``)."""
    return f"{e.strerror or e}: {e.filename}" if e.filename is not None else f"{e.strerror or e}"


def read_json(path: str | Path) -> dict | None:
    """The parsed file, or None when it is missing, unreadable or not valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def read_object(path: str | Path) -> dict | None:
    """The parsed file when it holds a JSON object; None when it is missing, unreadable, not valid
    JSON, or valid JSON of another kind (``[]``: a bookkeeping file someone else wrote)."""
    obj = read_json(path)
    return obj if isinstance(obj, dict) else None


def read_log(sweep_dir: str | Path, sweep_id: str | None = None) -> list[dict]:
    """The records of ``<sweep_dir>/sweep_log.jsonl`` (of the invocation ``sweep_id`` when given);
    unreadable lines and lines that are not JSON objects are skipped."""
    try:
        lines = (Path(sweep_dir) / LOG_FILE).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and (sweep_id is None or rec.get("sweep_id") == sweep_id):
            out.append(rec)
    return out
