"""The parity harness (scripts/parity/) without Mammoth: its suite side on synthetic data gives the
reference exactly what the suite's run trains on (split, initial weights, batches in order) and
the run's own Acc; the weights map onto Mammoth's MLP layout; Mammoth's side measures a row of R
after each task; the harness writes the parity record and prints its table, the report's
(``clsuite.analysis.parity``); the record's checks."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from clsuite.analysis import figures as fg
from clsuite.analysis import parity
from clsuite.analysis.report import main_report, number
from clsuite.core.callbacks import evaluate
from clsuite.core.learner import ContinualLearner
from clsuite.core.train import build
from clsuite.run import archive as rec
from clsuite.run.io import Unreadable
from tests.results_fixtures import fake_R, parity_record, write_run

PARITY = Path(__file__).resolve().parents[2] / "scripts" / "parity"
sys.path.insert(0, str(PARITY))

import harness  # noqa: E402
import mammoth_side  # noqa: E402
import suite_side  # noqa: E402

SMALL = ["benchmark=synthetic", "benchmark.synthetic.shape=[1,28,28]", "memory=5"]


@pytest.fixture(scope="module")
def cfg():
    return suite_side.compose("gss", "synthetic", 3, extra=SMALL[1:])


def test_the_materials_are_what_the_suites_run_trains_on(cfg, tmp_path, monkeypatch):
    mat = suite_side.materials(cfg)
    seen = []
    step = ContinualLearner.training_step

    def recording(self, batch, batch_idx):
        if not seen or seen[-1][0] != self.current_task:
            seen.append((self.current_task, []))
        seen[-1][1].append((batch[0].clone(), batch[1].clone()))
        return step(self, batch, batch_idx)

    monkeypatch.setattr(ContinualLearner, "training_step", recording)
    out = suite_side.suite_acc(cfg, tmp_path)
    assert [k for k, _ in seen] == list(range(len(mat.tasks)))
    for (_, batches), task in zip(seen, mat.tasks, strict=True):  # the same batches, in the same order
        assert len(batches) == len(task.batches) > 1
        for (x, y), (mx, my) in zip(batches, task.batches, strict=True):
            assert torch.equal(x, mx) and torch.equal(y, my)
        xs, ys = torch.cat([b[0] for b in task.batches]), torch.cat([b[1] for b in task.batches])
        assert sorted(ys.tolist()) == sorted(task.train[1].tolist()) and len(xs) == len(task.train[0])
    _, learner, _ = build(cfg)  # the same seed: the run's initial weights are the materials'
    for k, v in learner.net.state_dict().items():
        assert torch.equal(v, mat.init[k])
    dm, _, _ = build(cfg)
    assert out["b"] == pytest.approx(evaluate(learner, dm)[0])
    assert out["acc"] == pytest.approx(sum(out["R"][-1]) / len(out["R"][-1]))
    assert (mat.memory_capacity, mat.batch_size, mat.replay_size, mat.lr) == (30, 10, 10, 0.1)  # mir_code


class MammothLikeMLP(nn.Module):
    """Mammoth's BaseMNISTMLP: fc1, fc2 inside _features, classifier."""

    def __init__(self, input_size=784, output_size=6, hidden_size=400):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.classifier = nn.Linear(hidden_size, output_size)
        self._features = nn.Sequential(self.fc1, nn.ReLU(), self.fc2, nn.ReLU())
        self.net = nn.Sequential(self._features, self.classifier)

    def forward(self, x):
        return self.net(x.flatten(1))


def test_the_suites_weights_fill_mammoths_mlp_layout(cfg):
    """The same function as the suite's MLP."""
    mat = suite_side.materials(cfg)
    ref = MammothLikeMLP()
    mammoth_side.suite_weights_into(ref, mat.init)
    _, learner, _ = build(cfg)
    x = mat.tasks[0].test[0][:7]
    torch.testing.assert_close(ref(x), learner.net(x))
    assert mammoth_side.accuracy_row(ref, mat.tasks) == pytest.approx(evaluate(learner, build(cfg)[0])[0])
    with pytest.raises(ValueError, match="do not fit"):
        mammoth_side.suite_weights_into(ref, {**mat.init, "features.9.weight": torch.zeros(1)})


def test_mammoths_side_measures_a_row_of_R_after_each_task(cfg, monkeypatch):
    """Mammoth's loop on a stand-in class (one SGD step per batch): the row after task k is the
    accuracy of the model as it is then; Acc is the mean of the last row."""
    rows = []

    class OneStep(mammoth_side.ContinualModel):
        def observe(self, inputs, labels, not_aug_inputs):
            self.opt.zero_grad()
            self.loss(self.net(inputs), labels).backward()
            self.opt.step()

        def end_task(self, dataset):
            rows.append(mammoth_side.accuracy_row(self.net, mat.tasks))

    mat = suite_side.materials(cfg)
    out = mammoth_side.run({"mlp": MammothLikeMLP, "gss": OneStep}, "gss", mat, 3)
    assert out["R"] == rows and len(rows) == len(mat.tasks) and rows[0] != rows[-1]
    assert out["acc"] == pytest.approx(np.mean(rows[-1]))


def _record(**kw) -> dict:
    return parity_record({("hal", "split_fmnist"): {0: (70.0, 71.0), 1: (72.0, 70.0), 2: (71.0, 70.0)}}, **kw)


def test_the_table_of_a_parity_record():
    """``make parity``'s table and the report's: per (method, benchmark, reading), both sides' Acc, the paired
    difference with its 95% t interval, per seed, the paper's value; the note names both codes, kernels, CPU."""
    t = parity.table(_record(commit="abcdef1234567890"))
    lines = t.markdown().splitlines()
    assert (
        lines[0]
        == "### Acc (%) of the suite's classes and Mammoth's (e75a491) on the same split, initial weights and batches"
    )
    assert lines[2] == ("| method | benchmark | reading | seeds | suite Acc | Mammoth Acc | suite − Mammoth, mean [95% CI] "
                        "| per seed | paper |")  # fmt: skip
    assert (
        lines[4]
        == "| HAL | split-FMNIST | mir_code | 0-2 | 71.0 ± 1.0 | 70.3 ± 0.6 | +0.7 [-3.1, +4.5] | -1.0, +2.0, +1.0 | 68.7 |"
    )
    assert lines[-1] == ("Mammoth at e75a491; the suite's code 0123456789abcdef (commit abcdef1234); CPU kernels portable; "
                         "Test CPU @ 1.00GHz. Paired by seed; *paper*: Table II.")  # fmt: skip
    assert parity.table(_record(complete=False)).note.endswith(
        "(no git commit); CPU kernels portable; Test CPU @ 1.00GHz. Paired by seed; *paper*: Table II. Incomplete: "
        "the harness was stopped before its last seed."
    )
    changed = _record()
    changed["rows"][0]["suite_overrides"] += ["replay_loss=concat"]
    changed["provenance"]["mammoth_flipped_means"] = False
    assert parity.table(changed).note.endswith(
        "Changed from the harness's setting: the suite's side with `replay_loss=concat`; Mammoth's iCaRL without its "
        "flipped class means."
    )
    assert parity.markdown(None, "results/parity/parity.json") == [
        "Not run: `make parity MAMMOTH=<a Mammoth checkout at e75a491>` (writes `results/parity/parity.json`; "
        "`clsuite records pack --parity results/parity/parity.json` puts it in docs/records/).", ""]  # fmt: skip


def test_a_parity_record_is_checked_when_read(tmp_path):
    path = tmp_path / "parity.json"
    assert parity.read(path) is None  # none made yet: the report says how to make it
    record = _record()
    path.write_text(json.dumps(record))
    assert parity.read(path) == record
    record["rows"][0]["seeds"][1]["mammoth"]["acc"] = 75.0  # Acc forged, R left
    path.write_text(json.dumps(record))
    with pytest.raises(Unreadable, match=r"parity.json: row 1 \(hal split_fmnist mir_code\), seed 1, mammoth: acc 75.0 "
                       r"is not the mean of R's last row \(70.0\)"):  # fmt: skip
        parity.read(path)
    for edit, why in [
        (lambda r: r["rows"][0]["seeds"][0]["suite"].update(R=[[1.0, 2.0]]), "seed 0, suite: R is not a square matrix"),
        (
            lambda r: r["rows"][0]["seeds"].append(r["rows"][0]["seeds"][0]),
            r"its seeds \[0, 1, 2, 0\] are not distinct",
        ),
        (lambda r: r["rows"].append(r["rows"][0]), "row 2: hal split_fmnist mir_code is in another row too"),
        (lambda r: r["provenance"].pop("mammoth_commit"), "its provenance lacks mammoth_commit"),
        (lambda r: r.pop("rows"), r"not a parity record \(provenance, complete, rows\)"),
    ]:
        record = _record()
        edit(record)
        assert re.search(why, rec.parity_problem(record))


def test_the_harness_refuses_a_folder_that_is_not_mammoth_and_a_bad_config(tmp_path, capsys, monkeypatch):
    assert harness.main(["--mammoth", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: --mammoth {tmp_path} is not a Mammoth checkout")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "gss.py").write_text("")
    assert (
        harness.main(["--mammoth", str(tmp_path), "--out", str(tmp_path / "p.json")]) == 2
    )  # its commit names the record
    assert capsys.readouterr().err == f"error: --mammoth {tmp_path}: not a git checkout (its commit names the record)\n"
    monkeypatch.setattr(mammoth_side, "checkout_commit", lambda root: parity.PINNED)
    assert harness.main(["--mammoth", str(tmp_path), "--reading", "nope", "--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == "error: unknown reading 'nope'; valid choices: mir_code, paper_text\n"
    assert not (tmp_path / "p.json").exists()


def test_mammoths_arguments_are_the_suites_setting(cfg):
    """docs/notes/PARITY.md's arguments: buffer = the suite's M in slots, batch = |B_t|, minibatch = |R|, its lr."""
    mat = suite_side.materials(cfg)
    a = {m: vars(mammoth_side.mammoth_args(m, mat)) for m in ("gss", "hal", "icarl")}
    for args in a.values():
        assert (args["buffer_size"], args["batch_size"], args["minibatch_size"], args["lr"], args["n_epochs"]) == (
            30, 10, 10, 0.1, 1)  # fmt: skip
    assert (a["gss"]["batch_num"], a["hal"]["hal_lambda"], a["hal"]["beta"], a["hal"]["gamma"]) == (1, 0.1, 0.5, 0.1)
    assert a["icarl"]["opt_wd"] == 1e-5 and a["icarl"]["optim_wd"] == 0.0


def test_a_stopped_harness_keeps_every_finished_pair_and_prints_the_records_table(tmp_path, monkeypatch, capsys):
    (tmp_path / "mammoth" / "models").mkdir(parents=True)
    (tmp_path / "mammoth" / "models" / "gss.py").write_text("")
    monkeypatch.setattr(mammoth_side, "checkout_commit", lambda root: parity.PINNED)
    monkeypatch.setattr(mammoth_side, "load", lambda root: {})
    monkeypatch.setattr(harness, "provenance", lambda commit: {**_record()["provenance"], "mammoth_commit": commit})
    monkeypatch.setattr("clsuite.config.numerics.apply", lambda mode: None)
    monkeypatch.setattr(
        suite_side, "compose", lambda *a, **k: SimpleNamespace(trainer=SimpleNamespace(numerics="native"))
    )
    done, stop = [], [2]
    side = lambda acc: {"R": fake_R(5, acc).tolist(), "acc": acc}  # noqa: E731

    def measure(method, bench, seed, *rest):
        if len(done) == stop[0]:
            raise KeyboardInterrupt  # the user stops it during the third pair
        done.append(seed)
        return {"seed": seed, "suite": side(80.0 + seed), "mammoth": side(79.0)}, {"lr": 0.1}

    monkeypatch.setattr(harness, "measure", measure)
    out = tmp_path / "parity.json"
    args = ["--mammoth", str(tmp_path / "mammoth"), "--methods", "hal", "--seeds", "0", "1", "2", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        harness.main(args)
    saved = json.loads(out.read_text())
    assert saved["complete"] is False and [s["seed"] for s in saved["rows"][0]["seeds"]] == [0, 1]
    assert saved["rows"][0]["seeds"][1]["suite"] == side(81.0) and rec.parity_problem(saved) is None
    stop[0] = None
    capsys.readouterr()
    assert harness.main(args) == 0
    saved = json.loads(out.read_text())
    assert saved["complete"] is True and rec.parity_problem(saved) is None
    assert [(r["method"], r["benchmark"], r["settings"]) for r in saved["rows"]] == [
        ("hal", "split_mnist", {"lr": 0.1}), ("hal", "split_fmnist", {"lr": 0.1})]  # fmt: skip
    assert capsys.readouterr().out == parity.table(saved).markdown() + "\n"  # the report's table


def test_the_report_shows_the_record_make_parity_wrote_and_refuses_a_forged_one(tmp_path, capsys, monkeypatch):
    """Built from multirun/ (``make report``), the report reads results/parity/parity.json; built from records,
    docs/records/parity.json (tests/analysis/test_records.py)."""
    monkeypatch.setattr(fg, "FORMATS", ("png",))
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "multirun" / "table2", method="er", seed=0)
    record = tmp_path / "results" / "parity" / "parity.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(_record()))
    assert main_report([]) == 0
    md = (tmp_path / "results" / "report" / "REPRODUCTION.md").read_text()
    section = md[
        md.index(f"## {number('parity')}. Parity with the reference codes (Mammoth: GSS, iCaRL, HAL; MIR: ER, MIR)") :
    ]
    assert "Every R and Acc, the settings and both commits: `results/parity/parity.json`." in section
    assert "| HAL | split-FMNIST | mir_code | 0-2 | 71.0 ± 1.0 | 70.3 ± 0.6 | +0.7 [-3.1, +4.5] |" in section
    capsys.readouterr()
    forged = _record()
    forged["rows"][0]["seeds"][2]["suite"]["acc"] = 72.0
    record.write_text(json.dumps(forged))
    assert main_report([]) == 2
    assert capsys.readouterr().err == (
        f"error: {record}: row 1 (hal split_fmnist mir_code), seed 2, suite: acc 72.0 is not the mean of R's last "
        "row (71.0); the report is not built\n"
    )
