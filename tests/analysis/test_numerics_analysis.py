"""The numerical-noise and cross-machine analyses (clsuite.analysis.noise / machines) on small
hand-made runs with known answers, and on the committed AMD report extract."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clsuite.analysis import machines as mc
from clsuite.analysis import noise as nz
from clsuite.analysis.claims import UNRESOLVED
from clsuite.analysis.load import Experiment

DOCS = Path(__file__).resolve().parents[2] / "docs" / "crossmachine"


def runs(acc: dict, bench="split_mnist", code="c1") -> pd.DataFrame:
    """{(method, kernels): [Acc per seed]} -> run rows."""
    rows = []
    for (method, kernels), values in acc.items():
        for seed, a in enumerate(values):
            rows.append({"benchmark": bench, "method": method, "numerics": kernels, "seed": seed, "acc": a,
                         "code": code, "key": f"{method}-{kernels}-{seed}-{bench}", "cpu": "X"})  # fmt: skip
    return pd.DataFrame(rows)


def test_noise_and_seed_spreads_by_hand():
    r = runs({("er", "A"): [80.0, 84.0, 90.0], ("er", "B"): [82.0, 84.0, 87.0]})
    t = nz.noise_table(r).iloc[0]
    # per seed over kernel sets: var of (80, 82) = 2, (84, 84) = 0, (90, 87) = 4.5 -> rms sd sqrt(6.5 / 3)
    assert t.sd_num == pytest.approx(math.sqrt(6.5 / 3))
    # per kernel set over seeds: var(80, 84, 90) = 76/3, var(82, 84, 87) = 19/3 -> sqrt(mean)
    assert t.sd_seed == pytest.approx(math.sqrt((76 / 3 + 19 / 3) / 2))
    assert (t.max_move, t.identical_seeds, t.seeds, t.kernel_sets) == (3.0, 1, 3, 2)


def test_a_seed_missing_under_one_kernel_set_is_left_out():
    r = runs({("er", "A"): [80.0, 84.0, 90.0], ("er", "B"): [82.0, 84.0]})
    assert nz.noise_table(r).iloc[0].seeds == 2


def test_paired_comparison_spread_and_sign_flips():
    r = runs({("adaer", "A"): [90.0, 85.0, 88.0], ("adaer", "B"): [89.0, 86.0, 88.0],
              ("mir", "A"): [89.0, 86.0, 80.0], ("mir", "B"): [90.0, 86.0, 80.0]})  # fmt: skip
    c = nz.comparisons_table(r, pairs=(("adaer", "mir"),)).iloc[0]
    d = np.array([[1.0, -1.0], [-1.0, 0.0], [8.0, 8.0]])  # seeds x kernel sets
    assert c.d_mean == pytest.approx(d.mean())
    assert c.sd_d == pytest.approx(math.sqrt(np.var(d, axis=0, ddof=1).mean()))
    assert c.sign_flips == 1  # seed 0: +1 and -1; seed 1 (-1, 0) and seed 2 keep their sign


def test_seeds_needed_matches_the_textbook_paired_t():
    # effect size 1 (delta = sd), two-sided 5%, power 80%: n = 10 (Cohen's tables for a one-sample t test)
    assert nz.seeds_needed(1.0, 1.0) == 10
    assert nz.seeds_needed(0.5, 1.0) == 34
    assert nz.seeds_needed(2.0, 0.0) == 2


def test_the_amd_report_is_read_back():
    src = mc.read_report(DOCS / "table2-mir_code-amd-epyc-3990ba2.md")
    assert src.name.startswith("AMD EPYC, native")
    cell = src.cells.set_index(["benchmark", "method", "quantity"]).loc[("split_fmnist", "adaer", "acc")]
    assert (cell["mean"], cell["std"], cell["n"]) == (72.6, 2.4, 10)
    assert len(src.comparisons) == 96 and set(src.verdicts) == {
        "table2_acc",
        "table2_forget",
        "table2_bwt",
        "table2_fwt",
    }
    row = src.comparisons.query("benchmark == 'split_fmnist' and label == 'AdaER vs C-CMR, Acc'").iloc[0]
    assert (row["mean"], row["low"], row["high"], row["outcome"]) == (1.25, -1.44, 3.94, UNRESOLVED)


def _cells(mean, std, n=10, method="er"):
    return pd.DataFrame(
        [{"benchmark": "split_mnist", "method": method, "quantity": "acc", "mean": mean, "std": std, "n": n}]
    )


def test_a_cell_moves_beyond_its_standard_error_and_a_report_rounding():
    empty = pd.DataFrame()
    ref = mc.Source("A", _cells(80.0, math.sqrt(10)), empty, {}, resolution=0.05)  # se 1
    near = mc.Source("B", _cells(81.45, math.sqrt(10)), empty, {})  # |d| = 1.45 <= sqrt(2) + 0.05
    far = mc.Source("C", _cells(81.5, math.sqrt(10)), empty, {})  # 1.5 > 1.464
    m = mc.moved_cells([ref, near, far]).set_index("source")
    assert not m.loc["B", "moved"] and m.loc["C", "moved"]
    assert m.loc["C", "se_diff"] == pytest.approx(math.sqrt(2))


def _comps(outcome, mean):
    return pd.DataFrame([{"claim": "table2_acc", "benchmark": "split_mnist", "label": "AdaER vs ER, Acc", "mean": mean,
                          "low": mean - 1, "high": mean + 1, "n": 10, "outcome": outcome}])  # fmt: skip


def test_a_claim_whose_verdict_moves_is_fragile_and_its_comparison_listed():
    a = mc.Source("A", _cells(80, 1), _comps("supported", 2.0), {"table2_acc": "reproduced"})
    b = mc.Source("B", _cells(80, 1), _comps(UNRESOLVED, 0.5), {"table2_acc": "partly reproduced"})
    c = mc.Source("C", _cells(80, 1), _comps("supported", 2.5), {"table2_acc": "reproduced"})
    assert mc.fragile([a, c]) == {}
    assert mc.fragile([a, b, c]) == {"table2_acc": {"A": "reproduced", "B": "partly reproduced", "C": "reproduced"}}
    changed = mc.changed_comparisons([a, b])
    assert [(x["label"], x["by_source"]["B"][0]) for x in changed] == [("AdaER vs ER, Acc", UNRESOLVED)]


def test_per_run_sources_judge_the_table2_claims_and_match_seed_by_seed(tmp_path):
    csv = DOCS / "table2-mir_code-intel-xeon-7b31373.csv"
    intel = mc.from_runs("intel", mc.read_runs_table(csv))
    assert len(intel.comparisons) == 96 and intel.verdicts["table2_fwt"] == "inconclusive"
    again = mc.from_runs("again", mc.read_runs_table(csv))
    assert mc.same_runs([intel, again]) == [("intel", "again", 280, 280)]
    e = Experiment("machines_x", tmp_path, mc.read_runs_table(csv).assign(numerics="portable"))
    names = [s.name for s in mc.sources({"machines_x": e}, DOCS)]
    assert names[0].startswith("AMD EPYC") and names[-1].endswith("portable (multirun/machines_x)") and len(names) == 3


def test_the_report_marks_a_fragile_verdict_with_its_deciding_comparison(tmp_path):
    from clsuite.analysis import tables as tb
    from clsuite.analysis.claims import judge_all

    e = Experiment("table2", tmp_path, mc.read_runs_table(DOCS / "table2-mir_code-intel-xeon-7b31373.csv"))
    judged = judge_all({"table2": e})
    rows = {r[0]: r for r in tb.verdicts(judged, {"table2_acc"}, "section 12").rows}
    acc, forget = (rows[f"AdaER has the best {q} of all methods (Joint excluded), M = 100"] for q in ("Acc", "Forget"))
    assert acc[-1].startswith("partly reproduced (*fragile*: decided by AdaER vs ")
    assert forget[-1] == "partly reproduced"


def test_each_kernel_set_judges_the_comparison_and_a_changed_outcome_is_flagged():
    # d per seed under A: (3, 4, 5) -> interval above 0 (supported); under B: (3, -4, 5) -> straddles 0
    r = runs({("adaer", "A"): [93.0, 94.0, 95.0], ("adaer", "B"): [93.0, 86.0, 95.0],
              ("mir", "A"): [90.0, 90.0, 90.0], ("mir", "B"): [90.0, 90.0, 90.0]})  # fmt: skip
    o = nz.outcomes_table(r, pairs=(("adaer", "mir"),)).set_index("kernels")
    assert o.loc["A"].outcome == "supported" and o.loc["B"].outcome == UNRESOLVED
    assert o.loc["A", "mean"] == pytest.approx(4.0) and o.loc["B", "mean"] == pytest.approx(4 / 3)
    assert o["moves"].all() and (o["seeds"] == 3).all()
    same = nz.outcomes_table(runs({("adaer", "A"): [93.0, 94.0, 95.0], ("adaer", "B"): [93.5, 94.0, 95.0],
                                   ("mir", "A"): [90.0] * 3, ("mir", "B"): [90.0] * 3}), pairs=(("adaer", "mir"),))  # fmt: skip
    assert not same["moves"].any()


def test_the_report_reads_the_other_machines_once(monkeypatch, tmp_path):
    """The report asks for the fragile claims (its verdict table) and for the subsection: one reading."""
    from clsuite.analysis.report import build_report
    from tests.results_fixtures import write_run

    read = []
    real = mc.read_report
    monkeypatch.setattr(mc, "read_report", lambda p: read.append(p) or real(p))
    srcs = mc.sources({}, DOCS)
    assert len(read) == 1 and mc.fragile(srcs) == {}
    assert any("Table II verdicts per machine" in x for x in mc.markdown(srcs)) and len(read) == 1
    write_run(tmp_path / "multirun" / "adhoc", method="er", seed=0)
    read.clear()
    build_report(tmp_path / "multirun", tmp_path / "results", crossmachine=DOCS)
    assert len(read) == 1
