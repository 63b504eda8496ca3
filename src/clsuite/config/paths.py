"""Names that become folder names: the one check they pass first (:func:`safe_name`; the rule and
who asks it: docs/INTEGRITY.md, section 4), and a sweep job's folder name (:func:`job_dirname`:
Hydra's override dirname made one folder name, hashed when longer than :data:`MAX_DIRNAME`; docs/GUIDE.md,
"Grid").
"""

from __future__ import annotations

import hashlib
import urllib.parse
import uuid

from clsuite.core.errors import ConfigError

MAX_NAME = 100
NAMED = ("experiment", "benchmark.name", "method.name")  # config keys whose values name folders
MAX_DIRNAME = 200  # a job folder name longer than this is hashed
RUN_ID = uuid.uuid4().hex[:6]  # this process's run: the last part of a single run's folder name


def safe_name(value, what: str = "name", limit: int = MAX_NAME) -> str:
    """``value`` when it can be a folder name of at most ``limit`` bytes (:data:`MAX_DIRNAME` for a job
    folder), else ``ConfigError`` naming it and the rule."""
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
    elif len(name.encode()) > limit:
        why = f"it is longer than {limit} bytes"
    if why:
        raise ConfigError(
            f"{what} {name!r} cannot be a folder name: {why}; valid: 1 to {limit} bytes without path "
            "separators or control characters, not starting with '.'"
        )
    return name


# a job folder name holds these as %XX: path separators, control characters, '%' itself (so that
# the name reads back as its overrides, :func:`dirname_text`); a leading '.' too (hidden folders)
_ESCAPED = {c: f"%{ord(c):02X}" for c in ["%", "/", "\\", *map(chr, range(32)), chr(127)]}
NO_OVERRIDES = "defaults"  # the folder of a job that overrides nothing its folder name would show


def job_dirname(name: str) -> str:
    """The override dirname as one folder name inside the sweep's (:data:`_ESCAPED` escaped), or a
    prefix of it plus a hash when it is longer than :data:`MAX_DIRNAME` bytes."""
    name = "".join(_ESCAPED.get(c, c) for c in name) or NO_OVERRIDES
    name = "%2E" + name[1:] if name.startswith(".") else name
    if len(name.encode()) <= MAX_DIRNAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    prefix = name.encode()[: MAX_DIRNAME - 40].decode(errors="ignore").rsplit(",", 1)[0]
    return f"{prefix},hash={digest}"


def dirname_text(name: str) -> str:
    """The overrides a job folder's name stands for (:func:`job_dirname`'s escapes undone)."""
    return urllib.parse.unquote(name)
