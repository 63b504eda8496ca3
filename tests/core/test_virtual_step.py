"""The virtual step (Eq. 3) and the interference scores (Eq. 4)."""

from __future__ import annotations

import copy

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from clsuite.core.callbacks import MemoryUpdate
from clsuite.core.replay.virtual import interference_scores, score_slots, virtual_params
from clsuite.core.train import build
from tests.conftest import make_cfg

RESNET = ["model=resnet18", "model.nf=4", "benchmark.synthetic.shape=[3,8,8]", "momentum=0.9"]


def trained_learner(*overrides):
    """A learner after a few real steps (so memory, optimizer state and BN stats are non-trivial)."""
    dm, learner, _ = build(make_cfg(*overrides))
    trainer = L.Trainer(
        max_epochs=1,
        limit_train_batches=4,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[MemoryUpdate()],
    )
    dm.set_task(0)
    learner.start_task(0)
    trainer.fit(learner, datamodule=dm)
    x, y, t = next(iter(dm.train_dataloader()))
    return learner, trainer, x, y, t


def snapshot(learner, trainer):
    return {
        "params": {k: v.detach().clone() for k, v in learner.net.named_parameters()},
        "buffers": {k: v.clone() for k, v in learner.net.named_buffers()},
        "opt": copy.deepcopy(learner._optimizer.state_dict()),
        "step": trainer.global_step,
        "grads": {k: None if v.grad is None else v.grad.clone() for k, v in learner.net.named_parameters()},
    }


def test_virtual_step_matches_a_copied_sgd_step_and_leaves_everything_untouched():
    learner, trainer, x, y, t = trained_learner(*RESNET)
    before = snapshot(learner, trainer)
    assert before["step"] == 4 and len(before["buffers"]) > 0 and before["opt"]["state"]  # BN + momentum present

    theta_prime = virtual_params(learner, x, y, t)
    score_slots(learner, x, y, t, torch.arange(len(learner.memory)))

    # reference: copy the network, one plain SGD step on B_t in train mode
    ref = copy.deepcopy(learner.net).train()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=learner.lr)
    F.cross_entropy(ref(x), y).backward()
    ref_opt.step()
    for k, p in ref.named_parameters():
        torch.testing.assert_close(theta_prime[k], p.detach(), rtol=1e-5, atol=1e-6)

    after = snapshot(learner, trainer)
    for k in before["params"]:
        assert torch.equal(before["params"][k], after["params"][k]), k
    for k in before["buffers"]:  # BatchNorm running mean / var / num_batches_tracked
        assert torch.equal(before["buffers"][k], after["buffers"][k]), k
    assert after["step"] == before["step"]
    for k, st in before["opt"]["state"].items():
        assert torch.equal(st["momentum_buffer"], after["opt"]["state"][k]["momentum_buffer"])
    for k in before["grads"]:
        assert (before["grads"][k] is None) == (after["grads"][k] is None)
        if before["grads"][k] is not None:
            assert torch.equal(before["grads"][k], after["grads"][k]), k


def test_scores_equal_a_direct_per_sample_computation():
    # MLP (no BatchNorm): a per-sample forward is well defined and must equal the batched score
    learner, _, x, y, t = trained_learner()
    slots = torch.arange(len(learner.memory))
    s = score_slots(learner, x, y, t, slots)
    ref = copy.deepcopy(learner.net)
    torch.optim.SGD(ref.parameters(), lr=learner.lr).zero_grad()
    F.cross_entropy(ref(x), y).backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= learner.lr * p.grad
    mx, my, _ = learner.memory.get(slots)
    with torch.no_grad():
        direct = torch.stack(
            [
                F.cross_entropy(ref(mx[i : i + 1]), my[i : i + 1])
                - F.cross_entropy(learner.net(mx[i : i + 1]), my[i : i + 1])
                for i in range(len(slots))
            ]
        )
    torch.testing.assert_close(s, direct, rtol=1e-4, atol=1e-5)
    assert torch.equal(learner.memory.score[slots], s)  # each slot keeps its latest score
    assert s.abs().sum() > 0


def test_compare_to_old_logits_scores_against_the_lower_loss_and_stores_better_logits():
    learner, _, x, y, t = trained_learner()
    mem = learner.memory
    slots = torch.arange(len(mem))
    theta_prime = virtual_params(learner, x, y, t)
    plain = interference_scores(learner, theta_prime, slots)
    mem.logits[slots] = 0.0  # stored logits: uniform, loss log(C)
    with_old = interference_scores(learner, theta_prime, slots, compare_to_old_logits=True)
    old_loss = torch.log(torch.tensor(float(mem.logits.shape[1])))
    with torch.no_grad():
        pre = F.cross_entropy(learner.net(mem.x[slots]), mem.y[slots], reduction="none")
    expected = plain + pre - torch.minimum(pre, old_loss)
    torch.testing.assert_close(with_old, expected, rtol=1e-4, atol=1e-5)
    updated = pre < old_loss
    assert updated.any()
    assert (mem.logits[slots[updated]] != 0).any(dim=1).all()
    assert (mem.logits[slots[~updated]] == 0).all()


@pytest.mark.parametrize("lr", [0.01, 0.5])
def test_virtual_step_size_is_the_learning_rate(lr):
    learner, _, x, y, t = trained_learner(f"lr={lr}")
    theta = {k: p.detach().clone() for k, p in learner.net.named_parameters()}
    tp = virtual_params(learner, x, y, t)
    learner.net.zero_grad()
    F.cross_entropy(learner.net(x), y).backward()
    for k, p in learner.net.named_parameters():
        torch.testing.assert_close(tp[k], theta[k] - lr * p.grad, rtol=1e-5, atol=1e-6)


def test_score_slots_passes_compare_to_old_logits_through():
    """score_slots(compare_to_old_logits=True) is interference_scores(..., True), not the plain score:
    stored logits that fit every sample (loss ~ 0) replace the current loss in s(m)."""
    learner, _, x, y, t = trained_learner()
    mem = learner.memory
    slots = torch.arange(len(mem))

    def confident():
        mem.logits[slots] = 20.0 * F.one_hot(mem.y[slots], mem.logits.shape[1]).float()

    confident()
    plain = score_slots(learner, x, y, t, slots)
    assert torch.equal(mem.score[slots], plain)
    with_old = score_slots(learner, x, y, t, slots, compare_to_old_logits=True)
    confident()
    expected = interference_scores(learner, virtual_params(learner, x, y, t), slots, compare_to_old_logits=True)
    torch.testing.assert_close(with_old, expected, rtol=1e-4, atol=1e-5)
    assert (with_old - plain).abs().min() > 0.1  # every slot scored against the stored (lower) loss
    assert torch.equal(mem.score[slots], with_old)
