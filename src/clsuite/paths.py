"""Names that become folder names: the one check they pass first (:func:`safe_name`; the rule and
who asks it: docs/INTEGRITY.md, section 4), and a sweep job's folder name (:func:`job_dirname`:
Hydra's override dirname, hashed when longer than :data:`MAX_DIRNAME`; docs/RUNS.md, "Grid").
"""

from __future__ import annotations

import hashlib
import uuid

from clsuite.errors import ConfigError

MAX_NAME = 100
NAMED = ("experiment", "benchmark.name", "method.name")  # config keys whose values name folders
MAX_DIRNAME = 200  # a job folder name longer than this is hashed
RUN_ID = uuid.uuid4().hex[:6]  # this process's run: the last part of a single run's folder name


def safe_name(value, what: str = "name") -> str:
    """``value`` when it can be a folder name, else ``ConfigError`` naming it and the rule."""
    name = value if isinstance(value, str) else str(value)
    why = None
    if name in ("", ".", ".."):
        why = "it is empty or a parent/current folder"
    elif "/" in name or "\\" in name:
        why = "it holds a path separator"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        why = "it holds a control character"
    elif name.startswith("."):
        why = "it starts with '.' (hidden and bookkeeping folders)"
    elif len(name.encode()) > MAX_NAME:
        why = f"it is longer than {MAX_NAME} bytes"
    if why:
        raise ConfigError(
            f"{what} {name!r} cannot be a folder name: {why}; valid: 1 to {MAX_NAME} bytes without path "
            "separators or control characters, not starting with '.'"
        )
    return name


def job_dirname(name: str) -> str:
    """The override dirname, or a prefix of it plus a hash when it is too long for a folder name."""
    if len(name.encode()) <= MAX_DIRNAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    prefix = name.encode()[: MAX_DIRNAME - 40].decode(errors="ignore").rsplit(",", 1)[0]
    return f"{prefix},hash={digest}"
