"""Table II cells checked by measurement (clsuite.analysis.cells), on hand-made results files: each
variant against the default paired by seed with exact differences, the verdict rule, the notes, a
cell found under another folder name by its sweep, and the report's Table II section with and
without runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from clsuite.analysis import cells as cl
from clsuite.analysis.load import load_experiment
from clsuite.analysis.report import build_report
from clsuite.analysis.stats import one_sample
from tests.results_fixtures import fake_R, write_run

SEEDS = (0, 1, 2, 3)


def put(root, method, cfg: dict, accs, bench="split_mnist", reading="mir_code", tag=""):
    for s, acc in zip(SEEDS, accs, strict=True):
        job = f"benchmark={bench},method={method},{tag},seed={s}"
        R = fake_R(1 if method == "joint" else 5, acc)[-1:] if method == "joint" else fake_R(5, acc)
        write_run(root, bench, method, s, R=R, reading=reading, extra_cfg=cfg, job=job)


def joint_cfg(epochs):
    return {"method": {"name": "joint", "joint": True, "epochs": epochs}}


def grid(root, sweep):
    root.mkdir(parents=True, exist_ok=True)
    (root / "grid.json").write_text(json.dumps({"argv": ["src/run.py", "--config-dir", "sweeps", "--config-name",
                                                         sweep], "jobs": []}))  # fmt: skip


def interval(d):
    d = np.asarray(d, dtype=float)
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean(), d.mean() - half, d.mean() + half


def test_each_variant_against_the_default_paired_by_seed(tmp_path):
    root = tmp_path / "cells_joint"
    put(root, "joint", joint_cfg(1), (86.0, 87.0, 88.0, 89.0), tag="e1")
    put(root, "joint", joint_cfg(5), (92.0, 94.5, 93.0, 96.0), tag="e5")
    put(root, "joint", joint_cfg(10), (86.0, 88.0, 87.0, 90.0), tag="e10")
    (r10, r5) = cl.rows(cl.BY_NAME["joint"], load_experiment(root).runs)
    assert (r5.variant, r5.name, r5.diff.n) == ("method.epochs=5", "5 passes over the union", 4)
    mean, lo, hi = interval([6.0, 7.5, 5.0, 7.0])
    assert (r5.diff.mean, r5.diff.low, r5.diff.high) == pytest.approx((mean, lo, hi))
    assert r5.default_acc == pytest.approx(87.5) and r5.variant_acc == pytest.approx(93.875)
    assert r5.paper == 94.0 and r5.gap == pytest.approx(6.5)
    assert lo <= 6.5 <= hi and r5.verdict == cl.EXPLAINS
    assert r10.variant == "method.epochs=10" and r10.verdict == cl.NO_EFFECT  # +0.5 [-0.4, +1.4]


@pytest.mark.parametrize(
    "d, gap, expected",
    [
        ([0.5, -0.5, 1.0, -1.0], 5.0, cl.NO_EFFECT),
        ([4.0, 5.0, 6.0, 5.0], 5.0, cl.EXPLAINS),
        ([2.0, 2.5, 3.0, 2.5], 5.0, cl.PART),
        ([9.0, 10.0, 11.0, 10.0], 5.0, cl.OVERSHOOTS),
        ([-2.0, -3.0, -2.5, -2.5], 5.0, cl.AWAY),
        ([-2.0, -3.0, -2.5, -2.5], -6.0, cl.PART),  # the paper below: a negative shift toward it
        ([-9.0, -10.0, -11.0, -10.0], -6.0, cl.OVERSHOOTS),
    ],
)
def test_verdict(d, gap, expected):
    assert cl.verdict(one_sample(d), gap) == expected


def test_a_cell_is_found_by_its_sweep_under_another_folder_name_and_noted(tmp_path):
    root = tmp_path / "multirun"
    exp = root / "i33_mine"  # `experiment=i33_mine` on the command line of sweeps/cells_joint.yaml
    grid(exp, "cells_joint")
    put(exp, "joint", joint_cfg(1), (86.0, 87.0, 88.0, 89.0), tag="e1")
    put(exp, "joint", joint_cfg(10), (93.0, 94.5, 93.5, 96.0), tag="e10")
    put(exp, "joint", joint_cfg(2), (86.0, 87.0, 88.0, 89.0), bench="split_fmnist", tag="e2")  # no default there
    other = root / "adhoc"
    grid(other, "table2")
    put(other, "joint", joint_cfg(10), (50.0,) * 4, tag="x")  # another sweep's runs: not the cell's
    found = cl.find(root)
    assert list(found) == ["i33_mine"] and cl.owner(found["i33_mine"]) is cl.BY_NAME["joint"]
    joint, agem, logits = (line.removeprefix("- ") for line in cl.markdown(found)[:3])
    assert joint.startswith("**Joint** (paper (split-MNIST) Joint 94.0; default: 1 pass")  # (FMNIST: no default run)
    assert "explained on every benchmark measured by 10 passes over the union" in joint
    assert "multirun/i33_mine/" in joint and "`make cell-joint`" in joint
    assert agem == ("**A-GEM**: not measured here: `make cell-agem` (sweeps/cells_agem_batch.yaml, "
                    "sweeps/cells_agem_draw.yaml, sweeps/cells_agem_pool.yaml, sweeps/cells_agem_layout.yaml, "
                    "sweeps/cells_agem_per_task.yaml, 10 seeds).")  # fmt: skip
    assert logits.startswith("**MIR's stored logits**: not measured here: `make cell-logits`")


def test_a_measured_none_and_the_stored_logit_default_from_the_reading(tmp_path):
    root = tmp_path / "choices_logits_on_overwrite"
    for m in ("mir", "adaer"):
        put(root, m, {"logits_on_overwrite": "reset"}, (88.0, 89.0, 90.0, 91.0), tag=f"{m}-reset")
        put(root, m, {"logits_on_overwrite": "keep"}, (88.5, 88.5, 90.5, 90.5), tag=f"{m}-keep")
    rows = cl.rows(cl.BY_NAME["stored_logits"], load_experiment(root).runs)
    assert [(r.method, r.variant, r.verdict) for r in rows] == [
        ("mir", "logits_on_overwrite=keep", cl.NO_EFFECT),
        ("adaer", "logits_on_overwrite=keep", cl.NO_EFFECT),
    ]  # mir_code's default is reset (conf/reading/mir_code.yaml): keep is the variant
    note = cl.summary(cl.BY_NAME["stored_logits"], rows, ["choices_logits_on_overwrite"])
    assert "none of the measured variants explains the distance to the paper (a measured none)" in note
    assert "Variants that move Acc (Δ [95% CI], paired): none." in note


def test_the_report_carries_the_notes_and_names_the_commands_when_nothing_ran(tmp_path):
    root = tmp_path / "multirun"
    put(root / "table2", "er", {}, (80.0, 81.0, 82.0, 83.0), tag="er")
    text = build_report(root, tmp_path / "results")["written"].read_text()
    assert "Cells checked by measurement" in text
    for c in cl.CELLS:  # Table II's (split-MNIST, -FMNIST); the CIFAR-10 copy's cells go with its row, absent here
        assert (f"**{c.title}**: not measured here: `{c.command}`" in text) == ("split_mnist" in c.benchmarks)
    exp = root / "cells_joint"
    put(exp, "joint", joint_cfg(1), (86.0, 87.0, 88.0, 89.0), tag="e1")
    put(exp, "joint", joint_cfg(5), (92.0, 94.5, 93.0, 96.0), tag="e5")
    text = build_report(root, tmp_path / "results")["written"].read_text()
    assert "**Joint** (paper" in text and "| Joint | Joint | 5 passes over the union | split-MNIST |" in text
    assert "### cells_joint\n" not in text.split("Other experiments")[1].split("## ")[0]  # not an ad-hoc sweep


def test_a_variant_run_under_other_cpu_kernels_is_not_paired_with_the_default(tmp_path):
    # the kernels are part of a run's environment (clsuite.config.numerics): a variant measured under other
    # kernels than its default would mix the numerical noise into the effect
    root = tmp_path / "cells_joint"
    put(root, "joint", joint_cfg(1), (86.0, 87.0, 88.0, 89.0), tag="e1")
    put(root, "joint", joint_cfg(5), (92.0, 94.5, 93.0, 96.0), tag="e5")
    runs = load_experiment(root).runs
    assert len(cl.rows(cl.BY_NAME["joint"], runs)) == 1
    other = runs.assign(numerics=[("portable" if f["method.epochs"] == 5 else n) for f, n in zip(runs["flat"], runs["numerics"], strict=True)])  # fmt: skip
    assert cl.rows(cl.BY_NAME["joint"], other) == []


def test_agem_memory_layouts_are_named_by_their_reference(tmp_path):
    # a label names only the keys whose value differs from the default's (reservoir), so
    # TaskReservoir's per_task=null (absent from the default) does not enter it
    replay = {"_target_": "clsuite.core.replay.random.RandomReplay", "exclude_current_task": True}
    base = {"method": {"name": "agem", "replay_size": 256, "replay": replay,
                       "update": {"_target_": "clsuite.core.memory.reservoir.Reservoir"}}}  # fmt: skip
    task = {"_target_": "clsuite.core.memory.task_reservoir.TaskReservoir", "per_task": None, "n_tasks": None}
    root = tmp_path / "cells_agem_layout"
    put(root, "agem", base, (31.0, 32.0, 30.0, 33.0), tag="res")
    put(root, "agem", {"method": {**base["method"], "update": task}}, (31.5, 32.5, 30.0, 33.5), tag="tr")
    put(root, "agem", {"method": {**base["method"], "update": {**task, "per_task": 10}}}, (30.0, 31.0, 29.0, 32.0), tag="pt")  # fmt: skip
    names = {r.name for r in cl.rows(cl.BY_NAME["agem"], load_experiment(root).runs)}
    assert names == {"a random M // T of each task (Avalanche)", "one batch (10) per task (Mammoth agem's end_task)"}


def test_icarls_exemplar_update_on_the_cifar10_copy_is_judged_against_the_official_papers_value(tmp_path):
    # herding is iCaRL's default; on the JPEG copy the paper's value is the official split-CIFAR10's (33.1)
    herding = {"method": {"name": "icarl", "update": {"_target_": "clsuite.core.memory.herding.HerdingMemory"}}}
    reservoir = {"method": {"name": "icarl", "update": {"_target_": "clsuite.core.memory.reservoir.Reservoir"}}}
    root = tmp_path / "cells_icarl_update"
    put(root, "icarl", herding, (50.0, 49.0, 51.0, 50.0), bench="split_cifar10_jpeg", tag="herding")
    put(root, "icarl", reservoir, (33.0, 35.0, 34.0, 31.0), bench="split_cifar10_jpeg", tag="reservoir")
    cell = cl.BY_NAME["icarl_update"]
    (r,) = cl.rows(cell, load_experiment(root).runs)
    assert (r.variant, r.name) == ("method.update._target_=Reservoir", cell.labels["method.update._target_=Reservoir"])
    mean, lo, hi = interval([-17.0, -14.0, -17.0, -19.0])
    assert (r.diff.mean, r.diff.low, r.diff.high) == pytest.approx((mean, lo, hi))
    assert r.paper == 33.1 and r.gap == pytest.approx(33.1 - 50.0) and r.verdict == cl.EXPLAINS
    note = cl.summary(cell, [r], ["cells_icarl_update"])
    assert note.startswith(
        "**iCaRL's exemplar update** (paper (split-CIFAR10, official data) iCaRL 33.1; default: herding"
    )
    assert "explained on every benchmark measured by reservoir, each image seen once" in note
    # the report: with the CIFAR-10 row's section, after its claims; not among Table II's (split-MNIST) cells
    put(tmp_path / "multirun" / "cifar10_jpeg_row", "icarl", herding, (50.0, 49.0, 51.0, 50.0),
        bench="split_cifar10_jpeg", tag="herding")  # fmt: skip
    (tmp_path / "multirun" / "cells_icarl_update").symlink_to(root)
    text = build_report(tmp_path / "multirun", tmp_path / "results")["written"].read_text()
    table2, row = text.split("## 1. Table II")[1].split("CIFAR-10 row on CIFAR-10 (JPEG copy)")[:2]
    assert "iCaRL's exemplar update" not in table2
    assert "- **iCaRL's exemplar update** (paper (split-CIFAR10, official data) iCaRL 33.1;" in row
    assert "| iCaRL's exemplar update | iCaRL | reservoir, each image seen once" in row


def test_icarls_classifier_cell_takes_null_as_the_nearest_mean():
    # method.plugin.classifier null (the suite's default: iCaRL's Alg. 1) is the default arm, head the variant
    default = cl.BY_NAME["icarl_classifier"].is_default
    assert default({"method.plugin.classifier": None}, "mir_code") and default({}, "mir_code")
    assert not default({"method.plugin.classifier": "nme"}, "mir_code")  # (the config refuses it: one spelling)
    assert not default({"method.plugin.classifier": "head"}, "mir_code")


def test_a_cell_is_noted_with_the_data_its_runs_were_on(tmp_path):
    """A cell's rows go to the section of the benchmark they ran on, with that benchmark's paper value: iCaRL's
    update cell run on split-MNIST (``--benchmarks`` overrides the sweep's) is noted among Table II's cells with
    split-MNIST's 70.3, not in the CIFAR-10 row's with the official split-CIFAR10's 33.1; and with runs of the cell
    but none of the row, the row's section still notes its cell."""
    herding = {"method": {"name": "icarl", "update": {"_target_": "clsuite.core.memory.herding.HerdingMemory"}}}
    reservoir = {"method": {"name": "icarl", "update": {"_target_": "clsuite.core.memory.reservoir.Reservoir"}}}
    root = tmp_path / "multirun" / "cells_icarl_update"
    put(root, "icarl", herding, (70.0, 69.0, 71.0, 70.0), tag="herding")
    put(root, "icarl", reservoir, (60.0, 61.0, 59.0, 60.0), tag="reservoir")
    found = cl.find(tmp_path / "multirun")
    mnist = "\n".join(cl.markdown(found))
    assert "- **iCaRL's exemplar update** (paper (split-MNIST) iCaRL 70.3; default: herding" in mnist
    cifar = cl.markdown(found, on=("split_cifar10_jpeg",))
    assert (
        cifar[0]
        == "- **iCaRL's exemplar update**: not measured here: `make cell-icarl` (sweeps/cells_icarl_update.yaml, 10 seeds)."
    )
    assert not any("| iCaRL's exemplar update |" in line for line in cifar)
    put(root, "icarl", herding, (50.0, 49.0, 51.0, 50.0), bench="split_cifar10_jpeg", tag="herding")
    put(root, "icarl", reservoir, (33.0, 35.0, 34.0, 31.0), bench="split_cifar10_jpeg", tag="reservoir")
    text = build_report(tmp_path / "multirun", tmp_path / "results")["written"].read_text()  # no cifar10_jpeg_row
    table2, row = text.split("## 1. Table II")[1].split("CIFAR-10 row on CIFAR-10 (JPEG copy)")[:2]
    assert "(paper (split-MNIST) iCaRL 70.3;" in table2 and "iCaRL 33.1" not in table2
    assert "- **iCaRL's exemplar update** (paper (split-CIFAR10, official data) iCaRL 33.1;" in row
    assert "70.3" not in row.split("\n## ")[0]
    # on the official split-CIFAR10 (the paper's data), the rows belong to Table II's section, beside MNIST's
    put(root, "icarl", herding, (40.0, 41.0, 39.0, 40.0), bench="split_cifar10", tag="herding")
    put(root, "icarl", reservoir, (35.0, 36.0, 34.0, 35.0), bench="split_cifar10", tag="reservoir")
    paper = "\n".join(cl.markdown(cl.find(tmp_path / "multirun"), on=cl.pv.BENCHMARKS))
    assert "(paper (split-MNIST/split-CIFAR10) iCaRL 70.3/33.1;" in paper
