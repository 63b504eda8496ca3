"""Scenarios: task-IL masks the head to the task's classes, domain-IL shares a small head,
and `eval_mask=seen` restricts class-IL predictions to classes seen so far."""

from __future__ import annotations

import numpy as np
import torch

from clsuite.core.train import build
from tests.conftest import make_cfg, run_cfg


def test_task_il_logits_are_masked_to_each_samples_task():
    _, learner, _ = build(make_cfg("scenario=task_il"))
    x = torch.rand(4, 1, 8, 8)
    t = torch.tensor([0, 1, 2, 1])
    out = learner.logits(x, t)
    for i, k in enumerate(t.tolist()):
        allowed = set(learner.task_classes[k].tolist())
        finite = set(torch.isfinite(out[i]).nonzero().flatten().tolist())
        assert finite == allowed
        assert set(learner.logit_mask(t)[i].nonzero().flatten().tolist()) == allowed  # the public mask
    for scenario in ("class_il", "domain_il"):  # the whole head
        _, other, _ = build(make_cfg(f"scenario={scenario}"))
        assert other.logit_mask(t).all() and other.logit_mask(t).shape == (4, other.net.head.out_features)


def test_task_il_forgets_less_than_class_il_for_online(tmp_path):
    cil = np.asarray(run_cfg(tmp_path / "c", "method=online")["R"])
    res = run_cfg(tmp_path / "t", "method=online", "scenario=task_il")
    til = np.asarray(res["R"])
    assert res["R_task_il"] == res["R"]  # the scenario's scores are masked to the task already
    assert cil[-1, 0] < 10  # class-IL fine-tuning: task 0 is gone
    assert til[-1, 0] > 60  # task-IL: the task's own two logits still separate its classes


def test_domain_il_head_has_classes_per_task_outputs(tmp_path):
    res = run_cfg(tmp_path, "scenario=domain_il", "method=er")
    assert build(make_cfg("scenario=domain_il"))[1].net.head.out_features == 2
    assert np.asarray(res["R"])[-1].mean() > 55  # above the 50% chance of a 2-way head


def test_eval_mask_seen_never_predicts_unseen_classes():
    _, learner, _ = build(make_cfg("eval_mask=seen"))
    learner.seen_tasks = 1
    with torch.no_grad():
        learner.net.head.bias[2:] += 100.0  # unseen classes would win the argmax
    pred = learner.predict(torch.rand(16, 1, 8, 8), torch.zeros(16, dtype=torch.long)).argmax(1)
    assert set(pred.tolist()) <= {0, 1}
