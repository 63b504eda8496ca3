"""The Makefile's paper targets: which folder a target's sweep writes and its aggregation reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def dry_run(*args: str) -> str:
    out = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.replace("\\\n", " ")  # join the recipe's continued lines


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize(
    "args, sweep_exp, folder",
    [
        (("fig-tau",), None, "tau"),
        (("fig-tau", "EXPERIMENT=mine"), "mine", "mine"),
        (("fig-tau", "ARGS=logger=none experiment=mine"), "mine", "mine"),
        (("table2", "EXPERIMENT=t2b"), "t2b", "t2b"),
    ],
)
def test_a_target_aggregates_the_folder_its_sweep_wrote(args, sweep_exp, folder):
    out = dry_run(*args)
    sweep = next(line for line in out.splitlines() if "src/run.py --config-dir sweeps" in line)
    agg = out[out.index("scripts/aggregate.py") :].split("||")[0].split()
    layout = args[0].removeprefix("fig-").replace("-", "_")
    assert agg[1:] == [folder, "--layout", layout]
    assert (f"experiment={sweep_exp}" in sweep) == (sweep_exp is not None)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_a_cell_target_runs_each_of_its_sweeps_in_its_own_folder_at_10_seeds():
    out = dry_run("cell-joint", "EXPERIMENT=mine")
    sweep = next(line for line in out.splitlines() if "src/run.py --config-dir sweeps" in line)
    assert "--config-name $c" in sweep and "for c in cells_joint;" in out
    assert "experiment=" not in sweep  # each sweep writes multirun/<its name>/, which the report reads
    assert "'seed=range(0,10)'" in sweep and "scripts/aggregate.py $c" in out
    assert "'seed=range(0,3)'" in dry_run("cell-joint", "SEEDS=3")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_parity_runs_the_harness_on_the_given_checkout():
    out = dry_run("parity", "MAMMOTH=/somewhere/mammoth", "PARITY_ARGS=--seeds 0")
    assert "scripts/parity/harness.py --mammoth /somewhere/mammoth --seeds 0" in out
