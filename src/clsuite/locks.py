"""The in-progress lock of a sweep job: ``running.lock`` in the job's folder.

1. ``JobLock.acquire`` creates the file atomically (``O_CREAT | O_EXCL``) with the holder's pid,
   host, process start time (a reused pid is told apart) and a random token;
2. a heartbeat thread touches it every 30 s while the job runs;
3. a second process finding the file asks :func:`holder_alive`: same host, is the pid still that
   process; another host (a shared file system), has the heartbeat stopped for
   ``CLSUITE_LOCK_STALE_S`` seconds (default 600); a torn file (no record yet) younger than
   ``TORN_GRACE_S`` is being written. A live holder keeps the job (the sweep summary counts it busy
   by the same rule, :func:`live_holder`); a dead one's lock is moved aside atomically (put back if
   it was a fresh lock taken meanwhile) and taken over;
4. ``release`` removes the file only while it still carries this holder's token.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from clsuite.io import LOCK_FILE, read_object

HOST = socket.gethostname()
TORN_GRACE_S = 60.0  # a lock file without its record yet: being written when younger, a dead writer's after


def _proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot; Linux), telling a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def holder_alive(holder: dict, mtime: float) -> bool:
    """Is the process named in a lock file still running (another host: is its heartbeat fresh)?"""
    if holder.get("host") != HOST:
        return time.time() - mtime < float(os.environ.get("CLSUITE_LOCK_STALE_S", 600))
    try:
        pid = int(holder.get("pid", -1))
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except (OSError, ValueError, TypeError):
        return False
    start = _proc_start(pid)
    return not (start and holder.get("start") and start != holder["start"])


def _judge(path: Path) -> tuple[dict | None, dict | None]:
    """(the live holder or None, the record read) of the lock file at ``path``; ``FileNotFoundError``
    when it is gone. A torn file (no record yet) is alive while younger than :data:`TORN_GRACE_S`."""
    record, mtime = read_object(path), path.stat().st_mtime
    alive = time.time() - mtime < TORN_GRACE_S if record is None else holder_alive(record, mtime)
    return (record or {"pid": "?", "host": "?", "note": "lock being written"}) if alive else None, record


def live_holder(path: Path) -> dict | None:
    """The live holder of the lock file at ``path`` (:class:`JobLock`'s rule), else None: no lock, or a stale one."""
    with contextlib.suppress(OSError, TypeError, ValueError):
        return _judge(Path(path))[0]
    return None


class JobLock:
    """``running.lock`` in a job folder (the module's steps): ``acquire()`` returns None when this
    process now holds it, else the holder's record; ``release()`` removes it while it is still ours."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK_FILE
        self.record = {"pid": os.getpid(), "host": HOST, "start": _proc_start(os.getpid()), "token": uuid.uuid4().hex}
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self) -> dict | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        holder: dict | None = None
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    live, holder = _judge(self.path)
                except FileNotFoundError:
                    continue
                if live:
                    return live
                self._break(holder)  # a dead holder's, or a torn file of a dead writer
                continue
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump({**self.record, "time": time.time(), "sweep_id": os.environ.get("CLSUITE_SWEEP_ID")}, f)
            except OSError:  # (a full disk) not left torn: a torn lock would read as busy for 60 s
                self.path.unlink(missing_ok=True)
                raise
            self._beat = threading.Thread(target=self._heartbeat, daemon=True)
            self._beat.start()
            return None
        return holder or {"pid": "?", "host": "?"}

    def _break(self, judged: dict | None) -> None:
        """Move a stale lock aside atomically; put it back if it was not the one judged stale."""
        aside = self.path.with_name(f"{LOCK_FILE}.stale-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        if read_object(aside) != judged:  # a fresh lock taken meanwhile: give it back
            with contextlib.suppress(OSError):
                os.link(aside, self.path)
        with contextlib.suppress(OSError):
            aside.unlink()

    def _heartbeat(self) -> None:
        while not self._stop.wait(30.0):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def release(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError, ValueError, TypeError):
            if (read_object(self.path) or {}).get("token") == self.record["token"]:
                self.path.unlink()
