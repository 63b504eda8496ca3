"""clsuite.analysis.data_code: the CIFAR row under MIR's data code against the row before it, paired by seed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clsuite.analysis import data_code as dc

MIR = {"data.input_range": "symmetric", "data.val_fraction": 0.05, "replay_loss": "split"}


def _run(method, seed, acc, flat, reading="mir_code", benchmark="split_cifar10_jpeg"):
    flat = {"replay_loss": "split", **flat}
    return dict(benchmark=benchmark, reading=reading, method=method, seed=seed, flat=flat, R=np.zeros((2, 2)),
                acc=acc, forget=10.0 + seed, bwt=-1.0)  # fmt: skip


def test_each_method_after_minus_before_over_the_seeds_both_ran():
    after = pd.DataFrame(
        [
            _run("mir", 0, 45.0, MIR),
            _run("mir", 1, 47.0, MIR),
            _run("mir", 2, 50.0, MIR),
            _run("mir", 3, 0.0, {**MIR, "data.val_fraction": 0.1}),  # another split: not an arm
            _run("mir", 0, 0.0, {**MIR, "replay_loss": "concat"}),  # a BatchNorm variant: not an arm
            _run("mir", 1, 0.0, {**MIR, "eval_bn": "memory"}),
        ]
    )  # fmt: skip
    before = pd.DataFrame([_run("mir", 0, 44.0, {}), _run("mir", 1, 45.0, {"data.input_range": "unit"}),
                           _run("mir", 2, 0.0, {}, reading="paper_text")])  # fmt: skip
    text = "\n".join(dc.markdown(after, before, "split_cifar10_jpeg"))
    # Acc: +1, +2 (seed 2 has no mir_code run before) -> 1.5 +- 12.706 * 0.5 = 6.35
    assert "| MIR | +1.5 [-4.9, +7.9] | +0.0 [+0.0, +0.0] | +0.0 [+0.0, +0.0] | 2 | – |" in text


def test_no_table_without_both_arms():
    after = pd.DataFrame([_run("mir", 0, 45.0, MIR)])
    assert dc.markdown(after, pd.DataFrame(), "split_cifar10_jpeg") == []
    assert dc.markdown(after, pd.DataFrame([_run("mir", 0, 45.0, MIR)]), "split_cifar10_jpeg") == []


def test_each_row_names_its_own_seeds_across_machines():
    """Native kernels differ per machine (CPU model and kernels): each method's row names the seeds whose two arms
    ran on two machines, from that method's runs alone (a method of one arm only, on another machine, moves no
    row); "–" for runs without a machine."""
    avx2, avx512 = "native (ATen AVX2, MKL auto AUTO)", "native (ATen AVX512, MKL auto AUTO)"
    runs = lambda m, arm, seed, cpu, k=avx512: {**_run(m, seed, 40.0 + seed, arm), "cpu": cpu, "numerics": k}  # noqa: E731
    after = pd.DataFrame([runs("er", MIR, 0, "AMD"), runs("er", MIR, 1, "AMD"), runs("er", MIR, 3, "Intel"),
                          runs("er", MIR, 4, "Intel", avx2), runs("icarl", MIR, 3, "AMD")])  # fmt: skip
    before = pd.DataFrame([runs("er", {}, s, "Intel") for s in (0, 1, 3, 4)])
    text = "\n".join(dc.markdown(after, before, "split_cifar10_jpeg"))
    assert "| ER | +0.0 [+0.0, +0.0] | +0.0 [+0.0, +0.0] | +0.0 [+0.0, +0.0] | 4 | 0, 1, 4 |" in text
    assert "iCaRL" not in text
    text = "\n".join(dc.markdown(after.drop(columns="cpu"), before, "split_cifar10_jpeg"))
    assert "| 4 | – |" in text
