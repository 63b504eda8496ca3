"""hydra_plugins.clsuite_sweeper: Hydra's basic sweeper without its second up-front composition of every job."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict, read_write

from clsuite import sweep
from clsuite.config import ConfigError
from clsuite.sweep import grid as grid_mod
from tests.conftest import CONF_DIR
from tests.test_sweeps import compose_sweep


class CountingLoader:
    """A config loader that counts the compositions Hydra's check asks of it."""

    def __init__(self):
        self.composed: list[list[str]] = []

    def load_sweep_config(self, master_config, sweep_overrides):
        self.composed.append(list(sweep_overrides))


def sweeper_with(loader):
    from hydra.core.plugins import Plugins

    Plugins.instance()  # Hydra's plugin scan (re-executes the sweeper modules) comes first, as in a sweep
    from hydra_plugins.clsuite_sweeper import BasicSweeper

    s = BasicSweeper(max_batch_size=None, params=None)
    s.hydra_context, s.config = SimpleNamespace(config_loader=loader), object()
    return s


def grid_of(*command_line: str):
    """(config, jobs) of ``python src/run.py -m <command_line>``; validate_grid runs inside a Hydra context."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True)
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.overrides.task = list(command_line)
    return cfg, sweep.expand_grid(cfg)


def validated_grid(*command_line: str) -> list[dict]:
    cfg, jobs = grid_of("benchmark=synthetic", "seed=0,1", *command_line)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):  # as in the sweep's process
        sweep.validate_grid(cfg, jobs)
    return jobs


@pytest.fixture(autouse=True)
def fresh_record(monkeypatch):
    monkeypatch.setattr(grid_mod, "_VALIDATED", set())


def test_the_config_names_the_clsuite_sweeper():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True)
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.clsuite_sweeper.BasicSweeper"
    assert compose_sweep("table2").hydra.sweeper._target_ == "hydra_plugins.clsuite_sweeper.BasicSweeper"


def test_a_batch_the_grid_check_validated_is_not_composed_again():
    jobs = validated_grid("method=er,mir")
    batch = [j["overrides"] for j in jobs]
    assert len(batch) == 4 and all(grid_mod.was_validated([b]) for b in batch)
    loader = CountingLoader()
    sweeper_with(loader).validate_batch_is_legal(batch)
    assert loader.composed == []


def test_any_job_not_validated_gets_hydras_check_of_the_whole_batch():
    jobs = validated_grid("method=er")
    batch = [j["overrides"] for j in jobs] + [["method=gem", "seed=0"]]
    loader = CountingLoader()
    sweeper_with(loader).validate_batch_is_legal(batch)
    assert loader.composed == batch  # Hydra's own check: every job composed, in order
    loader = CountingLoader()
    sweeper_with(loader).validate_batch_is_legal([])
    assert loader.composed == []  # (an empty batch: nothing to compose either way)


def test_a_refused_grid_records_nothing():
    cfg, jobs = grid_of("benchmark=synthetic", "method=er", "lr=0.1,nan")
    with (
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
        pytest.raises(ConfigError, match="lr must be a finite number"),
    ):
        sweep.validate_grid(cfg, jobs)
    assert not any(grid_mod.was_validated([j["overrides"]]) for j in jobs)  # not even the good job before it


def test_an_unknown_option_in_the_grid_names_its_job():
    """The grid's jobs go through the one check of unknown options (``config.check_overrides``)."""
    cfg, jobs = grid_of("benchmark=synthetic", "method=er,nope")
    with (
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
        pytest.raises(
            ConfigError, match=r"^unknown method 'nope'; valid choices: .*\(job benchmark=synthetic,method=nope\)$"
        ),
    ):
        sweep.validate_grid(cfg, jobs)


def test_a_new_sweep_forgets_the_jobs_an_earlier_one_validated(monkeypatch):
    for key in ("CLSUITE_SWEEP_ID", "CLSUITE_SWEEP_PID"):  # set by the callback: restored after the test
        monkeypatch.setenv(key, "")
    jobs = validated_grid("method=er")
    assert grid_mod.was_validated([j["overrides"] for j in jobs])
    sweep.SweepCallback().on_multirun_start(compose_sweep("table2", "hydra.sweeper._target_=x.Other"))
    assert not grid_mod.was_validated([j["overrides"] for j in jobs])  # (a glob() sweep would get Hydra's check)
