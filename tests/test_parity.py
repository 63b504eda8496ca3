"""The parity harness (scripts/parity/) without Mammoth: its suite side on synthetic data gives the
reference exactly what the suite's run trains on (split, initial weights, batches in order) and
the run's own Acc; the weights map onto Mammoth's MLP layout; the table is docs/PARITY.md's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from clsuite.callbacks import evaluate
from clsuite.experiment import build
from clsuite.learner import ContinualLearner

PARITY = Path(__file__).resolve().parents[1] / "scripts" / "parity"
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


def test_the_suites_weights_fill_mammoths_mlp_layout(cfg):
    """Mammoth's BaseMNISTMLP: fc1, fc2 inside _features, classifier; the same function as the suite's MLP."""

    class MammothLikeMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.classifier = nn.Linear(784, 400), nn.Linear(400, 400), nn.Linear(400, 6)
            self._features = nn.Sequential(self.fc1, nn.ReLU(), self.fc2, nn.ReLU())
            self.net = nn.Sequential(self._features, self.classifier)

        def forward(self, x):
            return self.net(x.flatten(1))

    mat = suite_side.materials(cfg)
    ref = MammothLikeMLP()
    mammoth_side.suite_weights_into(ref, mat.init)
    _, learner, _ = build(cfg)
    x = mat.tasks[0].test[0][:7]
    torch.testing.assert_close(ref(x), learner.net(x))
    assert mammoth_side.accuracy_row(ref, mat.tasks) == pytest.approx(evaluate(learner, build(cfg)[0])[0])
    with pytest.raises(ValueError, match="do not fit"):
        mammoth_side.suite_weights_into(ref, {**mat.init, "features.9.weight": torch.zeros(1)})


def test_the_table_is_parity_mds():
    rows = [{"method": "hal", "benchmark": "split_fmnist", "suite": {0: 70.0, 1: 72.0, 2: 71.0},
             "mammoth": {0: 71.0, 1: 70.0, 2: 70.0}}]  # fmt: skip
    lines = harness.table(rows).splitlines()
    assert lines[0].startswith("| method | benchmark | suite Acc | Mammoth Acc | suite - Mammoth, mean [95% CI] |")
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[:4] == ["hal", "split_fmnist", "71.0 +- 1.0 (n=3)", "70.3 +- 0.6 (n=3)"]
    assert cells[4].startswith("+0.7 [") and cells[4].endswith("(n=3)")
    assert cells[5:] == ["-1.0, +2.0, +1.0", "68.7"]  # per seed; the paper's Table II


def test_the_harness_refuses_a_folder_that_is_not_mammoth(tmp_path, capsys):
    assert harness.main(["--mammoth", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: --mammoth {tmp_path} is not a Mammoth checkout")


def test_mammoths_arguments_are_the_suites_setting(cfg):
    """docs/PARITY.md's arguments: buffer = the suite's M in slots, batch = |B_t|, minibatch = |R|, its lr."""
    mat = suite_side.materials(cfg)
    a = {m: vars(mammoth_side.mammoth_args(m, mat)) for m in ("gss", "hal", "icarl")}
    for args in a.values():
        assert (args["buffer_size"], args["batch_size"], args["minibatch_size"], args["lr"], args["n_epochs"]) == (
            30, 10, 10, 0.1, 1)  # fmt: skip
    assert (a["gss"]["batch_num"], a["hal"]["hal_lambda"], a["hal"]["beta"], a["hal"]["gamma"]) == (1, 0.1, 0.5, 0.1)
    assert a["icarl"]["opt_wd"] == 1e-5 and a["icarl"]["optim_wd"] == 0.0


def test_a_stopped_harness_keeps_every_finished_pair(tmp_path, monkeypatch):
    (tmp_path / "mammoth" / "models").mkdir(parents=True)
    (tmp_path / "mammoth" / "models" / "gss.py").write_text("")
    monkeypatch.setattr(mammoth_side, "checkout_commit", lambda root: mammoth_side.PINNED)
    monkeypatch.setattr(mammoth_side, "load", lambda root: {})
    monkeypatch.setattr(harness, "provenance", lambda root: {"mammoth_commit": mammoth_side.PINNED})
    monkeypatch.setattr("clsuite.numerics.apply", lambda mode: None)
    monkeypatch.setattr(
        suite_side, "compose", lambda *a, **k: SimpleNamespace(trainer=SimpleNamespace(numerics="native"))
    )
    done = []

    def measure(method, bench, seed, *rest):
        if len(done) == 2:
            raise KeyboardInterrupt  # the user stops it during the third pair
        done.append(seed)
        return 80.0 + seed, 79.0

    monkeypatch.setattr(harness, "measure", measure)
    out = tmp_path / "parity.json"
    args = ["--mammoth", str(tmp_path / "mammoth"), "--methods", "hal", "--seeds", "0", "1", "2", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        harness.main(args)
    saved = json.loads(out.read_text())
    assert saved["complete"] is False and saved["rows"][0]["suite"] == {"0": 80.0, "1": 81.0}
    done.clear()
    monkeypatch.setattr(harness, "measure", lambda *a: (80.0, 79.0))
    assert harness.main(args) == 0 and json.loads(out.read_text())["complete"] is True
