"""The Makefile's paper targets: each is `clsuite paper <target>` (clsuite.paper) with the Make
variables as options; which folder a target's sweep writes and its aggregation reads."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clsuite import paper

ROOT = Path(__file__).resolve().parents[2]


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
    out = dry_run("parity", "MIR=/somewhere/mir", "PARITY_ARGS=--mir-seeds 0")  # MIR's side alone, or beside
    assert "scripts/parity/harness.py --mir /somewhere/mir --mir-seeds 0" in out
    assert "harness.py --mammoth /a --mir /b" in dry_run("parity", "MAMMOTH=/a", "MIR=/b")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("shared", [True, False])
def test_make_and_the_config_find_the_data_by_the_same_rule(tmp_path, monkeypatch, shared):
    """DATA_DIR of every target (and data.download=true of `make run` when it is data/) is
    clsuite.config.home.data_dir's, the default of data.root too: $DATA_DIR, else ../shared/datasets, else data."""
    from clsuite.config.home import data_dir

    if shared:
        (tmp_path / "shared" / "datasets").mkdir(parents=True)
    (clone := tmp_path / "clone").mkdir()
    for name in ("Makefile", "src"):
        (clone / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "MAKEFLAGS", "MAKELEVEL")}

    def make(*args: str, **extra: str) -> str:
        cmd = ["make", "-s", "-o", ".venv/.installed", "--eval", "probe: ; @echo DATA_DIR=$$DATA_DIR", *args]
        return subprocess.run(cmd, cwd=clone, env={**env, **extra}, capture_output=True, text=True, check=True).stdout

    monkeypatch.delenv("DATA_DIR", raising=False)
    monkeypatch.chdir(clone)
    assert (rule := data_dir()) == (os.path.join("..", "shared", "datasets") if shared else "data")
    assert make("probe") == f"DATA_DIR={rule}\n" and make("probe", DATA_DIR="/mine") == "DATA_DIR=/mine\n"
    assert make("-n", "run").split() == [".venv/bin/python", "src/run.py", *([] if shared else ["data.download=true"])]


@pytest.mark.parametrize("copy", [True, False])
def test_a_paper_target_without_a_benchmarks_data_names_the_way_out_in_one_line(tmp_path, monkeypatch, capsys, copy):
    """`make fig-memory` without the official CIFAR-10 stopped on its data, then said "no runs: ... run its
    sweep first"; neither named BENCHMARKS= / --benchmarks nor the JPEG copy that was there. Now one
    line, before any sweep starts: the data's own line, then the benchmarks without it and, when its
    copy is here, with the copy in its place."""
    from tests.core.test_data import fake_mnist

    for name in ("MNIST", "FashionMNIST"):
        fake_mnist(tmp_path / "d", name, per_class_train=1, per_class_test=1)
    if copy:  # the copy counts as here when it passes its own check (md5, decode): that check is stubbed here
        real = paper._data_problem
        monkeypatch.setattr(paper, "_data_problem", lambda b, cmd: None if b == "split_cifar10_jpeg" else real(b, cmd))
    monkeypatch.setattr(paper, "_sweep", lambda cmd: pytest.fail(f"a sweep started: {cmd}"))
    argv = ["fig-memory", "--seeds", "1", "--methods", "er", f"data.root={tmp_path / 'd'}", "data.verify_md5=false"]
    assert paper.main(argv) == 2  # (the fake MNIST files have no official md5)
    err = capsys.readouterr().err
    way = "; or pass --benchmarks (make: BENCHMARKS=) split_mnist,split_fmnist without it"
    way += ", or split_mnist,split_fmnist,split_cifar10_jpeg with CIFAR-10 (JPEG copy), which is here" if copy else ""
    assert err.startswith(f"error: split_cifar10 has no data: missing CIFAR data in {tmp_path / 'd'} (")
    assert err.endswith(f"{way}\n") and err.count("\n") == 1, err


def test_a_refused_paper_sweep_is_named_once_and_nothing_is_aggregated(tmp_path):
    """`paper ... --experiment ../../x` printed its refusal twice: the sweep's, then the aggregation's."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CLSUITE_")}, "PYTHONPATH": str(ROOT / "src")}
    args = ["paper", "tau", "--benchmarks", "synthetic", "--seeds", "1", "--experiment", "../../x"]
    p = subprocess.run([sys.executable, "-m", "clsuite", *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: experiment '../../x' cannot be a folder name: it holds a path separator")
    assert list(tmp_path.iterdir()) == []


def test_make_help_lists_every_target_with_its_note():
    """Every rule of the Makefile a user can name (not a file, not a pattern) is a line of `make help`."""
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):(?!=)", text, flags=re.M))
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    out = out.split("Variables (make TARGET VAR=value ...):\n")[0]
    listed = {line.split()[0]: line.split(None, 1)[1:] for line in out.splitlines() if line.strip()}
    assert {"setup", "lint", "format", "run", "table2", "help"} <= targets
    assert targets == set(listed) and all(listed.values())  # each with its note


def test_make_help_lists_every_variable_with_its_note():
    """Every variable a user can set on make's command line (`VAR ?=`, and DATA_DIR) is a line of
    `make help`, after the targets, with the targets it reaches and its default."""
    text = (ROOT / "Makefile").read_text()
    variables = set(re.findall(r"^([A-Z_]+) *\?=", text, flags=re.M)) | {"DATA_DIR"}
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    head, _, tail = out.partition("Variables (make TARGET VAR=value ...):\n")
    listed = {line.split("=")[0].strip(): line.split(None, 1)[1:] for line in tail.splitlines() if line.strip()}
    assert {"SEEDS", "BENCHMARKS", "METHODS", "READING", "LAUNCHER", "JOBS", "EXPERIMENT", "ARGS"} <= variables
    assert variables == set(listed) and all(listed.values()), sorted(variables ^ set(listed))
    assert head and "  SEEDS=n " in tail


def test_the_records_targets_run_their_verbs():
    assert verb_args("records", "JOBS=2", "DRY_RUN=1", "ARGS=logger=none") == ["records", "--jobs", "2", "--dry-run",
                                                                              "logger=none"]  # fmt: skip
    assert "src/run.py report --records docs/records --docs" in dry_run("report-docs")
    assert "src/run.py replay --sample 3 --seed 1" in dry_run("replay", "REPLAY_ARGS=--sample 3 --seed 1")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_bench_args_reach_every_line_of_the_bench_targets():
    """`make bench BENCH_ARGS=...` passed the options to its first line only (not the stream's, not the
    checkpoint's); each line of `bench` and `bench-numerics` ends with them, so that the last given wins."""
    given = ["--repeats", "2", "--methods", "er", "gss"]
    out = dry_run("bench", "bench-numerics", "BENCH_ARGS=" + " ".join(given))
    lines = [shlex.split(line) for line in out.splitlines() if "scripts/bench.py" in line]
    assert [line[2:-5] for line in lines] == [
        [],
        ["--measure", "stream", "--benchmark", "split_cifar10", "--methods", "er", "adaer", "--reading", "mir_code",
         "--batches", "30"],
        ["--measure", "checkpoint"],
        ["--numerics", "native", "portable"],
    ]  # fmt: skip
    assert all(line[-5:] == given for line in lines)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_test_reruns_the_exact_tests_once_per_kernel_level_on_a_worker_of_its_own():
    rerun = [line for line in dry_run("test").splitlines() if "--dist each" in line]
    assert len(rerun) == 1 and '-m "exact and not pinned and not slow"' in rerun[0]
    tx = [a for a in shlex.split(rerun[0]) if a.startswith("popen//")]
    assert tx == [
        "popen//env:ATEN_CPU_CAPABILITY=default//env:MKL_CBWR=COMPATIBLE",
        "popen//env:ATEN_CPU_CAPABILITY=avx2//env:MKL_CBWR=AVX2",
    ]
