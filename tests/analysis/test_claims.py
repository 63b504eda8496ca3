"""Rule 4 of clsuite.analysis.claims: "contradicted" under Holm's family-wise control, on hand-made per-seed differences.

Every expected p is computed here by hand: Holm's step-down written out, the one-sided t p from
the numerical integration of the t density in test_aggregate (never scipy's t), and each test
fails when the adjustment is removed.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from clsuite.analysis import claims as cl
from clsuite.analysis import tables as tb
from clsuite.analysis.load import load_runs
from clsuite.analysis.report import _claim_json, _rules, main_claims
from clsuite.analysis.stats import Paired, one_sample
from tests.analysis.test_aggregate import _t4_two_sided_p
from tests.results_fixtures import fake_R, write_run

BORDERLINE = [-1.0, -2.0, -3.0, -0.5, -1.5]  # mean -1.6, interval [-2.79, -0.41]: below 0, but only just
CLEAR = [-3.0, -2.5, -3.5, -3.0, -2.8]  # mean -2.96, interval [-3.41, -2.51]
NULL = [4.0, -4.0, 3.0, -3.5, 0.5]  # mean 0: the seeds cannot separate the arms
# BORDERLINE by hand: squared deviations from -1.6: 0.36 + 0.16 + 1.96 + 1.21 + 0.01 = 3.7, sd = sqrt(3.7 / 4)
P_BORDERLINE = _t4_two_sided_p(1.6 / math.sqrt(3.7 / 4 / 5)) / 2  # one-sided p for d < 0, about 0.0102


def _judged(diffs: list[list[float]], margins=None) -> cl.Judged:
    margins = margins or [float("nan")] * len(diffs)
    comps = [cl.Comparison("split_mnist", f"c{i}", one_sample(d), m) for i, (d, m) in enumerate(zip(diffs, margins))]
    return cl.Judged(claim=None, reading="mir_code", comparisons=comps)


def test_holm_adjusted_p_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.2: 4 x 0.01 = 0.04; 3 x 0.03 = 0.09; 2 x 0.04 = 0.08 -> kept at 0.09; 1 x 0.2
    assert cl.holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    # capped at 1 and non-decreasing in the order of p: 3 x 0.01; 2 x 0.5 = 1.0; 0.9 -> kept at 1.0
    assert cl.holm([0.5, 0.9, 0.01]) == pytest.approx([1.0, 1.0, 0.03])
    assert cl.holm([0.02]) == [0.02] and cl.holm([]) == []


def test_one_sided_p_is_the_t_test_the_interval_inverts():
    p = one_sample(BORDERLINE)
    assert p.p_below == pytest.approx(P_BORDERLINE, abs=1e-6) and 0.010 < P_BORDERLINE < 0.011
    assert one_sample([-x for x in BORDERLINE]).p_below == pytest.approx(1 - P_BORDERLINE, abs=1e-6)
    assert p.high < 0 and P_BORDERLINE < cl.ALPHA == 0.025  # below 0 <=> p < 0.025, one tail of the 95%
    assert one_sample([-1.0, -1.0]).p_below == 0.0 and one_sample([2.0, 2.0]).p_below == 1.0  # sd = 0
    assert one_sample([0.0, 0.0]).p_below == 1.0 and math.isnan(one_sample([-1.0]).p_below)


def test_many_null_comparisons_and_one_borderline_negative_is_not_not_reproduced():
    diffs = [BORDERLINE] + [[x + 0.2 * k for x in NULL] for k in range(-5, 6)]  # 1 + 11 comparisons
    j = _judged(diffs)
    assert j.m == 12 and j.outcomes[0] == cl.RAW_ONLY and set(j.outcomes[1:]) == {cl.UNRESOLVED}
    assert j.p_adj[0] == pytest.approx(12 * P_BORDERLINE, abs=1e-5)  # the smallest of 12 p: times 12
    assert j.verdict == cl.INCONCLUSIVE and j.deciding is j.comparisons[0]
    supported = [[x + 5.0 for x in CLEAR]]  # with a supported comparison beside: partly reproduced
    assert _judged(diffs + supported).verdict == cl.PARTLY


def test_a_clearly_negative_comparison_still_falsifies_among_many_nulls():
    j = _judged([CLEAR] + [[x + 0.2 * k for x in NULL] for k in range(-5, 6)])
    assert j.outcomes[0] == cl.CONTRADICTED and j.verdict == cl.NOT and j.outcomes.count(cl.CONTRADICTED) == 1
    assert j.p_adj[0] < cl.ALPHA and j.p_adj[0] == pytest.approx(12 * one_sample(CLEAR).p_below)


def test_the_adjustment_is_holm_over_the_claims_comparisons():
    """Three comparisons, Holm by hand on their one-sided p: p_B < p_A < p_C."""
    a, b, c = BORDERLINE, CLEAR, [x + 1.0 for x in NULL]
    j = _judged([a, b, c, [1.0]])  # the fourth has one seed: no interval, not in the family
    p_a, p_b, p_c = (one_sample(d).p_below for d in (a, b, c))
    assert p_b < p_a < p_c and j.m == 3
    expected = [max(3 * p_b, 2 * p_a), 3 * p_b, max(3 * p_b, 2 * p_a, p_c)]
    assert j.p_adj[:3] == pytest.approx(expected) and math.isnan(j.p_adj[3])
    # 2 p_a = 0.0205 < 0.025: with three in the family the borderline one stays contradicted
    assert j.outcomes == [cl.CONTRADICTED, cl.CONTRADICTED, cl.UNRESOLVED, cl.MISSING]


def _at_p(p: float, n: int = 5) -> Paired:
    """Per-seed differences mean + sd z (z: mean 0, sample sd 1) whose one-sided t p for d < 0 is ``p``."""
    z = np.arange(n) - (n - 1) / 2
    z = z / z.std(ddof=1)
    return one_sample(stats.t.ppf(p, n - 1) / math.sqrt(n) + z)


@pytest.mark.parametrize(
    ("p", "other", "expected"),
    [
        (0.0249, None, cl.CONTRADICTED),  # m = 1: Holm is the interval's rule, at its 2.5% tail
        (0.0251, None, cl.UNRESOLVED),  # ... the interval just contains 0
        (0.0124, 0.3, cl.CONTRADICTED),  # m = 2: 2 x 0.0124 = 0.0248 < 0.025
        (0.0126, 0.3, cl.RAW_ONLY),  # 2 x 0.0126 = 0.0252: below 0 raw, not after Holm
    ],
)
def test_the_level_boundary(p, other, expected):
    comps = [_at_p(p)] + ([_at_p(other)] if other else [])
    assert comps[0].p_below == pytest.approx(p, rel=1e-9)
    f = cl.family(comps)
    outcomes, p_adj = f.outcomes, f.p_adj
    assert outcomes[0] == expected and p_adj[0] == pytest.approx(p * len(comps), rel=1e-9)


def test_supported_keeps_the_per_comparison_interval():
    """An intersection-union test needs no correction: 12 comparisons each just above 0 reproduce the claim."""
    j = _judged([[-x for x in BORDERLINE]] * 12)
    assert j.verdict == cl.REPRODUCED and j.outcomes.count(cl.SUPPORTED) == 12


def test_claims_table_from_the_runs(tmp_path, capsys):
    """AdaER against 12 methods, one borderline: the table shows the raw interval and the adjusted decision."""
    root = tmp_path / "multirun" / "table2"
    others = ["online", "oewc", "si", "er", "gem", "agem", "icarl", "hal", "gss", "mir", "ccmr", "ebrs"]
    diffs = {m: [x + 0.2 * k for x in NULL] for k, m in enumerate(others, -5)} | {"mir": BORDERLINE}
    for s in range(5):
        adaer = 75.0 + 3 * math.sin(s)
        write_run(root, method="adaer", seed=s, R=fake_R(5, adaer))
        for m, d in diffs.items():
            write_run(root, method=m, seed=s, R=fake_R(5, adaer - d[s]))
    runs = load_runs(root)[0]
    claim = cl.Claim("t", "table2", "test", "AdaER beats all", cl.beats("acc", ["adaer"]), {"memory": 100})
    (new,) = cl.judge(claim, runs)
    assert new.verdict == cl.INCONCLUSIVE and new.deciding.label == "AdaER vs MIR, Acc"
    row = tb.claims([new]).markdown()
    assert f"AdaER vs MIR, Acc, split-MNIST: -1.6 [-2.8, -0.4], n=5 | contradicted raw, not after Holm (p_adj = {12 * P_BORDERLINE:.3f} ≥ 0.025, m = 12) |" in row  # fmt: skip
    assert "| 0 / 0 / 1 / 0 / 0 / 11 / 0 / 0 |" in row  # supported / contradicted / raw / equivalent / raw / ...
    (mir,) = [c for c in _claim_json(new)["comparisons"] if c["label"] == "AdaER vs MIR, Acc"]  # claims.json
    assert (mir["outcome"], mir["outcome_raw"]) == (cl.RAW_ONLY, cl.CONTRADICTED) and mir["p_adj"] > cl.ALPHA
    assert "Holm's step-down" in _rules() and "contradicted raw, not after Holm" in _rules()  # the report says so
    # `clsuite claims` prints the claims table of the runs
    assert main_claims(["--multirun-dir", str(tmp_path / "multirun")]) == 0
    assert "(contradicted: Holm" in capsys.readouterr().out
    assert main_claims(["--multirun-dir", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.startswith("error: --multirun-dir")


def test_an_open_claim_gets_the_seeds_its_deciding_comparison_would_need():
    """Inconclusive and partly reproduced claims get one row: the seeds that would decide their deciding
    comparison at its observed mean and sd (support for d > 0 at 95%; contradiction after Holm for
    d <= 0, one-sided at 0.025 / m); identical arms get none; a decided claim no row."""
    import types

    from clsuite.analysis import tables as tb
    from clsuite.analysis.stats import seeds_needed

    def judged(text, diffs):
        j = _judged(diffs)
        j.claim = types.SimpleNamespace(text=text)
        return j

    ahead = [1.0, 3.0, -1.0]  # mean +1, sd 2: unresolved, on the claim's side
    behind = [-1.0, 0.5, -2.5, 0.0]  # mean -0.75, sd 1.26: unresolved, against the claim
    inconclusive = judged("ahead", [ahead])
    partly = judged("partly", [[2.0, 2.1, 1.9], behind])  # one supported, the weakest against it
    identical = judged("identical", [[0.0, 0.0, 0.0]])
    decided = judged("decided", [[2.0, 2.1, 1.9]])
    assert (inconclusive.verdict, partly.verdict, identical.verdict, decided.verdict) == (
        cl.INCONCLUSIVE, cl.PARTLY, cl.INCONCLUSIVE, cl.REPRODUCED,
    )  # fmt: skip
    t = tb.open_claims([inconclusive, partly, identical, decided])
    rows = {r[0]: r for r in t.rows}
    assert set(rows) == {"ahead", "partly", "identical"}
    assert rows["ahead"][4:] == ["3", "+1.0 ± 2.0", f"{seeds_needed(1.0, 2.0, level=0.95)} to support"]
    sd = statistics.stdev(behind)
    n = seeds_needed(0.75, sd, level=1 - 0.05 / 2)  # Holm over the claim's m = 2 comparisons
    assert n > seeds_needed(0.75, sd, level=0.95)  # (the family's level is the stricter one)
    assert rows["partly"][3:] == ["c1, split-MNIST", "4", f"-0.8 ± {sd:.1f}", f"{n} to contradict after Holm (m = 2)"]
    assert rows["identical"][6] == "none: the two arms agree in every seed"
    assert tb.open_claims([decided]) is None


def test_an_open_claim_is_planned_by_the_comparison_that_decides_it_first():
    """Several open comparisons: the weakest (the deciding one, lowest lower bound) need not be the one that decides
    the claim first. One contradicted after Holm decides it: the fewest seeds over those against it; where every
    open one is on the claim's side, reproduced needs the last of them supported: the most seeds over them."""
    from clsuite.analysis.stats import seeds_needed

    wide = [-2.7 + v for v in (20.0, -15.0, 10.0, -5.0, -10.0)]  # mean -2.7, sd 14: the lowest lower bound
    narrow = [-2.3 + v for v in (4.0, -3.0, 2.0, -1.0, -2.0)]  # mean -2.3, sd 2.9: contradicted sooner
    j = _judged([wide, narrow])
    j.claim = cl.Claim("t", "table2", "test", "AdaER beats all", cl.beats("acc", ["adaer"]))
    assert j.deciding is j.comparisons[0] and j.outcomes == [cl.UNRESOLVED, cl.UNRESOLVED]
    w, text = tb.first_decision(j)
    n = seeds_needed(2.3, statistics.stdev(narrow), level=1 - 0.05 / 2)
    assert w is j.comparisons[1] and text == f"{n} to contradict after Holm (m = 2)"
    assert n < seeds_needed(2.7, statistics.stdev(wide), level=1 - 0.05 / 2)  # (the weakest would need more)
    row = tb.open_claims([j]).rows[0]
    assert row[3:] == ["c1, split-MNIST", "5", f"-2.3 ± {statistics.stdev(narrow):.1f}", text]

    sure, unsure = [1.0 + v for v in (1.0, -1.0, 0.5, -0.5)], [0.5 + v for v in (2.0, -2.0, 1.0, -1.0)]
    both = _judged([sure, unsure])  # both unresolved, both on the claim's side
    assert set(both.outcomes) == {cl.UNRESOLVED}
    w, text = tb.first_decision(both)
    n = [seeds_needed(statistics.mean(d), statistics.stdev(d)) for d in (sure, unsure)]
    assert n[0] < n[1] and w is both.comparisons[1]
    assert text == f"{n[1]} to support it, the last of the claim's 2 open comparisons"


def test_the_plan_keeps_rule_5s_precedence_and_names_what_blocks_the_claim():
    """Supported comes before equivalent: a comparison on the claim's side is planned to a tie only where that
    takes fewer seeds than support. Identical arms keep a claim from "reproduced": no support is planned then.
    A partly reproduced claim with nothing open but missing comparisons is planned to their runs."""
    from clsuite.analysis.stats import seeds_needed

    ahead = [1.0 + v for v in (2.0, -2.0, 1.0, -1.0, 0.0)]  # mean +1, sd 1.6: unresolved, support in ~20
    noisy = [-0.2 + v for v in (30.0, -30.0, 20.0, -20.0, 0.0)]  # mean -0.2, sd 25: nothing within 1000
    j = _judged([ahead, noisy], margins=[1.25, 1.25])
    assert j.outcomes == [cl.UNRESOLVED, cl.UNRESOLVED]
    n_for, n_eq = tb._seeds(j, j.comparisons[0])
    assert n_for < n_eq < 1000  # a tie would be reachable, but support comes first
    w, text = tb.first_decision(j)  # not "n_eq to show equivalence" of the first: the noisy one's own words
    assert w is j.comparisons[1] and text.startswith("over 1000 either way: to contradict after Holm (m = 2)")
    alone = _judged([ahead], margins=[1.25])
    assert tb.first_decision(alone)[1] == f"{seeds_needed(1.0, statistics.stdev(ahead))} to support"
    blocked = _judged([ahead, [0.0] * 5])  # one comparison identical: never reproduced
    assert blocked.outcomes == [cl.UNRESOLVED, cl.IDENTICAL]
    assert tb.first_decision(blocked)[1].startswith("none: identical arms keep the claim from being reproduced")
    partly = _judged([[2.0, 2.1, 1.9], [3.0]])  # supported, and one rival with one seed: missing
    assert partly.verdict == cl.PARTLY and tb.first_decision(partly) == (
        partly.comparisons[1],
        "none open: runs of its 1 missing comparisons",
    )


@pytest.mark.parametrize("benchmark", ["split_mnist", "split_cifar10_jpeg"])
def test_a_table2_rival_without_runs_is_missing_and_the_claim_not_reproduced(tmp_path, benchmark):
    """ "Best of all methods" counts every method the paper's Table II row gives a value (the official data's for
    the JPEG copy; an N/A cell is no rival): AdaER clearly ahead of the two rivals that ran is partly reproduced,
    not reproduced; a claim without ``table2`` counts the methods present only."""
    root = tmp_path / "table2"
    for s in range(5):
        for m, acc in (("adaer", 80.0 + s), ("er", 70.0 + s), ("mir", 75.0 + s + 0.1 * s * s)):
            write_run(root, benchmark=benchmark, method=m, seed=s, R=fake_R(5, acc), reading="mir_code")
    runs = load_runs(root)[0]
    (j,) = cl.judge(next(c for c in cl.CLAIMS if c.key == "table2_acc"), runs, benchmarks=(benchmark,))
    rivals = ["online", "oewc", "si", "gem", "agem", "icarl", "hal", "gss", "ccmr", "ebrs"]  # Table II's, Joint out
    assert j.outcomes == [cl.SUPPORTED] * 2 + [cl.MISSING] * 10 and j.verdict == cl.PARTLY and j.m == 2
    assert [c.label for c in j.comparisons[2:]] == [f"AdaER vs {cl.pv.method_label(m)}, Acc" for m in rivals]
    assert (
        "missing (under 2 seeds with both arms, or no runs of the rival): AdaER vs Online, Acc"
        in tb.claims_markdown([j])
    )
    (fwt,) = cl.judge(next(c for c in cl.CLAIMS if c.key == "table2_fwt"), runs, benchmarks=(benchmark,))
    assert "AdaER vs Online, FWT" not in [c.label for c in fwt.comparisons]  # the paper's Online FWT: N/A
    assert "AdaER vs GEM, FWT" in [c.label for c in fwt.comparisons]
    present = cl.Claim("t", "table2", "test", "AdaER beats ER and MIR", cl.beats("acc", ["adaer"]), {"memory": 100})
    assert cl.judge(present, runs, benchmarks=(benchmark,))[0].verdict == cl.REPRODUCED


def test_the_sign_flip_floor_counts_the_seeds_of_tested_comparisons_only():
    """A rival with one seed (missing: no interval, no test) does not set the note's n: the row's five seeds do.
    5 seeds: 2/2^5 = 0.0625, the floor said; 6 seeds: 0.03125, nothing to say."""
    five = _judged([NULL, [2.0]])  # NULL: 5 seeds; [2.0]: one seed, missing
    assert not five.comparisons[1].result.defined
    note = cl.sign_flip_floor_note([five])
    assert note.startswith("With 5 seeds the exact sign-flip test cannot give p < 0.05") and "2/2^5 = 0.0625" in note
    assert cl.sign_flip_floor_note([_judged([[*NULL, 1.0], [2.0]])]) == ""
    assert cl.sign_flip_floor_note([_judged([[2.0]])]) == ""  # nothing tested: nothing to say


def test_the_unseparated_comparisons_name_their_own_seeds_when_their_counts_differ():
    """One count of seeds in the line when every unresolved comparison has it; else n per comparison (a
    method with fewer finished seeds than the others is not described with the others' count)."""

    def judged(*seeds):
        comps = [cl.Comparison("split_mnist", f"AdaER vs M{i}, Acc", one_sample(NULL[:k])) for i, k in enumerate(seeds)]
        return cl.Judged(claim=cl.CLAIMS[0], reading="mir_code", comparisons=comps)

    same = tb.claims_markdown([judged(5, 5)])
    assert "(mir_code): 5 seeds cannot separate AdaER vs M0, Acc on split-MNIST (" in same and ", n=5)" not in same
    mixed = tb.claims_markdown([judged(5, 2)])
    assert "(mir_code): the seeds cannot separate AdaER vs M0, Acc on split-MNIST (" in mixed
    assert ", n=5); AdaER vs M1, Acc on split-MNIST (" in mixed and ", n=2)." in mixed
