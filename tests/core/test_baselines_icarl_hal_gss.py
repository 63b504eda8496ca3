"""iCaRL, HAL and GSS: behaviour on toy data, then whole runs on the synthetic stream."""

from __future__ import annotations

from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from clsuite.core.callbacks import MemoryUpdate
from clsuite.core.learner import ContinualLearner
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.class_ring import ClassRingBuffer
from clsuite.core.memory.gss_greedy import GSSGreedy
from clsuite.core.memory.herding import HerdingMemory, herding
from clsuite.core.memory.reservoir import Reservoir
from clsuite.core.methods.icarl import ICaRL
from clsuite.core.models.nets import MLP
from clsuite.core.train import build
from clsuite.run.experiment import make_trainer
from tests.conftest import make_cfg, run_cfg


class IdentityFeatures(nn.Module):
    """phi(x) = x; the head prefers the last class whatever the input."""

    def __init__(self, dim: int, num_classes: int):
        super().__init__()
        self.head = nn.Linear(dim, num_classes)
        nn.init.zeros_(self.head.weight)
        with torch.no_grad():
            self.head.bias.copy_(torch.arange(num_classes, dtype=torch.float))

    def forward(self, x, return_features=False):
        return (self.head(x), x) if return_features else self.head(x)


def clusters(n_per_class: int, centres: torch.Tensor, noise: float = 0.05, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(len(centres)).repeat_interleave(n_per_class)
    return centres[y] + noise * torch.randn(len(y), centres.shape[1], generator=g), y


# -- iCaRL ---------------------------------------------------------------------
def test_icarl_nearest_mean_classifies_clusters():
    centres = torch.eye(3) * 2 + 0.2  # three directions (features are L2-normalised)
    net = IdentityFeatures(3, num_classes=4)  # class 3: no exemplars
    memory = Memory(30, (3,), 4)
    mx, my = clusters(10, centres, seed=0)
    memory.append(mx, my, torch.zeros_like(my))
    learner = ContinualLearner(net, memory=memory)
    x, y = clusters(50, centres, seed=1)
    scores = ICaRL().predict(learner, x, torch.zeros_like(y))
    assert (net(x).argmax(1) == 3).all()  # the head alone is always wrong
    assert (scores.argmax(1) == y).all()
    assert torch.isneginf(scores[:, 3]).all()  # no exemplars, never predicted
    # classifier=head (the paper's hybrid1): the learner's own masked head, the exemplars unused
    for classifier, expected in (("head", torch.full_like(y, 3)), (None, y)):
        learner.plugin = ICaRL(classifier=classifier)
        assert (learner.predict(x, torch.zeros_like(y)).argmax(1) == expected).all()


def test_icarl_loss_distils_the_old_classes_from_the_net_frozen_at_the_task_end():
    """Task 2's loss: BCE averaged over all outputs and samples (the original code and Mammoth),
    targets one-hot for the new classes and sigmoid(old net) for the old ones (iCaRL Alg. 3); the
    old net is a frozen copy, so training on after on_task_end leaves its targets where they were."""
    torch.manual_seed(0)
    tc = torch.tensor([[0, 1], [2, 3]])
    learner = ContinualLearner(MLP((3,), 4, hidden=8), memory=Memory(0, (3,), 4), task_classes=tc)
    plugin = ICaRL()
    plugin.on_task_end(learner, 0, None)  # freeze the net after task 1
    old_out = learner.net(torch.ones(1, 3)).detach()
    with torch.no_grad():
        for p in learner.net.parameters():
            p.add_(0.3)  # the net moves on; the frozen copy must not
    learner.current_task = 1
    x, y = torch.randn(5, 3), torch.tensor([2, 3, 2, 3, 2])
    out = learner.net(x)
    target = F.one_hot(y, 4).float()
    target[:, :2] = torch.sigmoid(plugin.old_net(x))[:, :2]
    expected = F.binary_cross_entropy_with_logits(out, target, reduction="none").sum() / (5 * 4)
    torch.testing.assert_close(plugin.loss(learner, x, y, torch.ones_like(y), None), expected)
    torch.testing.assert_close(plugin.old_net(torch.ones(1, 3)), old_out)  # frozen at the task end
    assert not any(p.requires_grad for p in plugin.old_net.parameters())
    no_distil = F.binary_cross_entropy_with_logits(out, F.one_hot(y, 4).float(), reduction="none").sum() / 20
    assert abs(float((expected - no_distil).detach())) > 0.02  # the test can tell distillation from none


def test_icarl_rejects_domain_il():
    learner = ContinualLearner(MLP((3,), 4, hidden=8), memory=Memory(0, (3,), 4), scenario="domain_il")
    with pytest.raises(ValueError, match="iCaRL needs one output per class"):
        ICaRL().setup(learner)


def test_icarl_herding_selects_a_representative_balanced_memory():
    g = torch.Generator().manual_seed(0)
    phi = torch.nn.functional.normalize(torch.rand(200, 8, generator=g) + torch.randn(200, 8, generator=g) * 0.3, dim=1)
    sel = herding(phi, 10)
    assert len(sel.unique()) == 10
    err = (phi[sel].mean(0) - phi.mean(0)).norm()
    rand = [phi[torch.randperm(200, generator=g)[:10]] for _ in range(50)]
    rand_err = torch.stack([(r.mean(0) - phi.mean(0)).norm() for r in rand])
    assert err < rand_err.min()  # herding beats every random subset of the same size

    # Alg. 5 + 4 at the task end: old classes cut to their first m, new classes herded to m each
    centres = torch.eye(4) + 0.1
    memory = Memory(8, (4,), 4)
    ox, oy = clusters(4, centres[:2], seed=2)
    memory.append(ox, oy, torch.zeros_like(oy))
    policy = HerdingMemory()
    learner = SimpleNamespace(net=IdentityFeatures(4, 4), memory=memory)
    nx, ny = clusters(30, centres[2:], seed=3)
    ny = ny + 2
    for i in range(0, 60, 20):
        policy.update(memory, nx[i : i + 20], ny[i : i + 20], torch.ones(20, dtype=torch.long), learner)
    assert memory.class_counts().tolist() == [4, 4, 0, 0]  # herding waits for the task to end
    policy.on_task_end(memory, learner)
    assert memory.class_counts().tolist() == [2, 2, 2, 2]
    kept_old = memory.x[: memory.size][memory.y[: memory.size] == 0]
    assert torch.equal(kept_old, ox[oy == 0][:2])  # first m in herding order


# -- GSS -----------------------------------------------------------------------
def test_gss_keeps_gradient_diverse_samples_over_near_duplicates():
    # 400 near-duplicates of one class-0 sample; 5 rare classes appear 3 times each, in 3 batches of
    # 5 (one sample of each rare class): the gate is the batch's (GSS_Greedy.py, Mammoth), so a rare
    # sample alone among 4 duplicates is not let in (test_references: the gate is the batch's)
    torch.manual_seed(0)
    learner = ContinualLearner(MLP((8,), num_classes=6, hidden=16, depth=1), memory=Memory(10, (8,), 6))
    g = torch.Generator().manual_seed(0)
    base, protos = torch.rand(8, generator=g), torch.rand(5, 8, generator=g) * 2
    n = 400
    x = base + 0.01 * torch.randn(n, 8, generator=g)
    y = torch.zeros(n, dtype=torch.long)
    rare = (4 + torch.randperm((n - 20) // 5 - 4, generator=g)[:3, None]) * 5 + torch.arange(5)  # memory full
    rare = rare.flatten()
    y[rare] = torch.arange(1, 6).repeat(3)
    x[rare] = protos[y[rare] - 1] + 0.05 * torch.randn(15, 8, generator=g)
    t = torch.zeros_like(y)

    def rare_classes_kept(policy, seed):
        torch.manual_seed(seed)
        memory = Memory(10, (8,), 6)
        for i in range(0, n, 5):
            policy.update(memory, x[i : i + 5], y[i : i + 5], t[i : i + 5], learner)
        assert memory.size == 10 and memory.seen == n
        return len(set(memory.y.tolist()) - {0})

    gss = [rare_classes_kept(GSSGreedy(n_mem_grads=10, mem_batch=1), s) for s in range(3)]
    reservoir = [rare_classes_kept(Reservoir(), s) for s in range(3)]
    assert min(gss) >= 3  # the gradient-diverse samples survive 380 near-duplicates ...
    assert max(reservoir) < 3 and sum(reservoir) < sum(gss) / 2  # ... reservoir keeps each with p = 10 / 400


# -- HAL -----------------------------------------------------------------------
def test_hal_ring_buffer_keeps_the_last_samples_of_each_class():
    memory = Memory(4, (1,), 2)
    policy = ClassRingBuffer()
    x = torch.arange(10, dtype=torch.float).unsqueeze(1)
    y = torch.tensor([0, 1, 0, 1, 0, 0, 0, 1, 1, 1])
    for i in range(0, 10, 3):
        policy.update(memory, x[i : i + 3], y[i : i + 3], torch.zeros(len(y[i : i + 3]), dtype=torch.long))
    held = {c: sorted(memory.x[: memory.size][memory.y[: memory.size] == c].flatten().tolist()) for c in (0, 1)}
    assert held == {0: [5.0, 6.0], 1: [8.0, 9.0]}
    assert memory.seen == 10


class AnchorLog(L.Callback):
    def __init__(self):
        self.seen = []  # (task, anchors) after every training batch

    def on_train_batch_end(self, trainer, learner, outputs, batch, batch_idx):
        self.seen.append((learner.current_task, learner.plugin.anchors.clone()))


def test_hal_anchors_are_learned_at_task_end_and_fixed_within_a_task():
    cfg = make_cfg("method=hal", "method.plugin.anchor_steps=20", "method.plugin.finetune_steps=10")
    dm, learner, device = build(cfg)
    log = AnchorLog()
    trainer = make_trainer(cfg, device, [MemoryUpdate(), log], None)
    after_task = []
    for task in range(dm.n_tasks):
        dm.set_task(task)
        learner.start_task(task)
        trainer.fit_loop.max_epochs = task + 1
        trainer.fit(learner, datamodule=dm)  # the task-end hook runs inside fit (on_train_end)
        after_task.append(learner.plugin.anchors.clone())
        assert not learner.plugin.phi_seen.any()  # phi_y restarts at each task end (Mammoth)
    cpt = dm.classes_per_task
    for task in range(dm.n_tasks):
        within = [a for k, a in log.seen if k == task]
        assert len(within) > 1 and all(torch.equal(a, within[0]) for a in within)  # fixed during the task
        assert len(within[0]) == task * cpt  # one anchor per class of each finished task
        assert len(after_task[task]) == (task + 1) * cpt  # the task end adds its anchors ...
        assert torch.equal(after_task[task][: task * cpt], within[0])  # ... and leaves the old ones alone
    assert torch.equal(learner.plugin.anchor_y, dm.task_classes.flatten())
    mx, my = learner.memory.x[: learner.memory.size], learner.memory.y[: learner.memory.size]
    init = torch.stack([mx[my == c].mean(0) for c in dm.task_classes[0]])  # the ring buffer still holds them
    new = after_task[0]
    assert new.isfinite().all() and not torch.allclose(new, init)  # optimised away from their init


# -- whole runs -------------------------------------------------------------------
@pytest.mark.parametrize("method", ["icarl", "icarl_reservoir", "hal", "gss"])
def test_trains_synthetic_tasks_end_to_end(tmp_path, method):
    over = ["method=icarl", "update@method.update=reservoir"] if method == "icarl_reservoir" else [f"method={method}"]
    res = run_cfg(tmp_path, *over, "benchmark.iters_per_batch=3")
    R = np.asarray(res["R"])
    assert all(R[k, k] > 60 for k in range(len(R)))  # each task is learned ...
    assert res["metrics"]["acc"] > 60  # ... and old tasks are kept (online fine-tuning: 33)
    assert all(s > 0 for s in res["steps_per_task"])


@pytest.mark.parametrize("cosines", ["exact", "gram"])
def test_gss_a_gradient_diverse_sample_in_a_redundant_batch_stays_out(cosines):
    """The gate is the batch's (GSS_Greedy.py ``if (batch_sim) < self.sim_th``, Mammoth gss_buffer.py
    l.65): a rare sample (c = 0.856 < 1) among 4 duplicates of the memory (c_B = 1.97) replaces
    nothing, on both cosine paths; alone (c_B = c) it gets in (p = 1.5 / (1.5 + 0.856) per draw)."""
    torch.manual_seed(0)
    learner = ContinualLearner(MLP((8,), num_classes=6, hidden=16, depth=1), memory=Memory(10, (8,), 6))
    g = torch.Generator().manual_seed(0)
    base, proto = torch.rand(8, generator=g), torch.rand(8, generator=g) * 2
    mx = base + 0.01 * torch.randn(10, 8, generator=g)
    x = torch.cat([base + 0.01 * torch.randn(4, 8, generator=g), proto[None]])
    y, t = torch.tensor([0, 0, 0, 0, 3]), torch.zeros(5, dtype=torch.long)
    policy = GSSGreedy(cosines=cosines)

    def after(seed, rows):
        mem = Memory(10, (8,), 6)
        mem.append(mx, torch.zeros(10, dtype=torch.long), torch.zeros(10, dtype=torch.long))
        mem.score[:10] = 1.5
        torch.manual_seed(seed)
        c, c_B = policy.scores(learner, mem, x[rows], y[rows], t[rows])
        torch.manual_seed(seed)
        policy.update(mem, x[rows], y[rows], t[rows], learner)
        return c, c_B, mem

    c, c_B, _ = after(0, slice(None))
    assert float(c[4]) == pytest.approx(0.856, abs=1e-3) and float(c_B) == pytest.approx(1.966, abs=1e-3)
    assert all(int(after(s, slice(None))[2].y.max()) == 0 for s in range(20))  # the batch is redundant
    assert sum(int(after(s, slice(4, 5))[2].y.max()) == 3 for s in range(20)) >= 8  # alone it enters


def test_gss_candidates_of_one_batch_replace_distinct_slots(monkeypatch):
    """Alg. 2 line 10 draws the slots to challenge without replacement: with c = 0 for both
    candidates (cosine -1, always accepted) they take both slots even though slot 0's score C
    dominates; drawn with replacement, both would land in slot 0 and the first would be lost."""
    mem = Memory(2, (1,), 10)
    mem.append(torch.tensor([[1.0], [2.0]]), torch.tensor([0, 1]), torch.zeros(2, dtype=torch.long))
    mem.score[:2] = torch.tensor([1.0, 1e-6])
    mem.seen = 2
    policy = GSSGreedy()
    monkeypatch.setattr(policy, "scores", lambda *a: (torch.zeros(2), torch.tensor(0.0)))
    torch.manual_seed(0)
    policy.update(
        mem, torch.tensor([[7.0], [8.0]]), torch.tensor([2, 3]), torch.ones(2, dtype=torch.long), learner=object()
    )
    assert sorted(mem.x[:, 0].tolist()) == [7.0, 8.0]
    assert sorted(mem.y.tolist()) == [2, 3] and mem.seen == 4
