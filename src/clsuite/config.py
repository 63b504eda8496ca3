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
import math
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def _conf_dir() -> Path:
    packaged = Path(__file__).resolve().parent / "conf"  # pip install . (hatch force-include)
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "conf"


CONF_DIR = _conf_dir()
GROUPS = tuple(sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir()))
RESUME_MODES = ("strict", "config_only", "off")  # clsuite.sweep.Job: what a finished result must match
SEED_MAX = 2**32 - 1  # numpy's seed range


class ConfigError(ValueError):
    pass


def group_options(group: str, extra_dirs=()) -> list[str]:
    """The options of a config group: its yaml files in ``conf/`` and in the ``extra_dirs`` on Hydra's
    search path (``--config-dir``, ``hydra.searchpath``: a benchmark added outside the package)."""
    return sorted({p.stem for d in (CONF_DIR, *extra_dirs) for p in (Path(d) / group).glob("*.yaml")})


def unknown_option(key: str, value: str, extra_dirs=()) -> str | None:
    """The error line for ``group=value`` when ``value`` has no yaml file in the group, else None."""
    key = key.lstrip("+~")
    if key not in GROUPS or value in group_options(key, extra_dirs):
        return None
    return f"unknown {key} {value!r}; valid choices: {', '.join(group_options(key, extra_dirs))}"


def search_dirs(args: list[str]) -> list[Path]:
    """The config directories the command line adds to Hydra's search path: ``--config-dir``/``-cd``
    and the ``file://`` (or plain) entries of ``hydra.searchpath=[...]``."""
    out = []
    for i, a in enumerate(args):
        if a in ("--config-dir", "-cd") and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith("--config-dir="):
            out.append(a.split("=", 1)[1])
        elif a.startswith("hydra.searchpath="):
            items = a.split("=", 1)[1].strip("[]").split(",")
            out += [s.strip().strip("'\"").removeprefix("file://") for s in items if "pkg://" not in s and s.strip()]
    return [Path(d) for d in out]


@functools.cache
def top_level_keys() -> list[str]:
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    return sorted({*(k for k in base if k not in ("defaults", "hydra")), *GROUPS})


def check_overrides(args: list[str]) -> None:
    """Command-line overrides: unknown group options (``method=foo``) and unknown keys (``+memroy=50``)."""
    known = top_level_keys()  # (cached: read once per process)
    extra = search_dirs(args)
    for arg in args:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        bare = key.lstrip("+~").split("@")[0]  # `update@method.update=reservoir`: the group is `update`
        if bare.startswith(("hydra", "logger.")):
            continue  # Hydra's own keys; logger options are passed through to the logger
        adds = key.startswith("+") and not key.startswith("++")  # `+k=v` adds a key the suite never reads
        if adds or bare.split(".")[0] not in known:
            close = difflib.get_close_matches(bare.split(".")[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key {bare!r} in {arg!r}{hint}; valid top-level keys: {', '.join(known)}")
        if bare in GROUPS and not value.startswith(("choice(", "range(", "glob(", "interval(")):
            for v in value.split(","):
                if v.strip() and (msg := unknown_option(bare, v.strip(), extra)):
                    raise ConfigError(msg)


# ----------------------------------------------------------------------------- values


def dotted_get(cfg, dotted: str, default=None):
    """``cfg["a"]["b"]`` for ``"a.b"`` in a DictConfig or a plain dict; ``default`` where a level is missing."""
    node = cfg
    for k in dotted.split("."):
        if not isinstance(node, Mapping) or k not in node:
            return default
        node = node[k]
    return node


def _number(cfg, key: str, default=None) -> float:
    v = dotted_get(cfg, key, default)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"{key} must be a number, got {v!r}")
    if not math.isfinite(v):
        raise ConfigError(f"{key} must be a finite number, got {v!r}")
    return float(v)


def _whole(cfg, key: str, lo: int, hi: int | None = None, default=None, allow_null: bool = False) -> int | None:
    """An int in [lo, hi]; a float such as 50.0 is rejected (it would be a second identity of 50)."""
    v = dotted_get(cfg, key, default)
    if v is None and allow_null:
        return None
    rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
    what = f"{key} must be a whole number {rng}{' or null' if allow_null else ''}, got {v!r}"
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and lo <= v and (hi is None or v <= hi):
        raise ConfigError(f"{what} (write {int(v)})")
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        raise ConfigError(what)
    return int(v)


def _choice(cfg, key: str, valid, default=None) -> str:
    v = dotted_get(cfg, key, default)
    if v not in valid:
        raise ConfigError(f"unknown {key} {v!r}; valid choices: {', '.join(map(str, valid))}")
    return v


def _precisions() -> tuple:
    import typing

    from lightning.fabric.connector import _PRECISION_INPUT_STR, _PRECISION_INPUT_STR_ALIAS

    return (*typing.get_args(_PRECISION_INPUT_STR), *typing.get_args(_PRECISION_INPUT_STR_ALIAS), 16, 32, 64)


# ----------------------------------------------------------------------------- the check


def validate(cfg: DictConfig) -> None:
    """Every check a composed config must pass before a run; raises ``ConfigError`` (one line)."""
    _whole(cfg, "seed", 0, SEED_MAX)
    _whole(cfg, "memory", 0)
    lam = _number(cfg, "lambda", 0.0)
    if not 0.0 <= lam < 1.0:
        raise ConfigError(f"lambda (imbalance) must be in [0, 1), got {cfg['lambda']!r}")
    tau = _number(cfg, "tau", 0.5)
    if not 0.0 <= tau <= 1.0:
        raise ConfigError(f"tau must be in [0, 1], got {cfg.tau!r}")
    if _number(cfg, "lr") <= 0:
        raise ConfigError(f"lr must be a finite number > 0, got {cfg.lr!r}")
    for key in ("momentum", "weight_decay"):
        if dotted_get(cfg, key) is not None and _number(cfg, key) < 0:
            raise ConfigError(f"{key} must be a finite number >= 0, got {cfg[key]!r}")
    batch_size = _whole(cfg, "batch_size", 1)
    _whole(cfg, "replay_size", 1)
    _whole(cfg, "candidates", 1, allow_null=True)  # the reading's keys (conf/reading/)
    for key in ("memory_per_class", "exclude_current_task", "compare_to_old_logits"):
        _choice(cfg, key, (True, False))
    if dotted_get(cfg, "method.lr") is not None and _number(cfg, "method.lr") <= 0:
        raise ConfigError(f"method.lr must be a finite number > 0 or null (the run's lr), got {cfg.method.lr!r}")
    _whole(cfg, "benchmark.iters_per_batch", 1, default=1)
    _choice(cfg, "scenario", ("class_il", "task_il", "domain_il"))
    _choice(cfg, "replay_loss", ("concat", "split"))
    _choice(cfg, "eval_mask", ("all", "seen"))
    _choice(cfg, "eval_split", ("test", "val"))
    _choice(cfg, "resume", RESUME_MODES, default="strict")
    _check_trainer(cfg)
    _check_data(cfg, batch_size)


def _check_trainer(cfg) -> None:
    _whole(cfg, "trainer.threads", 1, allow_null=True)
    _whole(cfg, "trainer.log_every_n_steps", 1, default=50)
    precision = dotted_get(cfg, "trainer.precision", "32-true")
    valid = _precisions()
    if precision not in valid:
        raise ConfigError(f"unknown trainer.precision {precision!r}; valid choices: {', '.join(map(str, valid))}")
    acc = _choice(cfg, "trainer.accelerator", ("auto", "cpu", "gpu"), default="auto")
    index = _whole(cfg, "trainer.device_index", 0, allow_null=True)
    if acc == "gpu" or index is not None:
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0 and acc == "gpu":
            raise ConfigError("trainer.accelerator='gpu' but no CUDA device is available; valid here: auto, cpu")
        if index is not None and n and index >= n:
            raise ConfigError(f"trainer.device_index must be in [0, {n - 1}] on this machine, got {index}")


def _check_data(cfg, batch_size: int) -> None:
    d, b = cfg.data, cfg.benchmark
    _choice(cfg, "data.class_order", ("natural", "random"))
    _choice(cfg, "data.imbalance_semantics", ("keep", "ratio"))
    vf = _number(cfg, "data.val_fraction", 0.0)
    if not 0.0 <= vf < 1.0:
        raise ConfigError(f"data.val_fraction must be in [0, 1), got {d.val_fraction!r}")
    if cfg.eval_split == "val" and vf == 0.0:
        raise ConfigError("eval_split=val needs data.val_fraction > 0 (e.g. data.val_fraction=0.05)")
    from clsuite.data import sources  # the reader registry: a source's sizes and files

    src = b.source
    try:
        source = sources.get(src)
    except sources.UnknownSource as e:
        raise ConfigError(str(e)) from None
    size = lambda v: v if isinstance(v, int) else _whole(cfg, f"benchmark.{v}", 1)  # noqa: E731
    n_classes, available = size(source.classes), size(source.train_per_class)
    per_task = _whole(cfg, "benchmark.classes_per_task", 1, n_classes)
    _whole(cfg, "benchmark.n_tasks", 1, n_classes // per_task)
    per_class = _whole(cfg, "benchmark.train_per_class", 1, available, allow_null=True) or available
    kept = per_class - round(vf * per_class)
    if kept < 1:
        raise ConfigError(
            f"data.val_fraction={vf} leaves {kept} training samples per class of {per_class} (zero training "
            f"steps); valid: data.val_fraction < {1 - 0.5 / per_class:.4f}"
        )
    rels = source.file_list(OmegaConf.to_container(b, resolve=True))
    if source.files is None:  # generated data: no data directory
        return
    root = Path(str(d.root))
    if not d.download and not root.is_dir():
        raise ConfigError(
            f"data directory {d.root!r} does not exist; set DATA_DIR or data.root to the folder holding "
            f"{src}'s files (e.g. DATA_DIR=../shared/datasets), or pass data.download=true on a machine with network"
        )
    from clsuite.data.files import unreadable

    if problem := unreadable(root, rels):
        raise ConfigError(problem)
