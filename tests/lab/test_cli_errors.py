"""Bad input: one `error:` line naming the bad value and the valid choices, exit 2,
before any training, and no results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from clsuite.config.check import CONF_DIR, ConfigError, check_overrides, validate
from tests.conftest import FAST, make_cfg

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "overrides,needle",
    [
        (["memory=-5"], "memory must be a whole number >= 0, got -5"),
        (["lambda=1.0"], "lambda must be in [0, 1), got 1.0"),
        (["lambda=-0.1"], "lambda must be in [0, 1)"),
        (["tau=1.5"], "tau must be in [0, 1], got 1.5"),
        (["lr=0"], "lr must be a finite number > 0, got 0"),
        (["lr=nan"], "lr must be a finite number, got nan"),
        (["lr=inf"], "lr must be a finite number, got inf"),
        (["lr=-1"], "lr must be a finite number > 0, got -1"),
        (["memory=nan"], "memory must be a whole number >= 0, got nan"),
        (["memory=inf"], "memory must be a whole number >= 0, got inf"),
        (["memory=50.0"], "memory must be a whole number >= 0, got 50.0 (write 50)"),
        (["batch_size=nan"], "batch_size must be a whole number >= 1, got nan"),
        (["batch_size=inf"], "batch_size must be a whole number >= 1, got inf"),
        (["replay_size=nan"], "replay_size must be a whole number >= 1, got nan"),
        (["replay_size=0"], "replay_size must be a whole number >= 1, got 0"),
        (["seed=-1"], "seed must be a whole number in [0, 4294967295], got -1"),
        (["seed=1.5"], "seed must be a whole number in [0, 4294967295], got 1.5"),
        (["seed=nan"], "seed must be a whole number in [0, 4294967295], got nan"),
        ([f"seed={2**32}"], "seed must be a whole number in [0, 4294967295], got 4294967296"),
        (["trainer.threads=0"], "trainer.threads must be a whole number >= 1 or null, got 0"),
        (
            ["trainer.precision=bogus"],
            "unknown trainer.precision 'bogus'; valid choices: 32-true, 16-mixed, bf16-mixed",
        ),
        (["trainer.accelerator=tpu"], "unknown trainer.accelerator 'tpu'; valid choices: auto, cpu, gpu"),
        (["trainer.max_epochs=3"], "unknown trainer.max_epochs 3; valid choices: 0"),
        (["trainer.limit_val_batches=-1"], "trainer.limit_val_batches must be a whole number >= 0, got -1"),
        (
            ["trainer._target_=os.path"],
            "trainer._target_ must name lightning.pytorch.Trainer or a subclass of it, got 'os.path'",
        ),
        (["data.val_fraction=0.999"], "data.val_fraction=0.999 leaves 0 training samples per class of 100"),
        (["benchmark.n_tasks=4"], "benchmark.n_tasks must be a whole number in [1, 3], got 4"),
        (["benchmark.n_tasks=0"], "benchmark.n_tasks must be a whole number >= 1, got 0"),
        (["benchmark.train_per_class=0"], "benchmark.train_per_class must be a whole number >= 1 or null, got 0"),
        (["benchmark.train_per_class=121"], "benchmark.train_per_class must be a whole number in [1, 120] or null"),
        (["benchmark=split_mnist", "benchmark.train_per_class=6000"], "in [1, 5421] or null, got 6000"),
        (["benchmark=split_mnist", "benchmark.n_tasks=6"], "benchmark.n_tasks must be a whole number in [1, 5], got 6"),
        (["resume=sometimes"], "unknown resume 'sometimes'; valid choices: strict, config_only, off"),
        (["scenario=foo"], "unknown scenario 'foo'; valid choices: class_il, task_il, domain_il"),
        (["replay_loss=sum"], "valid choices: concat, split"),
        (["eval_split=val"], "needs data.val_fraction > 0"),
        (["eval_bn=memory"], "eval_bn=memory needs a network with BatchNorm (model.arch=resnet18), got model.arch=mlp"),
        (["eval_bn=batch"], "unknown eval_bn 'batch'; valid choices: running, memory"),
        (
            ["model.norm_groups=4"],
            "model.norm_groups=4 needs a network with BatchNorm (model.arch=resnet18), got model",
        ),
        (
            ["model.arch=resnet18", "model.norm_groups=3"],
            "model.norm_groups=3 must divide model.nf=20; valid: null, 1, 2",
        ),
        (["model.norm_groups=0"], "model.norm_groups must be a whole number >= 1 or null, got 0"),
        (["data.input_range=x"], "unknown data.input_range 'x'; valid choices: unit, symmetric"),
        (["benchmark=split_mnist", "data.root=/nonexistent/dir"], "data directory '/nonexistent/dir' does not exist"),
        (["logger=csv", "+logger.required=true"], "logger.required=true needs logger=wandb"),
        (["logger=csv", "logger._target_=nope.Nope"], "unknown logger._target_ 'nope.Nope': no class or function"),
        (
            ["callbacks.progress._target_=clsuite.run.progress.nope"],
            "unknown callbacks.progress._target_ 'clsuite.run.progress.nope'",
        ),
        (["callbacks.progress=5"], "callbacks.progress must be null or a node with a _target_, got 5"),
        (["callbacks.record=5"], "callbacks.record must be {_target_: clsuite.run.record.RunRecord} (the run's"),
        (["callbacks.record=null"], "callbacks.record must be {_target_: clsuite.run.record.RunRecord} (the run's"),
        (
            ["+callbacks.mine._target_=collections.OrderedDict"],
            "callbacks.mine._target_ must be one of clsuite's callbacks or a stock Lightning one (lightning.pytorch.callbacks.*",
        ),
    ],
)
def test_validate_rejects_with_one_line(overrides, needle):
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*overrides))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_defaults_are_valid():
    validate(make_cfg())
    validate(make_cfg("benchmark=split_mnist", "data.root=/", "data.download=true"))  # the real sizes are in range
    validate(make_cfg("trainer.threads=null", "seed=4294967295", "memory=0"))


def test_gpu_without_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        ConfigError, match=r"^trainer.accelerator='gpu' but no CUDA device is available; valid here: auto, cpu$"
    ):
        validate(make_cfg("trainer=gpu"))


def test_unreadable_data_file(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    f = raw / "train-images-idx3-ubyte.gz"
    f.write_bytes(b"x")
    f.chmod(0)
    if os.access(f, os.R_OK):  # (root reads everything)
        pytest.skip("running as root")
    with pytest.raises(ConfigError, match=r"^unreadable data file .*train-images-idx3-ubyte.gz: permission denied$"):
        validate(make_cfg("benchmark=split_mnist", f"data.root={tmp_path}"))


@pytest.mark.parametrize(
    "arg,needle",
    [
        ("+memroy=50", "unknown key 'memroy' in '+memroy=50' (did you mean 'memory'?); valid top-level keys: "),
        ("memroy=50", "unknown key 'memroy' in 'memroy=50' (did you mean 'memory'?)"),
        ("+trainer.foo=1", "unknown key 'trainer.foo'"),
    ],
)
def test_unknown_keys(arg, needle):
    with pytest.raises(ConfigError) as e:
        check_overrides([arg])
    assert str(e.value).startswith(needle) and "\n" not in str(e.value)
    check_overrides(["memory=50", "++memory=20", "hydra.run.dir=x", "logger.project=p", "--multirun"])


@pytest.mark.parametrize(
    "args,line",
    [
        (["method=foo"], "unknown method 'foo'; valid choices: adaer, agem, ccmr, ebrs, er, gem, gss, hal, icarl, "
         "joint, mir, oewc, online, si"),
        (["benchmark=mnist2"], "unknown benchmark 'mnist2'; valid choices: split_cifar10, split_cifar100, "),
        (["method=er", "update@method.update=nope"], "unknown update 'nope'; valid choices: class_ring, ebrs, "
         "gss_greedy, herding, reservoir, task_reservoir, task_ring"),
    ],
)  # fmt: skip
def test_unknown_group_option_lists_choices(args, line):
    """Hydra refuses an unknown option; its list of the group's options becomes the line's valid choices."""
    from clsuite.config.compose import compose

    with pytest.raises(ConfigError) as e:
        compose(args)
    assert str(e.value).startswith(line) and "\n" not in str(e.value), str(e.value)


def test_an_unknown_option_lists_the_options_of_an_outside_config_folder(tmp_path):
    from clsuite.config.compose import compose

    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "mym.yaml").write_text(METHOD_YAML.format(name="mym") + "lr: null\nplugin: null\n")
    for how in (["--config-dir", str(tmp_path)], [f"hydra.searchpath=[file://{tmp_path}]"]):
        with pytest.raises(ConfigError, match=r"^unknown method 'nope'; valid choices: adaer, .*, mir, mym, oewc, "):
            compose([*how, "method=nope"])


def test_a_group_option_that_is_a_path_is_refused_before_hydra_reads_it():
    """``method=../benchmark/synthetic`` names another group's yaml: Hydra would read that file as the
    method; the option is refused with the group's choices instead (a name never becomes a path unchecked)."""
    from clsuite.config.compose import compose

    for bad in ("method=../benchmark/synthetic", "benchmark=sub/split_mnist", "model=a\\b"):
        group = bad.split("=")[0]
        with pytest.raises(ConfigError, match=rf"^unknown {group} '.+'; valid choices: "):
            compose([bad])
    with pytest.raises(ConfigError, match=r"^unknown method '\.\./x'; valid choices: adaer, "):  # a sweep's value
        compose(["-m", "method=er,../x"])


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
    p = _run("+memroy=50", "benchmark=synthetic", "logger=none", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("error: unknown key 'memroy'") and len(p.stderr.splitlines()) == 1
    p = _run("method.update._target_=x.Y", "benchmark=synthetic", "logger=none", cwd=tmp_path)  # Hydra logged 3 lines
    assert p.returncode == 2 and p.stderr.splitlines() == [
        "error: unknown method.update._target_ 'x.Y'; valid classes: ClassRingBuffer, EBRS, GSSGreedy, "
        "HerdingMemory, Reservoir, TaskReservoir, TaskRingBuffer"
    ]
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


def test_refusals_that_need_the_data_or_the_environment_come_before_any_folder(tmp_path):
    """Issue 30: a run without its data, or with W&B required and no API key, exited 2 after Hydra had
    made outputs/.../.hydra and run.log; a sweep with one such point wrote grid.json, trained the others,
    then failed; `logger=csv +logger.required=true` was accepted. Now: one line, exit 2, nothing written."""
    (tmp_path / "empty").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    env.update(HOME=str(tmp_path / "home"), WANDB_MODE="online", PYTHONPATH=str(ROOT / "src"))
    fast = ["logger=none", "trainer=cpu", "trainer.progress_bar=false"]
    cases = [
        (["benchmark=split_cifar10", "data.root=empty", *fast], "error: missing CIFAR data in "),
        (["benchmark=split_mnist", "data.root=empty", *fast], "error: missing data file empty/MNIST/raw/"),
        (["benchmark=synthetic", *fast, "logger=wandb", "logger.required=true"],
         "error: W&B is required (logger.required=true) but cannot start: online (mode, $WANDB_MODE) without an API key"),
        (["benchmark=synthetic", *fast, "logger=csv", "+logger.required=true"],
         "error: logger.required=true needs logger=wandb (the one logger that can fail to start), got logger=csv"),
        (["-m", "benchmark=synthetic,split_mnist", "data.root=empty", *fast], "error: missing data file "),
    ]  # fmt: skip
    for args, needle in cases:
        p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith(needle), (args, p.stderr[-2000:])
        assert sorted(q.name for q in tmp_path.iterdir() if q.name != "home") == ["empty"], args  # no folder


def test_a_relative_data_root_holds_under_hydra_job_chdir(tmp_path):
    """Issue 30: hydra.job.chdir=true with a relative data.root (DATA_DIR=../shared/datasets) passed the
    checks, then failed in the run's own folder (exit 2, its folder left). The root is the launch folder's."""
    from tests.core.test_data import fake_mnist

    fake_mnist(tmp_path / "d", "MNIST", per_class_train=30, per_class_test=5)
    args = ["benchmark=split_mnist", "data.root=d", "data.verify_md5=false", "hydra.job.chdir=true",
            "benchmark.n_tasks=2", "benchmark.train_per_class=20", "logger=none", "trainer=cpu",
            "trainer.progress_bar=false", "trainer.threads=1", "hydra.run.dir=run"]  # fmt: skip
    p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["config"]["data"]["root"] == str(tmp_path / "d") and len(res["R"]) == 2


def test_a_bad_value_in_a_sweep_is_named_before_the_folders_it_would_share(tmp_path):
    """Issue 30: `-m seed=0 checkpoint_every=0,5` was refused as "would share a folder" (checkpoint_every
    is left out of folder names) instead of naming the bad value."""
    p = _run("-m", "benchmark=synthetic", "logger=none", "seed=0", "checkpoint_every=0,5", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: checkpoint_every must be a whole number >= 1, got 0 (job benchmark=synthetic,seed=0)"
    ], p.stderr[-2000:]
    assert not list(tmp_path.iterdir())


_STOP_AT_TASK_2 = """
import os, signal, sys
sys.path.insert(0, {src!r})
import clsuite.cli as cli
from clsuite.core.callbacks import DivergenceGuard
_step = DivergenceGuard.on_train_batch_end
def step(self, trainer, learner, *a):
    _step(self, trainer, learner, *a)
    if learner.current_task == 1 and not os.environ.get("NO_STOP"):
        os.kill(os.getpid(), signal.SIGINT)
DivergenceGuard.on_train_batch_end = step
cli.main(sys.argv[1:])
"""


def test_a_stopped_run_says_whether_and_where_a_rerun_resumes(tmp_path):
    """The SIGINT / SIGTERM line said "no results written" and nothing of a rerun: it now names the task a
    rerun resumes at and the checkpoint it resumes from, or that it starts again at task 1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLSUITE_")}
    code = _STOP_AT_TASK_2.format(src=str(ROOT / "src"))
    base = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false", "method=online"]

    def run(*args, **extra):
        argv = [*(a for a in args if a == "-m"), *base, *(a for a in args if a != "-m")]
        return subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env={**env, **extra},
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    p = run("checkpoint=off")
    assert p.returncode == 130 and p.stderr.strip().splitlines()[-1].endswith(
        "; a rerun starts again at task 1 (no checkpoint yet)"
    ), p.stderr[-2000:]
    p = run("checkpoint=task_end")
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 130 and last.startswith("error: interrupted by SIGINT; the run stopped before its end"), last
    ckpt = next((tmp_path / "outputs" / ".checkpoints").glob("*/after-task-0001.ckpt")).relative_to(tmp_path)
    assert last.endswith(f"; a rerun resumes at task 2 of 3 from {ckpt}"), last
    p = run("checkpoint=task_end", NO_STOP="1")
    assert p.returncode == 0 and f"resuming at task 2 of 3 (task 1 done) from {ckpt}" in p.stderr, p.stderr[-2000:]
    p = run("-m", "checkpoint=task_end", "seed=1", "experiment=s")  # a sweep's job: its own folder's checkpoints
    job = "benchmark=synthetic,method=online,seed=1"
    ckpt = tmp_path / "multirun" / "s" / job / "checkpoints" / "after-task-0001.ckpt"
    line = f"error: {job}: interrupted by SIGINT; recorded in {tmp_path / 'multirun' / 's' / job / 'failed.json'}; "
    assert p.returncode == 130 and f"{line}a rerun resumes at task 2 of 3 from {ckpt}\n" in p.stderr, p.stderr


def test_fail_prints_one_error_line_on_stderr_and_returns_the_status(capsys):
    """Every command's refusal goes through ``clsuite.core.errors.fail``: the line on stderr, the status back."""
    from clsuite.core.errors import fail

    assert fail("--sample must be a whole number >= 1, got 0") == 2 and fail("disk full; nothing run", 1) == 1
    out = capsys.readouterr()
    assert (
        out.out == ""
        and out.err == "error: --sample must be a whole number >= 1, got 0\nerror: disk full; nothing run\n"
    )


def test_an_invocations_signals_are_its_own_and_a_workers_copy_starts_afresh():
    """The stop's state is an object :func:`clsuite.cli.main` owns (no module globals): two invocations do
    not share it, and the copy pickled into a joblib worker with Hydra's task function holds nothing."""
    import pickle
    import signal

    from clsuite.cli import Interrupted, Invocation

    a, b = Invocation(), Invocation()
    with pytest.raises(Interrupted) as e:
        a(signal.SIGINT, None)
    a(signal.SIGTERM, None)  # a second signal: noted, not raised
    a.jobs_started = 2
    assert e.value.exit_code == 130 and a.received == [signal.SIGINT, signal.SIGTERM] and b.received == []
    w = pickle.loads(pickle.dumps(a))
    assert (w.received, w.exit_code, w.jobs_started) == ([], None, 0)


METHOD_YAML = "defaults:\n  - /replay@replay: random\n  - /update@update: reservoir\n  - _self_\nname: {name}\n"


def test_a_yaml_error_in_an_outside_config_names_its_file_line_and_column(tmp_path):
    """It was Hydra's first line alone ("mapping values are not allowed here"): no file, no line."""
    from clsuite import api

    (tmp_path / "method").mkdir()
    bad = tmp_path / "method" / "mym.yaml"
    bad.write_text(METHOD_YAML.format(name="mym") + " lr: null\nplugin: null\n")  # lr indented by one space
    line = f"bad YAML in {bad}, line 6, column 4: mapping values are not allowed here"
    for how in (["--config-dir", str(tmp_path)], [f"hydra.searchpath=[file://{tmp_path}]"]):
        with pytest.raises(ConfigError) as e:
            api.compose([*how, "method=mym", *FAST])
        assert str(e.value) == line
    bad.write_text(METHOD_YAML.format(name="mym") + "plugin: [1,\n")
    with pytest.raises(ConfigError) as e:
        api.compose(["--config-dir", str(tmp_path), "method=mym", *FAST])
    assert str(e.value) == (
        f"bad YAML in {bad}, line 7, column 1: expected the node content, but found '<stream end>' "
        "(while parsing a flow node)"
    )


@pytest.mark.parametrize(
    "entry,line",
    [
        ("file:///nonexistent/conf", "hydra.searchpath entry 'file:///nonexistent/conf' is not a folder"),
        ("/nonexistent/conf", "hydra.searchpath entry '/nonexistent/conf' is not a folder"),
        ("file://{tmp}/a_file", "hydra.searchpath entry 'file://{tmp}/a_file' is not a folder"),
        ("pkg://cl_no_such_package.conf", "hydra.searchpath entry 'pkg://cl_no_such_package.conf' is not an importable package"),
        ("foo://x", "hydra.searchpath entry 'foo://x': No config source registered for schema foo, supported types"),
    ],
)  # fmt: skip
def test_a_searchpath_entry_hydra_cannot_read_is_refused(tmp_path, entry, line):
    """Hydra skips such an entry with a warning no one sees: the run went on without its configs."""
    (tmp_path / "a_file").write_text("")
    entry, line = entry.format(tmp=tmp_path), line.format(tmp=tmp_path)
    with pytest.raises(ConfigError) as e:
        check_overrides([f"hydra.searchpath=[file://{tmp_path},{entry}]", "method=er"])
    assert str(e.value).startswith(line), str(e.value)


def test_the_config_folders_are_checked_before_the_options_they_hold(tmp_path):
    """A --config-dir that is not a folder was reported as "unknown method 'mym'" (the options were
    checked first); the Python API did not see --config-dir's options at all."""
    from clsuite import api

    with pytest.raises(ConfigError, match=r"^--config-dir 'nope' is not a folder$"):
        api.compose(["--config-dir", "nope", "method=mym", *FAST])
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "mym.yaml").write_text(METHOD_YAML.format(name="mym") + "lr: null\nplugin: null\n")
    assert api.compose(["--config-dir", str(tmp_path), "method=mym", *FAST]).method.name == "mym"


def test_an_outside_config_named_as_one_of_the_suite_is_refused(tmp_path):
    """Hydra reads the suite's conf/ first: an outside method/er.yaml was never read, without a word."""
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "er.yaml").write_text(METHOD_YAML.format(name="er") + "lr: 0.5\nplugin: null\n")
    line = f"{tmp_path / 'method' / 'er.yaml'} is never read: Hydra reads the suite's conf/method/er.yaml first"
    for extra, overrides in (([tmp_path], []), ((), [f"hydra.searchpath=[file://{tmp_path}]"])):
        with pytest.raises(ConfigError) as e:
            check_overrides([*overrides, "method=mir"], extra_dirs=extra)
        assert str(e.value).startswith(line)
    check_overrides([f"hydra.searchpath=[file://{CONF_DIR}]", "method=er"])  # the suite's own folder: itself


def test_a_bug_in_the_checks_before_hydra_surfaces_as_itself(monkeypatch):
    """An unexpected exception before composition (a bug, not bad input) reaches the caller as it was
    raised, its traceback intact, instead of a NameError about the command line it never parsed."""
    from clsuite import cli
    from clsuite.config import compose

    def broken(argv):
        raise RuntimeError("a bug in the checks")

    monkeypatch.setattr(compose, "check", broken)
    with pytest.raises(RuntimeError, match="a bug in the checks"):
        cli.main(["method=er"])
