"""A method and a replay policy added from outside ``src/`` (a config folder and a module of the
user's own) sweep beside the built-in ones, by ``--config-dir`` and ``hydra.searchpath``, and the
module they load is part of the runs' code identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clsuite import identity, io

ROOT = Path(__file__).resolve().parents[1]
FAST = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false"]

POLICY = """\
from clsuite.replay.base import ReplayPolicy


class NewestReplay(ReplayPolicy):
    \"\"\"Replays the |R| most recently filled slots.\"\"\"

    def __init__(self, exclude_current_task=False):
        self.exclude_current_task = exclude_current_task

    def select(self, learner, x, y, t, n):
        return learner.memory.slots(learner.current_task if self.exclude_current_task else None)[-n:]
"""
REPLAY_YAML = "_target_: my_policies.NewestReplay\nexclude_current_task: ${exclude_current_task}\n"
METHOD_YAML = """\
defaults:
  - /replay@replay: newest
  - /update@update: reservoir
  - _self_
name: er_newest
lr: null
plugin: null
"""


@pytest.fixture
def outside(tmp_path):
    """tmp/ext/my_policies.py (the policy), tmp/my_conf/{method/er_newest,replay/newest}.yaml."""
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "my_policies.py").write_text(POLICY)
    conf = tmp_path / "my_conf"
    for group, name, text in (("replay", "newest", REPLAY_YAML), ("method", "er_newest", METHOD_YAML)):
        (conf / group).mkdir(parents=True)
        (conf / group / f"{name}.yaml").write_text(text)
    return tmp_path


def sweep(where: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where / "ext")}
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), *args, *FAST]
    return subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True, timeout=600)


def results(where: Path, experiment: str) -> dict[str, dict]:
    folder = where / "multirun" / experiment
    return {p.parent.name: json.loads(p.read_text()) for p in folder.glob(f"*/{io.RESULTS_FILE}")}


def test_an_outside_method_sweeps_beside_a_built_in_one_and_its_module_is_in_the_identity(outside):
    p = sweep(outside, "--config-dir", "my_conf", "-m", "method=er_newest,er", "experiment=a")
    assert p.returncode == 0, p.stderr[-3000:]
    runs = results(outside, "a")
    assert sorted(runs) == ["benchmark=synthetic,method=er", "benchmark=synthetic,method=er_newest"]
    new, old = runs["benchmark=synthetic,method=er_newest"], runs["benchmark=synthetic,method=er"]
    assert new["config"]["method"]["replay"]["_target_"] == "my_policies.NewestReplay"
    code_new, code_old = new["identity"]["code"], old["identity"]["code"]
    assert code_old == {"hash": identity.code_identity()["hash"]}  # a stock run: the package alone
    assert code_new["hash"] == code_old["hash"]
    assert set(code_new["outside"]) == {"my_policies"} and len(code_new["outside"]["my_policies"]) == 16

    # an edit of the outside module reruns exactly the run that loads it
    (outside / "ext" / "my_policies.py").write_text(POLICY + "\n# edited\n")
    p = sweep(outside, "--config-dir", "my_conf", "-m", "method=er_newest,er", "experiment=a")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "1 ran, 1 skipped" in p.stderr and "code changed: 1" in p.stderr
    after = results(outside, "a")["benchmark=synthetic,method=er_newest"]["identity"]["code"]["outside"]
    assert after["my_policies"] != code_new["outside"]["my_policies"]


@pytest.mark.parametrize(
    "how",
    [
        ["--config-dir", "my_conf", "-m"],
        ["-m", "hydra.searchpath=[file://{where}/my_conf]"],
    ],
    ids=["config_dir", "searchpath"],
)
def test_an_outside_replay_policy_sweeps_beside_a_built_in_one(outside, how):
    args = [a.format(where=outside) for a in how]
    p = sweep(outside, *args, "method=er", "replay@method.replay=newest,random", "experiment=b")
    assert p.returncode == 0, p.stderr[-3000:]
    runs = results(outside, "b")
    targets = {name: r["config"]["method"]["replay"]["_target_"] for name, r in runs.items()}
    assert targets == {
        "benchmark=synthetic,method=er,replay@method.replay=newest": "my_policies.NewestReplay",
        "benchmark=synthetic,method=er,replay@method.replay=random": "clsuite.replay.random.RandomReplay",
    }


def test_outside_modules_are_those_a_config_names_outside_the_package(tmp_path, monkeypatch):
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "policy.py").write_text(POLICY)
    (tmp_path / "my_readers.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {
        "method": {"replay": {"_target_": "my_pkg.policy.NewestReplay"}, "plugin": {"_target_": "clsuite.methods.x"}},
        "benchmark": {"source": "my_readers:tiny"},
        "model": {"_target_": "numpy.ndarray"},
    }
    assert identity.outside_modules(config) == ["my_pkg", "my_readers", "numpy"]
    identity.module_hash.cache_clear()
    code = identity.outside_code(config)
    import numpy

    assert code["numpy"] == f"numpy {numpy.__version__}"  # an installed library: its version
    before = code["my_pkg"]
    (tmp_path / "my_pkg" / "helper.py").write_text("y = 2\n")  # any file of the package counts
    identity.module_hash.cache_clear()
    assert identity.outside_code(config)["my_pkg"] != before
    identity.module_hash.cache_clear()
    assert identity.outside_modules({"benchmark": {"source": "MNIST"}, "method": {}}) == []


def test_a_broken_outside_module_or_config_is_one_error_line_before_any_folder(outside):
    """An outside module that failed to import was "unknown ..._target_; valid classes: ..."; a YAML
    error in an outside config named no file; a searchpath entry that is no folder was ignored."""
    policy, bad = outside / "ext" / "my_policies.py", outside / "my_conf" / "replay" / "bad.yaml"
    policy.write_text(POLICY.replace("(ReplayPolicy):", "(ReplayPolicy)"))  # a SyntaxError on line 4
    bad.write_text("_target_: my_policies.NewestReplay\n exclude_current_task: false\n")  # indented by one space
    broken = f"method.replay._target_ 'my_policies.NewestReplay': importing my_policies failed at {policy}, line 4: "
    cases = [
        (["--config-dir", "my_conf", "method=er_newest"], f"{broken}SyntaxError: expected ':'"),
        (["--config-dir", "my_conf", "-m", "method=er,er_newest"],
         f"{broken}SyntaxError: expected ':' (job benchmark=synthetic,method=er_newest)"),
        (["-m", "hydra.searchpath=[file://my_conf]", "method=er", "replay@method.replay=random,bad"],
         f"bad YAML in {bad}, line 2, column 22: mapping values are not allowed here "
         "(job benchmark=synthetic,method=er,replay@method.replay=bad)"),
        (["hydra.searchpath=[file://my_conf,file://no_conf]", "method=er"],
         "hydra.searchpath entry 'file://no_conf' is not a folder"),
    ]  # fmt: skip
    for args, line in cases:
        p = sweep(outside, *args)
        assert p.returncode == 2 and p.stderr.splitlines() == [f"error: {line}"], (args, p.stderr[-2000:])
        assert sorted(q.name for q in outside.iterdir()) == ["ext", "my_conf"], args  # no outputs/, multirun/
