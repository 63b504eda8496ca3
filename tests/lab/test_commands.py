"""The verbs of the ``clsuite`` command (clsuite.commands): dispatch, the default verb, the hint
that names what exists where the process runs, and a sweep then its aggregation end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from clsuite import commands
from clsuite.config import home

ROOT = Path(__file__).resolve().parents[2]


def test_no_verb_is_run_and_sweep_adds_multirun(monkeypatch):
    assert commands.split_verb(["method=mir", "memory=200"]) == ("run", ["method=mir", "memory=200"])
    assert commands.split_verb([]) == ("run", [])
    assert commands.split_verb(["--help"]) == ("run", ["--help"])
    assert commands.split_verb(["aggregate", "table2"]) == ("aggregate", ["table2"])
    got = []
    monkeypatch.setattr("clsuite.cli.main", lambda argv: got.append(argv))
    for argv in (["method=er"], ["run", "method=er"], ["sweep", "method=er,mir"], ["sweep", "-m", "seed=1,2"]):
        with pytest.raises(SystemExit) as e:
            commands.main(argv)
        assert e.value.code == 0
    assert got == [["method=er"], ["method=er"], ["-m", "method=er,mir"], ["-m", "seed=1,2"]]


@pytest.mark.parametrize("verb", ["aggregate", "wandb"])
def test_analysis_verbs_reach_their_functions(verb, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        commands.main([verb, "nope", "--multirun-dir", str(tmp_path)])
    assert e.value.code == 2 and "error: " in capsys.readouterr().err and "nope" in str(tmp_path / "nope")


@pytest.mark.parametrize("verb", ["claims", "choices"])
def test_claims_and_choices_are_verbs_that_need_runs(verb, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        commands.main([verb, "--multirun-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and str(tmp_path) in err


def test_hint_names_the_command_that_works_here_with_this_interpreter(monkeypatch, tmp_path):
    """A checkout: src/run.py (or its scripts) with the interpreter running now (the system ``python`` may lack the
    suite's dependencies); installed: the console command when it is this environment's, else
    ``<this python> -m clsuite``."""
    python = Path(sys.executable)
    monkeypatch.chdir(ROOT)
    py = str(python.relative_to(ROOT)) if python.is_relative_to(ROOT) else str(python)
    assert home.hint("aggregate", "card") == f"{py} src/run.py aggregate card"
    assert home.hint("wandb", "card") == f"{py} scripts/wandb_sync.py card"
    assert home.hint("paper", "table2", "--seeds", "5") == f"{py} src/run.py paper table2 --seeds 5"
    monkeypatch.chdir(tmp_path)  # elsewhere: the paths in full
    assert home.hint("aggregate", "card") == f"{python} {ROOT / 'src' / 'run.py'} aggregate card"
    monkeypatch.setattr(home, "CHECKOUT", Path("/nonexistent"))  # an installed package: no checkout
    monkeypatch.setattr(home.shutil, "which", lambda name: str(python.parent / "clsuite"))
    assert home.hint("aggregate", "card") == "clsuite aggregate card"
    assert home.hint("paper", "table2", "--seeds", "10") == "clsuite paper table2 --seeds 10"
    monkeypatch.setattr(home.shutil, "which", lambda name: "/elsewhere/bin/clsuite")  # another environment's
    assert home.hint("aggregate", "card") == f"{python} -m clsuite aggregate card"
    monkeypatch.setattr(home.shutil, "which", lambda name: None)
    assert home.hint("report") == f"{python} -m clsuite report"


def test_help_and_dash_dash_help_list_every_verb(capsys):
    for argv in (["help"], ["--help"]):
        with pytest.raises(SystemExit) as e:
            commands.main(argv)
        assert e.value.code == 0
        out = capsys.readouterr().out
        for verb in commands.VERBS:
            assert f"clsuite {verb}" in out or (verb == "run" and "clsuite [run]" in out), (argv, verb)
        assert "clsuite paper TARGET" in out and "--config-dir sweeps" not in out
    with pytest.raises(SystemExit) as e:
        commands.main(["help", "paper"])
    assert e.value.code == 0 and "--seeds" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        commands.main(["help", "nope"])
    assert e.value.code == 2 and "unknown verb 'nope'; valid choices: run, sweep, paper" in capsys.readouterr().err


def test_a_retired_environment_variable_is_named_with_the_key_that_replaced_it(monkeypatch, capsys):
    monkeypatch.setenv("CLSUITE_REUSE", "0")
    monkeypatch.setenv("CLSUITE_CHECKPOINTS", "/tmp/x")
    with pytest.raises(SystemExit) as e:
        commands.main(["help"])
    assert e.value.code == 0 and capsys.readouterr().err == (
        "note: CLSUITE_REUSE is not read any more; use reuse=false\n"
        "note: CLSUITE_CHECKPOINTS is not read any more; use checkpoint_dir=...\n"
    )
    monkeypatch.delenv("CLSUITE_REUSE")
    monkeypatch.delenv("CLSUITE_CHECKPOINTS")
    with pytest.raises(SystemExit):
        commands.main(["help"])
    assert capsys.readouterr().err == ""


def test_sweep_then_aggregate_through_the_verbs(tmp_path):
    """``run.py sweep`` (a checkout; the console command runs the same main), its hint, then
    ``run.py aggregate`` on what it made: the table names the reading the runs used."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "clsuite").exists()
    )
    run = [sys.executable, str(ROOT / "src" / "run.py")]
    fast = ["benchmark=synthetic", "benchmark.n_tasks=2", "logger=none", "trainer=cpu", "trainer.progress_bar=false"]
    p = subprocess.run([*run, "sweep", *fast, "method=er,online", "experiment=card"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"tables and figures: {sys.executable} {ROOT / 'src' / 'run.py'} aggregate card" in p.stderr
    assert "reading=mir_code" in p.stdout  # every printed run summary names its reading
    p = subprocess.run([*run, "aggregate", "card"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    md = (tmp_path / "results" / "card" / "card.md").read_text()
    assert "| ER | synthetic | mir_code |" in md and "| Online | synthetic | mir_code |" in md


def _clone_beside(tmp_path: Path, shared: bool) -> Path:
    """``tmp_path/clone`` (the working directory) with, when ``shared``, ``tmp_path/shared/datasets``
    holding a small MNIST in its official layout."""
    from tests.core.test_data import fake_mnist

    if shared:
        fake_mnist(tmp_path / "shared" / "datasets", "MNIST", per_class_train=30, per_class_test=5)
    (clone := tmp_path / "clone").mkdir(parents=True)
    return clone


def test_the_design_cards_sweep_finds_the_data_beside_the_clone_without_setting_anything(tmp_path):
    """The design card's command (``-m method=... memory=...``) right after ``make run`` on a machine
    with ../shared/datasets failed: "data directory 'data' does not exist" (only the Makefile set
    DATA_DIR). data.root's default is the Makefile's rule (clsuite.config.home.data_dir), also inside a job
    that runs in its own folder (hydra.job.chdir)."""
    clone = _clone_beside(tmp_path, shared=True)
    env = {k: v for k, v in os.environ.items() if k != "DATA_DIR" and not k.startswith("CLSUITE_")}
    args = ["-m", "method=er,online", "memory=50", "benchmark=split_mnist", "benchmark.n_tasks=2",
            "benchmark.train_per_class=20", "data.verify_md5=false", "logger=none", "trainer=cpu",
            "trainer.progress_bar=false", "trainer.threads=1", "hydra.job.chdir=true"]  # fmt: skip
    p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=clone, env=env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    roots = {json.loads(f.read_text())["config"]["data"]["root"] for f in clone.glob("multirun/default/*/results.json")}
    assert [Path(r).resolve() for r in roots] == [tmp_path / "shared" / "datasets"], roots  # both jobs


def test_where_the_data_is_found_is_one_rule_and_never_the_runs_identity(tmp_path, monkeypatch):
    """$DATA_DIR, else ../shared/datasets when it exists, else data: the config's default; a run whose data
    was found there has the identity of a run of the same files elsewhere (only their content counts)."""
    from tests.conftest import identity_of, make_cfg

    monkeypatch.delenv("DATA_DIR", raising=False)
    monkeypatch.chdir(_clone_beside(tmp_path / "bare", shared=False))
    assert home.data_dir() == "data" and make_cfg().data.root == "data"
    monkeypatch.chdir(_clone_beside(tmp_path, shared=True))
    OmegaConf.resolve(found := make_cfg("benchmark=split_mnist"))  # (data.root as found here and now)
    assert home.data_dir() == found.data.root == os.path.join("..", "shared", "datasets")
    shutil.copytree(tmp_path / "shared" / "datasets", tmp_path / "copy")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "copy"))
    OmegaConf.resolve(given := make_cfg("benchmark=split_mnist"))
    assert home.data_dir() == given.data.root == str(tmp_path / "copy")
    assert identity_of(found, "cpu")["key"] == identity_of(given, "cpu")["key"]
    (tmp_path / "copy" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"other")
    assert identity_of(found, "cpu")["key"] != identity_of(given, "cpu")["key"]
