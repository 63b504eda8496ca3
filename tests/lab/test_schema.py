"""The declared schema (clsuite.config.schema, issue 21): every key of conf/ is declared; every key
refuses a value of the wrong type and one out of its range with one `error:` line and exit 2,
before anything is written; the cross-key rules; Hydra's errors as one line; --help and
docs/CONFIG.md generated from the schema; the signal messages."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from omegaconf import OmegaConf, open_dict

from clsuite import cli
from clsuite.config import help as confighelp
from clsuite.config import schema
from clsuite.config.check import ConfigError, group_options, validate
from clsuite.core.replay.base import ReplayPolicy
from clsuite.core.spec import Whole
from tests.conftest import make_cfg
from tests.core.test_imagefolder import TINY as IMAGES
from tests.core.test_imagefolder import members, write_archive

ROOT = Path(__file__).resolve().parents[2]
SYN = ["benchmark=synthetic", "logger=none", "trainer=cpu", "reading=paper_text"]  # M in total


# ----------------------------------------------------------------------------- coverage


def context(key: str) -> list[str]:
    """Overrides that put a key of KEYS into the composed config."""
    if key.startswith("benchmark.synthetic."):
        return ["benchmark=synthetic"]
    if key.startswith("benchmark.image_folder."):
        return IMAGES  # a tiny archive, made by context_cfgs under its data.root (this source cannot download)
    if key.startswith("logger.") and key != "logger.name":
        return ["logger=wandb"]
    return {
        "model.hidden": ["model=mlp"],
        "model.depth": ["model=mlp"],
        "method.joint": ["method=joint"],
        "method.replay_loss": ["method=hal"],
    }.get(key, [])


def slot_of(target: str) -> str:
    return next(s for s in schema.SLOTS if target in schema.targets(s))


def leaves(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("shape",):
            yield from leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def composed_configs():
    """Every option of every group at least once (the groups that do not interact, side by side)."""
    others = {g: group_options(g) for g in ("benchmark", "model", "logger", "trainer", "reading")}
    for i, method in enumerate(group_options("method")):
        yield make_cfg(f"method={method}", *(f"{g}={opts[i % len(opts)]}" for g, opts in others.items()))
    for group in ("replay", "update"):
        for option in group_options(group):
            yield make_cfg("method=er", f"{group}@method.{group}={option}")


def test_every_key_of_conf_is_declared():
    """A key in conf/ without a declaration fails here: its range is declared in clsuite.config.schema."""
    undeclared = set()
    for cfg in composed_configs():
        c = OmegaConf.to_container(cfg, resolve=False)
        c.pop("hydra", None)
        for key, _ in leaves(c):
            slot = key.split(".")[1] if key.startswith("method.") and key.count(".") >= 2 else None
            if key in schema.KEYS or key.endswith("._target_") or key in {f"method.{s}" for s in schema.SLOTS}:
                continue
            if key.startswith("cites."):  # a mapping of key names to their source lines: one declaration, "cites"
                continue
            if slot in schema.SLOTS:
                target = OmegaConf.select(cfg, f"method.{slot}._target_")
                if key.split(".", 2)[2] in schema.node_keys(target):
                    continue
            undeclared.add(key)
    assert not undeclared, f"declare these keys in clsuite.config.schema: {sorted(undeclared)}"


def test_every_declared_class_exists_and_is_selected_by_an_option():
    from hydra.utils import get_class

    for target in [t for slot in schema.SLOTS for t in schema.targets(slot)]:
        get_class(target)
        assert confighelp.selected_by().get(target), f"no conf/ option selects {target}"


def test_every_parameter_of_a_slot_class_is_declared_where_the_class_takes_it():
    """One declaration per key: each constructor parameter of the suite's replay, update and plugin classes
    carries its Spec (``Annotated[type, Spec]``), which the check, --help and docs/CONFIG.md read."""
    import inspect

    from hydra.utils import get_class

    for target in [t for slot in schema.SLOTS for t in schema.targets(slot)]:
        cls = get_class(target)
        taken = [k for k in inspect.signature(cls).parameters]
        assert list(schema.node_keys(target)) == taken, f"{target}: annotate each parameter with its Spec"
    assert list(schema.node_keys("clsuite.core.replay.ccmr.CCMRReplay"))[:2] == ["tau", "candidates"]
    assert schema.node_keys("clsuite.core.replay.ccmr.CCMRReplay")["tau"].range() == "in [0, 1]"


def test_icarls_classifier_has_one_spelling_of_its_default():
    """null is the nearest mean of exemplars: ``nme`` would be a second identity of the same runs, refused with
    the valid choices, null among them (a nullable choice names null)."""
    with pytest.raises(ConfigError, match=r"^unknown method.plugin.classifier 'nme'; valid choices: head, null$"):
        validate(make_cfg("method=icarl", "method.plugin.classifier=nme"))
    validate(make_cfg("method=icarl", "method.plugin.classifier=head"))


# ----------------------------------------------------------------------------- the walk


def bad_values(spec: schema.Spec) -> list[tuple[str, object, str]]:
    """[(what, python value, command-line text), ...]: one of the wrong type, one out of range."""
    if spec.kind in ("whole", "real"):
        out = spec.lo - 1 if spec.lo is not None else spec.hi + 1
        return [("type", "abc", "abc"), ("range", out, str(out))]
    return {
        "flag": [("type", "maybe", "maybe"), ("range", 2, "2")],
        "choice": [("type", 3.5, "3.5"), ("range", "nope", "nope")],
        "name": [("type", [1], "[1]"), ("range", "a/b", "a/b")],
        "text": [("type", [1], "[1]"), ("range", 5, "5")],  # (a free string: a number is its "range")
        "path": [("type", [1], "[1]"), ("range", "", "''")],
        "names": [("type", "abc", "abc"), ("range", [1, 2], "[1,2]")],
        "shape": [("type", "abc", "abc"), ("range", [0, 8, 8], "[0,8,8]")],
        "notes": [("type", "abc", "abc"), ("range", {"a": 1}, "{a:1}")],
    }[spec.kind]


def all_keys() -> list[tuple[str, schema.Spec, list[str]]]:
    """Every declaration: (dotted key, spec, overrides that select it); a key of a replay / update /
    plugin class once per class that declares it."""
    keys = [(key, spec, context(key)) for key, spec in schema.KEYS.items()]
    for target in [t for slot in schema.SLOTS for t in schema.targets(slot)]:
        slot, option = slot_of(target), confighelp.selected_by()[target][0]
        base = ["method=er"] if slot != "plugin" else []
        keys += [(f"method.{slot}.{k}", spec, [*base, option]) for k, spec in schema.node_keys(target).items()]
    return keys


WALK = [(key, ctx, what, v, text) for key, spec, ctx in all_keys() for what, v, text in bad_values(spec)]
IDS = [f"{' '.join(ctx)} {key}-{what}".strip() for key, ctx, what, _, _ in WALK]


def test_the_schema_covers_every_key():
    declared = {(key, tuple(ctx)) for key, _, ctx in all_keys()}
    assert len(declared) == len(all_keys())  # no key declared twice (the count: python -m clsuite.config.help --count)


@pytest.fixture(scope="module")
def context_cfgs(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    write_archive(data / "tiny", "tar.gz", members())  # IMAGES' archive
    where = [f"data.root={data}", f"data.cache_dir={data / 'cache'}"]
    cache: dict[tuple, object] = {}

    def get(ctx):
        ov = tuple(ctx)
        if ov not in cache:
            cache[ov] = make_cfg(*ov, *(where if ctx == IMAGES else ()))
        return copy.deepcopy(cache[ov])

    return get


@pytest.mark.parametrize("key,ctx,what,v,text", WALK, ids=IDS)
def test_every_key_refuses_a_bad_value(context_cfgs, key, ctx, what, v, text):
    """The walk on the composed config (fast): one line naming the key and the value."""
    cfg = context_cfgs(ctx)
    validate(cfg)  # the context itself is valid
    with open_dict(cfg):
        OmegaConf.update(cfg, key, v, merge=False, force_add=True)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and repr(v) in msg, msg


def run_cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    """``clsuite.cli.main(argv)`` in this process, in an empty folder: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return e.value.code, out, err


def assert_refused(tmp_path, code, err, *needles):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for n in needles:
        assert n in err, err
    assert not list(tmp_path.iterdir()), "a refused run wrote something"


@pytest.mark.slow
@pytest.mark.parametrize("key,ctx,what,v,text", WALK, ids=IDS)
def test_every_key_refuses_a_bad_value_on_the_command_line(tmp_path, monkeypatch, capsys, key, ctx, what, v, text):
    """The same walk through the command line (clsuite.cli.main): exit 2, one line, nothing written."""
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, *SYN, *ctx, f"{key}={text}")
    assert_refused(tmp_path, code, err, key)


# ----------------------------------------------------------------------------- the issue's examples

EXAMPLES = [
    (
        ["method.replay.exclude_current_task=maybe"],
        "error: method.replay.exclude_current_task must be true or false, got 'maybe'",
    ),
    (["data.normalize=maybe"], "error: data.normalize must be true or false, got 'maybe'"),
    (["data.download=maybe"], "error: data.download must be true or false, got 'maybe'"),
    (["trainer.deterministic=maybe"], "error: trainer.deterministic must be true or false, got 'maybe'"),
    (["trainer.progress_bar=maybe"], "error: unknown trainer.progress_bar 'maybe'; valid choices: auto, true, false"),
    (
        ["method=mir", "method.replay.candidates=0"],
        "error: method.replay.candidates must be a whole number >= 1, got 0",
    ),
    (["model.hidden=0"], "error: model.hidden must be a whole number >= 1, got 0"),
    (["model.depth=-1"], "error: model.depth must be a whole number >= 0, got -1"),
    (
        ["method=oewc", "method.plugin.e_lambda=-5"],
        "error: method.plugin.e_lambda must be a finite number >= 0, got -5",
    ),
    (
        ["method=hal", "method.plugin.anchor_steps=-1"],
        "error: method.plugin.anchor_steps must be a whole number >= 0, got -1",
    ),
    (
        ["method=hal", "method.plugin.finetune_batch=0"],
        "error: method.plugin.finetune_batch must be a whole number >= 1, got 0",
    ),
    (
        ["method=gem", "memory=2"],
        "error: memory must be a whole number in [3, 100000] (method=gem needs one ring slot per task, T=3), got 2",
    ),
    (
        ["method=hal", "memory=3"],
        "error: memory must be a whole number in [6, 100000] (method=hal needs one slot per class, 6 classes), got 3",
    ),
    (["trainer.precision=64"], "error: unknown trainer.precision 64; valid choices: 32-true, 16-mixed, bf16-mixed"),
    (["benchmark.backbone=foo"], "error: unknown benchmark.backbone 'foo'; valid choices: mlp, resnet18"),
    (["model.arch=foo"], "error: unknown model.arch 'foo'; valid choices: auto, mlp, resnet18"),
    (
        ["memory=99999999999999999999999"],
        "error: memory must be a whole number in [0, 100000] (at most 100000 slots: the larger of 100000 and the stream's 600 samples), got 99999999999999999999999",
    ),
    (
        ["memory=${oc.env:NOPE}"],
        "error: memory=${oc.env:NOPE} does not resolve (Environment variable 'NOPE' not found); memory must be a whole number >= 0",
    ),
    (["method=oewc", "method.plugin.chunk=0"], "error: method.plugin.chunk must be a whole number >= 1, got 0"),
    (
        ["method=gss", "method.update.n_mem_grads=0"],
        "error: method.update.n_mem_grads must be a whole number >= 1, got 0",
    ),
    (
        ["scenario=domain_il", "method=hal"],
        "error: method=hal does not support scenario=domain_il; valid choices: class_il, task_il",
    ),
    (
        ["scenario=domain_il", "method=icarl"],
        "error: method=icarl does not support scenario=domain_il; valid choices: class_il, task_il",
    ),
    (
        ["trainer.max_steps=5"],
        "error: unknown key 'trainer.max_steps'; valid keys of trainer: accelerator, deterministic, precision, log_every_n_steps, max_epochs, enable_model_summary, num_sanity_val_steps, limit_val_batches, device_index, numerics, progress_bar, threads",
    ),
    (["~method"], "error: method cannot be deleted (~method): every run needs one; valid choices: adaer, agem,"),
    (["method="], "error: unknown method ''; valid choices: adaer, agem,"),
    (["seed=1,2"], "error: seed=1,2 sweeps over several values: add -m (--multirun) to run each one"),
    (
        ["method.plugin.e_lambda=abc"],
        "error: unknown key 'method.plugin.e_lambda': method.plugin is null for method=adaer; it has no e_lambda",
    ),
    (["method=oewc", "method.plugin.e_lambda=abc"], "error: method.plugin.e_lambda must be a finite number, got 'abc'"),
    (["method.update.class_ties=foo"], "error: unknown method.update.class_ties 'foo'; valid choices: lowest, random"),
    (["method=oewc", "method.plugin.gamma=nan"], "error: method.plugin.gamma must be a finite number, got nan"),
    (["method=si", "method.plugin.xi=0"], "error: method.plugin.xi must be a finite number > 0, got 0"),
    (
        ["replay=balanced"],
        "error: replay is chosen per method: write replay@method.replay=balanced; valid choices: balanced, ccmr, mir, random",
    ),
    (
        ["method=gem", "replay@method.replay=balanced"],
        "error: replay@method.replay needs a method with a replay policy; valid choices: method=adaer,",
    ),
    (["memory=[1"], "error: could not parse 'memory=[1': "),
    (["+method=er"], "error: method is already in the config: write 'method=er'"),
]


@pytest.mark.parametrize("argv,line", EXAMPLES, ids=[" ".join(a) for a, _ in EXAMPLES])
def test_issue_example_is_one_error_line(tmp_path, monkeypatch, capsys, argv, line):
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, *SYN, *argv)
    assert_refused(tmp_path, code, err)
    assert err.strip().startswith(line), err


def test_the_cli_composes_a_run_once_and_refuses_it_before_any_folder(tmp_path, monkeypatch, capsys):
    """The command line composed each run's config twice (a check, then ``hydra.main``): now Hydra's
    composition is the only one (its run mode, then the run), and a bad value is still refused before
    Hydra makes the run's folder."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    load, modes = ConfigLoaderImpl.load_configuration, []

    def counted(self, *args, **kwargs):
        modes.append(kwargs["run_mode"].name)
        return load(self, *args, **kwargs)

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, *SYN, "tau=2")
    assert_refused(tmp_path, code, err, "error: tau must be in [0, 1], got 2")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text("{}")
    modes.clear()  # a valid run, refused at its folder (the callback's last check)
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, *SYN, "hydra.run.dir=run")
    assert code == 2 and err.startswith("error: hydra.run.dir 'run' already holds another run's results"), err
    assert modes == ["MULTIRUN", "RUN"]  # Hydra's own: the run mode (get_mode), then the run
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["run", "run/results.json"]


def test_a_sweep_refuses_a_bad_grid_point_before_grid_json(tmp_path, monkeypatch, capsys):
    """scenario=domain_il method=hal fails when the grid is checked: no job, no grid.json."""
    code, _, err = run_cli(
        tmp_path, monkeypatch, capsys, "-m", *SYN, "scenario=domain_il", "method=er,hal", "hydra.sweep.dir=multirun/s"
    )
    assert code == 2 and err.strip().splitlines()[-1].startswith(
        "error: method=hal does not support scenario=domain_il; valid choices: class_il, task_il (job "
    ), err
    assert not list(tmp_path.rglob("grid.json")) and not list(tmp_path.rglob("results.json"))


def test_a_sweep_refuses_an_interpolation_that_does_not_resolve(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, "-m", *SYN, "memory=5,${oc.env:NOPE}")
    assert_refused(tmp_path, code, err, "error: memory=${oc.env:NOPE} does not resolve (Environment variable 'NOPE'")


def test_a_sweep_refuses_an_unknown_key_as_one_line(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(tmp_path, monkeypatch, capsys, "-m", *SYN, "trainer.max_steps=5", "seed=0,1")
    assert_refused(tmp_path, code, err, "unknown key 'trainer.max_steps'; valid keys of trainer: accelerator")


# ----------------------------------------------------------------------------- cross-key rules


@pytest.mark.parametrize(
    "ok,bad,needle",
    [
        (["method=gem", "memory=3"], ["method=gem", "memory=2"], "in [3, 100000]"),  # synthetic: T = 3
        (["method=gem", "reading=mir_code", "memory=1"], None, None),  # 1 per class x 6 classes >= 3 tasks
        (["method=hal", "memory=6"], ["method=hal", "memory=5"], "one slot per class, 6 classes"),
        (["method=icarl", "memory=6"], ["method=icarl", "memory=5"], "one slot per class, 6 classes"),
        (["method=er", "memory=100000"], ["method=er", "memory=100001"], "in [0, 100000] (at most 100000 slots"),
        (
            ["method=er", "reading=mir_code", "memory=16666"],
            ["method=er", "reading=mir_code", "memory=16667"],
            "per class",
        ),
        (["method=online", "memory=100001"], None, None),  # no memory: M is not read
        (
            ["method=gem", "method.update.n_tasks=3"],
            ["method=gem", "method.update.n_tasks=2"],
            ">= 3 (benchmark.n_tasks)",
        ),
        (["method=icarl", "scenario=task_il"], ["method=icarl", "scenario=domain_il"], "does not support"),
    ],
)
def test_cross_key_rules(ok, bad, needle):
    total = ["reading=paper_text"]  # M in total, unless the case names mir_code (M per class)
    validate(make_cfg(*total, *ok))
    if bad:
        with pytest.raises(ConfigError, match=None) as e:
            validate(make_cfg(*total, *bad))
        assert needle in str(e.value)


def test_precision_needs_a_device_that_runs_it(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(
        ConfigError, match=r"^trainer.precision=16-mixed does not run on cpu; valid choices here: 32-true, bf16-mixed$"
    ):
        validate(make_cfg("trainer.accelerator=auto", "trainer.precision=16-mixed"))
    validate(make_cfg("trainer.precision=bf16-mixed"))


def test_every_cpu_precision_trains(tmp_path):
    """The precisions the schema offers on a CPU run end to end (64-true / 16-true did not)."""
    from tests.conftest import run_cfg

    for precision in set(schema.CPU_PRECISIONS) - {"32-true"}:  # (32-true: every other test)
        res = run_cfg(
            tmp_path,
            "method=er",
            f"trainer.precision={precision}",
            "benchmark.n_tasks=2",
            "benchmark.train_per_class=20",
            "memory=20",
        )
        assert res["config"]["trainer"]["precision"] == precision and res["metrics"]["acc"] > 0


def test_an_undeclared_class_must_at_least_exist():
    cfg = make_cfg("method=er")
    with open_dict(cfg):
        cfg.method.replay._target_ = "clsuite.core.replay.nope.Nope"
    with pytest.raises(
        ConfigError,
        match=r"^unknown method.replay._target_ 'clsuite.core.replay.nope.Nope'; valid classes: BalancedReplay",
    ):
        validate(cfg)


class WideReplay(ReplayPolicy):
    """A replay policy from outside the package (this test module), declaring a key of its own."""

    def __init__(self, exclude_current_task: bool = False, width: Annotated[int, Whole(1, None, "a test key")] = 1):
        self.exclude_current_task, self.width = exclude_current_task, width

    def select(self, learner, x, y, t, n):
        return None


class LooseReplay(WideReplay):
    """The same, its key undeclared (no Spec): only what its constructor takes is checked."""

    def __init__(self, width: int):
        super().__init__(width=1)


def test_a_class_declared_from_outside_has_its_keys_checked():
    cfg = make_cfg("method=er")
    with open_dict(cfg):
        cfg.method.replay = {"_target_": f"{__name__}.LooseReplay", "width": 0}
    validate(cfg)  # undeclared but importable: its keys are its own
    with open_dict(cfg):
        cfg.method.replay._target_ = f"{__name__}.WideReplay"
    with pytest.raises(ConfigError, match=r"^method.replay.width must be a whole number >= 1, got 0$"):
        validate(cfg)
    with open_dict(cfg):
        cfg.method.replay.width, cfg.method.replay.height = 2, 3  # Hydra's instantiate would fail on it
    with pytest.raises(
        ConfigError,
        match=r"^unknown key 'method.replay.height'; valid keys of method.replay: exclude_current_task, width$",
    ):
        validate(cfg)


class HintedReplay(WideReplay):
    """Its annotation names a class imported only for type checkers: unresolvable at run time."""

    def __init__(self, width: Annotated[NotImportedHere, Whole(1, None, "a test key")] = 1):  # noqa: F821
        super().__init__(width=width)


def test_a_constructor_annotation_that_cannot_be_read_is_one_error_line():
    cfg = make_cfg("method=er")
    with open_dict(cfg):
        cfg.method.replay = {"_target_": f"{__name__}.HintedReplay", "width": 2}
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == (
        f"cannot read the constructor annotations of {__name__}.HintedReplay: name 'NotImportedHere' is not defined"
    )


@pytest.mark.parametrize(
    "slot,node,line",
    [
        ("replay", {"_target_": "collections.OrderedDict"},
         "method.replay._target_ 'collections.OrderedDict' is not a subclass of clsuite.core.replay.base.ReplayPolicy; "
         "valid classes: BalancedReplay, CCMRReplay, MIRReplay, RandomReplay"),
        ("plugin", {"_target_": "clsuite.core.replay.random.RandomReplay", "exclude_current_task": False},
         "method.plugin._target_ 'clsuite.core.replay.random.RandomReplay' is not a subclass of clsuite.core.methods.base.Plugin; "
         "valid classes: AGEM, GEM, HAL, ICaRL, NoMemory, OnlineEWC, SI"),
        ("update", {"_target_": "os.path.join"},
         "method.update._target_ 'os.path.join' is a function, not a subclass of clsuite.core.memory.base.UpdatePolicy; "
         "valid classes: ClassRingBuffer, EBRS, GSSGreedy, HerdingMemory, Reservoir, TaskReservoir, TaskRingBuffer"),
        ("replay", {"_target_": "os.path"},
         "method.replay._target_ 'os.path' is a module, not a subclass of clsuite.core.replay.base.ReplayPolicy; "
         "valid classes: BalancedReplay, CCMRReplay, MIRReplay, RandomReplay"),
        ("replay", {"_target_": "clsuite.core.replay.random.RandomReplay", "exclude_current_task": False, "bogus": 1},
         "unknown key 'method.replay.bogus'; valid keys of method.replay: exclude_current_task"),
        ("update", {"_target_": "clsuite.core.memory.reservoir.Reservoir", "n_tasks": 3},
         "unknown key 'method.update.n_tasks'; valid keys of method.update: none"),
        ("replay", {"_target_": f"{__name__}.WideReplay", "height": 1},
         "unknown key 'method.replay.height'; valid keys of method.replay: exclude_current_task, width"),
        ("replay", {"_target_": f"{__name__}.LooseReplay"},
         f"method.replay cannot build {__name__}.LooseReplay: missing a required argument: 'width'"),
        ("replay", 5, "method.replay must be null or a node with a _target_, got 5; valid classes: BalancedReplay, "),
        ("plugin", {"c": 1}, "method.plugin must be null or a node with a _target_, got {'c': 1}; valid classes: "),
    ],
)  # fmt: skip
def test_a_method_slot_holds_a_class_of_that_slot_with_its_keys(slot, node, line):
    """Each of these passed the check, then failed when the run built its method, in its folder."""
    cfg = make_cfg("method=er")
    with open_dict(cfg):
        cfg.method[slot] = node
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value).startswith(line), str(e.value)


BROKEN = {  # module files -> (the line of the module that failed, its exception's first line)
    "syntax": ({"cl_broken_a.py": "class A(ReplayPolicy)\n    pass\n"}, 1, "SyntaxError: expected ':'"),
    "raises": ({"cl_broken_a.py": "x = 1\nraise RuntimeError('no GPU here\\nsecond line')\n"}, 2,
               "RuntimeError: no GPU here"),
    "imports": ({"cl_broken_a.py": "import os\nimport cl_not_installed\n"}, 2,
                "ModuleNotFoundError: No module named 'cl_not_installed'"),
    "circular": ({"cl_broken_a.py": "from cl_broken_b import B\nclass A: ...\n",
                  "cl_broken_b.py": "from cl_broken_a import A\nB = A\n"}, 1,
                 "ImportError: cannot import name 'A' from partially initialized module 'cl_broken_a'"),
    "exits": ({"cl_broken_a.py": "import sys\nsys.exit(3)\n"}, 2, "SystemExit: 3"),
}  # fmt: skip


@pytest.mark.parametrize("case", BROKEN)
def test_an_outside_module_that_fails_to_import_is_named_with_its_line(tmp_path, monkeypatch, case):
    """It was "unknown method.replay._target_ ...; valid classes: ..." (pydoc.locate swallowed the error)."""
    files, line, why = BROKEN[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = make_cfg("method=er")
    with open_dict(cfg):
        cfg.method.replay = {"_target_": "cl_broken_a.A"}
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    where = tmp_path / ("cl_broken_b.py" if case == "circular" else "cl_broken_a.py")
    assert str(e.value).startswith(
        f"method.replay._target_ 'cl_broken_a.A': importing cl_broken_a failed at {where}, line {line}: {why}"
    ), str(e.value)
    assert "\n" not in str(e.value)
    (tmp_path / "cl_broken_a.py").write_text("class A: ...\n")  # importable, no such class: unknown as before
    with open_dict(cfg):
        cfg.method.replay._target_ = "cl_broken_a.Nope"
    try:
        with pytest.raises(ConfigError, match=r"^unknown method.replay._target_ 'cl_broken_a.Nope'; valid classes: B"):
            validate(cfg)
    finally:
        sys.modules.pop("cl_broken_a", None)


def test_an_outside_reader_module_that_fails_to_import_is_one_line(tmp_path, monkeypatch):
    """benchmark.source=module:name: a module that raised at import was a traceback."""
    (tmp_path / "cl_broken_reader.py").write_text("import numpy\nraise ValueError('bad reader')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as e:
        validate(make_cfg("benchmark.source=cl_broken_reader:tiny"))
    assert str(e.value) == (
        f"benchmark.source 'cl_broken_reader:tiny': importing cl_broken_reader failed at "
        f"{tmp_path / 'cl_broken_reader.py'}, line 2: ValueError: bad reader"
    )


# ----------------------------------------------------------------------------- help and docs


def test_help_lists_every_group_and_key(tmp_path, monkeypatch, capsys):
    code, out, err = run_cli(tmp_path, monkeypatch, capsys, "--help")
    assert code == 0 and not err and not list(tmp_path.iterdir())
    for group in ("benchmark", "method", "replay@method.replay", "update@method.update", "reading"):
        assert f"\n  {group} " in out
    assert "balanced, ccmr, mir, random" in out
    for key, spec, _ in all_keys():
        assert f"  {key}: {spec.range()}" in out, key


def test_config_doc_is_generated_from_the_schema():
    doc = (ROOT / "docs" / "CONFIG.md").read_text()
    assert doc == confighelp.markdown(), "run: python -m clsuite.config.help > docs/CONFIG.md"


# ----------------------------------------------------------------------------- signals

_PATCHED = """
import os, signal, sys
sys.path.insert(0, {src!r})
import clsuite.cli as cli
{patch}
cli.main(sys.argv[1:])
"""


def _run_patched(tmp_path, patch: str, *args):
    code = _PATCHED.format(src=str(ROOT / "src"), patch=patch)
    return subprocess.run(
        [sys.executable, "-c", code, *SYN, "trainer.progress_bar=false", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_single_run_signalled_during_start_up_says_so(tmp_path):
    patch = (
        "import clsuite.sweep.callback as cb\n"  # a single run is validated in the run callback's start
        "_v = cb.validate\n"
        "def validate(cfg):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return _v(cfg)\n"
        "cb.validate = validate\n"
    )
    p = _run_patched(tmp_path, patch, "method=online")
    assert p.returncode == 143, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1] == (
        "error: interrupted by SIGTERM; the run stopped during start-up, before any training; no results written"
    )
    assert "failed.json" not in p.stderr and not list(tmp_path.rglob("results.json"))


def test_sigint_then_sigterm_reports_sigint_and_exits_130(tmp_path):
    patch = (
        "from clsuite.core.callbacks import DivergenceGuard\n"
        "_step = DivergenceGuard.on_train_batch_end\n"
        "def step(self, trainer, learner, *a):\n"
        "    _step(self, trainer, learner, *a)\n"
        "    if learner.train_steps == 2:\n"
        "        try:\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        finally:\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "DivergenceGuard.on_train_batch_end = step\n"
    )
    p = _run_patched(tmp_path, patch, "method=online")
    assert p.returncode == 130, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: interrupted by SIGINT; the run stopped before its end, no results written (")
    assert last.endswith("(SIGTERM received while stopping: ignored)")
    assert not list(tmp_path.rglob("results.json"))


def test_a_signal_after_the_stop_message_cannot_change_the_exit_status(tmp_path):
    """Issue 30: SIGINT, then SIGTERM while the process was exiting, exited 143 naming only SIGINT:
    the handlers were restored to the defaults on the way out. The first signal decides: 130."""
    patch = (
        "import atexit\n"
        "from clsuite.core.callbacks import DivergenceGuard\n"
        "_step = DivergenceGuard.on_train_batch_end\n"
        "def step(self, trainer, learner, *a):\n"
        "    _step(self, trainer, learner, *a)\n"
        "    if learner.train_steps == 2:\n"
        "        atexit.register(os.kill, os.getpid(), signal.SIGTERM)  # during the exit, after the message\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "DivergenceGuard.on_train_batch_end = step\n"
    )
    p = _run_patched(tmp_path, patch, "method=online")
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    stop, later = p.stderr.strip().splitlines()[-2:]  # the later signal named, as docs/GUIDE.md says
    assert stop.startswith("error: interrupted by SIGINT; the run stopped before its end")
    assert later == "warning: SIGTERM received while exiting: ignored (exit status 130)"


def test_an_interpolation_below_the_benchmark_that_does_not_resolve_is_one_error_line():
    """A key the rules never read (a user benchmark's note) still resolves with the benchmark: its
    failed interpolation is named by its own key, not a traceback (it was one before)."""
    cfg = make_cfg("benchmark=split_mnist")
    with open_dict(cfg):
        cfg.benchmark.note = "${oops.missing}"
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert (
        str(e.value) == "benchmark.note=${oops.missing} does not resolve (Interpolation key 'oops.missing' not found)"
    )
