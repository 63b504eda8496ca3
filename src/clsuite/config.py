"""The config directory, its groups and options, and every check on a config before a run.

One home for: ``CONF_DIR`` (the packaged copy ``clsuite/conf`` in an installed wheel, the
repository's ``conf/`` in a checkout), the config groups (its sub-folders) and their options
(its yaml files), the unknown-option / unknown-key check on overrides (:func:`check_overrides`,
used by the command line, the sweep grid and ``clsuite.api``) and :func:`validate`, the check of
a composed config. Every failure is a ``ConfigError`` whose message is one line naming the bad
value and the valid range; the command line prints it as ``error: ...`` and exits with status 2,
before any data is read or any step is taken (a sweep: before any job starts).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from clsuite.schema import RESUME_MODES, SEED_MAX, SOURCE_SIZES, ConfigError, check  # noqa: F401  (re-exported)


def _conf_dir() -> Path:
    packaged = Path(__file__).resolve().parent / "conf"  # pip install . (hatch force-include)
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "conf"


CONF_DIR = _conf_dir()
GROUPS = tuple(sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir()))


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def unknown_option(key: str, value: str) -> str | None:
    """The error line for ``group=value`` when ``value`` has no yaml file in the group, else None."""
    key = key.lstrip("+~")
    if key not in GROUPS:
        return None
    if "/" not in value and "\\" not in value and (CONF_DIR / key / f"{value}.yaml").is_file():
        return None
    return f"unknown {key} {value!r}; valid choices: {choices(key)}"


def choices(group: str) -> str:
    return ", ".join(group_options(group))


@functools.cache
def top_level_keys() -> list[str]:
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    return sorted({*(k for k in base if k not in ("defaults", "hydra")), *GROUPS})


def check_overrides(args: list[str]) -> None:
    """Command-line overrides: unknown group options (``method=foo``) and unknown keys (``+memroy=50``)."""
    known = top_level_keys()  # (cached: read once per process)
    for arg in args:
        if arg.startswith("-") or ("=" not in arg and not arg.startswith("~")):
            continue
        key, _, value = arg.partition("=")
        bare = key.lstrip("+~").split("@")[0]  # `update@method.update=reservoir`: the group is `update`
        if bare.startswith(("hydra", "logger.")):
            continue  # Hydra's own keys; logger options are passed through to the logger
        adds = key.startswith("+") and not key.startswith("++")  # `+k=v` adds a key the suite never reads
        if adds and bare in known:
            raise ConfigError(f"{bare} is already in the config: write {arg[1:]!r} (+ adds a key it lacks)")
        if adds or bare.split(".")[0] not in known:
            close = difflib.get_close_matches(bare.split(".")[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key {bare!r} in {arg!r}{hint}; valid top-level keys: {', '.join(known)}")
        if bare in GROUPS and key.startswith("~") and bare != "tuned":  # (tuned is optional)
            raise ConfigError(f"{bare} cannot be deleted ({arg}): every run needs one; valid choices: {choices(bare)}")
        if bare in GROUPS and not value.startswith(("choice(", "range(", "glob(", "interval(")):
            for v in value.split(","):
                if (v.strip() or not key.startswith("~")) and (msg := unknown_option(bare, v.strip())):
                    raise ConfigError(msg)
        from clsuite.paths import NAMED, safe_name  # values that become folder names, before Hydra makes one

        if bare in NAMED:
            for v in _sweep_values(value):
                safe_name(v, bare)


def _sweep_values(value: str) -> list[str]:
    """The values of an override: ``a,b`` or ``choice(a,b)`` -> [a, b], quotes stripped."""
    if value.startswith(("choice(", "glob(")) and value.endswith(")"):
        value = value[value.index("(") + 1 : -1]
    return [v.strip().strip("'\"") for v in value.split(",")]


# ----------------------------------------------------------------------------- values


def dotted_get(cfg, dotted: str, default=None):
    """``cfg["a"]["b"]`` for ``"a.b"`` in a DictConfig or a plain dict; ``default`` where a level is missing."""
    node = cfg
    for k in dotted.split("."):
        if not isinstance(node, Mapping) or k not in node:
            return default
        node = node[k]
    return node


# ----------------------------------------------------------------------------- the check


def validate(cfg: DictConfig) -> None:
    """Every check a composed config must pass before a run; raises ``ConfigError`` (one line).

    The declared schema (``clsuite.schema``: every key's type and range, the cross-key rules),
    then the data files the run will read."""
    from clsuite.paths import check_names  # names that become folder names (clsuite.paths)

    check_names(cfg)
    check(cfg)
    if cfg.benchmark.source == "synthetic":
        return
    d = cfg.data
    root = Path(str(d.root))
    if not d.download and not root.is_dir():
        raise ConfigError(
            f"data directory {d.root!r} does not exist; set DATA_DIR or data.root to the folder holding "
            f"{cfg.benchmark.source}'s files (e.g. DATA_DIR=../shared/datasets), or pass data.download=true on a "
            "machine with network"
        )
    from clsuite.data.files import unreadable

    if problem := unreadable(root, cfg.benchmark.source):
        raise ConfigError(problem)
