"""The in-progress lock of a sweep job: an ``flock`` of ``running.lock`` in its folder, freed by the kernel
when its holder dies (docs/GUIDE.md, "Locks, failures and the grid"; docs/INTEGRITY.md, section 5).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from pathlib import Path

from filelock import FileLock, Timeout

from clsuite.run.io import LOCK_FILE, read_object

HOST = socket.gethostname()
PROBE_GRACE_S = 0.25  # how long a job retries a held lock: a probe (live_holder) holds it for microseconds


def _record(path: Path) -> dict:
    """What the holder of the lock at ``path`` wrote (pid and host ``?`` while it has not yet)."""
    return read_object(path) or {"pid": "?", "host": "?"}


def live_holder(path: Path) -> dict | None:
    """The record of the process that holds the lock file at ``path``, else None (no file, no holder).
    A shared lock asked for without waiting, on a read-only descriptor: nothing is created or written."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _record(Path(path))
    except OSError:  # a file system without locks: no job could hold it either
        return None
    finally:
        os.close(fd)
    return None


class JobLock:
    """``running.lock`` in a job folder: ``acquire()`` returns None when this process now holds it,
    else the holder's record; an ``OSError`` (a folder that cannot be written, a file system without
    locks: ``ENOLCK``) names the file. ``release()`` removes the file, then frees the lock. The record
    names the holder's sweep (``sweep_id``): a launcher tells its own jobs' locks from another sweep's."""

    def __init__(self, folder: Path, sweep_id: str | None = None):
        self.path = Path(folder) / LOCK_FILE
        self.sweep_id = sweep_id
        # no soft lock: it outlives a kill -9; a short retry: a job that starts while a summary probes the
        # lock would otherwise read the probe as a running job and be left for a rerun
        self._lock = FileLock(self.path, timeout=PROBE_GRACE_S, fallback_to_soft=False)

    def acquire(self) -> dict | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            return _record(self.path)
        except OSError as e:
            e.filename = e.filename or str(self.path)
            raise
        try:
            record = {"pid": os.getpid(), "host": HOST, "sweep_id": self.sweep_id}
            self.path.write_text(json.dumps(record))
        except OSError:
            self.release()
            raise
        return None

    def release(self) -> None:
        if self._lock.is_locked:
            with contextlib.suppress(OSError):  # while held: a process that opened it meanwhile finds it unlinked
                self.path.unlink()
            self._lock.release()
