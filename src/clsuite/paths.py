"""Names that become folder names: the one check they pass first (:func:`safe_name`).

The experiment (``multirun/<experiment>/``, ``outputs/<experiment>/``, ``results/<experiment>/``),
the benchmark and method names (a single run's folder ``<time>_<benchmark>_<method>_<id>``) and
the arguments of ``scripts/aggregate.py`` / ``scripts/wandb_sync.py`` name folders. A name is
refused (``ConfigError``: one ``error:`` line, exit 2, before anything is written) when it

- is empty, ``.`` or ``..``, or starts with ``.`` (hidden and bookkeeping folders: ``.index``);
- holds a ``/`` or ``\\`` (a path, absolute or relative: ``../../x``, ``/tmp/x``);
- holds a control character (a newline, a NUL, ...);
- is longer than :data:`MAX_NAME` bytes (a file name stops at 255; a run folder joins several).

An explicit ``hydra.run.dir`` / ``hydra.sweep.dir`` is the user's choice of folder (Hydra's
convention) and is not checked here; ``clsuite.sweep.callback`` refuses a run folder that holds
another run's results.
"""

from __future__ import annotations

from clsuite.config import ConfigError, dotted_get

MAX_NAME = 100
NAMED = ("experiment", "benchmark.name", "method.name")  # config keys whose values name folders


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


def check_names(cfg) -> None:
    """Every config value of :data:`NAMED` (``config.validate`` calls this)."""
    for key in NAMED:
        value = dotted_get(cfg, key)
        if value is not None:
            safe_name(value, key)
