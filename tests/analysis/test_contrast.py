"""clsuite.analysis.contrast: arms against a base arm, paired by seed, one row per contrast."""

from __future__ import annotations

import pandas as pd
import pytest

from clsuite.analysis.contrast import contrast, in_method_order, machine_groups


def _runs(rows):
    return pd.DataFrame(rows, columns=["group", "arm", "seed", "acc", "forget"])


RUNS = _runs(
    [
        ("g1", "base", 0, 80.0, 10.0),
        ("g1", "base", 1, 82.0, 12.0),
        ("g1", "base", 2, 90.0, 0.0),  # seed 2: no other arm has it, never paired
        ("g1", "b", 0, 81.0, 9.0),
        ("g1", "b", 1, 85.0, 9.0),
        ("g1", "a", 0, 70.0, 20.0),
        ("g1", "a", 1, 70.0, 20.0),
        ("g2", "a", 0, 50.0, 5.0),  # g2: no base arm, no row
    ]
)


def test_each_arm_minus_the_base_over_the_seeds_both_ran():
    f = contrast(RUNS, "arm", "base", ["acc", "forget"], by=["group"])
    assert list(f["arm"]) == ["a", "b"] and list(f["group"]) == ["g1", "g1"] and list(f["n"]) == [2, 2]
    b = f.iloc[1]
    # acc: +1, +3 -> mean 2, sd sqrt(2), half-width 12.706 * 1 = 12.706
    assert (b["acc"].mean, b["acc"].low, b["acc"].high) == pytest.approx((2.0, 2.0 - 12.7062, 2.0 + 12.7062), abs=1e-4)
    assert (b["acc_arm"], b["acc_base"]) == (83.0, 81.0)  # seed 2 of the base left out
    assert (b["forget"].mean, b["forget_base"]) == (-2.0, 11.0)
    a = f.iloc[0]
    assert (a["acc"].mean, a["acc"].low, a["acc"].high) == pytest.approx((-11.0, -23.7062, 1.7062), abs=1e-4)


def test_the_base_per_group_and_the_arms_order():
    f = contrast(RUNS, "arm", lambda key: {"g1": "b", "g2": None}[key[0]], ["acc"], by=["group"], order=["base", "a"])
    assert list(f["arm"]) == ["base", "a"] and list(f["base"]) == ["b", "b"]
    assert list(f["acc"].map(lambda p: p.mean)) == [-2.0, -13.0]  # base - b: -1, -3; a - b: -11, -15
    assert contrast(RUNS, "arm", "none", ["acc"], by=["group"]).empty  # no base arm anywhere: no row
    ungrouped = contrast(RUNS[RUNS["group"] == "g1"], "arm", "base", ["acc"])
    assert list(ungrouped["arm"]) == ["a", "b"] and list(ungrouped.columns[:3]) == ["arm", "base", "n"]


def test_runs_in_the_papers_method_order_then_a_key():
    runs = pd.DataFrame({"method": ["zeta", "mir", "adaer", "mir"], "data": ["x", "b", "a", "a"]})
    assert list(zip(*in_method_order(runs, "data").to_dict("list").values(), strict=True)) == [
        ("mir", "a"), ("mir", "b"), ("adaer", "a"), ("zeta", "x")]  # fmt: skip
    runs = runs.assign(benchmark=["split_mnist", "split_fmnist", "split_fmnist", "split_mnist"])  # Table II's order
    assert list(in_method_order(runs, "benchmark")["data"]) == ["a", "b", "a", "x"]


def test_pairs_of_arms_in_every_group_and_a_seeds_runs_averaged():
    runs = pd.concat([RUNS, _runs([("g1", "b", 0, 91.0, 9.0)])])  # a second run of seed 0 in arm b: 81 and 91
    f = contrast(runs, "arm", [("b", "a"), ("a", "base")], ["acc"], by=["group"], per_seed="mean")
    assert list(zip(f["group"], f["arm"], f["base"], f["n"], strict=True)) == [
        ("g1", "b", "a", 2), ("g1", "a", "base", 2), ("g2", "b", "a", 0), ("g2", "a", "base", 0)]  # fmt: skip
    assert (f["acc"][0].mean, f["acc_arm"][0]) == (15.5, 85.5)  # b: 86 (mean of 81, 91), 85; a: 70, 70
    last = contrast(runs, "arm", [("b", "a")], ["acc"], by=["group"])  # default: a seed's last run (91)
    assert (last["acc"][0].mean, last["acc_arm"][0]) == (18.0, 88.0)


def test_machine_groups_pair_runs_of_one_benchmark_reading_and_seed():
    """Methods share a group where every (benchmark, reading, seed) both ran is on one machine: one reading on
    machine A and the other on B splits nobody; a method moved to B in one seed of A's reading leaves the group;
    a method with one seed on two machines is named apart."""
    rows = [("er", r, s, "A" if r == "paper_text" else "B") for r in ("paper_text", "mir_code") for s in (0, 1)]
    rows += [(m, r, s, cpu) for m in ("mir", "adaer") for _, r, s, cpu in rows[:4]]
    runs = lambda rs: pd.DataFrame(  # noqa: E731
        [
            {"method": m, "benchmark": "split_mnist", "reading": r, "seed": s, "cpu": c, "numerics": "k"}
            for m, r, s, c in rs
        ]
    )
    assert machine_groups(runs(rows)) == ([["er", "mir", "adaer"]], [])
    moved = [(m, r, s, "B" if (m, r, s) == ("mir", "paper_text", 1) else c) for m, r, s, c in rows]
    assert machine_groups(runs(moved)) == ([["er", "adaer"], ["mir"]], [])
    assert machine_groups(runs([*rows, ("adaer", "mir_code", 0, "A")])) == ([["er", "mir"], ["adaer"]], ["adaer"])
    assert machine_groups(runs(rows).drop(columns="cpu")) == ([], [])
