"""Shared test helpers: compose the real config with tiny synthetic overrides; code in a process
with pinned kernels; every test runs without the caller's ``CLSUITE_*`` variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from clsuite.config import check as config

torch.set_num_threads(1)  # tiny tensors: one thread is faster on a 2-core machine

CONF_DIR = str(config.CONF_DIR)  # the one home of the config directory
FAST = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false"]


def make_cfg(*overrides: str):
    """The suite's own config, composed as `python src/run.py` would, on synthetic data."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=[*FAST, *overrides])


def expected_identity(cfg) -> dict:
    """The identity a run of ``cfg`` started now would have (``clsuite.run.identity.expected``), its source bound."""
    from clsuite.core.data.sources import bind
    from clsuite.run.identity import expected

    return expected(cfg, bind(cfg.benchmark))


def identity_of(cfg, device: str | None = None) -> dict:
    """``clsuite.run.identity.identity`` of ``cfg`` on ``device``, its source bound."""
    from clsuite.core.data.sources import bind
    from clsuite.run.identity import identity

    return identity(cfg, device, bind(cfg.benchmark))


def run_cfg(tmp_path, *overrides: str) -> dict:
    from clsuite.run.experiment import run_experiment

    return run_experiment(make_cfg(*overrides), tmp_path)


ROOT = Path(__file__).resolve().parents[1]


def in_portable_process(code: str, timeout: int = 300) -> str:
    """Run ``code`` in a new Python process whose kernels ``trainer.numerics=portable`` pins before
    its first torch computation (this process's are fixed: clsuite.config.numerics); its stdout."""
    prelude = "from clsuite.config.numerics import apply, check\napply('portable')\ncheck('portable')\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    p = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=timeout, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


# The kernel level this process was started under: `make test` reruns the exact tests with one worker per level.
LEVEL = " ".join(f"{k}={os.environ[k]}" for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR") if k in os.environ)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails under a kernel level set from outside names it in its report."""
    report = (yield).get_result()
    if report.failed and LEVEL:
        report.sections.append(("kernel level", LEVEL))


@pytest.fixture(autouse=True, scope="session")
def _without_the_callers_clsuite_variables():
    """Every test and fixture runs, and starts its subprocesses, without the ``CLSUITE_*`` variables
    of the shell that started pytest (a retired ``CLSUITE_REUSE``: a ``note:`` line in each command's
    output); a test that needs one sets it itself (``monkeypatch.setenv``)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("CLSUITE_")]:
            mp.delenv(name)
        yield


@pytest.fixture
def run(tmp_path):
    def _run(*overrides):
        return run_cfg(tmp_path, *overrides)

    return _run


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """Offline W&B with every folder it writes inside the test's tmp dir."""
    for var in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / ".wandb" / var.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tmp_path
