"""Rule 5 of clsuite.analysis.claims: equivalence within a margin (two one-sided tests, TOST), on hand-made
per-seed differences.

The TOST p is checked against the t density with 4 degrees of freedom integrated numerically (test_aggregate)
and against scipy's t; the power of TOST that plans the seeds against a simulation of the test itself; each
verdict test fails when the margin, the equivalence or Holm's adjustment of it is left out.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from clsuite.analysis import claims as cl
from clsuite.analysis import tables as tb
from clsuite.analysis.report import _rules
from clsuite.analysis.stats import one_sample, seeds_for_equivalence, seeds_needed, tost_power
from tests.analysis.test_aggregate import _t4_two_sided_p

TIE = [0.5, -0.5, 1.0, 0.0, -1.0]  # mean 0; squared deviations 0.25 + 0.25 + 1 + 0 + 1 = 2.5, sd = sqrt(2.5 / 4)
SE_TIE = math.sqrt(2.5 / 4 / 5)  # = sqrt(0.125)
T95_4 = 2.131846786326649  # t_{0.95, 4} from tables: the 90% interval's quantile
AHEAD = [5.0, 6.0, 4.5, 5.5, 6.5]  # clearly supported


def _judged(diffs, margins=None, text="AdaER has the best Acc of all methods") -> cl.Judged:
    margins = margins or [cl.MARGINS["acc"]] * len(diffs)
    comps = [
        cl.Comparison("split_mnist", f"AdaER vs R{i}, Acc", one_sample(d), m)
        for i, (d, m) in enumerate(zip(diffs, margins, strict=True))
    ]
    return cl.Judged(
        claim=types.SimpleNamespace(text=text, source="test", key="t"), reading="mir_code", comparisons=comps
    )


def _at_tost_p(p: float, n: int = 5, margin: float = 1.0) -> list[float]:
    """Per-seed differences of mean 0 whose TOST p against ``margin`` is ``p`` (both one-sided p equal)."""
    z = np.arange(n) - (n - 1) / 2
    z = z / z.std(ddof=1)
    se = margin / stats.t.isf(p, n - 1)
    return list(z * se * math.sqrt(n))


def test_tost_p_and_interval_by_hand():
    r = one_sample(TIE)
    # H0 d <= -1: t = (0 + 1) / se = 2.83, p = P(T_4 >= 2.83); H0 d >= 1: the mirror image, the same p
    p_hand = _t4_two_sided_p(1.0 / SE_TIE) / 2
    assert r.p_equivalent(1.0) == pytest.approx(p_hand, abs=1e-6) and 0.023 < p_hand < 0.024
    assert r.p_equivalent(1.0) == pytest.approx(stats.t.sf(1.0 / SE_TIE, 4), rel=1e-12)
    assert r.bounds(0.90) == pytest.approx((-T95_4 * SE_TIE, T95_4 * SE_TIE))  # [-0.754, +0.754]
    assert r.bounds(0.95) == pytest.approx((r.low, r.high))
    # off-centre: mean 0.3, the upper test decides: P(T_4 <= (0.3 - 1) / se)
    shifted = one_sample([x + 0.3 for x in TIE])
    assert shifted.p_equivalent(1.0) == pytest.approx(_t4_two_sided_p(0.7 / SE_TIE) / 2, abs=1e-6)
    assert shifted.p_equivalent(1.0) == pytest.approx(stats.t.cdf(-0.7 / SE_TIE, 4), rel=1e-12)
    # edge cases: one seed, no margin, every seed the same difference
    assert math.isnan(one_sample([0.1]).p_equivalent(1.0)) and math.isnan(r.p_equivalent(float("nan")))
    assert one_sample([0.5, 0.5]).p_equivalent(1.0) == 0.0 and one_sample([1.5, 1.5]).p_equivalent(1.0) == 1.0


def test_equivalent_inside_the_margin_and_not_when_the_interval_crosses_it():
    f = cl.family([one_sample(TIE)], [1.0])  # 90% interval +-0.754 inside +-1.0: p = 0.024 < 0.05
    assert f.outcomes == [cl.EQUIVALENT] and f.p_eq_adj == pytest.approx(f.p_eq)
    # the same differences against a margin of 0.7: the 90% interval crosses it, p = P(T_4 >= 1.98) = 0.059
    f = cl.family([one_sample(TIE)], [0.7])
    assert f.outcomes == [cl.UNRESOLVED] and f.p_eq[0] == pytest.approx(_t4_two_sided_p(0.7 / SE_TIE) / 2, abs=1e-6)
    assert 0.05 < f.p_eq[0] < 0.06
    # the boundary is the 90% interval's: inside exactly when p < 0.05
    for p, expected in ((0.0499, cl.EQUIVALENT), (0.0501, cl.UNRESOLVED)):
        r = one_sample(_at_tost_p(p))
        assert r.p_equivalent(1.0) == pytest.approx(p, rel=1e-9)
        assert (r.bounds(0.9)[1] < 1.0) == (p < 0.05) and cl.family([r], [1.0]).outcomes == [expected]
    assert cl.family([one_sample(TIE)]).outcomes == [cl.UNRESOLVED]  # no margin: never equivalent


def test_each_quantity_gets_its_own_margin():
    """The builders carry the quantity's margin: a tie within +-1.25 but not +-1.0 is equivalent in BWT, not in Acc."""
    d = [x * 1.5 for x in TIE]  # 90% interval +-1.13
    q = {"acc": 0.0, "bwt": 0.0, "forget": 0.3}  # AdaER forgets 0.3 more in every seed
    runs = pd.DataFrame([{"method": "adaer", "seed": s, **{k: 50.0 + v + o for k, o in q.items()}} for s, v in enumerate(d)]
                        + [{"method": "mir", "seed": s, **dict.fromkeys(q, 50.0)} for s in range(5)])  # fmt: skip
    acc, bwt, forget = (next(cl.beats(k, ["adaer"], ["mir"])("split_mnist", runs, ["adaer", "mir"])) for k in q)
    assert (acc.margin, bwt.margin) == (cl.MARGINS["acc"], cl.MARGINS["bwt"]) == (1.0, 1.25)
    assert 1.0 < acc.result.bounds(0.9)[1] < 1.25
    assert _judged([d], [acc.margin]).outcomes == [cl.UNRESOLVED] and _judged([d], [bwt.margin]).outcomes == [
        cl.EQUIVALENT
    ]
    # lower is better (Forget): the orientation flips (mir - adaer), the margin is Forget's
    assert (forget.margin, forget.label, forget.result.mean) == (1.25, "AdaER vs MIR, Forget", pytest.approx(-0.3))
    assert (acc.label, acc.result.mean) == ("AdaER vs MIR, Acc", pytest.approx(0.0, abs=1e-12))
    assert set(cl.MARGINS) >= {"acc", "forget", "bwt", "fwt", "first_task_drop", "first_task_final", "acc_decline"}


def test_best_of_all_with_one_equivalent_rival_is_tied():
    tight = [x / 2 for x in TIE]  # 90% interval +-0.38: TOST p = P(T_4 >= 1 / (se / 2)) = 0.0028
    j = _judged([AHEAD, [x + 3.0 for x in AHEAD], tight])
    assert j.outcomes == [cl.SUPPORTED, cl.SUPPORTED, cl.EQUIVALENT]
    p = _t4_two_sided_p(2.0 / SE_TIE) / 2
    assert j.p_eq[2] == pytest.approx(p, abs=1e-6) and j.p_eq_adj[2] == pytest.approx(3 * p, abs=1e-5)  # Holm, m = 3
    assert j.p_eq_adj[:2] == [1.0, 1.0]  # the rivals it beats are far from equivalent
    assert (
        j.verdict == cl.TIED == "not reproduced: tied"
        and j.tied == [j.comparisons[2]]
        and j.deciding is j.comparisons[2]
    )
    cell = tb.verdict_cell(j)
    assert cell == "not reproduced: tied (AdaER vs R2, Acc, split-MNIST: equivalent within ±1.0)"
    row = tb.claims([j]).markdown()
    assert "| 2 / 0 / 0 / 1 / 0 / 0 / 0 / 0 |" in row
    assert (
        f"equivalent after Holm: 90% interval [-0.4, +0.4] within ±1.0 (TOST p_adj = {3 * p:.3f} < 0.05, m = 3)" in row
    )
    # the wider tie (TOST p 0.024) is equivalent alone but not after Holm over 3: the claim is partly reproduced
    wide = _judged([AHEAD, [x + 3.0 for x in AHEAD], TIE])
    assert wide.outcomes[2] == cl.EQ_RAW_ONLY and wide.verdict == cl.PARTLY
    # a contradicted comparison still falsifies outright; without the tie the claim is partly reproduced
    assert _judged([AHEAD, [-x for x in AHEAD], TIE]).verdict == cl.NOT
    assert _judged([AHEAD, [x + 4.0 for x in TIE]]).verdict == cl.REPRODUCED
    assert _judged([AHEAD, [x * 3 for x in TIE]]).verdict == cl.PARTLY
    # equivalence alone, nothing supported: still tied (the claim's order fails against that rival)
    assert _judged([TIE, [x * 3 for x in TIE]]).verdict == cl.TIED


def test_holm_over_the_claims_comparisons_for_equivalence():
    """TOST p 0.03: equivalent alone (m = 1), equivalent raw only beside a second comparison (Holm: 2 x 0.03)."""
    d = _at_tost_p(0.03)
    assert _judged([d]).outcomes == [cl.EQUIVALENT]
    j = _judged([d, AHEAD])
    assert j.p_eq[0] == pytest.approx(0.03, rel=1e-9) and j.p_eq_adj[0] == pytest.approx(0.06, rel=1e-9)
    assert j.outcomes == [cl.EQ_RAW_ONLY, cl.SUPPORTED] and j.verdict == cl.PARTLY
    assert "equivalent raw, not after Holm: 90% interval" in tb.decision(j, j.comparisons[0])
    # TOST p 0.02: 2 x 0.02 = 0.04 < 0.05, tied beside a supported one
    j = _judged([_at_tost_p(0.02), AHEAD])
    assert j.outcomes == [cl.EQUIVALENT, cl.SUPPORTED] and j.verdict == cl.TIED
    assert tb.decision(j, j.comparisons[0]) == (
        f"equivalent after Holm: {tb.within(j.comparisons[0])} (TOST p_adj = 0.040 < 0.05, m = 2)"
    )


def test_precedence_supported_contradicted_identical():
    small_lead = [0.50, 0.52, 0.48, 0.51, 0.49]  # above 0 and inside +-1.0: the claim's order holds
    j = _judged([small_lead])
    assert j.p_eq[0] < 0.001 and j.outcomes == [cl.SUPPORTED] and j.verdict == cl.REPRODUCED
    small_lag = [-x for x in small_lead]  # below 0 after Holm and inside +-1.0: contradicted
    assert _judged([small_lag]).outcomes == [cl.CONTRADICTED]
    # identical arms are not "equivalent": FWT in class-IL stays inconclusive
    j = _judged([[0.0] * 5, [0.0] * 5])
    assert j.outcomes == [cl.IDENTICAL, cl.IDENTICAL] and j.verdict == cl.INCONCLUSIVE


def _simulated_power(delta, sd, margin, n, alpha, draws=400_000, seed=0):
    """Slow, independent: the share of simulated seed sets whose (1 - 2 alpha) t interval lies inside the margin."""
    x = np.random.default_rng(seed).normal(delta, sd, size=(draws, n))
    mean, se = x.mean(axis=1), x.std(axis=1, ddof=1) / math.sqrt(n)
    c = stats.t.ppf(1 - alpha, n - 1)
    return float(np.mean((mean - c * se > -margin) & (mean + c * se < margin)))


@pytest.mark.parametrize(
    ("delta", "sd", "margin", "n", "alpha"),
    [(0.0, 2.4, 1.0, 20, 0.05), (0.3, 2.4, 1.0, 60, 0.0125), (-0.5, 1.0, 1.0, 8, 0.05), (0.0, 1.0, 1.25, 4, 0.05)],
)
def test_tost_power_against_a_simulation(delta, sd, margin, n, alpha):
    assert tost_power(delta, sd, margin, n, alpha) == pytest.approx(
        _simulated_power(delta, sd, margin, n, alpha), abs=4e-3
    )


def test_seeds_for_equivalence():
    n = seeds_for_equivalence(0.0, 2.4, 1.0, alpha=0.05 / 4)  # CIFAR-10 (JPEG copy): AdaER vs C-CMR, Acc, m = 4
    assert tost_power(0.0, 2.4, 1.0, n, 0.0125) >= 0.8 > tost_power(0.0, 2.4, 1.0, n - 1, 0.0125)
    assert n == 75 and _simulated_power(0.0, 2.4, 1.0, n, 0.0125) == pytest.approx(0.8, abs=0.01)
    # large-sample check: n ~ (z_{1 - alpha} + z_{1 - beta/2})^2 sd^2 / margin^2 at delta = 0 (plus the t's few)
    z = stats.norm.ppf(1 - 0.0125) + stats.norm.ppf(0.9)
    assert z**2 * 2.4**2 < n < z**2 * 2.4**2 + 5
    assert seeds_for_equivalence(1.0, 2.4, 1.0) == 1000 and seeds_for_equivalence(0.0, 0.0, 1.0) == 2


def test_the_planning_table_plans_equivalence_where_it_comes_first():
    def judged(text, diffs, margins=None):
        return _judged(diffs, margins, text)

    tie = list(np.array([2.0, -3.0, 1.5, 2.5, -3.0]))  # mean 0, sd 2.7: unresolved, far from both
    near_margin = [-0.7 + v for v in (12.0, -10.0, 8.0, -6.0, -4.0)]  # mean -0.7, sd 9.2: over 1000 either way
    beyond = [-2.0 + v for v in (30.0, -30.0, 20.0, -20.0, 0.0)]  # mean -2.0 outside +-1.0: no equivalence
    rows = {r[0]: r for r in tb.open_claims([judged("tie", [tie] * 4), judged("near", [near_margin]),
                                             judged("beyond", [beyond] * 16)]).rows}  # fmt: skip
    sd = float(np.std(tie, ddof=1))
    n_eq = seeds_for_equivalence(0.0, sd, 1.0, alpha=0.05 / 4)
    assert n_eq < 1000 and seeds_needed(0.0, sd, level=1 - 0.05 / 4) == 1000
    assert rows["tie"][6] == f"{n_eq} to show equivalence within ±1.0 after Holm (m = 4)"
    assert (
        rows["near"][6]
        == "over 1000 either way: to contradict after Holm (m = 1) or to show equivalence within ±1.0 after Holm (m = 1)"
    )
    assert rows["beyond"][6].startswith("over 1000 to contradict after Holm (m = 16); equivalence out of reach")
    assert not any("1000 or more" in r[6] for r in rows.values())


def test_the_report_prints_rule_5():
    rules = _rules()
    assert "5. Equivalence." in rules and "two one-sided paired t tests (TOST)" in rules
    assert "Acc 1.0 point" in rules and "Forget and BWT 1.25 points" in rules and "at most 5%" in rules
    assert "**not reproduced: tied**" in rules and "MARGINS" in rules
