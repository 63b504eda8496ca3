"""The Makefile's paper targets: each is `clsuite paper <target>` (clsuite.paper) with the Make
variables as options; which folder a target's sweep writes and its aggregation reads."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from clsuite import paper

ROOT = Path(__file__).resolve().parents[1]


def dry_run(*args: str) -> str:
    cmd = ["make", "-n", "-o", ".venv/.installed", *args]  # (-o: the venv exists; not rebuilt)
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.replace("\\\n", " ")  # join the recipe's continued lines


def verb_args(*make_args: str) -> list[str]:
    """The arguments the target passes to ``src/run.py paper`` (``make -n``)."""
    line = next(line for line in dry_run(*make_args).splitlines() if "src/run.py paper" in line)
    return shlex.split(line.split("src/run.py paper", 1)[1].split("||")[0].split(";")[0])


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
    (_, sweep), (_, agg) = paper.plan(verb_args(*args))
    layout = args[0].removeprefix("fig-").replace("-", "_")
    assert sweep[sweep.index("--config-name") + 1] == layout and agg == [folder, "--layout", layout]
    assert (f"experiment={sweep_exp}" in sweep) == (sweep_exp is not None)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_a_cell_target_runs_each_of_its_sweeps_in_its_own_folder_at_10_seeds():
    out = dry_run("cell-joint", "EXPERIMENT=mine", "ARGS=experiment=mine logger=none")
    assert "for c in cells_joint;" in out
    args = [
        a.replace("$c", "cells_joint")
        for a in verb_args("cell-joint", "EXPERIMENT=mine", "ARGS=experiment=mine logger=none")
    ]
    (_, sweep), (_, agg) = paper.plan(args)
    assert sweep[sweep.index("--config-name") + 1] == "cells_joint" and "logger=none" in sweep
    assert not any(a.startswith("experiment=") for a in sweep)  # each sweep writes multirun/<its name>/
    assert "seed=range(0,10)" in sweep and agg == ["cells_joint"]  # an ad-hoc sweep's tables
    (_, sweep), _ = paper.plan([a.replace("$c", "cells_joint") for a in verb_args("cell-joint", "SEEDS=3")])
    assert "seed=range(0,3)" in sweep


def test_make_variables_become_the_verbs_options_and_the_verbs_defaults_are_the_only_ones():
    args = verb_args("table2", "SEEDS=3", "READING=paper_text", "LAUNCHER=joblib", "JOBS=2",
                     "BENCHMARKS=split_mnist,split_fmnist", "METHODS=er,mir", "ARGS=logger=none")  # fmt: skip
    (_, sweep), _ = paper.plan(args)
    i = sweep.index("--config-name")
    assert sweep[i + 2 :] == [
        "reading=paper_text", "launcher=joblib", "seed=range(0,3)", "benchmark=split_mnist,split_fmnist",
        "method=er,mir", "hydra.launcher.n_jobs=2", "logger=none",
    ]  # fmt: skip
    assert verb_args("table2") == ["table2"]  # nothing set: the verb's defaults (5 seeds, mir_code, basic)
    (_, sweep), _ = paper.plan(["table2"])
    assert sweep[i + 2 :] == ["reading=mir_code", "launcher=basic", "seed=range(0,5)"]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_parity_runs_the_harness_on_the_given_checkout():
    out = dry_run("parity", "MAMMOTH=/somewhere/mammoth", "PARITY_ARGS=--seeds 0")
    assert "scripts/parity/harness.py --mammoth /somewhere/mammoth --seeds 0" in out


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_records_targets_run_their_verbs():
    assert verb_args("records", "JOBS=2", "DRY_RUN=1", "ARGS=logger=none") == ["records", "--jobs", "2", "--dry-run",
                                                                              "logger=none"]  # fmt: skip
    assert "src/run.py report --records docs/records --docs" in dry_run("report-docs")
    assert "src/run.py replay --sample 3 --seed 1" in dry_run("replay", "REPLAY_ARGS=--sample 3 --seed 1")
