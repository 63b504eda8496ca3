"""The analysis from hand-made results files: loading and dedupe, statistics, verdicts, tables.

Every expected number is computed here by hand or by an independent route (brute-force sign
flips, numerical integration of the t density), never copied from the code under test.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clsuite.analysis import claims as cl
from clsuite.analysis import figures as fg
from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.load import job_overrides, load_experiment, load_runs
from clsuite.analysis.report import aggregate, main_aggregate, memory_axis
from clsuite.analysis.stats import Paired, one_sample, paired, summarize
from tests.results_fixtures import edit_run, fake_R, write_grid, write_run

# ----------------------------------------------------------------------------- loading


def test_dedupe_by_identity_key(tmp_path):
    root = tmp_path / "table2"
    write_run(root, seed=0, R=fake_R(5, 80.0), job="a")
    write_run(root, seed=0, R=fake_R(5, 80.0), job="b")  # the same identity reached twice
    write_run(root, seed=1, R=fake_R(5, 70.0), job="c")
    runs, dropped, _left = load_runs(root)
    assert sorted(runs["job"]) == ["a", "c"] and dropped == [("b", "a")]
    # a run copied from another experiment gives way to the one trained here
    edit_run(write_run(root, seed=2, R=fake_R(5, 60.0), job="a0"), lambda res: res.update(reused_from="elsewhere"))
    write_run(root, seed=2, R=fake_R(5, 60.0), job="z")
    runs, dropped, _left = load_runs(root)
    assert "z" in set(runs["job"]) and ("a0", "z") in dropped


def test_forged_unsealed_and_malformed_files_are_never_counted(tmp_path):
    """The example of issue 20: metrics.acc set to 99 by hand moved a cell to 81.2 +- 25.2."""
    root = tmp_path / "table2"
    for s in range(3):
        write_run(root, seed=s, R=fake_R(5, 80.0), job=f"s{s}")
    forged = root / "s2" / "results.json"
    res = json.loads(forged.read_text())
    res["metrics"]["acc"] = 99.0
    forged.write_text(json.dumps(res))  # the seal no longer matches
    d = write_run(root, seed=3, job="no_metrics")
    edit_run(d, lambda r: r.pop("metrics"))  # sealed again, but malformed
    edit_run(write_run(root, seed=4, job="acc_not_from_R"), lambda r: r["metrics"].update(acc=99.0))
    d = write_run(root, seed=5, job="unsealed")
    res = json.loads((d / "results.json").read_text())
    (d / "results.json").write_text(json.dumps({k: v for k, v in res.items() if k != "digest"}))
    (root / "list").mkdir()
    (root / "list" / "results.json").write_text("[]")
    (root / "torn").mkdir()
    (root / "torn" / "results.json").write_text('{"status": "fini')
    e = load_experiment(root)
    assert sorted(e.runs["job"]) == ["s0", "s1"]
    s = summarize(e.runs)
    assert s["acc_mean"].tolist() == [80.0] and s["n"].tolist() == [2]
    reasons = {r["job"]: r["reason"] for r in e.status["rejected"]}
    assert reasons["s2"].startswith("edited after it was written")
    assert reasons["no_metrics"].startswith("'metrics' lacks")
    assert reasons["acc_not_from_R"].startswith("metrics.acc = 99.0 is not the value recomputed")
    assert reasons["unsealed"].startswith("unsealed")
    assert reasons["list"] == "not a JSON object (a list)" and reasons["torn"].startswith("not valid JSON")
    md = tb.status_markdown(e.status, "x")
    assert "**left out**" in md and "`s2`: edited after it was written" in md


def test_a_run_without_identity_is_rejected(tmp_path):
    root = tmp_path / "table2"
    write_run(root, seed=0, identity=False, job="a")
    write_run(root, seed=1, job="b")
    runs, _dropped, left = load_runs(root)
    assert list(runs["job"]) == ["b"] and left["rejected"][0]["reason"].startswith("no 'identity' object")


def test_one_run_per_seed_the_current_codes_else_the_newest(tmp_path, monkeypatch):
    """Two runs of one seed with different code were both pooled (n=3 over 2 seeds)."""
    import os

    from clsuite.analysis import load

    root = tmp_path / "table2"
    write_run(root, seed=0, R=fake_R(5, 80.0), job="s0")
    old = write_run(root, seed=1, R=fake_R(5, 70.0), job="s1_old", code_hash="aaaa000000000000")
    new = write_run(root, seed=1, R=fake_R(5, 60.0), job="s1_new", code_hash="bbbb000000000000")
    os.utime(old / "results.json", (1e9, 1e9))  # older
    runs, _d, left = load_runs(root)
    assert sorted(runs["job"]) == ["s0", "s1_new"]
    assert left["seed_duplicates"] == [{"job": "s1_old", "kept": "s1_new", "why": "the newest results file"}]
    assert summarize(runs)["n"].tolist() == [2]
    monkeypatch.setattr(load, "current_code", lambda: "aaaa000000000000")
    runs, _d, left = load_runs(root)
    assert sorted(runs["job"]) == ["s0", "s1_old"] and left["seed_duplicates"][0]["why"] == "the current code's run"
    md = tb.status_markdown(load_experiment(root).status, "x")
    assert "`s1_new`: left out, kept `s1_old` (the current code's run)" in md
    del new


def test_status_against_the_grid(tmp_path):
    root = tmp_path / "table2"
    done = [write_run(root, method=m, seed=s).name for m in ("er", "adaer") for s in (0, 1)]
    failed = root / "benchmark=split_fmnist,method=er,seed=1"
    failed.mkdir(parents=True)
    (failed / "failed.json").write_text(json.dumps({"error": "RuntimeError: CUDA out of memory", "attempt": 2}))
    old = write_run(root, method="gem", seed=0).name  # from an earlier sweep
    (root / done[0] / "results.stale-1.json").write_text("{}")
    write_grid(root, [*done, failed.name, "never-ran"])
    st = load_experiment(root).status
    assert st["finished"] == 5 and st["grid"]["expected"] == 6
    assert [f["job"] for f in st["failed"]] == [failed.name] and st["missing"] == ["never-ran"]
    assert st["outside_grid"] == [old] and st["stale_files"] == 1
    md = tb.status_markdown(st, "multirun/table2")
    assert "RuntimeError: CUDA out of memory (attempt 2" in md and "`never-ran`" in md


def test_runs_outside_the_grid_are_said_included_only_when_counted(tmp_path):
    """Issue "The last frictions of a first day", item 3: a nested copy of a grid job's run and a link to
    one's results.json in an extra folder were "+ 2 outside it (earlier sweeps, included)", though neither
    was counted. Now only the counted run is "included"; the others are said skipped, with why."""
    root = tmp_path / "table2"
    done = [write_run(root, method="er", seed=s).name for s in (0, 1)]
    old = write_run(root, method="gem", seed=0).name  # from an earlier sweep: counted
    write_grid(root, done)
    shutil.copytree(root / done[0], root / done[0] / "copy")  # a nested copy: the same run
    (root / "extra").mkdir()
    (root / "extra" / "results.json").symlink_to(root / done[1] / "results.json")  # a link: the same run
    st = load_experiment(root).status
    assert st["finished"] == 3 and st["grid"]["finished"] == 2 and st["outside_grid"] == [old]
    assert st["outside_grid_skipped"] == [
        {"job": f"{done[0]}/copy", "why": "the same run as one counted (a copy, or a link to its results file)"},
        {"job": "extra", "why": "the same run as one counted (a copy, or a link to its results file)"},
    ]
    lines = tb.status_markdown(st, "multirun/table2").splitlines()
    assert (
        "- finished: 2 of the grid, + 1 outside it (earlier sweeps, included); 2 outside it skipped: the same run "
        "as one counted (a copy, or a link to its results file)"
    ) in lines
    shutil.rmtree(root / old)  # nothing counted outside the grid: no "included" at all
    lines = tb.status_markdown(load_experiment(root).status, "multirun/table2").splitlines()
    assert (
        "- finished: 2 of the grid; 2 outside it skipped: the same run as one counted (a copy, or a link to its "
        "results file)"
    ) in lines


def test_a_grid_cell_counts_only_the_run_the_grid_asked_for_at_its_folder(tmp_path, capsys):
    """Issue 30: another job's results.json copied into a grid job's folder made that cell n=1 while the
    report said "0 missing" and --strict exited 0; a copy of a run kept instead of the grid's own made
    the header say "3/4 of the grid" with 4/4 present."""
    import shutil

    from clsuite.run.identity import config_hash
    from clsuite.sweep import summary

    root = tmp_path / "multirun" / "table2"
    dirs = [write_run(root, seed=s, R=fake_R(5, 80.0 - s)).name for s in range(4)]
    jobs = [{"overrides": [], "dir": d, "config_hash": config_hash(_config(root / d))} for d in dirs]
    (root / "grid.json").write_text(json.dumps({"created": "now", "argv": [], "jobs": jobs}))
    args = ["table2", "--multirun-dir", str(tmp_path / "multirun"), "--out", str(tmp_path / "results"), "--strict"]
    shutil.copytree(root / dirs[0], root / "a_copy")  # a copy of seed 0's run, sorting before the grid's own
    assert main_aggregate(args) == 0
    assert capsys.readouterr().out.startswith("table2: 4 runs (4/4 of the grid), 0 failed, 0 missing ->")
    e = load_experiment(root)
    assert sorted(e.runs["job"]) == sorted(dirs)
    assert e.status["duplicates"] == [{"job": "a_copy", "same_run_as": dirs[0]}]  # the grid's own is kept
    shutil.copy(root / dirs[0] / "results.json", root / dirs[3] / "results.json")  # seed 0's file in seed 3's folder
    e = load_experiment(root)
    assert sorted(e.runs["job"]) == sorted(dirs[:3]) and summarize(e.runs)["n"].tolist() == [3]
    why = "not the run the grid asked for at this folder: its config is another job's (seed=0)"
    assert e.status["rejected"] == [{"job": dirs[3], "reason": why}]
    assert e.status["grid"]["finished"] == 3 and e.status["missing"] == []
    assert main_aggregate(args) == 1
    out, err = capsys.readouterr()
    assert out.startswith("table2: 3 runs (3/4 of the grid), 0 failed, 0 missing, 1 left out ->")
    assert f"  left out: {dirs[3]}: not the run the grid asked for at this folder" in err
    # the sweep's own summary counts it the same way
    s = summary.summarize(root, None, jobs)
    assert (s["finished_total"], s["failed"]) == (3, 1)
    assert "is another job's run, not the grid's" in s["failed_jobs"][0]


def _config(d: Path) -> dict:
    return json.loads((d / "results.json").read_text())["config"]


BROKEN_GRIDS = {  # what a grid.json is made -> the reason it is refused with
    "torn": (lambda p: p.write_text("["), "not valid JSON (a torn or hand-written file)"),
    "fifo": (lambda p: os.mkfifo(p), "not a regular file (a FIFO)"),
    "folder": (lambda p: p.mkdir(), "not a regular file (a folder)"),
    "dangling link": (lambda p: p.symlink_to(p.parent / "gone.json"), "a link to nothing"),
    "a list": (lambda p: p.write_text("[]"), "not a JSON object (a list)"),
    "no jobs": (lambda p: p.write_text('{"jobs": 3}'), "its jobs are not a list of jobs, each with its folder's name"),
    "a path": (
        lambda p: p.write_text('{"jobs": [{"dir": "../x"}]}'),
        "its jobs are not a list of jobs, each with its folder's name",
    ),
}


@pytest.mark.parametrize("kind", BROKEN_GRIDS)
def test_a_grid_json_that_cannot_be_read_is_an_error_not_no_grid(tmp_path, capsys, kind):
    """Issue 41: `echo '[' > grid.json` (or a FIFO) beside a swapped results file: `aggregate --strict`
    read no grid, counted the swapped file and exited 0. Every reader of the grid now refuses it, naming it."""
    import shutil

    from clsuite.analysis.choices import CHOICES
    from clsuite.analysis.choices import main as choices_main
    from clsuite.analysis.report import main_claims, main_report
    from clsuite.analysis.wandb_sync import main as main_wandb
    from clsuite.run.identity import config_hash

    root = tmp_path / "multirun" / "e"
    dirs = [write_run(root, seed=s, R=fake_R(5, 80.0 - s)).name for s in range(2)]
    jobs = [{"overrides": [], "dir": d, "config_hash": config_hash(_config(root / d))} for d in dirs]
    (root / "grid.json").write_text(json.dumps({"created": "now", "argv": [], "jobs": jobs}))
    shutil.copy(root / dirs[0] / "results.json", root / dirs[1] / "results.json")  # seed 0's file in seed 1's folder
    out = ["--out", str(tmp_path / "results")]
    args = ["e", "--multirun-dir", str(tmp_path / "multirun"), *out, "--strict"]
    assert main_aggregate(args) == 1  # the grid read: the swapped file is left out
    capsys.readouterr()
    (root / "grid.json").unlink()
    make, why = BROKEN_GRIDS[kind]
    make(root / "grid.json")
    error = (
        f"error: {root / 'grid.json'}: {why}; its runs cannot be checked against their sweep's grid: restore it "
        "(rerunning the sweep writes it again), or remove it to read the runs without a grid"
    )
    report_args = ["--multirun-dir", str(tmp_path / "multirun"), "--results-dir", str(tmp_path / "report")]
    choice = tmp_path / "choices" / CHOICES[0].experiment  # (`clsuite choices` reads its own experiments)
    choice.mkdir(parents=True)
    make(choice / "grid.json")
    for main, argv, line in (
        (
            choices_main,
            ["--multirun-dir", str(choice.parent), "--out", str(tmp_path / "c")],
            error.replace(str(root), str(choice)),
        ),
        (main_aggregate, args, error),
        (main_claims, ["--multirun-dir", str(tmp_path / "multirun")], error),
        (main_report, report_args, f"{error}; the report is not built"),
        (main_wandb, ["e", "--multirun-dir", str(tmp_path / "multirun"), *out], error),
    ):
        assert main(argv) == 2, main
        out_text, err = capsys.readouterr()
        assert err.splitlines() == [line] and not out_text.strip(), main
    assert not (tmp_path / "results" / "e" / "wandb").exists()


def test_mixed_environments_are_flagged(tmp_path):
    root = tmp_path / "table2"
    write_run(root, seed=0)
    edit_run(write_run(root, seed=1), lambda res: res["identity"]["env"].update(torch_threads=2))
    md = tb.status_markdown(load_experiment(root).status, "x")
    assert "**mixed environments**" in md and "cpu / 2 / 2.13.0 / unrecorded (1 runs)" in md


def test_mixed_cpu_kernels_are_flagged(tmp_path):
    """Runs of one cell made with other CPU kernels (clsuite.config.numerics) are another environment."""
    root = tmp_path / "table2"
    portable = {"mode": "portable", "aten": "DEFAULT", "mkl": "COMPATIBLE", "mkldnn": False, "nnpack": False}
    edit_run(write_run(root, seed=0), lambda res: res["identity"]["env"].update(numerics=portable))
    native = dict(portable, mode="native", aten="AVX2", mkl="auto AVX2", mkldnn=True, nnpack=True)
    edit_run(write_run(root, seed=1), lambda res: res["identity"]["env"].update(numerics=native))
    e = load_experiment(root)
    assert sorted(e.runs["numerics"]) == ["native (ATen AVX2, MKL auto AVX2)", "portable"]
    md = tb.status_markdown(e.status, "x")
    assert "**mixed environments**" in md and "/ portable (1 runs)" in md


def _set_identity(d, **code_and_provenance):
    edit_run(d, lambda res: res["identity"].update(code_and_provenance))


def test_code_versions_are_content_hashes_and_commits_are_provenance(tmp_path):
    root = tmp_path / "table2"
    same = {"code": {"hash": "1111222233334444"}}
    _set_identity(write_run(root, seed=0), **same, provenance={"commit": "a" * 40, "dirty": False, "version": None})
    _set_identity(write_run(root, seed=1), **same, provenance={"commit": "b" * 40, "dirty": True, "version": None})
    old = write_run(root, seed=2)
    _set_identity(old, code={"commit": "abc1234", "dirty_hash": None})  # made before content hashes
    edit_run(old, lambda res: res["identity"].pop("provenance"))
    runs = load_runs(root)[0].set_index("seed")
    assert list(runs["commit"]) == ["aaaaaaaaaa", "bbbbbbbbbb+dirty", "abc1234"]
    assert list(runs["code"]) == ["1111222233334444", "1111222233334444", "commit:abc1234"]
    _set_identity(old, code={"commit": "abc1234", "dirty_hash": "ffff"})
    assert load_runs(root)[0].set_index("seed").loc[2, ["commit", "code"]].tolist() == [
        "abc1234+dirty",
        "commit:abc1234+ffff",
    ]
    _set_identity(old, code={"commit": None, "version": "0.1.0", "dirty_hash": "ffff"})  # an installed package
    assert load_runs(root)[0].set_index("seed").loc[2, "commit"] == "unknown"
    _set_identity(old, **same, provenance={"commit": "c" * 40, "dirty": False, "version": None})
    st = load_experiment(root).status  # three commits, one code: not mixed
    assert st["code_versions"] == {
        "1111222233334444": {"runs": 3, "commits": ["aaaaaaaaaa", "bbbbbbbbbb+dirty", "cccccccccc"]}
    }
    assert "mixed code versions" not in tb.status_markdown(st, "x")
    _set_identity(old, code={"hash": "5555666677778888"})  # the same commit, other code
    md = tb.status_markdown(load_experiment(root).status, "x")
    assert "**mixed code versions**" in md and "`5555666677778888` (1 runs; cccccccccc)" in md


# ----------------------------------------------------------------------------- statistics


def _t4_two_sided_p(t: float) -> float:
    """Independent reference: the t density with 4 degrees of freedom, integrated numerically."""
    x = np.linspace(abs(t), 2000.0, 2_000_001)
    pdf = 0.375 * (1 + x**2 / 4) ** -2.5  # Gamma(5/2) / (sqrt(4 pi) Gamma(2)) = 0.375
    return float(2 * np.trapezoid(pdf, x))


def test_paired_interval_and_tests_exact():
    x = {0: 81.0, 1: 72.0, 2: 93.0, 3: 60.5, 4: 77.0, 5: 50.0}
    y = {0: 80.0, 1: 70.0, 2: 90.0, 3: 61.0, 4: 75.0}  # seed 5 has no pair: left out
    p = paired(x, y)
    d = np.array([1.0, 2.0, 3.0, -0.5, 2.0])
    assert p.n == 5 and p.mean == pytest.approx(1.5)
    assert p.sd == pytest.approx(math.sqrt(7 / 4))  # squared deviations 0.25 + 0.25 + 2.25 + 4 + 0.25 = 7
    half = 2.7764451051977987 * math.sqrt(7 / 4) / math.sqrt(5)  # t_{0.975, 4} from tables
    assert (p.low, p.high) == pytest.approx((1.5 - half, 1.5 + half))
    assert p.p_t == pytest.approx(_t4_two_sided_p(1.5 / (math.sqrt(7 / 4) / math.sqrt(5))), abs=1e-5)
    # exact sign-flip: the share of the 32 sign patterns whose |mean| reaches the observed one
    flips = [abs(np.mean(d * s)) >= 1.5 - 1e-12 for s in itertools.product((1, -1), repeat=5)]
    assert p.p_signflip == pytest.approx(sum(flips) / 32) and sum(flips) == 4


def test_paired_edge_cases():
    assert one_sample([]).n == 0 and not one_sample([]).defined
    one = one_sample([2.0])
    assert one.n == 1 and not one.defined and cl.outcome(one) == cl.MISSING
    same = one_sample([0.0, 0.0, 0.0])  # FWT in class-IL: the same value for both methods
    assert (same.low, same.high) == (0.0, 0.0) and cl.outcome(same) == cl.IDENTICAL
    const = one_sample([1.0, 1.0, 1.0])
    assert (const.low, const.high) == (1.0, 1.0) and cl.outcome(const) == cl.SUPPORTED


def test_summary_mean_sample_std_n(tmp_path):
    root = tmp_path / "table2"
    for s, acc in enumerate((80.0, 82.0, 84.0)):
        write_run(root, method="er", seed=s, R=fake_R(5, acc, 60.0))
    s = summarize(load_runs(root)[0]).iloc[0]
    assert s["n"] == 3 and s["acc_mean"] == pytest.approx(82.0) and s["acc_std"] == pytest.approx(2.0)
    assert s["first_task_final_mean"] == pytest.approx(60.0) and s["first_task_drop_mean"] == pytest.approx(30.0)


# ----------------------------------------------------------------------------- verdicts


def test_verdict_rules():
    S, C, U, I, M = cl.SUPPORTED, cl.CONTRADICTED, cl.UNRESOLVED, cl.IDENTICAL, cl.MISSING
    assert cl.verdict([S, S, S]) == cl.REPRODUCED
    assert cl.verdict([S, U]) == cl.PARTLY and cl.verdict([S, M]) == cl.PARTLY
    # a claim is a conjunction: one contradicted comparison falsifies it, however many are supported
    assert cl.verdict([S, S, C]) == cl.NOT and cl.verdict([S, C, U]) == cl.NOT
    assert cl.verdict([C, U]) == cl.NOT and cl.verdict([C]) == cl.NOT
    assert cl.verdict([U, I, M]) == cl.INCONCLUSIVE
    assert cl.verdict([]) == cl.NOT_RUN and cl.verdict([M, M]) == cl.NOT_RUN


def test_the_deciding_comparison_is_the_clearest_contradiction_else_the_weakest():
    def comp(label, low, high):
        return cl.Comparison("split_mnist", label, Paired(3, (low + high) / 2, 1.0, low, high, 0.01, 0.25))

    wide_unresolved, mild_against, clear_against = comp("u", -9.0, 2.0), comp("c1", -3.0, -0.5), comp("c2", -6.0, -4.0)
    j = cl.Judged(claim=None, reading="mir_code", comparisons=[wide_unresolved, mild_against, clear_against])
    assert j.verdict == cl.NOT and j.deciding is clear_against  # not the unresolved one with the lowest bound
    j = cl.Judged(claim=None, reading="mir_code", comparisons=[comp("s", 1.0, 3.0), wide_unresolved])
    assert j.verdict == cl.PARTLY and j.deciding is wide_unresolved


def _claim_runs(tmp_path, adaer_minus_er: list[float]) -> pd.DataFrame:
    """ER at 70 + seed noise shared with AdaER; AdaER = ER + the given per-seed difference."""
    root = tmp_path / "table2"
    for s, d in enumerate(adaer_minus_er):
        er = 70.0 + 5 * np.sin(s)
        write_run(root, method="er", seed=s, R=fake_R(5, er))
        write_run(root, method="adaer", seed=s, R=fake_R(5, er + d))
    return load_runs(root)[0]


CLAIM = cl.Claim("t", "table2", "test", "AdaER beats ER", cl.beats("acc", ["adaer"], ["er"]), {"memory": 100})


@pytest.mark.parametrize(
    ("diffs", "expected"),
    [
        ([3.0, 2.5, 3.5, 3.0, 2.8], cl.REPRODUCED),  # clearly better in every seed
        ([-3.0, -2.5, -3.5, -3.0, -2.8], cl.NOT),  # clearly worse
        ([4.0, -4.0, 3.0, -3.5, 0.5], cl.INCONCLUSIVE),  # the seeds cannot separate them
    ],
)
def test_claim_verdicts_on_constructed_runs(tmp_path, diffs, expected):
    (j,) = cl.judge(CLAIM, _claim_runs(tmp_path, diffs))
    assert j.reading == "paper_text" and j.verdict == expected
    (c,) = j.comparisons
    assert c.result.n == 5 and c.result.mean == pytest.approx(np.mean(diffs))


def test_lower_is_better_is_oriented(tmp_path):
    runs = _claim_runs(tmp_path, [3.0, 2.5, 3.5, 3.0, 2.8])  # AdaER forgets less (fake_R: Forget = 90 - final)
    claim = cl.Claim("f", "table2", "test", "AdaER forgets least", cl.beats("forget", ["adaer"], ["er"]))
    (j,) = cl.judge(claim, runs)
    assert j.verdict == cl.REPRODUCED and j.comparisons[0].result.mean == pytest.approx(2.96)


def test_claims_are_judged_per_reading(tmp_path):
    root = tmp_path / "table2"
    for s in range(4):
        for r, d in (("paper_text", -3.0 - 0.1 * s), ("mir_code", 3.0 + 0.1 * s)):
            write_run(root, method="er", seed=s, reading=r, R=fake_R(5, 70.0 + s))
            write_run(root, method="adaer", seed=s, reading=r, R=fake_R(5, 70.0 + s + d))
    got = {j.reading: j.verdict for j in cl.judge(CLAIM, load_runs(root)[0])}
    assert got == {"paper_text": cl.NOT, "mir_code": cl.REPRODUCED}


# ----------------------------------------------------------------------------- tables


@pytest.fixture
def table2_runs(tmp_path):
    root = tmp_path / "multirun" / "table2"
    for seed, acc in enumerate((80.0, 82.0, 84.0)):  # ER: Acc 82 ± 2
        write_run(root, method="er", seed=seed, R=fake_R(5, acc))
        write_run(root, method="er", seed=seed, reading="mir_code", R=fake_R(5, acc + 4))
        write_run(root, method="adaer", seed=seed, R=fake_R(5, 90.0))
    write_run(root, benchmark="split_fmnist", method="er", seed=0, R=fake_R(5, 70.0))
    return tmp_path


def test_table2_readings_side_by_side_with_the_paper(table2_runs):
    res = aggregate("table2", table2_runs / "multirun", table2_runs / "results")
    md = (table2_runs / "results" / "table2" / "table2.md").read_text()
    tex = (table2_runs / "results" / "table2" / "table2.tex").read_text()
    head = "| Method | Acc paper_text | Acc mir_code | Acc paper | Forget paper_text | Forget mir_code | Forget paper |"
    assert head in md
    # ER on split-MNIST: paper_text 82.0 ± 2.0, mir_code 86.0 ± 2.0, the paper's 86.4; Forget 90 - Acc
    assert "| ER | 82.0 ± 2.0 | 86.0 ± 2.0 | 86.4 | 8.0 ± 2.0 | 4.0 ± 2.0 | 11.6 |" in md
    assert "| AdaER | 90.0 ± 0.0 | – | 89.6 |" in md  # no mir_code run of AdaER
    assert "| ER | 70.0 (n=1) | – | 69.6 |" in md  # split-FMNIST: one seed (no std), one reading
    assert md.index("| ER |") < md.index("| AdaER |")
    assert "BWT" in md and "Bwt" not in md.split("### Notes")[0]  # labels from clsuite.core.metrics.METRICS
    assert r"82.0 $\pm$ 2.0" in tex and r"\multicolumn{3}{c}{Acc}" in tex
    assert res["runs"] == 10 and (table2_runs / "results" / "table2" / "runs.csv").read_text().count("\n") == 11


def test_adhoc_sweep_gets_a_plain_table_of_its_axes(tmp_path):
    root = tmp_path / "multirun" / "lr_probe"
    for lr, acc in ((0.05, 60.0), (0.1, 70.0)):
        for s in (0, 1):
            write_run(root, method="er", seed=s, extra_cfg={"lr": lr}, R=fake_R(5, acc + s), job=f"lr={lr},seed={s}")
    aggregate("lr_probe", tmp_path / "multirun", tmp_path / "results")
    md = (tmp_path / "results" / "lr_probe" / "lr_probe.md").read_text()
    head = "| method | benchmark | reading | lr | Acc (%) | Forget (% points) | BWT (% points) | FWT (% points) |"
    assert head in md
    assert "| ER | split-MNIST | paper_text | 0.05 | 60.5 ± 0.7 |" in md
    assert "| ER | split-MNIST | paper_text | 0.1 | 70.5 ± 0.7 |" in md
    rows = [line for line in md.splitlines() if line.startswith("| ER |")]
    assert len(rows) == 2 and not any("[" in r for r in rows)  # lr moved off the paper's setting: no paper value


def test_adhoc_table_and_csvs_give_task_il_acc_time_and_memory_where_the_runs_recorded_them(tmp_path):
    """Results files since the task-IL matrix and the peaks carry them to the tables and CSVs; older
    ones (no R_task_il, no peaks) are read as before, their cells N/A, and alone they add no column."""
    from clsuite.core.metrics import task_il_metrics

    def newer(res, acc_task_il, ram):
        res["R_task_il"] = fake_R(5, acc_task_il).tolist()
        res["metrics"].update(task_il_metrics(res["R_task_il"]))
        res.update(train_time_s=1.5, peak_ram_mb=ram, peak_gpu_mb=None)

    root = tmp_path / "multirun" / "costs"
    for s, (acc, ram) in enumerate(((96.0, 500.0), (98.0, 700.0))):
        edit_run(write_run(root, method="mir", seed=s, job=f"method=mir,seed={s}"), lambda r: newer(r, acc, ram))  # noqa: B023
    write_run(root, method="er", job="method=er,seed=0")  # made before: neither
    aggregate("costs", tmp_path / "multirun", tmp_path / "results")
    out = tmp_path / "results" / "costs"
    md = (out / "costs.md").read_text()
    head = next(line for line in md.splitlines() if line.startswith("| method |"))
    assert head.endswith("| FWT (% points) | task-IL Acc (%) | task-1 Acc at the end (%) | task-1 drop (% points) "
                         "| wall time (s) | training time (s) | peak RAM (MB) | n |")  # fmt: skip
    mir = next(line for line in md.splitlines() if line.startswith("| MIR |"))
    assert "| 97.0 ± 1.4 | " in mir and mir.endswith("| 2 | 2 | 600 | 2 |")
    er = next(line for line in md.splitlines() if line.startswith("| ER |"))
    assert er.endswith("| -10.0 [-7.1] | N/A | 80.0 | 10.0 | 2 | N/A | N/A | 1 |")
    runs = pd.read_csv(out / "runs.csv").set_index("job")
    assert runs.loc["method=mir,seed=1", ["acc_task_il", "peak_ram_mb", "train_time_s"]].tolist() == [98.0, 700.0, 1.5]
    assert runs.loc["method=er,seed=0", ["acc_task_il", "peak_ram_mb"]].isna().all()
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    assert summary.loc["mir", ["acc_task_il_mean", "peak_ram_mb_mean", "peak_ram_mb_std"]].round(4).tolist() == [
        97.0, 600.0, 141.4214]  # fmt: skip
    for d in root.iterdir():  # the older file alone: no task-IL or peak column
        if "mir" in d.name:
            shutil.rmtree(d)
    aggregate("costs", tmp_path / "multirun", tmp_path / "results")
    head = next(line for line in (out / "costs.md").read_text().splitlines() if line.startswith("| method |"))
    assert "task-IL" not in head and "peak" not in head and "training time" not in head and "wall time (s)" in head


def test_adhoc_sweep_names_n_the_reading_and_the_paper_value_where_the_paper_has_one(tmp_path, monkeypatch):
    """The design card's sweep (method x M, one seed): n = 1 cells without a std, the reading in
    every row, the paper's Table II value only at M = 100 (Table II's condition)."""
    root = tmp_path / "multirun" / "card"
    for m in ("er", "mir"):
        for mem in (50, 100):
            write_run(root, method=m, memory=mem, reading="mir_code", R=fake_R(5, 70.0 + mem / 10),
                      job=f"memory={mem},method={m},seed=0")  # fmt: skip
    write_run(root, method="mir", memory=100, seed=1, reading="mir_code", R=fake_R(5, 82.0),
              job="memory=100,method=mir,seed=1")  # fmt: skip
    drawn = []
    monkeypatch.setattr(fg, "_save", lambda fig, stem, *a, **k: drawn.append(fig) or [Path(stem).with_suffix(".png")])
    aggregate("card", tmp_path / "multirun", tmp_path / "results")
    fig, _acc_against_m = drawn  # the heatmaps: one panel per method x M, never averaged over M
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title())
    assert titles == ["ER, M=100, n=1", "ER, M=50, n=1", "MIR, M=100, n=2", "MIR, M=50, n=1"]
    assert "one panel per method x M" in fig._suptitle.get_text() and "reading mir_code" in fig._suptitle.get_text()
    md = (tmp_path / "results" / "card" / "card.md").read_text()
    assert "| method | benchmark | reading | M | Acc (%) |" in md
    assert "| ER | split-MNIST | mir_code | 50 | 75.0 | " in md  # n = 1: the value, no ± and no paper value
    row = next(line for line in md.splitlines() if line.startswith("| ER | split-MNIST | mir_code | 100 |"))
    assert "| 80.0 [86.4] | 10.0 [11.6] | -10.0 [-10.7] |" in row and row.endswith("| 1 |")
    row = next(line for line in md.splitlines() if line.startswith("| MIR | split-MNIST | mir_code | 100 |"))
    assert "| 81.0 ± 1.4 [88.0] |" in row and row.endswith("| 2 |")


def test_aggregate_cli_strict_and_errors(table2_runs, capsys):
    root = table2_runs / "multirun" / "table2"
    write_grid(root, [p.parent.name for p in root.rglob("results.json")] + ["never-ran"])
    args = ["table2", "--multirun-dir", str(table2_runs / "multirun"), "--out", str(table2_runs / "results")]
    assert main_aggregate(args) == 0 and main_aggregate([*args, "--strict"]) == 1
    assert main_aggregate(["nope", "--multirun-dir", str(table2_runs / "multirun")]) == 2
    assert "error: no runs" in capsys.readouterr().err


def test_paper_values_transcribed():
    assert pv.table2_value("split_mnist", "adaer", "acc") == 89.6
    assert pv.table2_value("split_cifar10", "mir", "bwt") == -0.8
    assert pv.table2_value("split_fmnist", "joint", "forget") is None
    assert all(len(pv.TABLE2[b]) == 14 for b in pv.TABLE2_BENCHMARKS)
    assert set(pv.METHOD_ORDER) == set(pv.TABLE2["split_mnist"])
    assert {q.experiment for q in pv.QUOTES} <= {c.experiment for c in cl.CLAIMS}
    assert [(p["er"], p["mir"]) for p in pv.PEERS["split_cifar10"]] == [(41.3, 47.6), (38.4, 42.4), (37.7, 43.0)]
    assert pv.method_label("my_method") == "my_method" and pv.order_methods(["zz", "adaer", "er"]) == [
        "er",
        "adaer",
        "zz",
    ]


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("targets:", "target:", r"expected the keys \['targets', "),
        ("98.8, -13.3]", "98.8]", r"table2 row si: expected 3 lists of 4 numbers or null"),
        ("[[89.6,", "[['89.6',", r"table2 row adaer: expected 3 lists of 4 numbers or null"),
        ("method: gem,", "method: gemm,", r"quotes.memory: unexpected quote \{'quote': \"split-MNIST: GEM's"),
        (", vs: {memory: 50}}", "}", r"quotes.memory: a gain or decline needs vs: \{'quote': "),
        ("quotes:", "quotes: [", r"not laid out as expected \(ParserError: "),
        (
            "er: 41.3, mir: 47.6}",
            "er: 41.3, mirr: 47.6}",
            r"peers.split_cifar10: unexpected \{'source': \"MIR's paper ",
        ),
        ("er: 38.4,", "er: 38,", r"peers.split_cifar10: unexpected \{'source': 'ASER "),
        (
            "benchmarks: [split_mnist, split_fmnist, split_cifar10, split_cifar100]",
            "benchmarks: 3",
            r"not laid out as expected \(TypeError: 'int' object is not subscriptable\)$",
        ),
    ],
)
def test_paper_values_file_is_checked(tmp_path, old, new, error):
    """The transcription is data (paper_values.yaml): read back as the module's names; a file not laid
    out as expected is one error naming it and what is wrong."""
    assert pv.load_values()["quotes"] == pv.QUOTES and pv.load_values()["table2"] == pv.TABLE2
    bad = tmp_path / "values.yaml"
    bad.write_text(pv.VALUES_FILE.read_text().replace(old, new, 1))
    with pytest.raises(pv.PaperValuesError, match="^" + re.escape(f"{bad}: ") + error):
        pv.load_values(bad)


def test_other_data_row_gets_paired_differences_and_the_published_peers_beside(tmp_path):
    """A Table II row on other data (CIFAR-10's JPEG copy): x - y per seed over the seeds both ran, its
    mean and 95% t interval per comparison, and ER's and MIR's Acc beside other papers' published ones."""
    root = tmp_path / "i44"
    accs = {"er": [40.0, 42.0, 38.0], "mir": [44.0, 45.0, 43.0], "adaer": [50.0, 47.0]}
    for method, values in accs.items():
        for seed, acc in enumerate(values):
            write_run(root, "split_cifar10_jpeg", method, seed, R=fake_R(5, acc), job=f"{method}-{seed}")
    runs = load_experiment(root).runs
    rows = tb.differences(runs, "split_cifar10_jpeg", "d").rows
    assert [r[0] for r in rows] == ["MIR − ER", "AdaER − MIR", "AdaER − ER"]  # (no C-CMR, E-BRS runs: no rows)
    assert rows[0][1:3] + rows[0][-1:] == ["paper_text", "+4.0 [+1.5, +6.5]", "3"]  # 4, 3, 5: sd 1, t(2) 4.303
    assert rows[1][2:3] + rows[1][-1:] == ["+4.0 [-21.4, +29.4]", "2"]  # 6, 2 over seeds 0-1 only
    peer = tb.peers(runs, "split_cifar10_jpeg", "p")
    assert peer.rows[0] == ["this suite (paper_text)", "CIFAR-10 (JPEG copy)", "40.0 ± 2.0", "44.0 ± 1.0",
                            "+4.0 [+1.5, +6.5], n=3"]  # fmt: skip
    assert peer.rows[1][1:] == ["split-CIFAR10, official data, other code", "41.3", "47.6", "+6.3"]
    assert len(peer.rows) == 1 + len(pv.PEERS["split_cifar10"]) and "other code, official data" in peer.note
    assert tb.peers(runs, "split_mnist", "p") is None  # no published peers known for it
    # a run of ER with another batch size in the same experiment makes every run a variant (load step 4):
    # no paired difference and no suite row then, rather than ER's seed 0 averaged over 40 and 10
    write_run(root, "split_cifar10_jpeg", "er", 0, R=fake_R(5, 10.0), extra_cfg={"batch_size": 10}, job="er-b10")
    runs = load_experiment(root).runs
    assert set(runs["variant"]) == {"batch_size=None", "batch_size=10"}
    assert tb.differences(runs, "split_cifar10_jpeg", "d").rows == []
    assert [r[0] for r in tb.peers(runs, "split_cifar10_jpeg", "p").rows] == [
        p["source"] for p in pv.PEERS["split_cifar10"]
    ]


def test_fmt():
    assert tb.fmt(82.0, 2.0) == "82.0 ± 2.0"
    assert tb.fmt(82.0, float("nan")) == "82.0"
    assert tb.fmt(float("nan")) == "N/A"
    assert tb.fmt(82.0, 2.0, 2, n_all=5) == "82.0 ± 2.0 (n=2)"
    assert tb.paper_number(-7.07) == "-7.1" and tb.paper_number(86.4) == "86.4" and tb.paper_number(None) == "N/A"
    assert tb.paper_number(-6.78) == "-6.8" and tb.paper_number(-12.5) == "-12.5"  # one decimal, as ours


def test_quoted_number_checked_per_seed(tmp_path):
    root = tmp_path / "memory"
    for s, (a50, a200) in enumerate(((60.0, 75.0), (62.0, 80.6), (58.0, 72.5))):
        write_run(root, method="gem", seed=s, memory=50, R=fake_R(5, a50))
        write_run(root, method="gem", seed=s, memory=200, R=fake_R(5, a200))
    (q,) = [q for q in pv.QUOTES if q.method == "gem" and q.experiment == "memory"]
    c = cl.check_quote(q, load_runs(root)[0], "paper_text")
    assert c.ours.n == 3 and c.ours.mean == pytest.approx(np.mean([25.0, 30.0, 25.0]))  # 100 (a200 / a50 - 1)
    assert c.inside == "no"  # the paper's 49.9% is far outside


def test_results_fixture_is_plausible():
    from tests.results_fixtures import plausible_R

    R = plausible_R(5, 0.7, seed=0)
    assert np.all(np.triu(R, 1) == 0) and np.all((R >= 0) & (R <= 100))
    assert np.all(np.diag(R) > 85) and R[-1, 0] < R[0, 0]


def test_variants_are_shown_apart_not_pooled(tmp_path):
    root = tmp_path / "multirun" / "table2"
    for s in (0, 1):
        write_run(root, method="er", seed=s, R=fake_R(5, 80.0), job=f"a{s}")
        write_run(root, method="er", seed=s, R=fake_R(5, 60.0), extra_cfg={"batch_size": 10}, job=f"b{s}")
    aggregate("table2", tmp_path / "multirun", tmp_path / "results")
    md = (tmp_path / "results" / "table2" / "table2.md").read_text()
    assert "| ER | 80.0 ± 0.0 | 86.4 |" not in md  # the two settings never share a cell ...
    assert "runs with other settings (variants)" in md
    assert "| ER | split-MNIST | paper_text | 10 | 60.0 ± 0.0 |" in md  # ... each has its own row
    assert "| ER | split-MNIST | paper_text | – | 80.0 ± 0.0 |" in md


def test_machine_facts_come_from_the_results_file(tmp_path):
    d = write_run(tmp_path / "table2", device="cuda:0")
    edit_run(d, lambda res: res["versions"].update(cpu="Some CPU 9000", gpu="Some GPU X"))
    r = load_runs(tmp_path / "table2")[0].iloc[0]
    assert (r["device"], r["cpu"], r["torch"], r["commit"]) == (
        "cuda:0 (Some GPU X)",
        "Some CPU 9000",
        "2.13.0",
        "abc1234000",
    )


def test_figures_are_drawn_per_reading_and_label_the_memory_unit(tmp_path):
    """A figure draws one line per method: runs of two readings get a figure each (pooled, the line
    would zig-zag between readings at every M); the M axis says per class or in total."""
    root = tmp_path / "multirun" / "memory"
    for reading, per_class in (("paper_text", False), ("mir_code", True)):
        for m in (50, 100):
            for s in (0, 1):
                write_run(root, method="er", seed=s, memory=m, reading=reading, R=fake_R(5, 60.0 + m / 10 + s),
                          extra_cfg={"memory_per_class": per_class}, job=f"m={m},r={reading},s={s}")  # fmt: skip
    res = aggregate("memory", tmp_path / "multirun", tmp_path / "results")
    names = sorted(p.name for p in res["figures"] if p.suffix == ".png")
    assert names == [f"fig5_fig6_memory_{q}_{r}.png" for q in ("acc", "bwt") for r in ("mir_code", "paper_text")]
    runs = res["experiment"].runs
    assert memory_axis(runs[runs["reading"] == "mir_code"]) == "memory size M (samples per class)"
    assert memory_axis(runs[runs["reading"] == "paper_text"]) == "memory size M (samples in total)"
    one = tmp_path / "one" / "memory"
    for s in (0, 1):
        write_run(one, method="er", seed=s, memory=50, reading="mir_code", job=f"s={s}")
    res = aggregate("memory", tmp_path / "one", tmp_path / "results1")
    assert sorted(p.name for p in res["figures"] if p.suffix == ".png") == [
        "fig5_fig6_memory_acc.png",
        "fig5_fig6_memory_bwt.png",
    ]


def test_adhoc_table_names_what_each_job_changed():
    """A check sweep changing a different key per method (no key varies within a method): without
    the overrides column its table would not say what was run."""
    assert job_overrides("benchmark=split_mnist,memory=100,memory_per_class=False,method=gem,seed=3") == (
        "memory_per_class=False"
    )
    assert job_overrides("model.shape=[3,8,8],method=er,seed=0") == "model.shape=[3,8,8]"  # values may hold commas


def test_adhoc_sweep_with_one_change_per_method_shows_it(tmp_path):
    root = tmp_path / "multirun" / "checks"
    for m, change in (("gem", {"memory_per_class": False}), ("agem", {"replay_size": 256})):
        key, value = next(iter(change.items()))
        for s in (0, 1):
            write_run(root, method=m, seed=s, extra_cfg=change, job=f"{key}={value},method={m},seed={s}")
    aggregate("checks", tmp_path / "multirun", tmp_path / "results")
    md = (tmp_path / "results" / "checks" / "checks.md").read_text()
    assert "| method | benchmark | reading | overrides | Acc (%) |" in md
    assert "| A-GEM | split-MNIST | paper_text | `replay_size=256` | 80.0 ± 0.0 |" in md  # no paper value: changed
    assert "| GEM | split-MNIST | paper_text | `memory_per_class=False` | 80.0 ± 0.0 |" in md


def test_every_table_gives_n_per_row(table2_runs):
    aggregate("table2", table2_runs / "multirun", table2_runs / "results")
    md = (table2_runs / "results" / "table2" / "table2.md").read_text()
    head = next(line for line in md.splitlines() if line.startswith("| Method | Acc paper_text"))
    assert head.endswith("| FWT paper | n paper_text | n mir_code |")
    mnist, fmnist = md.split("### Table II (table2): split-FMNIST")
    assert next(r for r in mnist.splitlines() if r.startswith("| ER |")).endswith("| 3 | 3 |")
    assert next(r for r in mnist.splitlines() if r.startswith("| AdaER |")).endswith("| 3 | – |")
    assert next(r for r in fmnist.splitlines() if r.startswith("| ER |")).endswith("| 1 | – |")  # one seed
    root = table2_runs / "multirun" / "memory"
    for m, seeds in ((50, (0, 1)), (100, (0, 1, 2))):
        for s in seeds:
            write_run(root, method="er", seed=s, memory=m, reading="mir_code", job=f"m={m},s={s}")
    aggregate("memory", table2_runs / "multirun", table2_runs / "results")
    md = (table2_runs / "results" / "memory" / "memory.md").read_text()
    assert "| Method | split-MNIST M=50 | split-MNIST M=100 | n seeds |" in md
    rows = [r for r in md.splitlines() if r.startswith("| ER |")]
    assert len(rows) == 2 and all(r.endswith("| 2–3 |") for r in rows)  # the row's cells: 2 and 3 seeds


def test_a_key_held_off_its_default_for_every_run_is_named_in_captions_titles_and_the_head(tmp_path, monkeypatch):
    """The design card's sweep at M = 50 and |B_t| = 20: no column shows M (it is not swept), so the
    captions, the figure titles and the head of the experiment's page do; at the defaults, none."""
    drawn = []
    monkeypatch.setattr(fg, "_save", lambda fig, stem, *a, **k: drawn.append(fig) or [Path(stem).with_suffix(".png")])
    root = tmp_path / "multirun" / "card"
    for m in ("er", "mir"):
        write_run(root, method=m, memory=50, reading="mir_code", job=f"method={m}",
                  extra_cfg={"memory_per_class": True, "batch_size": 20, "lr": 0.1})  # fmt: skip
    aggregate("card", tmp_path / "multirun", tmp_path / "results")
    md = (tmp_path / "results" / "card" / "card.md").read_text()
    line = "Held for every run at a value other than the default: M=50 per class, batch_size=20."
    assert md.count(line) == 2  # the page's head and the table's caption
    assert "| method | benchmark | reading | Acc (%) |" in md  # (no M column: one value)
    (fig,) = drawn
    assert fig._suptitle.get_text().endswith("\n" + line)
    tex = (tmp_path / "results" / "card" / "card.tex").read_text()
    assert tex.count("M=50 per class, batch\\_size=20") == 2  # the caption and the footnote
    assert "\\caption{card: every swept setting (reading mir\\_code, M per class) Held for every run" in tex

    drawn.clear()
    root = tmp_path / "multirun" / "plain"
    for m in ("er", "mir"):  # every key at its default (mir_code: M = 100 per class, |B_t| = 10)
        write_run(
            root,
            method=m,
            reading="mir_code",
            job=f"method={m}",
            extra_cfg={"memory_per_class": True, "batch_size": 10},
        )
    aggregate("plain", tmp_path / "multirun", tmp_path / "results")
    assert "Held for every run" not in (tmp_path / "results" / "plain" / "plain.md").read_text()
    assert "Held for every run" not in drawn[0]._suptitle.get_text()


def test_a_run_s_changed_settings_are_those_off_its_own_default():
    """The default of a run is composed with its benchmark, method and reading: mir_code's M per class
    and GEM's tuned margin on split-MNIST are defaults there, not changes; an unknown method's keys are
    not compared."""
    from clsuite.analysis.defaults import changed, default_of

    default, unknown = default_of("split_mnist", "gem", "mir_code")
    assert unknown == () and default["memory_per_class"] is True and default["batch_size"] == 10
    run = pd.Series({"benchmark": "split_mnist", "method": "gem", "reading": "mir_code", "memory": 100, "tau": 0.5,
                     "lambda": 0.0, "flat": {k: v for k, v in default.items() if k not in ("memory", "tau", "lambda")}})  # fmt: skip
    assert changed(run) == {}
    run["flat"] = {**run["flat"], "batch_size": 20, "method.plugin.memory_strength": 0.25}
    run["lambda"] = 0.5
    assert changed(run) == {"lambda": 0.5, "batch_size": 20, "method.plugin.memory_strength": 0.25}
    outside = run.copy()
    outside["method"] = "er_newest"  # a method from outside src/: its own keys have no default here
    outside["flat"] = {"method.replay._target_": "my_policies.NewestReplay", "batch_size": 20}
    assert default_of("split_mnist", "er_newest", "mir_code")[1] == ("method",)
    assert changed(outside) == {"lambda": 0.5, "batch_size": 20}


def test_the_verdict_legend_explains_both_marks_it_uses(tmp_path):
    """Claims of an experiment with no runs read "not run"; a reading without runs in an experiment
    that has some reads "–": the legend says what each mark means."""
    root = tmp_path / "multirun" / "table2"
    for seed in (0, 1):
        for m in ("er", "adaer"):
            write_run(root, method=m, seed=seed, reading="paper_text", R=fake_R(5, 80.0 + seed))
    judged = cl.judge_all({"table2": load_experiment(root)})  # the other experiments: no runs (not run)
    text = tb.verdicts([*judged, cl.Judged(judged[0].claim, "mir_code")]).markdown()  # a second reading
    rows = [line for line in text.splitlines() if line.startswith("| AdaER") or line.startswith("| Every")]
    assert any("| not run |" in r for r in rows) and any(r.endswith("| – |") for r in rows)
    assert "not run: no run of the claim's experiment at all" in text and "–: the experiment has runs, none of" in text


# ----------------------------------------------------------------------------- what every table and figure says


def _card(root: Path, memories=(50, 100, 200), reading="mir_code") -> None:
    """The design card's sweep: method x M, one seed, M per class (mir_code)."""
    for m in ("er", "mir"):
        for mem in memories:
            write_run(root, method=m, memory=mem, reading=reading, R=fake_R(5, 70.0 + mem / 10),
                      extra_cfg={"memory_per_class": reading == "mir_code"}, job=f"memory={mem},method={m},seed=0")  # fmt: skip


def _drawn(monkeypatch) -> list:
    """The figures drawn from now on (none written)."""
    drawn = []
    monkeypatch.setattr(fg, "_save", lambda fig, stem, *a, **k: drawn.append(fig) or [Path(stem).with_suffix(".png")])
    return drawn


def test_every_table_and_figure_names_its_reading_and_the_unit_of_m(tmp_path, monkeypatch):
    """A paper target's tables and figures name the reading and whether M is per class or in total,
    also with one reading (the file names then carry no reading: docs/figures/ keeps its names)."""
    root = tmp_path / "multirun" / "memory"
    for m in (50, 100):
        for s in (0, 1):
            write_run(root, method="er", seed=s, memory=m, reading="mir_code", extra_cfg={"memory_per_class": True},
                      job=f"m={m},s={s}")  # fmt: skip
    drawn = _drawn(monkeypatch)
    res = aggregate("memory", tmp_path / "multirun", tmp_path / "results")
    assert [p.name for p in res["figures"]] == ["fig5_fig6_memory_acc.png", "fig5_fig6_memory_bwt.png"]
    assert [f._suptitle.get_text() for f in drawn] == [
        "Fig. 5: averaged test accuracy against the memory size M (reading mir_code, M per class)",
        "Fig. 6: backward transfer against the memory size M (reading mir_code, M per class)",
    ]
    assert [t.title for t in res["tables"]] == [
        "Fig. 5: Acc (%) against M (reading mir_code, M per class)",
        "Fig. 6: BWT (% points) against M (reading mir_code, M per class)",
    ]
    md = (tmp_path / "results" / "memory" / "memory.md").read_text()
    assert "### Fig. 5: Acc (%) against M (reading mir_code, M per class)" in md
    tex = (tmp_path / "results" / "memory" / "memory.tex").read_text()
    assert r"\caption{Fig. 5: Acc (\%) against M (reading mir\_code, M per class)}" in tex
    # two readings: each named with its unit (Table II's columns are the readings)
    drawn.clear()
    res = aggregate("table2", *_two_readings(tmp_path))
    both = "readings paper_text: M in total; mir_code: M per class"
    assert all(t.title.endswith(f" ({both})") for t in res["tables"])
    assert [f._suptitle.get_text().split("\n")[0] for f in drawn] == [
        f"split-MNIST: accuracy matrix R[i, j] (%) (Table II runs; reading {r}, M {u})"
        for r, u in (("mir_code", "per class"), ("paper_text", "in total"))
    ]


def _two_readings(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "two" / "table2"
    for s in (0, 1):
        write_run(root, method="er", seed=s, reading="paper_text", extra_cfg={"memory_per_class": False})
        write_run(root, method="er", seed=s, reading="mir_code", extra_cfg={"memory_per_class": True})
    return tmp_path / "two", tmp_path / "results2"


def test_an_adhoc_memory_sweep_gets_acc_against_m_as_png_and_pdf_beside_its_heatmaps(tmp_path):
    _card(tmp_path / "multirun" / "card")
    res = aggregate("card", tmp_path / "multirun", tmp_path / "results")
    out = tmp_path / "results" / "card"
    assert sorted(p.name for p in res["figures"]) == [
        "acc_against_memory.pdf", "acc_against_memory.png", "accuracy_matrix_split_mnist_mir_code.png",
    ]  # fmt: skip
    assert all((out / p.name).is_file() for p in res["figures"])
    md = (out / "card.md").read_text()
    assert "- [acc_against_memory.png](acc_against_memory.png)" in md
    lr = tmp_path / "multirun" / "lr"  # M not swept (or swept with another condition): no such figure
    for lr_ in (0.05, 0.1):
        write_run(lr, method="er", extra_cfg={"lr": lr_}, job=f"lr={lr_}")
    assert [p.name for p in aggregate("lr", tmp_path / "multirun", tmp_path / "results")["figures"]] == []


def test_summary_csv_orders_m_as_a_number(tmp_path):
    _card(tmp_path / "multirun" / "card")  # job folders sort as strings: memory=100, memory=200, memory=50
    aggregate("card", tmp_path / "multirun", tmp_path / "results")
    s = pd.read_csv(tmp_path / "results" / "card" / "summary.csv")
    assert list(zip(s["method"], s["memory"])) == [("er", 50), ("er", 100), ("er", 200), ("mir", 50), ("mir", 100),
                                                   ("mir", 200)]  # fmt: skip


def test_figures_say_seed_in_the_singular_for_one(tmp_path, monkeypatch):
    drawn = _drawn(monkeypatch)
    _card(tmp_path / "multirun" / "memory", (50, 100))
    aggregate("memory", tmp_path / "multirun", tmp_path / "results")
    notes = {t.get_text() for f in drawn for t in f.texts if t.get_text().startswith("ours:")}
    assert notes == {"ours: 1 seed (no std)"}
    summary = summarize(load_runs(tmp_path / "multirun" / "memory")[0])
    fg.vs_condition(pd.concat([summary.assign(n=2)]), "acc", "memory", "t", tmp_path / "two")
    assert {t.get_text() for t in drawn[-1].texts if t.get_text().startswith("ours:")} == {
        "ours: mean ± 1 std over 2 seeds"
    }


def test_tables_with_fwt_say_it_cannot_rank_methods(table2_runs):
    from clsuite.core.metrics import FWT_CLASS_IL

    res = aggregate("table2", table2_runs / "multirun", table2_runs / "results")
    assert all(f"FWT: {FWT_CLASS_IL}" in t.note for t in res["tables"])  # Table II per benchmark
    _card(table2_runs / "multirun" / "card", (50, 100))
    (t,) = aggregate("card", table2_runs / "multirun", table2_runs / "results")["tables"]
    assert "FWT (% points)" in t.header and f"FWT: {FWT_CLASS_IL}" in t.note  # an ad-hoc sweep's table
    root = table2_runs / "multirun" / "memory"
    _card(root, (50, 100))
    tables = aggregate("memory", table2_runs / "multirun", table2_runs / "results")["tables"]
    assert tables and not any(FWT_CLASS_IL in t.note for t in tables)  # Acc, BWT against M: no FWT column
    tex = (table2_runs / "results" / "table2" / "table2.tex").read_text()
    assert "FWT = -(mean of b over tasks 2..T)" in tex
