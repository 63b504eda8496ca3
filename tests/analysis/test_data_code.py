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
    assert "| MIR | +1.5 [-4.9, +7.9] | +0.0 [+0.0, +0.0] | +0.0 [+0.0, +0.0] | 2 |" in text


def test_no_table_without_both_arms():
    after = pd.DataFrame([_run("mir", 0, 45.0, MIR)])
    assert dc.markdown(after, pd.DataFrame(), "split_cifar10_jpeg") == []
    assert dc.markdown(after, pd.DataFrame([_run("mir", 0, 45.0, MIR)]), "split_cifar10_jpeg") == []


def test_the_note_says_which_seeds_pair_runs_of_one_machine():
    """Native kernels differ per machine (CPU model and kernels): the note names the seeds whose two arms ran
    on one machine and those whose pair spans two (no note for runs without a machine)."""
    avx2, avx512 = "native (ATen AVX2, MKL auto AUTO)", "native (ATen AVX512, MKL auto AUTO)"
    runs = lambda arm, seed, cpu, k=avx512: {**_run("er", seed, 40.0 + seed, arm), "cpu": cpu, "numerics": k}  # noqa: E731
    after = pd.DataFrame([runs(MIR, 0, "AMD"), runs(MIR, 1, "AMD"), runs(MIR, 3, "Intel"), runs(MIR, 4, "Intel", avx2)])
    before = pd.DataFrame([runs({}, 0, "Intel"), runs({}, 1, "Intel"), runs({}, 3, "Intel"), runs({}, 4, "Intel")])
    text = "\n".join(dc.markdown(after, before, "split_cifar10_jpeg"))
    assert (
        "Pairs: seeds 3 on one machine; seeds 0, 1, 4 across machines (a machine: a CPU model and its kernels" in text
    )
    assert dc.machines_note(after.drop(columns="cpu"), before) == ""
