"""The Python API: compose a config, run it, get the results dict (docs/GUIDE.md, "As a package").

:func:`compose` checks and validates overrides as the command line does; :func:`run` trains a composed
config, or a list of overrides, into a folder. Sweeps are the command line's (``clsuite -m``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, open_dict

from clsuite.config import compose as _compose
from clsuite.config.check import ConfigError, validate

__all__ = ["ConfigError", "compose", "run"]


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The suite's config with ``overrides`` (Hydra syntax, e.g. ``"memory=200"``), checked as the CLI checks it."""
    cfg = _compose.compose(list(overrides), config_name=config_name)
    with open_dict(cfg):
        del cfg["hydra"]  # (as Hydra hands a run its config)
    validate(cfg)
    return cfg


def run(cfg: DictConfig | Sequence[str], out_dir: str | Path) -> dict:
    """Train one run of ``cfg`` (a composed config or a list of overrides); the results dict."""
    from clsuite.run.experiment import run_experiment

    if isinstance(cfg, DictConfig):
        validate(cfg)  # (a config edited after compose)
    else:
        cfg = compose(cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return run_experiment(cfg, out_dir)
