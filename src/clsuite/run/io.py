"""One home for the suite's file names, its file I/O and its hashes: atomic writes, bounded reads of
regular files (:class:`Unreadable`: a one-line reason), canonical JSON and sha256 (docs/INTEGRITY.md,
sections 1 and 7).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

RESULTS_FILE = "results.json"  # one finished run (written last, atomically)
FAILED_FILE = "failed.json"  # one failed sweep job (error line, traceback, attempts)
GRID_FILE = "grid.json"  # the expected job folders of a sweep
LOG_FILE = "sweep_log.jsonl"  # one line per sweep job: ran / skipped / reused / busy / interrupted / failed
LOCK_FILE = "running.lock"  # a sweep job in progress: flock held, holder pid and host (clsuite.sweep.locks.JobLock)
OVERRIDES_FILE = "overrides.json"  # a job folder whose name is hashed (overrides too long) keeps them here
STALE_PREFIX = "results.stale-"  # an older result of the job, kept when its identity no longer matches
CHECKPOINT_DIR = "checkpoints"  # a sweep job's task-end checkpoints, in its folder (clsuite.run.checkpoint)
METRICS_CSV = "csv/metrics.csv"  # a run's loss and accuracy rows from the CSV logger (clsuite.run.loggers)


MEMORY_TMP = Path("/dev/shm")  # Linux's tmpfs: files there never reach a disk


def scratch_dir(prefix: str, need_bytes: int = 1 << 30) -> tempfile.TemporaryDirectory:
    """A temporary folder for thousands of small files written, read and deleted within one command (the
    records extracted for a report): in memory (:data:`MEMORY_TMP`) where it is a writable folder with
    ``need_bytes`` free and ``TMPDIR`` is not set, else the system's temporary folder. On a disk mounted
    with ``discard`` every deletion waits for the device (docs/notes/PERFORMANCE.md, "The report's time")."""
    root = None
    with contextlib.suppress(OSError):
        if "TMPDIR" not in os.environ and os.access(MEMORY_TMP, os.W_OK | os.X_OK):
            root = MEMORY_TMP if shutil.disk_usage(MEMORY_TMP).free >= need_bytes else None
    return tempfile.TemporaryDirectory(prefix=prefix, dir=root)


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


PROBE_FILE, PROBE_BYTES = ".clsuite-write-probe", 1 << 16  # more than Hydra's .hydra/*.yaml of a run


def probe_folder(folder: str | Path) -> None:
    """Make ``folder`` and write :data:`PROBE_BYTES` there, then remove them, before anything of value
    is written: an OS error (read-only, a full disk, a name too long, a parent that is a file) names
    ``folder``, and the folders made here are removed again."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # (the innermost first)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(folder / PROBE_FILE, bytes(PROBE_BYTES))
        (folder / PROBE_FILE).unlink()
    except OSError as e:
        for p in made:
            with contextlib.suppress(OSError):
                p.rmdir()
        raise OSError(e.errno, e.strerror, str(folder)) from e


def canonical(obj) -> str:
    """One JSON text per value: sorted keys, no spaces, keys as strings (a JSON round trip first)."""
    plain = json.loads(json.dumps(obj, default=str, allow_nan=True))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=True)


def sha256(data: str | bytes) -> str:
    """The sha256 hex digest of ``data`` (of a string: its UTF-8 bytes)."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def os_error_line(e: OSError) -> str:
    """``<reason>: <path>``: one line for an OS error on an output path (``Read-only file system: ...``)."""
    return f"{e.strerror or e}: {e.filename}" if e.filename is not None else f"{e.strerror or e}"


MAX_BYTES = 64 << 20  # a bookkeeping file of the suite (results, grid, log) is far smaller
MAX_DEPTH = 64  # JSON nesting: the suite's files nest under 10 levels; Python's parser fails near 1000


class Unreadable(Exception):
    """A file that is not read back: not a regular file, too large, nested too deeply, not valid
    JSON, or an OS error. Its message is the one-line reason."""


_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFSOCK: "socket", stat.S_IFDIR: "folder"}  # fmt: skip


def read_regular(path: str | Path, limit: int | None = MAX_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (a symlink is followed), at most ``limit`` of them.

    ``FileNotFoundError`` when it is missing; :class:`Unreadable` otherwise: not a regular file
    (opened non-blocking, so a FIFO is refused at once instead of waiting for a writer), larger
    than ``limit``, or an OS error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as e:
        raise Unreadable(f"unreadable ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(f"not a regular file (a {_KINDS.get(stat.S_IFMT(st.st_mode), 'special file')})")
        if limit is not None and st.st_size > limit:
            raise Unreadable(f"too large ({st.st_size} bytes; the suite reads at most {limit})")
        chunks, n = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            n += len(chunk)
            if limit is not None and n > limit:
                raise Unreadable(f"too large (more than {limit} bytes)")
        return b"".join(chunks)
    except OSError as e:
        raise Unreadable(f"unreadable ({e.strerror or e})") from None
    finally:
        os.close(fd)


def too_deep(obj, limit: int = MAX_DEPTH) -> bool:
    """Whether parsed JSON nests deeper than ``limit`` levels (walked without recursion)."""
    stack = [(obj, 1)] if isinstance(obj, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def parse_json(data: bytes | str):
    """Parsed JSON, bounded in nesting; :class:`Unreadable` when it is not valid or too deep."""
    try:
        obj = json.loads(data)
    except RecursionError:
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels (not a file of the suite)") from None
    except ValueError:  # (UnicodeDecodeError included)
        raise Unreadable("not valid JSON (a torn or hand-written file)") from None
    if too_deep(obj):
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels (not a file of the suite)")
    return obj


def load_json(path: str | Path, limit: int | None = MAX_BYTES):
    """The parsed JSON file at ``path`` (:func:`read_regular`, :func:`parse_json`): ``FileNotFoundError``
    when it is missing, :class:`Unreadable` with the reason otherwise."""
    return parse_json(read_regular(path, limit))


def read_json(path: str | Path) -> dict | None:
    """The parsed file, or None when it is missing, unreadable (:func:`load_json`) or not valid JSON."""
    try:
        return load_json(path)
    except (OSError, Unreadable):
        return None


def read_object(path: str | Path) -> dict | None:
    """The parsed file when it holds a JSON object; None when it is missing, unreadable, not valid
    JSON, or valid JSON of another kind (``[]``: a bookkeeping file someone else wrote)."""
    obj = read_json(path)
    return obj if isinstance(obj, dict) else None


def read_failure(path: str | Path) -> dict | None:
    """A job's ``failed.json``: None when it is missing; one that cannot be read is a failure all the
    same, its ``error`` saying why (never taken for no record)."""
    try:
        rec = load_json(path)
    except FileNotFoundError:
        return None
    except (OSError, Unreadable) as e:
        return {"error": f"its {FAILED_FILE} is unreadable: {e}"}
    return rec if isinstance(rec, dict) else {"error": f"its {FAILED_FILE} is not a JSON object"}


def read_log(sweep_dir: str | Path, sweep_id: str | None = None) -> list[dict]:
    """The records of ``<sweep_dir>/sweep_log.jsonl`` (of the invocation ``sweep_id`` when given);
    unreadable lines and lines that are not JSON objects are skipped."""
    try:
        lines = read_regular(Path(sweep_dir) / LOG_FILE).splitlines()
    except (OSError, Unreadable):
        return []
    out = []
    for line in lines:
        try:
            rec = parse_json(line)
        except Unreadable:
            continue
        if isinstance(rec, dict) and (sweep_id is None or rec.get("sweep_id") == sweep_id):
            out.append(rec)
    return out
