"""Bad input: one `error:` line naming the bad value and the valid choices, exit 2,
before any training, and no results file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from clsuite.config import ConfigError, check_overrides, validate
from tests.conftest import make_cfg

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["memory=-5"], "memory must be a whole number >= 0, got -5"),
        (["lambda=1.0"], "lambda (imbalance) must be in [0, 1), got 1.0"),
        (["lambda=-0.1"], "lambda (imbalance) must be in [0, 1)"),
        (["tau=1.5"], "tau must be in [0, 1], got 1.5"),
        (["lr=0"], "lr must be > 0"),
        (["scenario=foo"], "unknown scenario 'foo'; valid choices: class_il, task_il, domain_il"),
        (["replay_loss=sum"], "valid choices: concat, split"),
        (["eval_split=val"], "needs data.val_fraction > 0"),
        (["benchmark=split_mnist", "data.root=/nonexistent/dir"], "data directory '/nonexistent/dir' does not exist"),
    ],
)
def test_validate_rejects_with_one_line(overrides, needle):
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*overrides))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_defaults_are_valid():
    validate(make_cfg())


@pytest.mark.parametrize(
    "arg,needle",
    [
        ("method=foo", "unknown method 'foo'; valid choices: "),
        ("benchmark=split_mnist,mnist2", "unknown benchmark 'mnist2'"),
    ],
)
def test_unknown_group_option_lists_choices(arg, needle):
    with pytest.raises(ConfigError) as e:
        check_overrides([arg])
    assert needle in str(e.value)
    assert "adaer" in str(e.value) or "split_mnist" in str(e.value)


def _run(*args, cwd):
    return subprocess.run(
        [sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_cli_unknown_method_and_bad_tau(tmp_path):
    p = _run("method=nope", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]  # exactly one line
    assert p.stderr.startswith("error: unknown method 'nope'; valid choices:") and "adaer" in p.stderr
    p = _run("tau=2", "benchmark=synthetic", "logger=none", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == "error: tau must be in [0, 1], got 2"
    assert not list(tmp_path.rglob("results.json"))


def test_cli_corrupted_data_file(tmp_path):
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in (
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ):
        (raw / f).write_bytes(b"garbage")
    p = _run(f"data.root={tmp_path / 'data'}", "logger=none", cwd=tmp_path)
    assert p.returncode == 2
    line = p.stderr.strip()
    assert "\n" not in line and line.startswith("error: corrupted data file") and "expected" in line
    assert "Traceback" not in p.stderr + p.stdout
    assert not list(tmp_path.rglob("results.json"))


def test_resolved_config_roundtrips():
    cfg = make_cfg("method=adaer", "tau=0.3")
    assert OmegaConf.to_container(cfg, resolve=True)["method"]["replay"]["tau"] == 0.3
