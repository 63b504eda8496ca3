"""Checks on a composed config, before any data is read or any step is taken.

Every failure is a ``ConfigError`` whose message is one line naming the bad
value and the valid choices; ``run.py`` prints it and exits with status 2.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("benchmark", "method", "model", "trainer", "logger", "launcher")


class ConfigError(ValueError):
    pass


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def check_overrides(args: list[str]) -> None:
    """Unknown config-group options in command-line overrides (``method=foo``)."""
    for arg in args:
        if "=" not in arg or arg.startswith(("-", "+", "~", "hydra")):
            continue
        key, value = arg.split("=", 1)
        if key not in GROUPS or not (CONF_DIR / key).is_dir():
            continue
        values = value.split(",") if not value.startswith(("choice(", "range(", "glob(")) else []
        valid = group_options(key)
        for v in values:
            if v.strip() and v.strip() not in valid:
                raise ConfigError(f"unknown {key} {v.strip()!r}; valid choices: {', '.join(valid)}")


def _num(cfg, key, default=None):
    v = cfg.get(key, default)
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got {v!r}") from None


def validate(cfg: DictConfig) -> None:
    memory = _num(cfg, "memory")
    if memory < 0 or memory != int(memory):
        raise ConfigError(f"memory must be a whole number >= 0, got {cfg.memory!r}")
    lam = _num(cfg, "lambda", 0.0)
    if not 0.0 <= lam < 1.0:
        raise ConfigError(f"lambda (imbalance) must be in [0, 1), got {cfg['lambda']!r}")
    tau = _num(cfg, "tau", 0.5)
    if not 0.0 <= tau <= 1.0:
        raise ConfigError(f"tau must be in [0, 1], got {cfg.tau!r}")
    if _num(cfg, "lr") <= 0:
        raise ConfigError(f"lr must be > 0, got {cfg.lr!r}")
    for key in ("batch_size", "replay_size"):
        v = _num(cfg, key)
        if v < 1 or v != int(v):
            raise ConfigError(f"{key} must be a whole number >= 1, got {cfg[key]!r}")
    iters = _num(cfg.benchmark, "iters_per_batch", 1)
    if iters < 1 or iters != int(iters):
        raise ConfigError(f"benchmark.iters_per_batch must be a whole number >= 1, got {iters!r}")
    choices = {
        "scenario": ("class_il", "task_il", "domain_il"),
        "replay_loss": ("concat", "split"),
        "eval_mask": ("all", "seen"),
        "eval_split": ("test", "val"),
    }
    for key, valid in choices.items():
        if cfg.get(key) not in valid:
            raise ConfigError(f"unknown {key} {cfg.get(key)!r}; valid choices: {', '.join(valid)}")
    d = cfg.data
    if d.class_order not in ("natural", "random"):
        raise ConfigError(f"unknown data.class_order {d.class_order!r}; valid choices: natural, random")
    if d.imbalance_semantics not in ("keep", "ratio"):
        raise ConfigError(f"unknown data.imbalance_semantics {d.imbalance_semantics!r}; valid choices: keep, ratio")
    vf = _num(d, "val_fraction", 0.0)
    if not 0.0 <= vf < 1.0:
        raise ConfigError(f"data.val_fraction must be in [0, 1), got {d.val_fraction!r}")
    if cfg.eval_split == "val" and vf == 0.0:
        raise ConfigError("eval_split=val needs data.val_fraction > 0 (e.g. data.val_fraction=0.05)")
    src = cfg.benchmark.source
    if src != "synthetic" and not d.download and not Path(str(d.root)).is_dir():
        raise ConfigError(
            f"data directory {d.root!r} does not exist; set DATA_DIR or data.root to the folder holding "
            f"{src}'s files (e.g. DATA_DIR=../shared/datasets), or pass data.download=true on a machine with network"
        )
