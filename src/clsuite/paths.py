"""Names that become folder names: the one check they pass first (:func:`safe_name`).

The experiment (``multirun/<experiment>/``, ``outputs/<experiment>/``, ``results/<experiment>/``),
the benchmark and method names (a single run's folder ``<time>_<benchmark>_<method>_<id>``) and
the arguments of ``clsuite aggregate`` / ``clsuite wandb`` name folders. A name is
refused (``ConfigError``: one ``error:`` line, exit 2, before anything is written) when it

- is empty, ``.`` or ``..``, or starts with ``.`` (hidden and bookkeeping folders: ``.index``);
- holds a ``/`` or ``\\`` (a path, absolute or relative: ``../../x``, ``/tmp/x``);
- holds a control character (a newline, a NUL, ...);
- is longer than :data:`MAX_NAME` bytes (a file name stops at 255; a run folder joins several).

A sweep job's folder is Hydra's override dirname; one longer than :data:`MAX_DIRNAME` characters is
shortened to a prefix plus a hash of the whole (:func:`job_dirname`; the job writes its overrides
inside, ``overrides.json``). ``clsuite.config`` registers the resolvers that use them.

An explicit ``hydra.run.dir`` / ``hydra.sweep.dir`` is the user's choice of folder (Hydra's
convention) and is not checked here; ``clsuite.sweep.callback`` refuses a run folder that holds
another run's results.
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
