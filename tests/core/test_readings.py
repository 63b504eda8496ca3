"""Readings (PROTOCOL 8), config groups and per-method values: what each policy actually receives.

Every method is composed under every reading and built (``clsuite.core.train.build``) on the
synthetic stream; the replay policy, the update policy, the memory and the learner are then
inspected: a reading's key must reach every method that has the notion, and a method that fixes
it itself (A-GEM's past-tasks-only R, GEM's ring per task, HAL's ring per class, iCaRL's
herding) keeps its own.
"""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from clsuite.core.memory.class_ring import ClassRingBuffer
from clsuite.core.memory.ebrs import EBRS
from clsuite.core.memory.gss_greedy import GSSGreedy
from clsuite.core.memory.herding import HerdingMemory
from clsuite.core.memory.reservoir import Reservoir
from clsuite.core.memory.task_ring import TaskRingBuffer
from clsuite.core.replay.ccmr import CCMRReplay
from clsuite.core.replay.mir import MIRReplay
from clsuite.core.replay.random import RandomReplay
from clsuite.core.train import build
from tests.conftest import make_cfg

READINGS = {
    # batch, |R|, loss, per class, past tasks only, C-CMR candidates, stored logits (on the synthetic stream: the MNIST
    # family), scoring updates BatchNorm's running statistics, lr
    "paper_text": dict(
        batch=20, R=20, loss="concat", per_class=False, past=False, cand=None, old=False, bn=False, lr=0.1
    ),
    "mir_code": dict(batch=10, R=10, loss="split", per_class=True, past=True, cand=50, old=True, bn=True, lr=0.1),
}
FOLLOWS = "reading"  # the method's policy takes the reading's value
# method: (replay class, its exclude_current_task, update class)
METHODS = {
    "er": (RandomReplay, FOLLOWS, Reservoir),
    "mir": (MIRReplay, FOLLOWS, Reservoir),
    "ccmr": (CCMRReplay, FOLLOWS, Reservoir),
    "ebrs": (MIRReplay, FOLLOWS, EBRS),
    "adaer": (CCMRReplay, FOLLOWS, EBRS),
    "agem": (RandomReplay, True, Reservoir),  # A-GEM's g_ref: past tasks only, every reading
    "gss": (RandomReplay, False, GSSGreedy),
    "hal": (RandomReplay, False, ClassRingBuffer),
    "icarl": (RandomReplay, False, HerdingMemory),
    "gem": (None, None, TaskRingBuffer),
    "oewc": (None, None, None),
    "si": (None, None, None),
    "online": (None, None, None),
    "joint": (None, None, None),
}
OWN_LOSS = {"hal": "concat"}  # HAL's ER step concatenates B_t and R under every reading
OWN_R = {"agem": 256}  # A-GEM's g_ref batch: its code's --eps-mem-batch under every reading
SYNTHETIC_CLASSES = 6  # conf/benchmark/synthetic.yaml


@pytest.mark.parametrize("reading", READINGS)
@pytest.mark.parametrize("method", METHODS)
def test_each_policy_receives_the_readings_keys(reading, method):
    r = READINGS[reading]
    replay_cls, exclude, update_cls = METHODS[method]
    cfg = make_cfg(f"reading={reading}", f"method={method}")
    assert cfg.reading == reading
    dm, learner, _ = build(cfg)
    loss, R = OWN_LOSS.get(method, r["loss"]), OWN_R.get(method, r["R"])
    assert (dm.batch_size, learner.replay_size, learner.replay_loss_form) == (r["batch"], R, loss)
    assert learner.lr == r["lr"] and learner.configure_optimizers().param_groups[0]["lr"] == r["lr"]
    uses_memory = update_cls is not None
    assert learner.memory.capacity == (100 * (SYNTHETIC_CLASSES if r["per_class"] else 1) if uses_memory else 0)
    assert type(learner.update_policy) is update_cls if uses_memory else learner.update_policy is None
    replay = learner.replay
    if replay_cls is None:
        assert replay is None
        return
    assert type(replay) is replay_cls
    assert replay.exclude_current_task is (r["past"] if exclude == FOLLOWS else exclude)
    if replay_cls is MIRReplay:
        assert replay.candidates == 50  # MIR's own C, every reading
        assert (replay.compare_to_old_logits, replay.scoring_updates_bn) == (r["old"], r["bn"])
    if replay_cls is CCMRReplay:  # C-CMR scores as MIR under every reading (one scoring function)
        assert replay.candidates == r["cand"] and replay.tau == 0.5 and replay.R_t_from == "candidates"
        assert (replay.compare_to_old_logits, replay.scoring_updates_bn) == (r["old"], r["bn"])
    if update_cls is EBRS:  # the open choices' defaults: Alg. 2's victim, 0 until scored
        assert (learner.update_policy.victim_rule, learner.update_policy.unscored) == ("lowest_score", 0)


# Every key a reading sets, as MIR's script lines give it (Scripts/ER_experiments.sh at 35eda78): the CIFAR-10
# line (l.9) on the CIFAR family, the split-MNIST line (l.17) on the MNIST family; they differ in one flag.
MIR_LINE = dict(memory_per_class=True, batch_size=10, replay_size=10, replay_loss="split", exclude_current_task=True,
                candidates=50, scoring_updates_bn=True, logits_on_overwrite="reset", lr=0.1)  # fmt: skip
FAMILY = {
    "split_cifar10": "cifar", "split_cifar10_jpeg": "cifar", "split_cifar100": "cifar",
    "split_mnist": "mnist", "split_fmnist": "mnist", "synthetic": "mnist",
}  # fmt: skip
LINES = {"cifar": {**MIR_LINE, "compare_to_old_logits": False}, "mnist": {**MIR_LINE, "compare_to_old_logits": True}}


@pytest.mark.parametrize("benchmark", FAMILY)
def test_mir_code_follows_the_script_line_of_the_benchmarks_family(benchmark):
    keys = [*LINES["cifar"], "reading"]
    cfg = make_cfg(f"benchmark={benchmark}")  # the default reading
    assert {k: cfg[k] for k in keys} == {**LINES[FAMILY[benchmark]], "reading": "mir_code"}
    paper = make_cfg(f"benchmark={benchmark}", "reading=paper_text")  # no per-family values: the same everywhere
    assert (paper.compare_to_old_logits, paper.scoring_updates_bn, paper.batch_size) == (False, False, 20)
    flipped = not LINES[FAMILY[benchmark]]["compare_to_old_logits"]
    cfg = make_cfg(f"benchmark={benchmark}", f"compare_to_old_logits={flipped}")
    assert cfg.compare_to_old_logits is flipped  # the command line still wins
    assert instantiate(cfg.method.replay).compare_to_old_logits is flipped  # AdaER's C-CMR (no data needed)


@pytest.mark.parametrize("benchmark", FAMILY)
@pytest.mark.parametrize("reading", READINGS)
def test_mir_codes_cifar_data_follows_mirs_data_code_and_the_rest_is_unchanged(benchmark, reading):
    """mir_code on the CIFAR family: MIR's inputs in [-1, 1] and 95% of each task's images (data.py l.43,
    l.368), each value with its source line in ``cites``; the MNIST family and paper_text keep the key's
    absence (null: [0, 1]) and every training image, so their runs keep their identity."""
    cfg = make_cfg(f"benchmark={benchmark}", f"reading={reading}")
    if reading == "mir_code" and FAMILY[benchmark] == "cifar":
        assert (cfg.data.input_range, cfg.data.val_fraction) == ("symmetric", 0.05)
        assert "data.py l.34" in cfg.cites["data.input_range"] and "cut=0.95" in cfg.cites["data.val_fraction"]
    else:
        assert (cfg.data.input_range, cfg.data.val_fraction) == (None, 0.0)
    cfg = make_cfg(f"benchmark={benchmark}", f"reading={reading}", "data.val_fraction=0", "data.input_range=unit")
    assert (cfg.data.input_range, cfg.data.val_fraction) == ("unit", 0.0)  # the command line still wins


def test_a_command_line_value_wins_over_the_reading():
    cfg = make_cfg("reading=mir_code", "method=adaer", "batch_size=5", "candidates=7", "exclude_current_task=false")
    dm, learner, _ = build(cfg)
    assert dm.batch_size == 5 and learner.replay_size == 10  # the rest of the reading stays
    assert learner.replay.candidates == 7 and learner.replay.exclude_current_task is False
    _, learner, _ = build(make_cfg("reading=mir_code", "method=er", "method.replay.exclude_current_task=false"))
    assert learner.replay.exclude_current_task is False  # one method's policy, after the reading


def test_a_methods_lr_overrides_the_runs_lr():
    assert build(make_cfg("method=er", "lr=0.2"))[1].lr == 0.2  # method.lr null: the run's lr
    _, learner, _ = build(make_cfg("method=mir", "lr=0.2", "method.lr=0.05"))
    assert learner.lr == 0.05 and learner.configure_optimizers().param_groups[0]["lr"] == 0.05
    _, learner, _ = build(make_cfg("reading=mir_code", "method=adaer", "method.lr=0.03"))
    assert learner.lr == 0.03  # the virtual step's alpha is learner.lr too (replay/virtual.py)


def test_swapping_a_methods_update_policy_from_the_command_line():
    _, learner, _ = build(make_cfg("method=icarl", "update@method.update=reservoir"))
    assert type(learner.update_policy) is Reservoir and learner.plugin.classifier == "nme"  # (null: the nearest mean)
    _, learner, _ = build(make_cfg("method=icarl", "method.plugin.classifier=head"))
    assert learner.plugin.classifier == "head"
    _, learner, _ = build(make_cfg("method=er", "replay@method.replay=mir"))
    assert type(learner.replay) is MIRReplay


@pytest.mark.parametrize(
    "method, benchmark, expected",
    [
        ("gem", "split_mnist", {"memory_strength": 1.0}),
        ("gem", "split_fmnist", {"memory_strength": 0.5}),
        ("gem", "split_cifar10", {"memory_strength": 0.5}),
        ("oewc", "split_mnist", {"e_lambda": 90, "gamma": 1.0}),
        ("oewc", "split_fmnist", {"e_lambda": 90, "gamma": 1.0}),
        ("oewc", "split_cifar10", {"e_lambda": 10, "gamma": 1.0}),
        ("si", "split_mnist", {"c": 1.0, "xi": 0.9}),
        ("si", "split_fmnist", {"c": 1.0, "xi": 0.9}),
        ("si", "split_cifar10", {"c": 0.5, "xi": 1.0}),
    ],
)
def test_tuned_values_per_benchmark(method, benchmark, expected):
    plugin = make_cfg(f"method={method}", f"benchmark={benchmark}").method.plugin
    assert {k: plugin[k] for k in expected} == expected
    key, value = next(iter(expected)), 3.0
    plugin = make_cfg(f"method={method}", f"benchmark={benchmark}", f"method.plugin.{key}={value}").method.plugin
    assert plugin[key] == value  # the command line wins over the tuned file
    p = instantiate(plugin)
    assert getattr(p, "margin" if key == "memory_strength" else key) == value


def test_hal_keeps_its_concatenated_loss_under_mir_code():
    assert build(make_cfg("reading=mir_code", "method=hal"))[1].replay_loss_form == "concat"
    assert build(make_cfg("reading=mir_code", "method=gss"))[1].replay_loss_form == "split"


def test_help_lists_the_readings_and_the_policy_groups():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "src" / "run.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    groups = {
        line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ") and len(line.split()) > 1
    }
    assert "mir_code, paper_text  [default: mir_code]" in groups["reading"]
    assert "ccmr" in groups["replay@method.replay"] and "ebrs" in groups["update@method.update"]
