"""clsuite.analysis.batchnorm: R's diagonal profile, the variants of a run's config, and the paired table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clsuite.analysis import batchnorm as bn

R3 = np.array([[80.0, 0.0, 0.0], [40.0, 2.0, 0.0], [30.0, 50.0, 60.0]])


def test_diagonal_profile_is_the_diagonal_the_best_from_it_on_and_the_last_row():
    diag, best, final = bn.diagonal_profile(R3)
    assert diag.tolist() == [80.0, 2.0, 60.0]
    assert best.tolist() == [80.0, 50.0, 60.0]  # task 2: 2 just after it, 50 after task 3
    assert final.tolist() == [30.0, 50.0, 60.0]


@pytest.mark.parametrize(
    "flat, want",
    [
        ({"replay_loss": "split"}, bn.DEFAULT),  # eval_bn absent (runs made before the key): running
        ({"replay_loss": "split", "eval_bn": "running"}, bn.DEFAULT),
        ({"replay_loss": "concat"}, bn.VARIANTS[1][0]),
        ({"replay_loss": "split", "eval_bn": "memory"}, bn.VARIANTS[2][0]),
        ({"replay_loss": "concat", "eval_bn": "memory"}, None),  # not a named variant: left out
        ({"replay_loss": "split", "model.norm_groups": 4}, bn.continual_norm(4)),
        ({"replay_loss": "concat", "model.norm_groups": 4}, None),  # two changes at once: left out
    ],
)
def test_a_runs_variant_comes_from_its_two_keys(flat, want):
    assert bn.variant(flat) == want


def _run(method, seed, loss, eval_bn, R, acc, forget, bwt):
    flat = {"replay_loss": loss, **({"eval_bn": eval_bn} if eval_bn else {})}
    return dict(benchmark="split_cifar10_jpeg", method=method, seed=seed, flat=flat, R=np.asarray(R), acc=acc,
                forget=forget, bwt=bwt)  # fmt: skip


def test_markdown_pairs_each_variant_with_the_default_by_seed():
    low, high = R3, R3 + np.eye(3) * 10  # the variant's diagonal 10 points higher
    runs = pd.DataFrame(
        [
            _run("er", 0, "split", None, low, 40.0, 20.0, 5.0),
            _run("er", 1, "split", None, low, 42.0, 22.0, 6.0),
            _run("er", 0, "split", "memory", high, 43.0, 19.0, 1.0),
            _run("er", 1, "split", "memory", high, 46.0, 20.0, 2.0),
            _run("er", 2, "split", "memory", high, 99.0, 0.0, 0.0),  # no default at seed 2: not paired
            _run("er", 0, "concat", "memory", high, 0.0, 0.0, 0.0),  # no named variant: left out
            dict(_run("er", 0, "split", None, low, 1.0, 1.0, 1.0), benchmark="split_mnist"),  # another benchmark
        ]
    )
    text = "\n".join(bn.markdown(runs, "split_cifar10_jpeg"))
    profile = [line for line in text.splitlines() if line.startswith("| ER |")]
    d = "[0, 1], 100%"
    assert (
        profile[0] == f"| ER | {d} | {bn.DEFAULT} | 2 | 80.0 / 2.0 / 60.0 | 80.0 / 50.0 / 60.0 | 30.0 / 50.0 / 60.0 |"
    )
    assert profile[1].startswith(f"| ER | {d} | {bn.VARIANTS[2][0]} | 3 | 90.0 / 12.0 / 70.0 |")
    # Acc: +3, +4 -> mean 3.5, sd 0.707, t_{0.975, 1} = 12.706 -> +3.5 +- 6.35; diagonal (j < T): +10 each seed
    assert (
        profile[2]
        == f"| ER | {d} | {bn.VARIANTS[2][0]} | +3.5 [-2.9, +9.9] | -1.5 [-7.9, +4.9] | -4.0 [-4.0, -4.0] | +10.0 [+10.0, +10.0] | 2 | – |"
    )
    assert bn.markdown(runs, "split_cifar100") == []


def test_arms_of_other_inputs_are_never_paired():
    """The default under MIR's [-1, 1] inputs and 95% split is not the other inputs' variant's default."""
    mir = {"data.input_range": "symmetric", "data.val_fraction": 0.05}
    runs = pd.DataFrame(
        [
            _run("er", 0, "split", None, R3, 40.0, 20.0, 5.0),
            _run("er", 1, "split", None, R3, 41.0, 20.0, 5.0),
            {**_run("er", 0, "split", "memory", R3, 45.0, 20.0, 5.0), "flat": {"replay_loss": "split", "eval_bn": "memory", **mir}},
            {**_run("er", 1, "split", "memory", R3, 44.0, 20.0, 5.0), "flat": {"replay_loss": "split", "eval_bn": "memory", **mir}},
        ]
    )  # fmt: skip
    text = "\n".join(bn.markdown(runs, "split_cifar10_jpeg"))
    assert "| ER | [-1, 1], 95% | " + bn.VARIANTS[2][0] + " | 2 |" in text
    assert "paired by seed" not in text  # no default of its inputs: no pair


def test_each_method_against_er_within_each_variant():
    """Within one variant, method − ER paired by seed: AdaER's lead over ER under the default (+5, +7: +6 [+/-
    12.706 x 1]) and under the concatenated loss (-5, -4: -4.5 [+/- 12.706 x 0.5])."""
    runs = pd.DataFrame(
        [
            _run("er", 0, "split", None, R3, 40.0, 20.0, 5.0),
            _run("er", 1, "split", None, R3, 42.0, 22.0, 6.0),
            _run("adaer", 0, "split", None, R3, 45.0, 15.0, 5.0),
            _run("adaer", 1, "split", None, R3, 49.0, 15.0, 6.0),
            _run("er", 0, "concat", None, R3, 30.0, 10.0, -50.0),
            _run("er", 1, "concat", None, R3, 31.0, 10.0, -50.0),
            _run("adaer", 0, "concat", None, R3, 25.0, 10.0, -50.0),
            _run("adaer", 1, "concat", None, R3, 27.0, 10.0, -50.0),
        ]
    )
    text = "\n".join(bn.markdown(runs, "split_cifar10_jpeg"))
    d, zero = "[0, 1], 100%", "+0.0 [+0.0, +0.0]"
    assert (
        f"| {bn.DEFAULT} | {d} | AdaER − ER | +6.0 [-6.7, +18.7] | -6.0 [-18.7, +6.7] | {zero} | {zero} | 2 | – |"
        in text
    )
    assert f"| {bn.VARIANTS[1][0]} | {d} | AdaER − ER | -4.5 [-10.9, +1.9] | {zero} | {zero} | {zero} | 2 | – |" in text


def test_the_tables_name_the_seeds_whose_pair_spans_two_machines():
    """A machine is a CPU model and its kernels: seed 0's variant ran on another model, seed 1's on the
    same model with other kernels (AVX2 against AVX-512), seed 2's on the default's machine."""
    avx512, avx2 = "native (ATen AVX512, MKL auto AUTO)", "native (ATen AVX2, MKL auto AUTO)"
    at = lambda run, cpu, k=avx512: {**run, "cpu": cpu, "numerics": k}  # noqa: E731
    runs = pd.DataFrame(
        [at(_run("er", s, "split", None, R3, 40.0 + s, 20.0, 5.0), "EPYC") for s in (0, 1, 2)]
        + [at(_run("adaer", s, "split", None, R3, 45.0 + s, 20.0, 5.0), "EPYC") for s in (0, 1, 2)]
        + [
            at(_run("er", 0, "split", "memory", R3, 41.0, 20.0, 5.0), "Xeon"),
            at(_run("er", 1, "split", "memory", R3, 42.0, 20.0, 5.0), "EPYC", avx2),
            at(_run("er", 2, "split", "memory", R3, 44.0, 20.0, 5.0), "EPYC"),
        ]
    )
    lines = "\n".join(bn.markdown(runs, "split_cifar10_jpeg")).splitlines()
    (variant,) = [x for x in lines if x.startswith(f"| ER | [0, 1], 100% | {bn.VARIANTS[2][0]} | +")]
    assert variant.endswith("| 3 | 0, 1 |")
    (versus,) = [x for x in lines if "AdaER − ER" in x]
    assert versus.endswith("| 3 | – |")  # the default's ER and AdaER: one machine per seed
