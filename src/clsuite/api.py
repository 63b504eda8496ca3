"""The Python API: compose a config, run it, get the results dict.

    from clsuite import api

    cfg = api.compose(["method=mir", "memory=200", "seed=3"])   # validated as the CLI validates
    results = api.run(cfg, "runs/mir-200-s3")                    # trains, writes results.json there
    results["metrics"]["acc"], results["R"], results["identity"]["key"]

    api.run(["method=er", "benchmark=split_fmnist"], "runs/er")  # overrides straight away

Steps: :func:`compose` checks the overrides (``clsuite.config.check_overrides``: unknown group
option, unknown key), composes ``conf/config.yaml`` with Hydra's compose API (the packaged
configs when installed) and validates the result (``clsuite.config.validate``); :func:`run`
takes a composed config or a list of overrides, validates again (a config edited by hand after
compose), opens the config's logger and calls ``clsuite.experiment.run_experiment`` (threads
pinned, divergence guard, identity, sealed results file). Bad input raises
``clsuite.config.ConfigError`` with the same one-line message the CLI prints after ``error:``;
a missing or corrupted data file raises ``clsuite.data.files.DataError``; a non-finite loss
raises ``clsuite.callbacks.Diverged``. Sweeps (resume, locks, launchers) are the CLI's
(``clsuite -m``); the API runs one configuration in this process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from clsuite.compose import error_line, sweep_values
from clsuite.config import CONF_DIR, ConfigError, check_overrides, validate

__all__ = ["ConfigError", "compose", "run"]


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The suite's config with ``overrides`` (Hydra syntax, e.g. ``"memory=200"``), validated."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides)
    check_overrides(overrides)
    if arg := sweep_values(overrides):
        raise ConfigError(f"{arg} sweeps over several values; compose takes one value per key (sweeps: clsuite -m)")
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(error_line(e, overrides, config_name)) from None
    validate(cfg)
    return cfg


def run(cfg: DictConfig | Sequence[str], out_dir: str | Path) -> dict:
    """Train one run of ``cfg`` (a composed config or a list of overrides); the results dict."""
    from clsuite.experiment import run_experiment
    from clsuite.loggers import make_logger

    if not isinstance(cfg, DictConfig):
        cfg = compose(cfg)
    validate(cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with make_logger(cfg, out_dir) as logger:
        return run_experiment(cfg, out_dir, logger=logger)
