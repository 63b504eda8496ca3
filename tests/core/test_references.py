"""Each method's core step against an independent slow reference (issue 11, item 2).

The references are written for reading, not speed: Python loops over samples, slots and
candidates, deep-copied networks stepped by hand, autograd on a hand-written loss. Where a
method draws random numbers, the reference either removes the randomness (a pool no larger than
the draw) or replays the same generator, so every comparison is exact.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.ebrs import EBRS
from clsuite.core.memory.gss_greedy import GSSGreedy
from clsuite.core.memory.herding import herding
from clsuite.core.memory.reservoir import Reservoir
from clsuite.core.methods.hal import HAL
from clsuite.core.methods.icarl import ICaRL
from clsuite.core.replay import ccmr
from clsuite.core.replay.ccmr import CCMRReplay, largest_remainder
from clsuite.core.replay.mir import MIRReplay
from tests.core.test_options import (
    TASK_CLASSES,
    D,
    assert_params,
    attach_sgd,
    toy_batch,
    toy_learner,
    toy_memory,
    toy_net,
)


# -- MIR: the top-|R| of the candidates by the interference score ------------------------------
def masked_ce(net, x, y, t, task_il):
    """Mean CE, sample by sample; under task-IL over the sample's task's classes only."""
    losses = []
    for i in range(len(y)):
        z = net(x[i : i + 1])[0]
        cls = TASK_CLASSES[int(t[i])].tolist() if task_il else list(range(len(z)))
        losses.append(torch.logsumexp(z[cls], 0) - z[int(y[i])])
    return torch.stack(losses).mean()


def reference_scores(net, lr, x, y, t, mx, my, mt, task_il=False):
    """s(m) = l(theta'; m) - l(theta; m), theta' one SGD step on B_t (deep copy), slot by slot."""
    moved = copy.deepcopy(net)
    moved.zero_grad()
    masked_ce(moved, x, y, t, task_il).backward()
    with torch.no_grad():
        for p in moved.parameters():
            p -= lr * p.grad
        return [
            float(
                masked_ce(moved, mx[i : i + 1], my[i : i + 1], mt[i : i + 1], task_il)
                - masked_ce(net, mx[i : i + 1], my[i : i + 1], mt[i : i + 1], task_il)
            )
            for i in range(len(my))
        ]


@pytest.mark.parametrize("scenario", ["class_il", "task_il"])
@pytest.mark.parametrize("seed", range(3))
def test_mir_replays_the_most_interfered_candidates(seed, scenario):
    mem = toy_memory([0, 0, 0, 0, 1, 1, 1, 1, 2, 2], seed=seed)
    learner = toy_learner(net=toy_net(seed), memory=mem, lr=0.5, scenario=scenario)
    x, y, t = toy_batch(task=2, n=5, seed=seed + 10)
    ref = reference_scores(learner.net, 0.5, x, y, t, mem.x[:10], mem.y[:10], mem.t[:10], scenario == "task_il")
    order = sorted(range(10), key=lambda i: -ref[i])
    assert ref[order[3]] - ref[order[4]] > 1e-5  # the top 4 is well defined
    R = MIRReplay(candidates=10).select(learner, x, y, t, 4)  # C >= |M|: every slot is a candidate
    assert sorted(R.tolist()) == sorted(order[:4])
    torch.testing.assert_close(mem.score[:10], torch.tensor(ref), rtol=1e-4, atol=1e-6)  # kept for E-BRS


# -- C-CMR: quotas by largest remainder, shortfall filled from the rest ------------------------
def check_largest_remainder(weights, total, got):
    """Hamilton's method with exact fractions: floor of each share, +1 for the largest remainders."""
    W = sum(weights)
    shares = [Fraction(w * total, W) for w in weights]
    base = [math.floor(s) for s in shares]
    extra = [g - b for g, b in zip(got, base, strict=True)]
    assert sum(got) == total and set(extra) <= {0, 1}
    rem = [s - b for s, b in zip(shares, base, strict=True)]
    up = [r for r, e in zip(rem, extra, strict=True) if e]
    down = [r for r, e in zip(rem, extra, strict=True) if not e]
    assert not up or not down or min(up) >= max(down)  # the largest remainders got the extra seats


def test_largest_remainder_against_exact_fractions():
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        k = int(torch.randint(1, 7, (1,), generator=g))
        w = torch.randint(0, 9, (k,), generator=g)
        if w.sum() == 0:
            continue
        total = int(torch.randint(0, 25, (1,), generator=g))
        check_largest_remainder(w.tolist(), total, largest_remainder(w, total).tolist())


def fake_ccmr_scores(monkeypatch, scores):
    monkeypatch.setattr(ccmr, "score_slots", lambda learner, x, y, t, slots, *a: scores[slots])


@pytest.mark.parametrize("seed", range(25))
def test_ccmr_selection_against_a_reference(monkeypatch, seed):
    """R_e = the top p; R_t holds q_j = LR(p_j, q) slots of each task j where available, the
    shortfall from the rest of M - R_e; no slot twice."""
    g = torch.Generator().manual_seed(seed)
    n_tasks = int(torch.randint(2, 5, (1,), generator=g))
    size = int(torch.randint(12, 40, (1,), generator=g))
    tasks = torch.randint(0, n_tasks, (size,), generator=g).tolist()
    scores = torch.randn(size, generator=g)
    fake_ccmr_scores(monkeypatch, scores)
    learner = toy_learner(memory=toy_memory([k % 3 for k in tasks]))
    learner.memory.t[:size] = torch.tensor(tasks)
    tau, n = [0.1, 0.3, 0.5, 0.7, 0.9][seed % 5], 10  # p = 1 and q = 1 included
    torch.manual_seed(seed)
    R = CCMRReplay(tau=tau).select(learner, None, None, None, n).tolist()
    p = math.floor(tau * n + 0.5)
    q = n - p
    by_score = sorted(range(size), key=lambda i: -float(scores[i]))
    assert len(R) == n == len(set(R))
    assert sorted(R[:p]) == sorted(by_score[:p])
    p_j = [sum(tasks[i] == j for i in by_score[:p]) for j in range(max(tasks) + 1)]
    W = sum(p_j)
    base = [pj * q // W for pj in p_j]  # floor of each share: every tie-break gives at least this
    avail = [sum(tasks[i] == j for i in by_score[p:]) for j in range(len(p_j))]
    got = [sum(tasks[i] == j for i in R[p:]) for j in range(len(p_j))]
    if all(a > b for a, b in zip(avail, base, strict=True)):  # no shortfall under any tie-break
        check_largest_remainder(p_j, q, got)  # R_t's task counts are exactly Eq. 5's quotas
    for j in range(len(p_j)):
        assert got[j] >= min(base[j], avail[j])  # a shortfall elsewhere never takes a task's quota


# -- E-BRS: the victim is the lowest-score slot of the most frequent class ---------------------
def reference_victims(labels, scores):
    """All slots that Alg. 2 lines 7-8 may evict (class ties: the lowest label)."""
    counts = {c: labels.count(c) for c in set(labels)}
    top = max(counts.values())
    y_tilde = min(c for c, n in counts.items() if n == top)
    slots = [i for i, c in enumerate(labels) if c == y_tilde]
    low = min(scores[i] for i in slots)
    return {i for i in slots if scores[i] == low}


def test_ebrs_victim_matches_the_reference_over_many_memories():
    """200 seeded memories, 3+ slots in the evicted class: a random slot of the right class
    passes all of them with probability below (1/2)^200."""
    evicted_class_sizes = []
    for seed in range(200):
        g = torch.Generator().manual_seed(seed)
        n = 14
        labels = torch.randint(0, 4, (n,), generator=g).tolist()
        scores = torch.randn(n, generator=g)
        if seed % 4 == 0:  # some exact score ties
            scores = scores.round()
        mem = Memory(n, (1,), 4)
        mem.append(torch.zeros(n, 1), torch.tensor(labels), torch.zeros(n, dtype=torch.long))
        mem.score[:n] = scores
        ref = reference_victims(labels, scores.tolist())
        v = EBRS().victim(mem, mem.class_counts())
        assert v in ref, (seed, v, ref)
        evicted_class_sizes.append(sum(1 for c in labels if c == labels[v]))
    assert min(evicted_class_sizes) >= 3


def test_ebrs_victim_score_ties_are_broken_at_random():
    labels, scores = [1, 1, 1, 0], [0.5, -1.0, -1.0, 3.0]
    mem = Memory(4, (1,), 2)
    mem.append(torch.zeros(4, 1), torch.tensor(labels), torch.zeros(4, dtype=torch.long))
    mem.score[:4] = torch.tensor(scores)
    torch.manual_seed(0)
    seen = {EBRS().victim(mem, mem.class_counts()) for _ in range(40)}
    assert seen == {1, 2}


@pytest.mark.parametrize("ties", ["lowest", "random"])
def test_ebrs_class_ties(ties):
    labels, scores = [5, 2, 5, 2, 7], [1.0, 3.0, 0.0, 2.0, -5.0]
    mem = Memory(5, (1,), 8)
    mem.append(torch.zeros(5, 1), torch.tensor(labels), torch.zeros(5, dtype=torch.long))
    mem.score[:5] = torch.tensor(scores)
    torch.manual_seed(0)
    seen = {EBRS(class_ties=ties).victim(mem, mem.class_counts()) for _ in range(40)}
    assert seen == ({3} if ties == "lowest" else {2, 3})  # class 2's lowest is slot 3, class 5's slot 2


def test_ebrs_update_against_a_sequential_reference(monkeypatch):
    """Every incoming sample accepted (j < M forced): each replaces the reference victim of the
    memory as it stands after the previous placement (counts move within the batch)."""
    g = torch.Generator().manual_seed(7)
    n = 12
    labels = torch.randint(0, 3, (n,), generator=g)
    scores = torch.randn(n, generator=g)
    mem = Memory(n, (1,), 5)
    mem.append(torch.arange(n, dtype=torch.float32)[:, None], labels, torch.zeros(n, dtype=torch.long))
    mem.score[:n] = scores
    mem.seen = n
    ref_labels, ref_scores, ref_x = labels.tolist(), scores.tolist(), list(range(n))
    new_y = [3, 4, 3, 4]
    for k, c in enumerate(new_y):
        (v,) = reference_victims(ref_labels, ref_scores)  # scores distinct, new samples score 0 > ...
        ref_labels[v], ref_scores[v], ref_x[v] = c, 0.0, 100 + k
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, k, cap, dev: torch.zeros(k, dtype=torch.long)
    )
    EBRS().update(mem, 100 + torch.arange(4.0)[:, None], torch.tensor(new_y), torch.ones(4, dtype=torch.long))
    assert mem.y[:n].tolist() == ref_labels
    assert mem.x[:n, 0].tolist() == ref_x


# -- reservoir: exact acceptance sample by sample ------------------------------------------------
def reservoir_reference(ys, M, batch, seed):
    """Vitter's algorithm one sample at a time, drawing u ~ U[0, 1) from the same generator:
    the k-th sample (k > M) replaces slot floor(u k) if it is < M."""
    torch.manual_seed(seed)
    mem, k = [], 0
    for start in range(0, len(ys), batch):
        for s in ys[start : start + batch]:
            k += 1
            if len(mem) < M:
                mem.append(s)
                continue
            j = int(float(torch.rand(1, dtype=torch.float64)) * k)
            if j < M:
                mem[j] = s
    return mem


@pytest.mark.parametrize("M,batch,seed", [(10, 20, 0), (10, 7, 1), (5, 1, 2), (13, 10, 3)])
def test_reservoir_acceptance_equals_the_sequential_algorithm(M, batch, seed):
    N = 300
    ys = list(range(N))
    ref = reservoir_reference(ys, M, batch, seed)
    torch.manual_seed(seed)
    mem = Memory(M, (1,), N)
    for s in range(0, N, batch):
        y = torch.arange(s, min(N, s + batch))
        Reservoir().update(mem, y.float()[:, None], y, torch.zeros_like(y))
    assert mem.y.tolist() == ref and mem.seen == N
    assert ref != ys[:M]  # the stream did move the memory


# -- iCaRL: herding, nearest mean of exemplars, distillation targets ------------------------------
def herding_reference(phi, m):
    mu = [sum(phi[i][d] for i in range(len(phi))) / len(phi) for d in range(len(phi[0]))]
    chosen, running = [], [0.0] * len(mu)
    for k in range(1, m + 1):
        best, best_cost = None, None
        for i in range(len(phi)):
            if i in chosen:
                continue
            cost = math.sqrt(sum((mu[d] - (running[d] + phi[i][d]) / k) ** 2 for d in range(len(mu))))
            if best_cost is None or cost < best_cost:
                best, best_cost = i, cost
        chosen.append(best)
        running = [running[d] + phi[best][d] for d in range(len(mu))]
    return chosen


@pytest.mark.parametrize("seed", range(3))
def test_herding_against_a_loop(seed):
    g = torch.Generator().manual_seed(seed)
    phi = F.normalize(torch.randn(30, 5, generator=g, dtype=torch.float64) + 0.5, dim=1)
    assert herding(phi, 8).tolist() == herding_reference(phi.tolist(), 8)
    assert herding(phi[:1], 3).tolist() == [0]  # fewer samples than m: all of them
    assert herding(phi[:5], 9).tolist() == herding_reference(phi[:5].tolist(), 5)


def test_nearest_mean_of_exemplars_against_a_loop():
    net = toy_net(3)
    mem = toy_memory([0, 0, 0, 0, 1, 1, 1, 1], seed=4)  # classes 0, 1, 2, 3; 4 and 5 have no exemplars
    learner = toy_learner(net=net, memory=mem)
    x, _, t = toy_batch(task=0, n=5, seed=5)
    scores = ICaRL().predict(learner, x, t)

    def phi(v):
        return F.normalize(net(v[None], return_features=True)[1][0], dim=0)

    with torch.no_grad():
        means = {}
        for c in sorted(set(mem.y[:8].tolist())):
            feats = [phi(mem.x[i]) for i in range(8) if int(mem.y[i]) == c]
            means[c] = F.normalize(sum(feats) / len(feats), dim=0)
        for i in range(5):
            dist = {c: float((phi(x[i]) - mu).norm()) for c, mu in means.items()}
            assert int(scores[i].argmax()) == min(dist, key=dist.get)
            for c, d in dist.items():
                assert float(scores[i, c]) == pytest.approx(-d, abs=1e-5)
            assert torch.isneginf(scores[i, 4:]).all()


def test_icarl_loss_uses_the_frozen_nets_sigmoid_as_old_class_targets():
    """BCE averaged over all 6 outputs and over R + B_t (original iCaRL ``loss.mean()``, Mammoth
    models/icarl.py l.155); targets: sigmoid(old net logits) for the old classes, one-hot (0 for
    the unseen classes 4, 5) for the others. The former sum over the seen classes is 4x this."""
    net, old = toy_net(0), toy_net(9)
    mem = toy_memory([0, 0], seed=6)
    learner = toy_learner(net=net, memory=mem, plugin=ICaRL())
    learner.current_task = 1
    learner.plugin.old_net = old
    x, y, t = toy_batch(task=1, n=3)
    loss = learner.plugin.loss(learner, x, y, t, torch.arange(2))
    xs, ys = torch.cat([x, mem.x[:2]]), torch.cat([y, mem.y[:2]])
    total = 0.0
    with torch.no_grad():
        for i in range(len(ys)):
            z, q = net(xs[i : i + 1])[0], torch.sigmoid(old(xs[i : i + 1])[0])
            for c in range(6):  # every output, the unseen classes 4, 5 included
                target = float(q[c]) if c < 2 else float(c == int(ys[i]))
                s = torch.sigmoid(z[c])
                total += -(target * math.log(s) + (1 - target) * math.log(1 - s))
    assert float(loss.detach()) == pytest.approx(total / (len(ys) * 6), rel=1e-5)
    learner.plugin.old_net = None  # without distillation the old classes' targets are 0: a different loss
    assert abs(float(learner.plugin.loss(learner, x, y, t, torch.arange(2)).detach() - loss.detach())) > 1e-3


# -- HAL: the anchoring gradient and the anchor objective -----------------------------------------
def test_hal_step_adds_the_anchoring_gradient_and_updates_phi():
    mem = toy_memory([0, 0, 0])
    learner = toy_learner(memory=mem, plugin=HAL(hal_lambda=0.3, beta=0.25), lr=0.2, replay_size=5)
    from clsuite.core.replay.random import RandomReplay

    learner.replay = RandomReplay()
    g = torch.Generator().manual_seed(11)
    anchors = torch.randn(2, D, generator=g)
    learner.plugin.anchors, learner.plugin.anchor_y = anchors, torch.tensor([0, 1])
    attach_sgd(learner)
    x, y, t = toy_batch()
    xr, yr = torch.cat([x, mem.x[:3]]), torch.cat([y, mem.y[:3]])
    net = learner.net
    # reference: theta~ = theta - lr grad l(R + B_t) (a stepped copy); then the anchored loss by autograd
    tilde = copy.deepcopy(net)
    F.cross_entropy(tilde(xr), yr).backward()
    with torch.no_grad():
        for p in tilde.parameters():
            p -= 0.2 * p.grad
        target = tilde(anchors)
        feats = tilde(x, return_features=True)[1]
    ref = copy.deepcopy(net)
    # anchor loss: the mean over anchors and logits (Mammoth models/hal.py l.152), not the sum over logits
    loss = F.cross_entropy(ref(xr), yr) + 0.3 * ((ref(anchors) - target) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        expected = [p - 0.2 * p.grad for p in ref.parameters()]
    learner.training_step((x, y, t), 0)
    assert_params(net, expected)
    for c in y.unique().tolist():  # phi_y: first visit, the mean feature of B_t's class y at theta~
        torch.testing.assert_close(learner.plugin.phi[c], feats[y == c].mean(0), rtol=1e-5, atol=1e-6)
    # a second batch: phi_y <- beta phi_y + (1 - beta) mean phi
    before = learner.plugin.phi.clone()
    x2, y2, t2 = toy_batch(seed=12)
    tilde2 = copy.deepcopy(net)
    F.cross_entropy(tilde2(torch.cat([x2, mem.x[:3]])), torch.cat([y2, mem.y[:3]])).backward()
    with torch.no_grad():
        for p in tilde2.parameters():
            p -= 0.2 * p.grad
        f2 = tilde2(x2, return_features=True)[1]
    learner.training_step((x2, y2, t2), 0)
    for c in y2.unique().tolist():
        torch.testing.assert_close(
            learner.plugin.phi[c], 0.25 * before[c] + 0.75 * f2[y2 == c].mean(0), rtol=1e-5, atol=1e-6
        )


def test_hal_anchor_gradient_is_lambda_over_C_times_the_summed_squares():
    """One anchor, a 10-way head: the gradient before_step adds is lambda / 10 times the gradient
    of sum_k (f_theta(e) - f_theta~(e))_k^2 (Mammoth models/hal.py l.152, mean over logits); the
    former sum over logits added 10 times more."""
    from types import SimpleNamespace

    from clsuite.core.models.nets import MLP

    torch.manual_seed(21)
    net = MLP((D,), 10, hidden=5, depth=1)
    learner = SimpleNamespace(net=net, lr=0.4, memory=Memory(2, (D,), 10))
    plugin = HAL(hal_lambda=0.1)
    plugin.setup(learner)
    plugin.anchors, plugin.anchor_y = torch.randn(1, D), torch.tensor([3])
    er_grad = [torch.randn_like(p) for p in net.parameters()]  # the ER loss's gradient, already in .grad
    for p, g in zip(net.parameters(), er_grad, strict=True):
        p.grad = g.clone()
    tilde = copy.deepcopy(net)
    with torch.no_grad():
        for p, g in zip(tilde.parameters(), er_grad, strict=True):
            p -= 0.4 * g
        target = tilde(plugin.anchors)
    ref = copy.deepcopy(net)
    summed = ((ref(plugin.anchors) - target) ** 2).sum()
    expected = torch.autograd.grad(summed, list(ref.parameters()))
    plugin.before_step(learner, torch.randn(2, D), torch.tensor([0, 1]), torch.zeros(2, dtype=torch.long), None)
    for p, g, e in zip(net.parameters(), er_grad, expected, strict=True):
        torch.testing.assert_close(p.grad - g, 0.1 / 10 * e, rtol=1e-5, atol=1e-7)
    assert max(float(e.abs().max()) for e in expected) > 1e-2  # the anchor term is not negligible


@pytest.mark.parametrize(
    "opts",
    [
        dict(gamma=0.1, anchor_steps=3, finetune_steps=2, anchor_lr=None),
        dict(gamma=0.7, anchor_steps=3, finetune_steps=2, anchor_lr=None),
        dict(gamma=0.1, anchor_steps=5, finetune_steps=0, anchor_lr=0.05),
    ],
)
def test_hal_anchors_against_a_hand_written_objective(opts):
    mem = toy_memory([0, 0, 0, 0, 0, 0], seed=13)  # classes 0 and 1
    learner = toy_learner(net=toy_net(5), memory=mem, lr=0.3, plugin=HAL(finetune_batch=10, **opts))
    plugin = learner.plugin
    plugin.phi[:2] = torch.randn(2, plugin.phi.shape[1], generator=torch.Generator().manual_seed(14))
    classes = torch.tensor([0, 1])
    got = plugin.learn_anchors(learner, classes)
    # reference: theta_M = theta after finetune_steps SGD steps on the whole memory (finetune_batch >= |M|)
    net = learner.net
    net_m = copy.deepcopy(net)
    for _ in range(opts["finetune_steps"]):
        net_m.zero_grad()
        F.cross_entropy(net_m(mem.x[:6]), mem.y[:6]).backward()
        with torch.no_grad():
            for p in net_m.parameters():
                p -= 0.3 * p.grad
    e = torch.stack([mem.x[:6][mem.y[:6] == c].mean(0) for c in (0, 1)]).requires_grad_(True)
    lr = opts["anchor_lr"] or 0.3
    for _ in range(opts["anchor_steps"]):
        out, feat = net(e, return_features=True)
        obj = (
            F.cross_entropy(net_m(e), classes, reduction="sum")
            - F.cross_entropy(out, classes, reduction="sum")
            - opts["gamma"] * ((feat - plugin.phi[:2]) ** 2).sum()
        )
        (grad,) = torch.autograd.grad(obj, e)
        e = (e + lr * grad).detach().requires_grad_(True)  # gradient ascent on the objective
    torch.testing.assert_close(got, e.detach(), rtol=1e-5, atol=1e-6)


def _bn_hal_learner(**opts):
    """HAL on a tiny ReducedResNet18 (BatchNorm; 3x16x16 inputs: the last blocks see 2x2 maps), a memory of
    classes 0 and 1 with running statistics moved off their initial values."""
    from clsuite.core.models.nets import ReducedResNet18

    torch.manual_seed(31)
    net = ReducedResNet18((3, 16, 16), 6, nf=2)
    g = torch.Generator().manual_seed(32)
    mem = Memory(6, (3, 16, 16), 6)
    mem.append(torch.rand(6, 3, 16, 16, generator=g), torch.tensor([0, 1] * 3), torch.zeros(6, dtype=torch.long))
    with torch.no_grad():
        net(torch.rand(8, 3, 16, 16, generator=g))  # the running statistics: one batch's
    learner = toy_learner(net=net, memory=mem, lr=0.3, plugin=HAL(finetune_batch=10, **opts))
    learner.plugin.phi[:2] = torch.randn(2, learner.plugin.phi.shape[1], generator=g)
    return learner


def test_hal_under_batchnorm_learns_each_anchor_in_training_mode_on_a_spare_copy():
    """Mammoth's spare network (models/hal.py ``get_anchors``): theta_M and the anchors in training mode
    (batch statistics), one anchor per batch, the network's own running statistics untouched. (Eval mode
    with running statistics off the data diverged on CIFAR-10.)"""
    learner = _bn_hal_learner(gamma=0.1, anchor_steps=3, finetune_steps=2)
    net, mem, plugin = learner.net, learner.memory, learner.plugin
    stats = {k: b.clone() for k, b in net.named_buffers()}
    net.eval()  # the caller's mode is restored
    plugin.on_task_end(learner, 0, None)
    got = plugin.anchors
    assert not net.training and all(torch.equal(b, stats[k]) for k, b in net.named_buffers())
    # reference: deep copies in training mode; theta_M on the whole memory (finetune_batch >= |M|)
    spare_t, spare_m = copy.deepcopy(net).train(), copy.deepcopy(net).train()
    for _ in range(2):
        spare_m.zero_grad()
        F.cross_entropy(spare_m(mem.x[:6]), mem.y[:6]).backward()
        with torch.no_grad():
            for p in spare_m.parameters():
                p -= 0.3 * p.grad
    want = []
    for c in (0, 1):  # one anchor at a time: a batch of one
        e = mem.x[:6][mem.y[:6] == c].mean(0, keepdim=True).requires_grad_(True)
        y = torch.tensor([c])
        for _ in range(3):
            out, feat = spare_t(e, return_features=True)
            obj = (
                F.cross_entropy(spare_m(e), y, reduction="sum")
                - F.cross_entropy(out, y, reduction="sum")
                - 0.1 * ((feat - plugin.phi[c]) ** 2).sum()
            )
            (grad,) = torch.autograd.grad(obj, e)
            e = (e + 0.3 * grad).detach().requires_grad_(True)
        want.append(e.detach())
    torch.testing.assert_close(got, torch.cat(want), rtol=1e-4, atol=1e-5)
    assert (got[0] - got[1]).abs().max() > 1e-3


def test_hal_under_batchnorm_anchors_and_the_batch_pass_theta_tilde_apart():
    """At theta~ = theta (a zero ER gradient) f_theta(E) - f_theta~(E) is exactly zero, so no anchoring
    gradient: f_theta~(E) is E's own batch, as f_theta(E) is (Mammoth: ``self.net(self.anchors)`` twice); in one
    batch with B_t, BatchNorm's statistics would differ. phi_y: B_t's features at theta~, in their own batch."""
    learner = _bn_hal_learner()
    net, plugin = learner.net, learner.plugin
    g = torch.Generator().manual_seed(33)
    plugin.anchors, plugin.anchor_y = torch.rand(2, 3, 16, 16, generator=g), torch.tensor([0, 1])
    x, y = torch.rand(4, 3, 16, 16, generator=g), torch.tensor([2, 3, 2, 3])
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    plugin.before_step(learner, x, y, torch.ones(4, dtype=torch.long), None)
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in net.parameters())
    with torch.no_grad():
        feats = copy.deepcopy(net)(x, return_features=True)[1]
    for c in (2, 3):
        torch.testing.assert_close(plugin.phi[c], feats[y == c].mean(0), rtol=1e-5, atol=1e-6)


# -- GSS-greedy: the score and the replacement rule ----------------------------------------------
def test_gss_score_against_per_sample_autograd():
    mem = toy_memory([0, 0, 1, 1, 2, 2], seed=15)
    learner = toy_learner(net=toy_net(6), memory=mem)
    x, y, t = toy_batch(task=2, n=4, seed=16)
    params = list(learner.net.parameters())

    def grad_of(xs, ys):
        gs = torch.autograd.grad(F.cross_entropy(learner.net(xs), ys), params)
        return torch.cat([g.flatten() for g in gs])

    G = [grad_of(mem.x[i : i + 1], mem.y[i : i + 1]) for i in range(6)]
    ref = [
        max(float(F.cosine_similarity(grad_of(x[i : i + 1], y[i : i + 1]), Gj, dim=0)) for Gj in G) + 1
        for i in range(4)
    ]
    # the gate's batch score: the gradient of B_t's mean loss against the same G_j
    g_B = grad_of(x, y)
    ref_B = max(float(F.cosine_similarity(g_B, Gj, dim=0)) for Gj in G) + 1
    for cosines in ("exact", "gram"):
        c, c_B = GSSGreedy(n_mem_grads=10, mem_batch=1, cosines=cosines).scores(learner, mem, x, y, t)  # every G_j
        torch.testing.assert_close(c, torch.tensor(ref), rtol=1e-4, atol=1e-5)
        assert float(c_B) == pytest.approx(ref_B, rel=1e-4, abs=1e-5)
        assert all(abs(float(c_B) - r) > 1e-3 for r in ref)  # c_B is no sample's own score
    # mem_batch = 3, n_mem_grads = 2: G_j = gradient of the mean loss over 3 slots (same random split)
    torch.manual_seed(0)
    idx = torch.randperm(6)
    Gb = [grad_of(mem.x[idx[3 * j : 3 * j + 3]], mem.y[idx[3 * j : 3 * j + 3]]) for j in range(2)]
    torch.manual_seed(0)
    got = GSSGreedy(n_mem_grads=2, mem_batch=3).memory_grads(learner, mem)
    torch.testing.assert_close(got, torch.stack(Gb), rtol=1e-4, atol=1e-6)
    c, c_B = GSSGreedy(empty_score=0.37).scores(learner, Memory(4, (D,), 6), x, y, t)
    assert c.tolist() == pytest.approx([1.37] * 4) and float(c_B) == pytest.approx(1.37)


def gss_one_update(C_mem, c_new, seed, c_batch=None):
    """One incoming sample with score c_new (and batch score c_batch, default c_new) meets a full memory."""
    mem = Memory(len(C_mem), (D,), 6)
    mem.append(
        torch.zeros(len(C_mem), D), torch.zeros(len(C_mem), dtype=torch.long), torch.zeros(len(C_mem), dtype=torch.long)
    )
    mem.score[: len(C_mem)] = torch.tensor(C_mem)
    policy = GSSGreedy()
    c_B = c_new if c_batch is None else c_batch
    policy.scores = lambda learner, memory, x, y, t: (torch.tensor([c_new]), torch.tensor(c_B))
    torch.manual_seed(seed)
    policy.update(mem, torch.ones(1, D), torch.tensor([5]), torch.tensor([1]), learner=object())
    return mem


def test_gss_replacement_probability_is_C_i_over_C_i_plus_c():
    # one slot with C = 1.5, a new sample with c = 0.5: replaced with probability 1.5 / 2 = 0.75
    n = 800
    hits = 0
    for s in range(n):
        mem = gss_one_update([1.5], 0.5, s)
        if int(mem.y[0]) == 5:
            hits += 1
            assert float(mem.score[0]) == pytest.approx(0.5)  # C_i <- c
    sd = math.sqrt(n * 0.75 * 0.25)
    assert abs(hits - 0.75 * n) < 5 * sd, hits  # inverted (0.25) or always (1.0) are > 20 sd away


def test_gss_picks_the_slot_with_probability_proportional_to_C():
    n = 600
    picked = [0, 0]
    for s in range(n):
        mem = gss_one_update([0.2, 1.8], 1e-6, s)  # c ~ 0: every draw is accepted
        for i in range(2):
            picked[i] += int(mem.y[i]) == 5
    assert sum(picked) == n
    sd = math.sqrt(n * 0.1 * 0.9)
    assert abs(picked[0] - 0.1 * n) < 5 * sd, picked


def test_gss_never_replaces_when_the_batch_is_redundant():
    for s in range(50):  # c_B >= 1: the batch gradient has cosine >= 0 with some G_j (Alg. 2 line 9)
        assert int(gss_one_update([0.2, 0.1], 1.0, s).y.sum()) == 0
        assert int(gss_one_update([0.2, 0.1], 1e-6, s, c_batch=1.0).y.sum()) == 0  # even a sample with c ~ 0


def test_gss_gate_is_the_batchs_not_the_samples():
    """GSS_Greedy.py ``if (batch_sim) < self.sim_th``, Mammoth gss_buffer.py l.65 ``elif batch_c < 1``:
    with c_B < 1 a sample whose own c >= 1 still challenges a slot (p = C_i / (C_i + c)); with a
    per-sample gate it never would."""
    n = 400
    hits = 0
    for s in range(n):
        mem = gss_one_update([1.5], 1.5, s, c_batch=0.5)
        if int(mem.y[0]) == 5:
            hits += 1
            assert float(mem.score[0]) == pytest.approx(1.5)  # C_i <- the sample's own c, not c_B
    sd = math.sqrt(n * 0.25)
    assert abs(hits - 0.5 * n) < 5 * sd, hits  # p = 1.5 / 3; a per-sample gate gives 0


# -- class-balanced replay: equal shares per class, shortfall from the rest -------------------------
@pytest.mark.parametrize("seed", range(20))
def test_balanced_replay_against_a_reference(seed):
    from clsuite.core.replay.balanced import BalancedReplay

    g = torch.Generator().manual_seed(seed)
    size = int(torch.randint(10, 30, (1,), generator=g))
    labels = torch.randint(0, 4, (size,), generator=g)
    tasks = labels // 2
    mem = Memory(size, (D,), 6)
    mem.append(torch.randn(size, D, generator=g), labels, tasks)
    learner = toy_learner(memory=mem)
    learner.current_task = 1
    exclude = seed % 2 == 1
    n = 7
    torch.manual_seed(seed)
    R = BalancedReplay(exclude_current_task=exclude).select(learner, None, None, None, n).tolist()
    pool = [i for i in range(size) if not (exclude and int(tasks[i]) == 1)]
    assert len(R) == len(set(R)) == min(n, len(pool)) and set(R) <= set(pool)
    if len(pool) <= n:
        return
    classes = sorted({int(labels[i]) for i in pool})
    avail = {c: sum(int(labels[i]) == c for i in pool) for c in classes}
    got = {c: sum(int(labels[i]) == c for i in R) for c in classes}
    base = n // len(classes)  # equal shares; n mod |classes| classes get one more
    for c in classes:
        assert got[c] >= min(base, avail[c])
    if all(a > base for a in avail.values()):  # no shortfall: the shares are exactly equal (+-1)
        assert set(got.values()) <= {base, base + 1}
        assert sum(v == base + 1 for v in got.values()) == n % len(classes)


def test_ccmr_tau_zero_shares_R_t_over_the_tasks_present_only(monkeypatch):
    tasks = [0] * 10 + [2] * 10 + [3] * 10  # task 1 has no slot
    fake_ccmr_scores(monkeypatch, torch.randn(30, generator=torch.Generator().manual_seed(0)))
    learner = toy_learner(memory=toy_memory([k % 3 for k in tasks]))
    learner.memory.t[:30] = torch.tensor(tasks)
    for seed in range(10):
        torch.manual_seed(seed)
        R = CCMRReplay(tau=0.0).select(learner, None, None, None, 20)
        counts = torch.bincount(learner.memory.t[R], minlength=4).tolist()
        assert counts[1] == 0 and sorted(counts) == [0, 6, 7, 7]


@pytest.mark.parametrize("scenario", ["class_il", "task_il"])
def test_ccmr_scores_with_the_scenarios_logits(scenario):
    mem = toy_memory([0, 0, 0, 0, 1, 1, 1, 1, 2, 2], seed=3)
    learner = toy_learner(net=toy_net(3), memory=mem, lr=0.5, scenario=scenario)
    x, y, t = toy_batch(task=2, n=5, seed=13)
    ref = reference_scores(learner.net, 0.5, x, y, t, mem.x[:10], mem.y[:10], mem.t[:10], scenario == "task_il")
    order = sorted(range(10), key=lambda i: -ref[i])
    assert ref[order[3]] - ref[order[4]] > 1e-5
    R = CCMRReplay(tau=1.0).select(learner, x, y, t, 4)
    assert sorted(R.tolist()) == sorted(order[:4])


@pytest.mark.parametrize("C", [None, 4])
def test_ccmr_candidates_respect_exclude_current_task(monkeypatch, C):
    fake_ccmr_scores(monkeypatch, torch.arange(12.0))
    learner = toy_learner(memory=toy_memory([0, 1, 2] * 4))
    learner.current_task = 2
    for seed in range(10):
        torch.manual_seed(seed)
        R = CCMRReplay(tau=0.5, candidates=C, exclude_current_task=True).select(learner, None, None, None, 3)
        assert len(R) == 3 and not (learner.memory.t[R] == 2).any()


def test_class_ring_buffer_with_one_slot_per_class():
    from clsuite.core.memory.class_ring import ClassRingBuffer

    mem, policy = Memory(3, (1,), 3), ClassRingBuffer()  # m = M // classes = 1
    x = torch.arange(6, dtype=torch.float)[:, None]
    y = torch.tensor([0, 1, 0, 2, 1, 0])
    for i in range(0, 6, 2):
        policy.update(mem, x[i : i + 2], y[i : i + 2], torch.zeros(2, dtype=torch.long))
    held = {int(c): float(v) for c, v in zip(mem.y[: mem.size], mem.x[: mem.size, 0], strict=True)}
    assert held == {0: 5.0, 1: 4.0, 2: 3.0} and mem.seen == 6  # the last sample of each class
