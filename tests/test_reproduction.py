"""The reproduction report (scripts/report.py) and the CIFAR path, end to end.

Fast: the report is built from hand-made results files (no training) and every number in it comes
from them. Slow: ER, MIR and AdaER train end to end with the reduced ResNet-18 on CIFAR-shaped
synthetic data (3x32x32, 10 classes in 5 tasks; split-CIFAR100's 5 iterations per batch too).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.test_aggregate import fake_R, write_run

ROOT = Path(__file__).resolve().parents[1]
CIFAR_SHAPED = [
    "benchmark.synthetic.shape=[3,32,32]",
    "benchmark.backbone=resnet18",
    "benchmark.synthetic.num_classes=10",
    "benchmark.n_tasks=5",
    "benchmark.classes_per_task=2",
    "benchmark.synthetic.train_per_class=40",
    "benchmark.train_per_class=40",
    "benchmark.synthetic.test_per_class=10",
]


def _report():
    spec = importlib.util.spec_from_file_location("report", ROOT / "scripts" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_is_built_from_results_files_only(tmp_path):
    mr = tmp_path / "multirun"
    for seed in (0, 1):
        for m, final in (("er", 70.0), ("mir", 72.0), ("adaer", 74.0 + seed)):
            for b in ("split_mnist", "split_fmnist"):
                write_run(mr / "table2", benchmark=b, method=m, seed=seed, R=fake_R(5, final))
    for lr, acc in ((0.03, 60.0), (0.05, 65.0), (0.1, 63.0), (0.2, 50.0)):
        write_run(
            mr / "readings_lrval",
            method="er",
            R=fake_R(5, acc),
            extra_cfg={"lr": lr, "eval_split": "val"},
            job=f"lr={lr}",
        )
    rep = _report()
    path = rep.build(mr, tmp_path / "results", tmp_path / "docs")
    md = path.read_text()
    assert "74.5 ± 0.7" in md  # AdaER's Acc over the two seeds, ours
    assert "| AdaER | 74.5 ± 0.7 | 89.6 |" in md  # beside the paper's value
    assert "Not run" in md  # figures without runs are named, with their command
    _, chosen = rep.lr_choice(mr)
    assert chosen == {("split_mnist", "er"): 0.05}  # chosen on validation Acc


def test_chosen_lr_needs_validation_runs(tmp_path, capsys):
    rep = _report()
    assert rep.main(["--chosen-lr", "--multirun-dir", str(tmp_path)]) == 2
    assert "readings_lrval" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("method", ["er", "mir", "adaer"])
def test_cifar_shaped_resnet18_end_to_end(run, tmp_path, method):
    res = run(f"method={method}", *CIFAR_SHAPED)
    R = np.asarray(res["R"])
    assert R.shape == (5, 5) and np.isfinite(R).all()
    assert res["config"]["benchmark"]["backbone"] == "resnet18"
    assert all(np.isfinite(v) for v in res["metrics"].values())
    assert sum(res["steps_per_task"]) == 5 * 80 // 20  # one step per incoming batch of 20
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["metrics"]["acc"] == pytest.approx(res["metrics"]["acc"])


@pytest.mark.slow
def test_cifar100_like_five_iterations_per_batch(run):
    res = run("method=adaer", "benchmark.iters_per_batch=5", *CIFAR_SHAPED)
    assert np.asarray(res["R"]).shape == (5, 5)
    assert res["config"]["benchmark"]["iters_per_batch"] == 5


@pytest.mark.slow
def test_cifar_shaped_resnet18_learns(run):
    """With 200 images per class (10 incoming batches per task) ER learns the CIFAR-shaped stream."""
    over = [o for o in CIFAR_SHAPED if "train_per_class" not in o]
    res = run("method=er", "benchmark.synthetic.train_per_class=200", "benchmark.train_per_class=200", *over)
    assert res["metrics"]["acc"] > 50.0  # chance over 10 classes is 10%
