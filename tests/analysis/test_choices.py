"""The paper's open choices, measured (clsuite.analysis.choices), on hand-made results files
(tests/results_fixtures.py): each value against the reading's default, paired by seed, with exact
expected differences; the report's section; the make target (dry run)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from clsuite import paper
from clsuite.analysis import choices as ch
from clsuite.analysis.load import load_experiment
from clsuite.analysis.report import build_report, number
from clsuite.config.home import hint
from tests.results_fixtures import fake_R, write_run

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (0, 1, 2, 3)
DEFAULT_ACC = (80.0, 82.0, 84.0, 86.0)


def put(root: Path, method: str, key: str, value, accs, reading="mir_code", bench="split_mnist", extra=None) -> None:
    """One run per seed with the choice ``key`` at ``value`` and Acc = accs[seed] (Forget = 90 - Acc)."""
    policy = {"method.update.victim": "update", "method.update.unscored": "update", "method.replay.R_t_from": "replay"}
    if key in policy:
        cfg = {"method": {"name": method, policy[key]: {key.split(".")[-1]: value}}}
    else:  # a top-level (reading) key, interpolated into the replay policy as the suite's configs do
        cfg = {key: value, "method": {"name": method, "replay": {key: value}}}
    cfg.update(extra or {})
    for s, acc in zip(SEEDS, accs, strict=True):
        job = f"benchmark={bench},method={method},{key}={ch.show(value)},reading={reading},seed={s}"
        write_run(root, bench, method, s, R=fake_R(5, acc), reading=reading, extra_cfg=cfg, job=job + str(extra or ""))


def t_interval(d):
    d = np.asarray(d, dtype=float)
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean(), d.mean() - half, d.mean() + half


def rows_of(tmp_path, name):
    return ch.choice_rows(ch.BY_EXPERIMENT[f"choices_{name}"], load_experiment(tmp_path / f"choices_{name}"))


def test_victim_random_against_lowest_score(tmp_path):
    root = tmp_path / "choices_victim"
    put(root, "adaer", "method.update.victim", "lowest_score", DEFAULT_ACC)
    put(root, "adaer", "method.update.victim", "random", (81.0, 85.0, 84.5, 90.0))
    (row,) = rows_of(tmp_path, "victim")
    assert (row.value, row.default, row.method, row.reading, row.n) == (
        "random",
        "lowest_score",
        "adaer",
        "mir_code",
        4,
    )
    mean, lo, hi = t_interval([1.0, 3.0, 0.5, 4.0])
    assert mean == 2.125
    acc = row.diffs["acc"]
    assert (acc.mean, acc.low, acc.high) == pytest.approx((mean, lo, hi))
    forget = row.diffs["forget"]  # Forget = 90 - Acc here: the opposite difference
    assert (forget.mean, forget.low, forget.high) == pytest.approx((-mean, -hi, -lo))
    assert row.default_acc == pytest.approx(83.0)


def test_unscored_values_each_against_0_only_on_common_seeds(tmp_path):
    root = tmp_path / "choices_unscored"
    put(root, "ebrs", "method.update.unscored", 0, DEFAULT_ACC)
    put(root, "ebrs", "method.update.unscored", math.inf, (70.0, 72.0, 75.0, 76.0))  # `unscored=inf`: a float
    put(root, "ebrs", "method.update.unscored", "insertion", (80.0, 82.0, 84.0, 86.0))
    (
        root
        / "benchmark=split_mnist,method=ebrs,method.update.unscored=insertion,reading=mir_code,seed=3"
        / "results.json"
    ).unlink()
    rows = {r.value: r for r in rows_of(tmp_path, "unscored")}
    assert set(rows) == {"inf", "insertion"} and rows["inf"].default == "0"
    assert rows["inf"].diffs["acc"].mean == pytest.approx(-9.75) and rows["inf"].n == 4
    ins = rows["insertion"].diffs["acc"]
    assert (ins.n, ins.mean, ins.sd, ins.low, ins.high) == (3, 0.0, 0.0, 0.0, 0.0)  # identical on seeds 0-2


@pytest.mark.parametrize(
    "reading, default, other, d", [("mir_code", "50", None, -2.0), ("paper_text", "null", 50, 2.0)]
)
def test_candidates_default_is_the_readings(tmp_path, reading, default, other, d):
    root = tmp_path / "choices_candidates"
    base = 50 if default == "50" else None
    put(root, "ccmr", "candidates", base, DEFAULT_ACC, reading=reading)
    put(root, "ccmr", "candidates", other, tuple(a + d for a in DEFAULT_ACC), reading=reading)
    (row,) = rows_of(tmp_path, "candidates")
    assert (row.default, row.value) == (default, ch.show(other))
    assert row.diffs["acc"].mean == pytest.approx(d) and row.diffs["forget"].mean == pytest.approx(-d)


def test_runs_that_differ_in_more_than_the_choice_are_not_paired(tmp_path):
    """A random-victim run at another batch size has no default of its own: no row, never paired
    with the default runs of batch size 10."""
    root = tmp_path / "choices_victim"
    put(root, "adaer", "method.update.victim", "lowest_score", DEFAULT_ACC, extra={"batch_size": 10})
    put(root, "adaer", "method.update.victim", "random", (60.0,) * 4, extra={"batch_size": 20})
    assert rows_of(tmp_path, "victim") == []
    put(root, "adaer", "method.update.victim", "random", (81.0, 83.0, 85.0, 87.0), extra={"batch_size": 10})
    (row,) = rows_of(tmp_path, "victim")
    assert row.diffs["acc"].mean == pytest.approx(1.0) and row.n == 4


@pytest.mark.parametrize("benchmark, mir_logits", [("split_mnist", "true"), ("split_cifar10_jpeg", "false")])
def test_defaults_come_from_the_configs(benchmark, mir_logits):
    """Each reading's value on the benchmark, its family's where they differ (mir_code: MIR's split-MNIST
    script line on MNIST, its CIFAR-10 line on CIFAR)."""
    got = {
        c.name: {r: ch.show(c.default(r, benchmark, "adaer")) for r in ("paper_text", "mir_code")} for c in ch.CHOICES
    }
    assert got == {
        "unscored": {"paper_text": "0", "mir_code": "0"},
        "victim": {"paper_text": "lowest_score", "mir_code": "lowest_score"},
        "R_t_from": {"paper_text": "candidates", "mir_code": "candidates"},
        "candidates": {"paper_text": "null", "mir_code": "50"},
        "replay_loss": {"paper_text": "concat", "mir_code": "split"},
        "stored_logits": {"paper_text": "false", "mir_code": mir_logits},
        "logits_on_overwrite": {"paper_text": "reset", "mir_code": "reset"},
    }
    assert ch.BY_EXPERIMENT["choices_stored_logits"].default("unlabelled", benchmark, "adaer") is ch.NO_DEFAULT


def test_every_choice_has_its_sweep():
    from omegaconf import OmegaConf

    for c in ch.CHOICES:
        sweep = OmegaConf.load(ROOT / "sweeps" / f"{c.experiment}.yaml")
        assert sweep.experiment == c.experiment
        params = sweep.hydra.sweeper.params
        assert c.key in params and str(params.benchmark) == "split_mnist,split_fmnist"
        assert str(params.seed) == "range(0,10)"


def test_report_section_and_script(tmp_path, monkeypatch, capsys):
    from clsuite.analysis import figures as fg

    monkeypatch.setattr(fg, "FORMATS", ("png",))
    multirun = tmp_path / "multirun"
    put(multirun / "choices_victim", "adaer", "method.update.victim", "lowest_score", DEFAULT_ACC)
    put(multirun / "choices_victim", "adaer", "method.update.victim", "random", (81.0, 85.0, 84.5, 90.0))
    res = build_report(multirun, tmp_path / "results")
    md = res["written"].read_text()
    section = md[
        md.index(f"## {number('choices')}. The paper's open choices") : md.index(f"## {number('numerics')}. Numerics")
    ]
    assert "| victim | mir_code | random (lowest_score) | split-MNIST | AdaER | 4 | 83.0 | +2.1 [" in section
    assert "- **victim** (`method.update.victim`)" in section and "Alg. 2 line 8" in section
    assert "- **unscored**" in section and f"(not run: `{hint('paper', 'choices', '--launcher', 'joblib')}`)" in section
    assert (
        "choices_victim"
        not in md[md.index(f"## {number('others')}. Other experiments") : md.index(f"## {number('runs')}. Runs")]
    )
    assert ch.main(["--multirun-dir", str(multirun), "--out", str(tmp_path / "out")]) == 0
    assert "random (lowest_score)" in (tmp_path / "out" / "choices.md").read_text()
    assert ch.main(["--multirun-dir", str(tmp_path / "none")]) == 2


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize(
    "args, seeds, reading",
    [
        ((), 10, "mir_code"),
        (("SEEDS=3", "READING=paper_text"), 3, "paper_text"),
        (("EXPERIMENT=mine",), 10, "mir_code"),
    ],
)
def test_make_fig_choices_dry_run(args, seeds, reading):
    from tests.lab.test_makefile import verb_args

    steps = paper.plan(verb_args("fig-choices", *args))
    sweeps = [cmd for kind, cmd in steps if kind == "sweep"]
    assert [cmd[cmd.index("--config-name") + 1] for cmd in sweeps] == [c.experiment for c in ch.CHOICES]
    assert "choices_logits_on_overwrite" in [c.experiment for c in ch.CHOICES]
    for cmd in sweeps:
        assert f"seed=range(0,{seeds})" in cmd and f"reading={reading}" in cmd
        assert not any(a.startswith("experiment=") for a in cmd)  # each choice keeps its folder
    assert steps[-2:] == [("aggregate", [c.experiment for c in ch.CHOICES]), ("choices", [])]


def test_paper_choices_with_an_option_first_runs_the_choices_loop(monkeypatch):
    # `clsuite paper --seeds 2 choices`: the target is not argv[0]; each choice's sweep, then one aggregation
    calls = []
    monkeypatch.setattr(paper, "_sweep", lambda cmd: calls.append(("sweep", cmd[cmd.index("--config-name") + 1])) or 0)
    monkeypatch.setattr("clsuite.analysis.report.main_aggregate", lambda argv: calls.append(("aggregate", argv)) or 0)
    monkeypatch.setattr(ch, "main", lambda argv: calls.append(("choices", argv)) or 0)
    monkeypatch.setattr(paper, "missing_data", lambda steps: None)  # the data check: test_makefile's
    assert paper.main(["--seeds", "2", "choices"]) == 0
    names = [c.experiment for c in ch.CHOICES]
    assert calls == [*(("sweep", n) for n in names), ("aggregate", names), ("choices", [])]
