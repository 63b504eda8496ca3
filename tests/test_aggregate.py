"""Aggregation from hand-made results files: table cells, std, paper values, missing/failed runs, figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clsuite import aggregate as agg
from clsuite import paper_values as pv
from clsuite.metrics import all_metrics


def fake_R(T: int, final: float, first_final: float | None = None) -> np.ndarray:
    """A T x T matrix whose last row averages ``final`` (first column ends at ``first_final``)."""
    R = np.zeros((T, T))
    for i in range(T):
        R[i, : i + 1] = 90.0
    R[-1] = final
    if first_final is not None:
        R[-1, 0] = first_final
        R[-1, 1:] = (final * T - first_final) / (T - 1)
    return R


def write_run(
    root: Path,
    benchmark="split_mnist",
    method="er",
    seed=0,
    memory=100,
    tau=0.5,
    lam=0.0,
    R=None,
    extra_cfg=None,
    job=None,
) -> Path:
    R = fake_R(5, 80.0) if R is None else np.asarray(R, dtype=float)
    b = np.full(R.shape[1], 10.0)
    cfg = {
        "experiment": root.name,
        "seed": seed,
        "memory": memory,
        "tau": tau,
        "lambda": lam,
        "lr": 0.1,
        "benchmark": {"name": benchmark, "n_tasks": R.shape[1]},
        "method": {"name": method},
        "logger": {"name": "csv"},
        "trainer": {"accelerator": "cpu", "progress_bar": False},
        **(extra_cfg or {}),
    }
    res = {
        "status": "finished",
        "benchmark": benchmark,
        "method": method,
        "memory": memory,
        "seed": seed,
        "R": R.tolist(),
        "b": b.tolist(),
        "metrics": all_metrics(R, b),
        "per_class": [],
        "config": cfg,
        "wall_time_s": 2.0,
        "device": "cpu",
    }
    d = root / (job or f"benchmark={benchmark},lambda={lam},memory={memory},method={method},seed={seed},tau={tau}")
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(res))
    return d


def write_grid(root: Path, dirs: list[str]) -> None:
    (root / "grid.json").write_text(
        json.dumps({"created": "now", "argv": [], "jobs": [{"overrides": [], "dir": d} for d in dirs]})
    )


@pytest.fixture
def table2_runs(tmp_path):
    root = tmp_path / "multirun" / "table2"
    dirs = []
    # ER: final rows averaging 80, 82, 84 -> Acc mean 82, sample std 2; AdaER: 3 seeds of 90
    for seed, acc in enumerate((80.0, 82.0, 84.0)):
        dirs.append(write_run(root, method="er", seed=seed, R=fake_R(5, acc)).name)
        dirs.append(write_run(root, method="adaer", seed=seed, R=fake_R(5, 90.0)).name)
    dirs.append(write_run(root, benchmark="split_fmnist", method="er", seed=0, R=fake_R(5, 70.0)).name)
    # a failed run and a never-run one in the grid
    failed = root / "benchmark=split_fmnist,method=er,seed=1"
    failed.mkdir(parents=True)
    (failed / "failed.json").write_text(json.dumps({"error": "RuntimeError: CUDA out of memory", "attempt": 2}))
    write_grid(root, [*dirs, failed.name, "benchmark=split_fmnist,method=er,seed=2"])
    return tmp_path


def test_summary_mean_std_n(table2_runs):
    runs = agg.load_runs(table2_runs / "multirun" / "table2")
    s = agg.summarize(runs)
    er = s[(s.method == "er") & (s.benchmark == "split_mnist")].iloc[0]
    assert er["n"] == 3
    assert er["acc_mean"] == pytest.approx(82.0)
    assert er["acc_std"] == pytest.approx(2.0)  # sample std of 80, 82, 84
    assert er["forget_mean"] == pytest.approx(90.0 - 82.0)
    assert er["first_task_final_mean"] == pytest.approx(82.0)


def test_table2_cells_paper_values_and_status(table2_runs):
    res = agg.aggregate("table2", table2_runs / "multirun", table2_runs / "results")
    md = (table2_runs / "results" / "table2" / "table2.md").read_text()
    tex = (table2_runs / "results" / "table2" / "table2.tex").read_text()
    # ER on split-MNIST: ours 82.0 ± 2.0 beside the paper's 86.4 (Table II)
    assert "| ER | 82.0 ± 2.0 [86.4] | 8.0 ± 2.0 [11.6] |" in md
    assert "| AdaER | 90.0 ± 0.0 [89.6] |" in md
    assert r"$82.0 \pm 2.0$ {\scriptsize[86.4]}" in tex
    assert r"\multicolumn{5}{c}{split-MNIST}" in tex
    # rows in the paper's order, one seed -> no std, a benchmark with no AdaER run -> dash
    assert md.index("| ER |") < md.index("| AdaER |")
    assert "| 70.0 [69.6] |" in md
    # the claims beside ours: AdaER 3.7% over ER on split-MNIST -> ours 100 (90/82 - 1)
    assert f"| {100 * (90 / 82 - 1):.1f} |" in md
    st = res["status"]
    assert st["grid"]["expected"] == 9 and st["finished_in_grid"] == 7
    assert [f["job"] for f in st["failed"]] == ["benchmark=split_fmnist,method=er,seed=1"]
    assert st["missing"] == ["benchmark=split_fmnist,method=er,seed=2"]
    assert "RuntimeError: CUDA out of memory (attempt 2" in md
    assert (table2_runs / "results" / "table2" / "accuracy_matrix_split_mnist.png").is_file()
    assert (table2_runs / "results" / "table2" / "accuracy_matrix_split_mnist.pdf").is_file()
    assert (table2_runs / "results" / "table2" / "runs.csv").read_text().count("\n") == 8


def test_strict_exit_status(table2_runs, capsys):
    args = ["table2", "--multirun-dir", str(table2_runs / "multirun"), "--out", str(table2_runs / "results")]
    assert agg.main(args) == 0
    assert agg.main([*args, "--strict"]) == 1
    assert agg.main(["nope", "--multirun-dir", str(table2_runs / "multirun")]) == 2
    assert "error: no runs" in capsys.readouterr().err


def test_variants_are_kept_apart(tmp_path):
    root = tmp_path / "multirun" / "table2"
    write_run(root, seed=0, R=fake_R(5, 80.0), job="a")
    write_run(root, seed=0, R=fake_R(5, 60.0), extra_cfg={"memory_per_class": True}, job="b")
    runs = agg.load_runs(root)
    assert sorted(runs["variant"]) == ["memory_per_class=None", "memory_per_class=True"]
    s = agg.summarize(runs)
    assert sorted(s["acc_mean"]) == [60.0, 80.0]
    # and nothing of the ignored keys (logger, device) makes a variant
    write_run(root, seed=1, R=fake_R(5, 80.0), extra_cfg={"logger": {"name": "wandb"}}, job="c")
    assert agg.load_runs(root)["variant"].nunique() == 2


def test_paper_values_transcribed():
    assert pv.table2_value("split_mnist", "adaer", "acc") == 89.6
    assert pv.table2_value("split_cifar10", "mir", "bwt") == -0.8
    assert pv.table2_value("split_fmnist", "joint", "forget") is None
    assert all(len(pv.TABLE2[b]) == 14 for b in pv.TABLE2_BENCHMARKS)
    assert set(pv.METHOD_ORDER) == set(pv.TABLE2["split_mnist"])
    assert {c.experiment for c in pv.CLAIMS} <= set(agg.RECIPES)


def test_fmt():
    assert agg.fmt(82.0, 2.0) == "82.0 ± 2.0"
    assert agg.fmt(82.0, float("nan")) == "82.0"
    assert agg.fmt(float("nan")) == "N/A"
    assert agg.fmt(82.0, 2.0, 2, n_all=5) == "82.0 ± 2.0 (n=2)"


def test_figure_recipes(tmp_path):
    """memory, first_task, imbalance, tau and cifar100 each give their figure files (PNG + PDF)."""
    mr = tmp_path / "multirun"
    for m, base in (("er", 70.0), ("adaer", 80.0)):
        for mem in (50, 100, 200):
            for seed in (0, 1):
                write_run(
                    mr / "memory", method=m, memory=mem, seed=seed, R=fake_R(5, base + mem / 50 + seed, 60 + seed)
                )
        for lam in (0.0, 0.5, 0.9):
            write_run(mr / "imbalance", benchmark="split_fmnist", method=m, lam=lam, R=fake_R(5, base - 20 * lam))
        write_run(mr / "first_task", method=m, R=fake_R(5, base, base - 20))
        write_run(mr / "cifar100", benchmark="split_cifar100", method=m, R=fake_R(50, base / 4, base / 3))
    for tau in (0.1, 0.5, 0.9):
        write_run(mr / "tau", benchmark="split_fmnist", method="adaer", tau=tau, R=fake_R(5, 70 + 5 * tau))
    expect = {
        "memory": ["fig5_memory_acc", "fig6_memory_bwt"],
        "first_task": ["fig7_first_task"],
        "cifar100": ["fig8_cifar100", "accuracy_matrix_split_cifar100"],
        "imbalance": ["fig9_imbalance"],
        "tau": ["fig10_tau"],
    }
    for exp, stems in expect.items():
        res = agg.aggregate(exp, mr, tmp_path / "results")
        names = {p.name for p in res["figures"]}
        for stem in stems:
            assert {f"{stem}.png", f"{stem}.pdf"} <= names, (exp, names)
    md = (tmp_path / "results" / "memory" / "memory.md").read_text()
    assert "| ER | 71.5 ± 0.7 | 72.5 ± 0.7 [86.4] | 74.5 ± 0.7 |" in md  # M=100 cell beside Table II
    tau_md = (tmp_path / "results" / "tau" / "tau.md").read_text()
    assert "| 0.5 | 72.5 |" in tau_md
    imb = (tmp_path / "results" / "imbalance" / "imbalance.md").read_text()
    assert "λ=0.5" in imb
    cif = (tmp_path / "results" / "cifar100" / "cifar100.md").read_text()
    assert "| ER | 17.5 [20.2]" not in cif  # the CIFAR100 paper numbers are text claims, not Table II cells
    assert "final first-task accuracy: ER 29%" in cif
