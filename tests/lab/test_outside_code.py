"""A method and a replay policy added from outside ``src/`` (a config folder and a module of the
user's own) sweep beside the built-in ones, by ``--config-dir`` and ``hydra.searchpath``, and every
module of the user's that they import is part of the runs' code identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clsuite.config.check import ConfigError
from clsuite.run import identity, io
from clsuite.run.experiment import run_experiment
from tests.conftest import expected_identity, make_cfg

ROOT = Path(__file__).resolve().parents[2]
FAST = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false"]

POLICY = """\
from clsuite.core.replay.base import ReplayPolicy
from my_helpers import newest


class NewestReplay(ReplayPolicy):
    \"\"\"Replays the |R| most recently filled slots.\"\"\"

    def __init__(self, exclude_current_task=False):
        self.exclude_current_task = exclude_current_task

    def select(self, learner, x, y, t, n):
        return newest(learner.memory.slots(learner.current_task if self.exclude_current_task else None), n)
"""
HELPER = "def newest(slots, n):\n    return slots[-n:]\n"
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
    """tmp/ext/my_policies.py (the policy) and the helper it imports, tmp/ext/my_helpers.py;
    tmp/my_conf/{method/er_newest,replay/newest}.yaml."""
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "my_policies.py").write_text(POLICY)
    (tmp_path / "ext" / "my_helpers.py").write_text(HELPER)
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


def test_an_outside_method_sweeps_beside_a_built_in_one_and_its_modules_are_in_the_identity(outside):
    p = sweep(outside, "--config-dir", "my_conf", "-m", "method=er_newest,er", "experiment=a")
    assert p.returncode == 0, p.stderr[-3000:]
    runs = results(outside, "a")
    assert sorted(runs) == ["benchmark=synthetic,method=er", "benchmark=synthetic,method=er_newest"]
    new, old = runs["benchmark=synthetic,method=er_newest"], runs["benchmark=synthetic,method=er"]
    assert new["config"]["method"]["replay"]["_target_"] == "my_policies.NewestReplay"
    code_new, code_old = new["identity"]["code"], old["identity"]["code"]
    assert code_old == {"hash": identity.code_identity()["hash"]}  # a stock run: the package alone
    assert code_new["hash"] == code_old["hash"]
    assert sorted(code_new["outside"]) == ["my_helpers", "my_policies"]
    assert all(len(h) == 16 for h in code_new["outside"].values())

    # an edit of the module the policy imports (not the one the config names) reruns exactly the run that loads it
    (outside / "ext" / "my_helpers.py").write_text(HELPER.replace("slots[-n:]", "slots[:n]"))
    p = sweep(outside, "--config-dir", "my_conf", "-m", "method=er_newest,er", "experiment=a")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "1 ran, 1 skipped" in p.stderr and "code changed: 1" in p.stderr
    after = results(outside, "a")["benchmark=synthetic,method=er_newest"]["identity"]["code"]["outside"]
    assert after["my_policies"] == code_new["outside"]["my_policies"]
    assert after["my_helpers"] != code_new["outside"]["my_helpers"]


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
        "benchmark=synthetic,method=er,replay@method.replay=random": "clsuite.core.replay.random.RandomReplay",
    }


def test_outside_modules_are_those_a_config_names_outside_the_package(tmp_path, monkeypatch):
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "policy.py").write_text(POLICY.replace("from my_helpers import newest\n", ""))
    (tmp_path / "my_readers.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {
        "method": {
            "replay": {"_target_": "my_pkg.policy.NewestReplay"},
            "plugin": {"_target_": "clsuite.core.methods.x"},
        },
        "benchmark": {"source": "my_readers:tiny"},
        "model": {"_target_": "numpy.ndarray"},
        "other": {"_target_": "no_such_module.X"},
    }
    assert identity.outside_modules(config) == ["my_pkg", "my_readers", "no_such_module", "numpy"]
    code = identity.outside_code(config)
    import numpy

    assert code["numpy"] == f"numpy {numpy.__version__}"  # an installed library: its version
    assert code["no_such_module"] == "not found"
    before = code["my_pkg"]
    (tmp_path / "my_pkg" / "helper.py").write_text("y = 2\n")  # any file of the package counts
    assert identity.outside_code(config)["my_pkg"] != before
    assert identity.outside_modules({"benchmark": {"source": "MNIST"}, "method": {}}) == []


FILES = {  # module -> what it imports (none of it is run to find it)
    "pol.py": "import os\nimport numpy\nfrom helper_a import f\n\n\ndef select():\n    import lazy_mod  # at train time\n",
    "helper_a.py": "import helper_b\n\nf = 1\n",  # a helper imported by a helper
    "helper_b.py": "from broken import g\n",
    "broken.py": "def g(:\n",  # a syntax error: hashed, and its import fails at run time as Python says
    "lazy_mod.py": "x = 1\n",
    "ns_pol/policy.py": "from pkg.sub import deep\n",  # a namespace package (no __init__.py)
    "pkg/__init__.py": "",
    "pkg/sub/__init__.py": "",
    "pkg/sub/deep.py": "import importlib\n\nimportlib.import_module('dyn_lit')\n",  # a package's submodule
    "dyn_lit.py": "import conf_mod\n",
    "my_conf/conf_mod.py": "z = 1\n",  # a module in a --config-dir folder put on PYTHONPATH
}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """FILES under tmp/, tmp/ and tmp/my_conf on sys.path; this process's record of what it imported
    (identity._HELD) and the modules a test imports are dropped afterwards."""
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "my_conf"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(identity, "_HELD", {}, raising=False)
    loaded = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - loaded:
        del sys.modules[name]


OUTSIDE = ["broken", "conf_mod", "dyn_lit", "helper_a", "helper_b", "lazy_mod", "ns_pol", "pkg", "pol"]


def test_every_outside_module_a_run_imports_is_in_the_identity_and_an_edit_of_any_is_seen(modules):
    """Helpers of helpers, a module imported inside a function, a package's submodule, a namespace
    package, importlib.import_module('literal'), a module in a config folder: all hashed; the standard
    library and installed libraries that outside code imports are not recorded."""
    cfg = make_cfg("method=er", "method.replay._target_=pol.X", "method.update._target_=ns_pol.policy.Y")
    config = identity.normalize(cfg)
    code = identity.outside_code(config)
    assert sorted(code) == OUTSIDE and all(len(h) == 16 for h in code.values())
    key = expected_identity(cfg)["key"]  # a sweep's job before it runs: resume, skip and reuse compare this
    for rel, module in [("helper_b.py", "helper_b"), ("lazy_mod.py", "lazy_mod"), ("pkg/sub/deep.py", "pkg"),
                        ("ns_pol/policy.py", "ns_pol"), ("my_conf/conf_mod.py", "conf_mod")]:  # fmt: skip
        (modules / rel).write_text(FILES[rel] + "# edited\n")
        now = identity.outside_code(config)
        assert [m for m in OUTSIDE if now[m] != code[m]] == [module]
        assert expected_identity(cfg)["key"] != key
        code, key = now, expected_identity(cfg)["key"]


def test_an_edit_after_this_process_imported_the_module_is_refused(modules):
    """The process keeps the code it imported: its identity would name the new file's hash."""
    config = {"method": {"replay": {"_target_": "helper_b.X"}}}
    (modules / "helper_b.py").write_text("y = 1\n")
    identity.outside_code(config)
    import helper_b  # noqa: F401  (a run of this process imports it)

    (modules / "helper_b.py").write_text("y = 2\n")
    with pytest.raises(ConfigError, match=r"^outside code helper_b changed on disk \(\w+ -> \w+\) after this process"):
        identity.outside_code(config)
    (modules / "helper_b.py").write_text("y = 1\n")  # back as imported
    identity.outside_code(config)


EDITING = """\
from pathlib import Path

from clsuite.core.replay.random import RandomReplay


class EditingReplay(RandomReplay):
    \"\"\"Edits the helper it imports lazily, at its first step (a user's edit while the run runs).\"\"\"

    def select(self, learner, x, y, t, n):
        helper = Path(__file__).with_name("lazy_mod.py")
        if "edited" not in helper.read_text():
            helper.write_text("x = 2  # edited\\n")
        import lazy_mod  # noqa: F401

        return super().select(learner, x, y, t, n)
"""


def test_outside_code_edited_while_the_run_runs_costs_the_run_not_a_wrong_number(modules, tmp_path):
    (modules / "editing.py").write_text(EDITING)
    cfg = make_cfg("method=er", "method.replay._target_=editing.EditingReplay")
    with pytest.raises(
        identity.CodeChanged, match=r"^outside code changed on disk while the run ran \(lazy_mod \w+ -> \w+\)"
    ):
        run_experiment(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / io.RESULTS_FILE).exists()


def test_a_broken_outside_module_or_config_is_one_error_line_before_any_folder(outside):
    """An outside module that failed to import was "unknown ..._target_; valid classes: ..."; a YAML
    error in an outside config named no file; a searchpath entry that is no folder was ignored."""
    policy, bad = outside / "ext" / "my_policies.py", outside / "my_conf" / "replay" / "bad.yaml"
    policy.write_text(POLICY.replace("(ReplayPolicy):", "(ReplayPolicy)"))  # a SyntaxError on the class line
    at = next(i for i, line in enumerate(POLICY.splitlines(), 1) if "(ReplayPolicy):" in line)
    bad.write_text("_target_: my_policies.NewestReplay\n exclude_current_task: false\n")  # indented by one space
    broken = f"method.replay._target_ 'my_policies.NewestReplay': importing my_policies failed at {policy}, line {at}: "
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
