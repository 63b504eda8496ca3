"""Every option that changes a result, on small fixed tensors: each test fails when its option is
ignored or inverted (issue 11). Expected values come from hand formulas or per-sample loops.

The learner is driven directly (``training_step`` with a plain SGD optimizer), so the checks are
exact: the parameters after a step equal those of a reference step computed here.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from clsuite.core.callbacks import evaluate
from clsuite.core.learner import ContinualLearner
from clsuite.core.memory.buffer import Memory
from clsuite.core.methods.gem import GEM, gem_project
from clsuite.core.methods.oewc import OnlineEWC
from clsuite.core.methods.si import SI
from clsuite.core.models.grads import flat_grad, grad_vector
from clsuite.core.models.nets import MLP, ContinualNorm
from clsuite.core.replay import ccmr, mir
from clsuite.core.replay.ccmr import CCMRReplay
from clsuite.core.replay.mir import MIRReplay
from clsuite.core.replay.random import RandomReplay
from clsuite.core.train import build
from tests.conftest import make_cfg, run_cfg

TASK_CLASSES = torch.tensor([[0, 1], [2, 3], [4, 5]])
D = 4  # input size of the toy network


def toy_net(seed=0, classes=6):
    torch.manual_seed(seed)
    return MLP((D,), classes, hidden=5, depth=1)


def toy_memory(tasks, seed=1, classes=6):
    """A memory with one sample per entry of ``tasks``; labels are the task's first or second class."""
    g = torch.Generator().manual_seed(seed)
    n = len(tasks)
    t = torch.tensor(tasks)
    y = TASK_CLASSES[t, torch.arange(n) % 2] if classes == 6 else torch.arange(n) % classes
    mem = Memory(n, (D,), classes)
    mem.append(torch.randn(n, D, generator=g), y, t)
    return mem


def toy_batch(task=1, n=3, seed=2):
    g = torch.Generator().manual_seed(seed)
    y = TASK_CLASSES[task][torch.tensor([0, 1, 1, 0, 1][:n])]
    return torch.randn(n, D, generator=g), y, torch.full((n,), task)


def toy_learner(net=None, memory=None, **kw):
    learner = ContinualLearner(
        net if net is not None else toy_net(),
        memory=memory if memory is not None else Memory(0, (D,), 6),
        task_classes=TASK_CLASSES,
        **kw,
    )
    learner.plugin.setup(learner)
    return learner


def attach_sgd(learner):
    """Drive ``training_step`` without a Trainer: plain SGD, plain backward."""
    opt = torch.optim.SGD(learner.net.parameters(), lr=learner.lr)
    learner.optimizers = lambda *a, **k: opt
    learner.manual_backward = lambda loss, *a, **k: loss.backward()
    return opt


def ce_per_sample(net, x, y, allowed=None):
    """-log softmax(z)_y sample by sample, over the ``allowed`` classes of each sample (all by default)."""
    out = []
    for i in range(len(y)):
        z = net(x[i : i + 1])[0]
        cls = list(range(len(z))) if allowed is None else allowed[i]
        out.append(-(z[int(y[i])] - torch.logsumexp(z[cls], 0)))
    return torch.stack(out)


def params_of(net):
    return [p.detach().clone() for p in net.parameters()]


def sgd_reference(net, loss_fn, lr, steps=1):
    """Parameters after ``steps`` plain SGD steps on ``loss_fn(net)`` (a deep copy of ``net``)."""
    ref = copy.deepcopy(net)
    for _ in range(steps):
        ref.zero_grad()
        loss_fn(ref).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= lr * p.grad
    return params_of(ref)


def assert_params(net, expected, atol=1e-6):
    for p, e in zip(net.parameters(), expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=atol)


# -- replay_loss: concat | split ---------------------------------------------------------------
@pytest.mark.parametrize("form", ["concat", "split"])
def test_replay_loss_forms_by_hand(form):
    mem = toy_memory([0, 0, 0, 0])  # |R| = 4, |B_t| = 2: the two forms differ
    learner = toy_learner(memory=mem, replay_loss=form)
    x, y, t = toy_batch(n=2)
    idx = torch.arange(4)
    loss = learner.replay_loss(x, y, t, idx)
    lb, lr_ = ce_per_sample(learner.net, x, y), ce_per_sample(learner.net, mem.x[:4], mem.y[:4])
    concat = torch.cat([lb, lr_]).mean()  # Alg. 1 line 10: one mean over R + B_t
    split = lb.mean() + lr_.mean()  # MIR's code: mean(B_t) + mean(R)
    assert abs(float((concat - split).detach())) > 0.1
    torch.testing.assert_close(loss, concat if form == "concat" else split)


def test_replay_loss_without_memory_is_the_batch_loss():
    for form in ("concat", "split"):
        learner = toy_learner(replay_loss=form)
        x, y, t = toy_batch()
        torch.testing.assert_close(learner.replay_loss(x, y, t, None), ce_per_sample(learner.net, x, y).mean())


def test_unknown_replay_loss_rejected():
    with pytest.raises(ValueError, match="replay_loss"):
        toy_learner(replay_loss="sum")


# -- scenario: the training logits --------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["class_il", "task_il"])
def test_training_loss_masks_logits_only_in_task_il(scenario):
    learner = toy_learner(scenario=scenario)
    x, y, t = toy_batch(task=1)
    allowed = [TASK_CLASSES[k].tolist() for k in t] if scenario == "task_il" else None
    expected = ce_per_sample(learner.net, x, y, allowed).mean()
    torch.testing.assert_close(learner.replay_loss(x, y, t, None), expected)
    other = ce_per_sample(learner.net, x, y, None if scenario == "task_il" else [[2, 3]] * 3).mean()
    assert abs(float((expected - other).detach())) > 1e-3  # the two scenarios give different losses here


@pytest.mark.parametrize("form", ["concat", "split"])
def test_task_il_masks_replayed_samples_with_their_own_task(form):
    """Both loss forms mask B_t with its task and R with each sample's own task; the logged loss
    parts are the two means (every form)."""
    mem = toy_memory([0, 2, 0, 2])
    learner = toy_learner(memory=mem, scenario="task_il", replay_loss=form)
    learner.want_loss_parts = True
    x, y, t = toy_batch(task=1, n=2)
    loss = learner.replay_loss(x, y, t, torch.arange(4))
    lb = ce_per_sample(learner.net, x, y, [TASK_CLASSES[k].tolist() for k in t])
    lr_ = ce_per_sample(learner.net, mem.x[:4], mem.y[:4], [TASK_CLASSES[k].tolist() for k in mem.t[:4]])
    torch.testing.assert_close(loss, torch.cat([lb, lr_]).mean() if form == "concat" else lb.mean() + lr_.mean())
    parts = learner.last_loss_parts
    assert set(parts) == {"current", "replay"}
    torch.testing.assert_close(parts["current"], lb.mean().detach())
    torch.testing.assert_close(parts["replay"], lr_.mean().detach())


# -- eval_mask: all | seen ----------------------------------------------------------------------
@pytest.mark.parametrize("mask", ["all", "seen"])
def test_eval_mask(mask):
    learner = toy_learner(eval_mask=mask)
    learner.seen_tasks = 2  # classes 0..3 seen
    with torch.no_grad():
        learner.net.head.bias.copy_(torch.tensor([0.0, 1.0, 2.0, 3.0, 50.0, 40.0]))
        learner.net.head.weight.zero_()
    x, _, t = toy_batch(task=0, n=4)
    pred = learner.predict(x, t).argmax(1)
    assert pred.tolist() == ([4] * 4 if mask == "all" else [3] * 4)


def test_eval_mask_seen_leaves_task_il_to_its_task_mask():
    learner = toy_learner(eval_mask="seen", scenario="task_il")
    learner.seen_tasks = 1
    with torch.no_grad():
        learner.net.head.weight.zero_()
        learner.net.head.bias.copy_(torch.tensor([0.0, 1.0, 5.0, 4.0, 9.0, 8.0]))
    x, _, _ = toy_batch(n=3)
    pred = learner.predict(x, torch.tensor([0, 1, 2])).argmax(1)
    assert pred.tolist() == [1, 2, 4]  # each sample's own task's best class


def test_start_task_counts_the_tasks_seen_for_the_seen_mask():
    """eval_mask=seen masks the classes of tasks not started yet: start_task(k) makes k + 1 tasks seen,
    and going back to an earlier task (a rerun of task 0) never forgets one."""
    learner = toy_learner(eval_mask="seen")
    with torch.no_grad():
        learner.net.head.weight.zero_()
        learner.net.head.bias.copy_(torch.tensor([0.0, 1.0, 2.0, 3.0, 50.0, 40.0]))
    x, _, t = toy_batch(task=0, n=2)
    seen = []
    for task in (0, 1, 0):
        learner.start_task(task)
        seen.append((learner.seen_tasks, learner.predict(x, t).argmax(1).tolist()))
    assert seen == [(1, [1, 1]), (2, [3, 3]), (2, [3, 3])]


# -- the optimizer ---------------------------------------------------------------------------------
def test_optimizer_is_sgd_with_the_runs_lr_momentum_and_weight_decay():
    """Two steps of the learner's optimizer equal two hand-written SGD steps with momentum m and
    weight decay wd: buf = m buf + (g + wd p), p -= lr buf (torch's SGD, dampening 0)."""
    lr, m, wd = 0.05, 0.9, 0.01
    learner = toy_learner(lr=lr, momentum=m, weight_decay=wd)
    x, y, _ = toy_batch(n=4)
    ref = copy.deepcopy(learner.net)
    bufs = [torch.zeros_like(p) for p in ref.parameters()]
    opt = learner.configure_optimizers()
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(learner.net(x), y).backward()
        opt.step()
        ref.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        with torch.no_grad():
            for p, b in zip(ref.parameters(), bufs, strict=True):
                b.mul_(m).add_(p.grad + wd * p)
                p -= lr * b
    assert_params(learner.net, params_of(ref))
    assert opt is learner.configure_optimizers()  # one optimizer for the whole stream (its momentum too)


# -- iters_per_batch -----------------------------------------------------------------------------
@pytest.mark.parametrize("iters", [1, 3])
def test_iters_per_batch_steps_and_reselects_replay(iters):
    mem = toy_memory([0, 0, 0])  # fewer slots than |R|: R is all of memory, deterministic
    calls = []

    class CountingReplay(RandomReplay):
        def select(self, learner, x, y, t, n):
            calls.append(n)
            return super().select(learner, x, y, t, n)

    learner = toy_learner(memory=mem, replay=CountingReplay(), iters_per_batch=iters, lr=0.2, replay_size=5)
    attach_sgd(learner)
    x, y, t = toy_batch()
    xr, yr = torch.cat([x, mem.x[:3]]), torch.cat([y, mem.y[:3]])
    expected = sgd_reference(learner.net, lambda net: F.cross_entropy(net(xr), yr), 0.2, steps=iters)
    learner.training_step((x, y, t), 0)
    assert calls == [5] * iters  # R re-selected before every update, with n = replay_size
    assert_params(learner.net, expected)
    assert learner.train_steps == 1  # one incoming batch


# -- a plugin's penalty reaches the gradient (oEWC) and SI's surrogate gradient -----------------
def test_learner_adds_the_oewc_penalty_to_the_loss_and_its_gradient():
    learner = toy_learner(plugin=OnlineEWC(e_lambda=5.0), lr=0.1)
    plugin = learner.plugin
    shapes = [p.shape for p in learner.net.parameters()]
    g = torch.Generator().manual_seed(3)
    fisher = [torch.rand(s, generator=g) for s in shapes]
    anchor = [p.detach() + 0.3 * torch.randn(p.shape, generator=g) for p in learner.net.parameters()]
    plugin.fisher = torch.cat([f.flatten() for f in fisher])
    plugin.anchor = torch.cat([a.flatten() for a in anchor])
    attach_sgd(learner)
    x, y, t = toy_batch()

    def loss_fn(net):  # CE + e_lambda sum_i F_i (theta_i - theta*_i)^2, parameter by parameter
        pen = sum((f * (p - a) ** 2).sum() for f, p, a in zip(fisher, net.parameters(), anchor, strict=True))
        return F.cross_entropy(net(x), y) + 5.0 * pen

    expected_loss = loss_fn(learner.net).detach()
    expected = sgd_reference(learner.net, loss_fn, 0.1)
    learner.training_step((x, y, t), 0)
    torch.testing.assert_close(learner.last_loss, expected_loss)
    assert_params(learner.net, expected)


@pytest.mark.parametrize("clip", [None, 0.05])
def test_learner_step_with_si_applies_the_surrogate_gradient(clip):
    learner = toy_learner(plugin=SI(c=3.0, xi=0.1, clip=clip), lr=0.1)
    plugin = learner.plugin
    g = torch.Generator().manual_seed(4)
    n = plugin.anchor.numel()
    plugin.big_omega = torch.rand(n, generator=g)
    plugin.anchor = plugin.anchor + 0.2 * torch.randn(n, generator=g)
    attach_sgd(learner)
    x, y, t = toy_batch()
    params = list(learner.net.parameters())
    theta = torch.cat([p.detach().flatten() for p in params])
    grads = torch.autograd.grad(F.cross_entropy(learner.net(x), y), params)
    task_g = torch.cat([gr.flatten() for gr in grads])
    total = task_g + 2 * 3.0 * plugin.big_omega * (theta - plugin.anchor)  # d/dtheta c sum Omega (theta - theta~)^2
    if clip is not None:
        total = total.clamp(-clip, clip)
        assert (total.abs() == clip).any() and (total.abs() < clip).any()
    learner.training_step((x, y, t), 0)
    new = torch.cat([p.detach().flatten() for p in params])
    torch.testing.assert_close(new, theta - 0.1 * total, rtol=1e-5, atol=1e-7)
    # omega (eq. 3) sees the task-loss gradient only: -g . delta
    torch.testing.assert_close(plugin.omega, -task_g * (new - theta), rtol=1e-4, atol=1e-9)


def test_si_surrogate_and_omega_by_hand():
    learner = toy_learner(plugin=SI(c=0.7, xi=0.25, clip=None))
    plugin = learner.plugin
    theta0 = plugin.anchor.clone()
    n = theta0.numel()
    g = torch.Generator().manual_seed(5)
    delta = 0.3 * torch.randn(n, generator=g)
    torch.nn.utils.vector_to_parameters(theta0 + delta, learner.net.parameters())
    omega = torch.randn(n, generator=g)  # some negative: relu must clip them
    plugin.omega = omega.clone()
    plugin.on_task_end(learner, 0, None)
    # Omega = relu(omega / ((theta - theta~)^2 + xi)); theta~ moves to theta; omega resets
    big = [max(0.0, float(o) / (float(d) ** 2 + 0.25)) for o, d in zip(omega, delta, strict=True)]
    torch.testing.assert_close(plugin.big_omega, torch.tensor(big), rtol=1e-5, atol=1e-7)
    assert (plugin.big_omega == 0).any() and (plugin.big_omega > 0).any()
    torch.testing.assert_close(plugin.anchor, theta0 + delta)
    assert (plugin.omega == 0).all()
    # surrogate c sum Omega (theta - theta~)^2 at a moved point
    torch.nn.utils.vector_to_parameters(theta0, learner.net.parameters())
    expected = 0.7 * sum(b * float(d) ** 2 for b, d in zip(big, delta, strict=True))
    assert float(plugin.surrogate(learner).detach()) == pytest.approx(expected, rel=1e-5)


# -- exclude_current_task, candidates, compare_to_old_logits (MIR, C-CMR, random replay) --------
def fixed_scores(monkeypatch, module, scores, log):
    scores = torch.as_tensor(scores, dtype=torch.float32)

    def fake(learner, x, y, t, slots, compare_to_old_logits=False, updates_bn=False):
        log.append((slots.clone(), compare_to_old_logits, updates_bn))
        return scores[slots]

    monkeypatch.setattr(module, "score_slots", fake)


TASKS9 = [0, 0, 0, 1, 1, 1, 2, 2, 2]
SCORES9 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 8.0, 7.0]  # the current task's slots score highest


@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize(
    "module, make",
    [
        (mir, lambda e: MIRReplay(candidates=50, exclude_current_task=e)),
        (ccmr, lambda e: CCMRReplay(tau=1.0, exclude_current_task=e)),
    ],
    ids=["mir", "ccmr"],
)
def test_scored_replay_exclude_current_task(monkeypatch, module, make, exclude):
    log = []
    fixed_scores(monkeypatch, module, SCORES9, log)
    learner = toy_learner(memory=toy_memory(TASKS9))
    learner.current_task = 2
    R = make(exclude).select(learner, None, None, None, 3)
    assert sorted(R.tolist()) == ([3, 4, 5] if exclude else [6, 7, 8])
    if module is mir:  # MIR scores only the slots it may replay
        assert sorted(log[0][0].tolist()) == (list(range(6)) if exclude else list(range(9)))


@pytest.mark.parametrize("exclude", [False, True])
def test_random_replay_exclude_current_task(exclude):
    learner = toy_learner(memory=toy_memory(TASKS9))
    learner.current_task = 2
    torch.manual_seed(0)
    drawn = torch.cat(
        [RandomReplay(exclude_current_task=exclude).select(learner, None, None, None, 5) for _ in range(20)]
    )
    assert bool((learner.memory.t[drawn] == 2).any()) is not exclude
    R = RandomReplay(exclude_current_task=exclude).select(learner, None, None, None, 9)
    assert sorted(R.tolist()) == (list(range(6)) if exclude else list(range(9)))


@pytest.mark.parametrize("C", [2, 5, 9])
def test_mir_scores_exactly_C_random_candidates_and_replays_their_top(monkeypatch, C):
    log = []
    fixed_scores(monkeypatch, mir, SCORES9, log)
    learner = toy_learner(memory=toy_memory(TASKS9))
    torch.manual_seed(C)
    R = MIRReplay(candidates=C).select(learner, None, None, None, 2)
    cand = log[0][0]
    assert len(cand) == C and len(set(cand.tolist())) == C
    top = sorted(cand.tolist(), key=lambda i: -SCORES9[i])[:2]
    assert sorted(R.tolist()) == sorted(top)


@pytest.mark.parametrize("C", [None, 4])
def test_ccmr_candidates(monkeypatch, C):
    log = []
    fixed_scores(monkeypatch, ccmr, SCORES9, log)
    learner = toy_learner(memory=toy_memory(TASKS9))
    torch.manual_seed(1)
    R = CCMRReplay(tau=1.0, candidates=C).select(learner, None, None, None, 2)
    cand = log[0][0].tolist()
    assert len(cand) == (9 if C is None else C)
    assert sorted(R.tolist()) == sorted(sorted(cand, key=lambda i: -SCORES9[i])[:2])


@pytest.mark.parametrize("flag", [False, True])
@pytest.mark.parametrize("key, arg", [("compare_to_old_logits", 1), ("scoring_updates_bn", 2)])
@pytest.mark.parametrize("module, policy", [(mir, MIRReplay), (ccmr, CCMRReplay)], ids=["mir", "ccmr"])
def test_scored_replay_passes_its_scoring_keys(monkeypatch, module, policy, key, arg, flag):
    log = []
    fixed_scores(monkeypatch, module, SCORES9, log)
    learner = toy_learner(memory=toy_memory(TASKS9))
    policy(candidates=9, **{key: flag}).select(learner, None, None, None, 2)
    assert log[0][arg] is flag


# -- scoring_updates_bn: the candidates' forward under theta and BatchNorm's running statistics ----
class BNNet(torch.nn.Module):
    """D -> 5 -> BatchNorm -> ReLU -> 6: the smallest network with running statistics."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Linear(D, 5), torch.nn.BatchNorm1d(5), torch.nn.ReLU())
        self.head = torch.nn.Linear(5, 6)

    def forward(self, x):
        return self.head(self.body(x))


@pytest.mark.parametrize("form", ["split", "concat"])
@pytest.mark.parametrize("policy", [MIRReplay, CCMRReplay])
@pytest.mark.parametrize("flag", [False, True])
def test_scoring_updates_bn_running_statistics_exactly(policy, flag, form):
    """One update of a BatchNorm net, every candidate scored, |R| = 2 of them replayed. The running
    statistics are those of these forwards in this order, each on its own batch's statistics (train
    mode): split (MIR's code: B_t once, shared with the virtual step) B_t, [the candidates under
    theta,] R; concat [the candidates,] R + B_t. The scores equal the by-hand losses under theta and
    theta' (train-mode BatchNorm) whatever the flag."""
    mem = toy_memory(TASKS9)
    learner = toy_learner(BNNet(), memory=mem, replay=policy(candidates=9, scoring_updates_bn=flag), lr=0.3,
                          replay_size=2, replay_loss=form)  # fmt: skip
    learner.current_task = 1
    attach_sgd(learner)
    x, y, t = toy_batch(task=1, n=4)
    post_net = copy.deepcopy(learner.net).train()
    F.cross_entropy(post_net(x), y).backward()
    with torch.no_grad():
        for p in post_net.parameters():
            p -= 0.3 * p.grad  # theta': one SGD step on B_t
        pre = F.cross_entropy(copy.deepcopy(learner.net).train()(mem.x), mem.y, reduction="none")
        post = F.cross_entropy(post_net(mem.x), mem.y, reduction="none")
    scored = post - pre
    R = scored.topk(2).indices
    expected = copy.deepcopy(learner.net).train()
    with torch.no_grad():
        if form == "split":
            expected(x)
        if flag:
            expected(mem.x)
        expected(mem.x[R]) if form == "split" else expected(torch.cat([x, mem.x[R]]))
    learner.training_step((x, y, t), 0)
    torch.testing.assert_close(learner.memory.score[:9], scored, rtol=0, atol=1e-6)
    bn, want = learner.net.body[1], expected.body[1]
    assert int(bn.num_batches_tracked) == (3 if form == "split" else 2) - (not flag)
    assert torch.equal(bn.running_mean, want.running_mean) and torch.equal(bn.running_var, want.running_var)


@pytest.mark.parametrize(
    "form, forwards, backwards", [("split", [4, 9, 9, 2], [4, 2]), ("concat", [4, 9, 9, 6], [4, 6])]
)
def test_the_split_step_passes_B_t_once_for_the_virtual_step_and_the_update(form, forwards, backwards):
    """MIR's code (mir.py l.304-313): one forward and one backward of B_t (4 samples) give the
    virtual step's gradient and the update's, then the 9 candidates go through under theta and
    theta', then R (2); the concatenated loss passes B_t alone for the virtual step and R + B_t (6)
    for the update. The parameters after the step are the same either way (test_options' references)."""
    seen, back = [], []
    net = toy_net()
    net.register_forward_hook(lambda m, inp, out: seen.append(len(inp[0])))
    net.register_full_backward_hook(lambda m, gin, gout: back.append(len(gout[0])))
    learner = toy_learner(net, memory=toy_memory(TASKS9), replay=MIRReplay(candidates=9), replay_size=2,
                          replay_loss=form)  # fmt: skip
    learner.current_task = 2
    attach_sgd(learner)
    x, y, t = toy_batch(task=2, n=4)
    learner.training_step((x, y, t), 0)
    assert (seen, back) == (forwards, backwards)
    assert learner.shared_batch_grads(x, y, t) is None  # nothing kept after the update


# -- per-task accuracy is micro-averaged (PROTOCOL section 5) -----------------------------------
class LookupLearner(torch.nn.Module):
    """predict(x) = one-hot of x[:, 0]: the prediction is written into the input."""

    def predict(self, x, t):
        return F.one_hot(x[:, 0].long(), 6).float()


class TwoTaskData:
    n_tasks = 2
    device = torch.device("cpu")
    label_map, task_classes = torch.arange(4), torch.tensor([[0, 1], [2, 3]])

    def __init__(self):
        # task 0: three samples of class 0 (all right), one of class 1 (wrong): micro 75, macro 50
        # task 1: one of class 2 (right), five of class 3 (one right): micro 2/6, macro 60
        y0, p0 = torch.tensor([0, 0, 0, 1]), torch.tensor([0, 0, 0, 0])
        y1, p1 = torch.tensor([2, 3, 3, 3, 3, 3]), torch.tensor([2, 3, 2, 2, 2, 2])
        self.data = [(p0.float()[:, None], y0), (p1.float()[:, None], y1)]
        self.tasks = [type("T", (), {"test": d, "val": (d[0][:0], d[1][:0])})() for d in self.data]

    def split(self, k, name):
        x, y = self.data[k] if name == "test" else (self.data[k][0][:0], self.data[k][1][:0])
        return x, y, torch.full_like(y, k)


def test_task_accuracy_is_micro_averaged_and_per_class_is_kept():
    accs, per_class, _ = evaluate(LookupLearner(), TwoTaskData(), "test", chunk=3)  # chunks split a task
    assert accs == pytest.approx([75.0, 100 * 2 / 6])
    assert per_class[0] == pytest.approx({0: 100.0, 1: 0.0})
    assert per_class[1] == pytest.approx({2: 100.0, 3: 20.0})


class RemappedData:
    """Three tasks of two classes each, labels remapped per task (task-IL: classes 2k, 2k+1 -> 0, 1),
    400-700 samples with random predictions written into the inputs; more samples of one class."""

    n_tasks = 3
    device = torch.device("cpu")
    label_map, task_classes = torch.tensor([0, 1, 0, 1, 0, 1]), torch.tensor([[0, 1], [2, 3], [4, 5]])

    def __init__(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.data, self.tasks = [], []
        for k in range(self.n_tasks):
            n = 400 + 150 * k
            cls = torch.where(torch.rand(n, generator=g) < 0.7, 2 * k, 2 * k + 1)  # imbalanced classes
            label = cls - 2 * k
            pred = torch.where(
                torch.rand(n, generator=g) < 0.6 + 0.1 * k, label, torch.randint(0, 6, (n,), generator=g)
            )
            self.data.append((pred.float()[:, None], label))
            self.tasks.append(type("T", (), {"test": (None, cls)})())

    def split(self, k, name):
        x, y = self.data[k]
        return x, y, torch.full_like(y, k)


def test_accuracies_through_torchmetrics_equal_the_exact_counts(monkeypatch):
    """Task accuracy = 100 * correct / total and class accuracy = 100 * (correct / n), bit for bit as
    computed from counts made here by hand, with labels remapped per task; the counts come from
    torchmetrics (called once per task). Its own float32 accuracy, and its default macro average,
    would both differ from the exact numbers."""
    import torchmetrics.functional.classification as tmc

    calls = []
    real = tmc.multiclass_stat_scores
    monkeypatch.setattr(tmc, "multiclass_stat_scores", lambda *a, **k: calls.append(1) or real(*a, **k))
    dm = RemappedData()
    accs, per_class, _ = evaluate(LookupLearner(), dm, "test", chunk=128)
    assert len(calls) == dm.n_tasks
    for k, ((x, label), task) in enumerate(zip(dm.data, dm.tasks)):
        right = [int(p) == int(t) for p, t in zip(x[:, 0].long(), label)]
        assert accs[k] == 100.0 * sum(right) / len(right)  # exact: ==, no tolerance
        cls = task.test[1].tolist()
        expected = {c: 100.0 * (sum(r for r, d in zip(right, cls) if d == c) / cls.count(c)) for c in set(cls)}
        assert per_class[k] == expected
        pred = x[:, 0].long()
        assert 100.0 * float(real(pred, label, 6, average=None)[:, 0].sum()) / len(right) == accs[k]
        assert 100.0 * float(tmc.multiclass_accuracy(pred, label, 6, average="micro")) != accs[k]  # float32
        assert 100.0 * float(tmc.multiclass_accuracy(pred, label, 6)) != pytest.approx(accs[k])  # macro


def test_evaluate_reads_the_requested_split():
    accs, per_class, task_il = evaluate(LookupLearner(), TwoTaskData(), "val")
    assert all(math.isnan(a) for a in accs + task_il) and per_class == [{}, {}]


class ScoresLearner(torch.nn.Module):
    """predict(x) = x: the scores are the inputs."""

    def predict(self, x, t):
        return x


class ScoredData:
    """Two tasks of a 4-class head, each sample's scores written into its input. Task 1's classes
    come in the order (3, 2), as a shuffled class order gives them."""

    n_tasks = 2
    device = torch.device("cpu")
    label_map, task_classes = torch.arange(4), torch.tensor([[0, 1], [3, 2]])
    scores = (  # (label, scores): class-IL right?, task-IL right?
        ((0, (1, 0, 3, 0)),  # no (2), yes (0 of 0, 1)
         (1, (0, 2, 0, 5)),  # no (3), yes
         (1, (4, 2, 0, 0)),  # no, no
         (0, (2, 2, 1, 0))),  # yes (a tie: the first), yes
        ((3, (9, 0, 1, 1)),  # no (0), no (a tie of 2 and 3: the lower label, as a masked argmax over the head)
         (2, (0, 0, 5, 1)),  # yes, yes
         (3, (0, 7, 0, 2))),  # no (1), yes
    )  # fmt: skip

    def __init__(self):
        self.data = [(torch.tensor([s for _, s in task], dtype=torch.float), torch.tensor([y for y, _ in task]))
                     for task in self.scores]  # fmt: skip
        self.tasks = [type("T", (), {"test": d})() for d in self.data]

    def split(self, k, name):
        x, y = self.data[k]
        return x, y, torch.full_like(y, k)


def test_task_il_accuracy_masks_the_same_scores_to_the_evaluated_tasks_classes():
    """Mammoth's mask_classes on the scores of the class-IL evaluation: exact values, a task split
    over chunks, ties broken as an argmax over the whole head with the other tasks' logits at -inf."""
    accs, _, task_il = evaluate(ScoresLearner(), ScoredData(), "test", chunk=3)
    assert accs == [25.0, 100.0 / 3] and task_il == [75.0, 100.0 * 2 / 3]
    for k, (x, y) in enumerate(ScoredData().data):  # the definition, written out: masked, then argmax
        masked = torch.full_like(x, float("-inf"))
        cols = ScoredData.task_classes[k]
        masked[:, cols] = x[:, cols]
        assert task_il[k] == 100.0 * int((masked.argmax(1) == y).sum()) / len(y)


def test_task_il_of_a_shared_head_is_class_il():
    """Domain-IL: every task's labels are the whole head (classes 2k, 2k+1 -> labels 0, 1), so the
    mask changes nothing."""
    dm = ScoredData()
    dm.label_map = torch.tensor([0, 1, 0, 1])
    dm.data = [(x[:, :2], dm.label_map[y]) for x, y in dm.data]
    accs, _, task_il = evaluate(ScoresLearner(), dm, "test")
    assert task_il == accs == [75.0, 100.0 * 2 / 3]


# -- config keys reach the built run (compose -> build) -----------------------------------------
def counts_per_task(dm, learner=None):
    return [sorted(torch.bincount(tk.train[1]).tolist()[min(tk.classes) :]) for tk in dm.tasks]


PLUMBING = [
    # (overrides, probe(dm, learner), expected)
    (["memory=7", "memory_per_class=false"], lambda dm, ln: ln.memory.capacity, 7),
    (["memory=7", "memory_per_class=true"], lambda dm, ln: ln.memory.capacity, 42),  # 6 classes x 7
    (["memory=7", "memory_per_class=true", "method=oewc"], lambda dm, ln: ln.memory.capacity, 0),
    (["batch_size=7"], lambda dm, ln: len(next(iter(dm.train_dataloader()))[1]), 7),
    (["replay_size=7"], lambda dm, ln: ln.replay_size, 7),
    (["replay_loss=split"], lambda dm, ln: ln.replay_loss_form, "split"),
    (["replay_loss=concat"], lambda dm, ln: ln.replay_loss_form, "concat"),
    (["tau=0.3"], lambda dm, ln: ln.replay.tau, 0.3),
    (["benchmark.iters_per_batch=3"], lambda dm, ln: ln.iters_per_batch, 3),
    (["scenario=task_il"], lambda dm, ln: ln.scenario, "task_il"),
    (
        ["scenario=domain_il"],
        lambda dm, ln: (ln.net.head.out_features, dm.split(2, "test")[1].unique().tolist()),
        (2, [0, 1]),
    ),
    (["eval_mask=seen"], lambda dm, ln: ln.eval_mask, "seen"),
    (["lr=0.03"], lambda dm, ln: ln.lr, 0.03),
    (["lambda=0.5"], counts_per_task, [[50, 100]] * 3),  # keep: the minority keeps (1 - lambda) n
    (["lambda=0.2"], counts_per_task, [[80, 100]] * 3),
    (["lambda=0.2", "data.imbalance_semantics=ratio"], counts_per_task, [[20, 100]] * 3),  # ratio: lambda n
    (
        ["data.class_order=random", "seed=3"],
        lambda dm, ln: dm.task_classes.flatten().tolist(),
        np.random.default_rng(3).permutation(6).tolist(),
    ),
    (["data.class_order=natural", "seed=3"], lambda dm, ln: dm.task_classes.flatten().tolist(), list(range(6))),
    (["method=mir", "method.replay.candidates=7"], lambda dm, ln: ln.replay.candidates, 7),
    (["method=mir", "method.replay.exclude_current_task=true"], lambda dm, ln: ln.replay.exclude_current_task, True),
    (["method=mir", "method.replay.compare_to_old_logits=true"], lambda dm, ln: ln.replay.compare_to_old_logits, True),
    (["method=adaer", "method.replay.candidates=7"], lambda dm, ln: ln.replay.candidates, 7),
    (["method=adaer", "method.update.class_ties=random"], lambda dm, ln: ln.update_policy.class_ties, "random"),
    (["method=adaer", "method.update.victim=random"], lambda dm, ln: ln.update_policy.victim_rule, "random"),
    (["method=ebrs", "method.update.unscored=inf"], lambda dm, ln: ln.update_policy.unscored, "inf"),
    (["method=adaer", "method.update.unscored=insertion"], lambda dm, ln: ln.update_policy.unscored, "insertion"),
    (["method=adaer", "method.replay.R_t_from=memory"], lambda dm, ln: ln.replay.R_t_from, "memory"),
    (["method=ccmr", "method.replay.compare_to_old_logits=true"], lambda dm, ln: ln.replay.compare_to_old_logits, True),
    (["method=agem", "method.replay_size=9"], lambda dm, ln: ln.replay_size, 9),
    (["method=agem", "method.replay.exclude_current_task=false"], lambda dm, ln: ln.replay.exclude_current_task, False),
    (
        ["method=agem", "update@method.update=task_reservoir", "method.update.per_task=4"],
        lambda dm, ln: (type(ln.update_policy).__name__, ln.update_policy.per_task),
        ("TaskReservoir", 4),
    ),
    (
        ["method=agem", "update@method.update=class_ring"],
        lambda dm, ln: type(ln.update_policy).__name__,
        "ClassRingBuffer",
    ),
    # the top-level keys a reading sets (PROTOCOL 8) reach the replay policies that read them
    (["method=mir", "exclude_current_task=true"], lambda dm, ln: ln.replay.exclude_current_task, True),
    (["method=mir", "exclude_current_task=false"], lambda dm, ln: ln.replay.exclude_current_task, False),
    (["method=adaer", "exclude_current_task=true"], lambda dm, ln: ln.replay.exclude_current_task, True),
    (["method=er", "exclude_current_task=true"], lambda dm, ln: ln.replay.exclude_current_task, True),
    (["method=adaer", "candidates=9"], lambda dm, ln: ln.replay.candidates, 9),
    (["method=mir", "compare_to_old_logits=true"], lambda dm, ln: ln.replay.compare_to_old_logits, True),
    (["method=mir", "compare_to_old_logits=false"], lambda dm, ln: ln.replay.compare_to_old_logits, False),
    (["method=adaer", "compare_to_old_logits=true"], lambda dm, ln: ln.replay.compare_to_old_logits, True),
    (["method=adaer", "compare_to_old_logits=false"], lambda dm, ln: ln.replay.compare_to_old_logits, False),
    (["method=er", "method.lr=0.05"], lambda dm, ln: ln.lr, 0.05),  # a method's own lr wins over the run's
    (
        ["reading=mir_code", "memory=3"],
        lambda dm, ln: (ln.memory.capacity, ln.replay_size, ln.replay_loss_form),
        (18, 10, "split"),
    ),
    (
        ["reading=paper_text", "memory=3"],
        lambda dm, ln: (ln.memory.capacity, ln.replay_size, ln.replay_loss_form),
        (3, 20, "concat"),
    ),
]


@pytest.mark.parametrize("overrides,probe,expected", PLUMBING, ids=[" ".join(p[0]) for p in PLUMBING])
def test_config_key_reaches_the_run(overrides, probe, expected):
    dm, learner, _ = build(make_cfg(*overrides))
    got = probe(dm, learner)
    assert got == (pytest.approx(expected) if isinstance(expected, float) else expected)


# -- GEM's memory_strength reaches the projection -------------------------------------------------
@pytest.mark.parametrize("strength", [0.0, 0.7])
def test_gem_plugin_projects_with_its_memory_strength(strength):
    mem = toy_memory([0, 0, 0, 1, 1, 1])
    learner = toy_learner(memory=mem, plugin=GEM(memory_strength=strength, eps=1e-3))
    learner.current_task = 2
    params = list(learner.net.parameters())
    x = mem.x[:6]
    F.cross_entropy(learner.net(x), torch.full((6,), 5)).backward()  # pushes the memory's inputs to class 5
    g = flat_grad(params)
    G = torch.stack(
        [
            grad_vector(F.cross_entropy(learner.net(mem.x[k * 3 : k * 3 + 3]), mem.y[k * 3 : k * 3 + 3]), params)
            for k in (0, 1)
        ]
    )
    assert (G @ g < 0).any()
    learner.plugin.before_step(learner, None, None, None, None)
    torch.testing.assert_close(flat_grad(params), gem_project(g, G, strength, 1e-3), rtol=1e-4, atol=1e-6)
    other = gem_project(g, G, 0.7 - strength, 1e-3)
    assert not torch.allclose(flat_grad(params), other, atol=1e-4)


# -- eval_split: b and R are measured on the requested split ------------------------------------
def test_eval_split_val_measures_on_the_validation_samples(tmp_path):
    over = ["method=online", "benchmark.n_tasks=2", "benchmark.train_per_class=20", "data.val_fraction=0.5"]
    over.append("batch_size=20")  # one step per task: accuracies short of 100, so the two splits differ
    res = run_cfg(tmp_path, *over, "eval_split=val")
    dm, learner, _ = build(make_cfg(*over, "eval_split=val"))  # the same seed: the same random init
    b_val = evaluate(learner, dm, "val")[0]
    assert res["eval_split"] == "val"
    assert res["b"] == pytest.approx(b_val)
    # the same training (same seed), measured on the test split instead: another matrix
    res_test = run_cfg(tmp_path / "test", *over, "eval_split=test")
    assert res_test["R"] != res["R"]
    assert res_test["b"] == pytest.approx(evaluate(learner, dm, "test")[0])
    assert len(dm.split(0, "val")[1]) == 20  # half of 2 classes x 20


# -- a plugin's own loss replaces the replay loss (A-GEM, iCaRL) ----------------------------------
def test_learner_steps_on_the_plugins_loss_when_it_has_one():
    from clsuite.core.methods.base import Plugin

    class SquaredLogits(Plugin):
        def loss(self, learner, x, y, t, idx):
            return (learner.net(x) ** 2).mean()

    learner = toy_learner(plugin=SquaredLogits(), lr=0.1)
    attach_sgd(learner)
    x, y, t = toy_batch()
    expected_loss = (learner.net(x) ** 2).mean().detach()
    expected = sgd_reference(learner.net, lambda net: (net(x) ** 2).mean(), 0.1)
    learner.training_step((x, y, t), 0)
    torch.testing.assert_close(learner.last_loss, expected_loss)
    assert_params(learner.net, expected)


# -- Joint's method.epochs: passes over the shuffled union -----------------------------------------
@pytest.mark.parametrize("epochs", [1, 3])
def test_joint_epochs_are_passes_over_the_union_each_reshuffled(tmp_path, monkeypatch, epochs):
    """``method.epochs=k``: k passes, each over every training sample of every task exactly once, in
    a new order; one row of R, measured after the last pass."""
    seen = []
    step = ContinualLearner.training_step

    def recording(self, batch, batch_idx):
        seen.append(batch[0].flatten(1).sum(1))  # one number per sample: which samples, in which order
        return step(self, batch, batch_idx)

    monkeypatch.setattr(ContinualLearner, "training_step", recording)
    slow = "lr=0.001"  # short of 100% after one pass on the synthetic clusters, so more passes show in R
    res = run_cfg(tmp_path, "method=joint", f"method.epochs={epochs}", slow)
    cfg = make_cfg()
    n = cfg.benchmark.train_per_class * cfg.benchmark.classes_per_task * cfg.benchmark.n_tasks
    assert res["steps_per_task"] == [epochs * -(-n // cfg.batch_size)]
    assert len(res["R"]) == 1
    order = torch.cat(seen)
    passes = order.view(epochs, n)
    for p in passes:  # each pass: the union, every sample once
        torch.testing.assert_close(p.sort().values, passes[0].sort().values)
    if epochs > 1:
        assert not torch.equal(passes[0], passes[1])  # reshuffled between passes
        one = run_cfg(tmp_path / "one", "method=joint", "method.epochs=1", slow)
        assert one["metrics"]["acc"] < res["metrics"]["acc"]  # the key changes the result


# -- data.input_range: MIR's [-1, 1] inputs on the CIFAR family -------------------------------------
def test_input_range_symmetric_is_mirs_rescaling_of_every_split_exactly():
    """symmetric: (x / 255 - 0.5) * 2 in MIR's order of operations (data.py l.34, l.43), on every split;
    unit (and null, the key's absence): x / 255 as before."""
    over = ["method=online", "benchmark.n_tasks=2", "benchmark.train_per_class=20", "data.val_fraction=0.25"]
    unit = build(make_cfg(*over))[0]
    default = build(make_cfg(*over, "data.input_range=unit"))[0]
    sym = build(make_cfg(*over, "data.input_range=symmetric"))[0]
    for k in range(2):
        for split in ("train", "val", "test"):
            x_unit, x_sym = unit.split(k, split)[0], sym.split(k, split)[0]
            assert torch.equal(default.split(k, split)[0], x_unit)
            assert torch.equal(x_sym, (x_unit - 0.5) * 2)
            assert torch.equal(sym.split(k, split)[1], unit.split(k, split)[1])
    x = torch.cat([sym.split(k, "train")[0] for k in range(2)])
    assert x.min() < -0.5 and x.max() <= 1.0 and x.min() >= -1.0


def test_input_range_moves_the_result(tmp_path):
    over = ["method=er", "benchmark.n_tasks=2", "benchmark.train_per_class=20", "memory=10"]
    unit = run_cfg(tmp_path / "unit", *over)
    sym = run_cfg(tmp_path / "sym", *over, "data.input_range=symmetric")
    assert sym["R"] != unit["R"] and sym["b"] != unit["b"]
    assert sym["config"]["data"]["input_range"] == "symmetric"


# -- eval_bn: BatchNorm statistics re-estimated over the memory for each evaluation --------------------
def test_eval_bn_memory_re_estimates_over_the_memory_and_restores_the_training_statistics(monkeypatch):
    """Inside ``bn_from_memory``: the running mean and variance are the mean over near-equal chunks of the
    memory's slots (slot order) of each chunk's batch mean and unbiased variance of the BatchNorm input;
    outside: the training's statistics, counter and momentum exactly as they were."""
    from clsuite.core import callbacks

    monkeypatch.setattr(callbacks, "BN_BATCH", 4)  # 9 slots -> chunks of 3, 3, 3
    learner = toy_learner(BNNet(), memory=toy_memory(TASKS9))
    bn = learner.net.body[1]
    learner.net.train()
    with torch.no_grad():
        learner.net(torch.randn(7, D, generator=torch.Generator().manual_seed(5)))  # some training statistics
    before = (bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone(), bn.momentum)
    with torch.no_grad():
        h = learner.net.body[0](learner.memory.x[:9])  # the BatchNorm's input, per slot
    chunks = h.split(3)
    want_mean = torch.stack([c.mean(0) for c in chunks]).mean(0)
    want_var = torch.stack([c.var(0, unbiased=True) for c in chunks]).mean(0)
    learner.net.eval()
    with callbacks.bn_from_memory(learner):
        torch.testing.assert_close(bn.running_mean, want_mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(bn.running_var, want_var, rtol=0, atol=1e-6)
        assert not learner.net.training  # the evaluation's mode
    assert torch.equal(bn.running_mean, before[0]) and torch.equal(bn.running_var, before[1])
    assert torch.equal(bn.num_batches_tracked, before[2]) and bn.momentum == before[3]


def test_eval_bn_memory_changes_the_evaluation_only(monkeypatch):
    """AccuracyMatrix evaluates inside ``bn_from_memory`` under eval_bn=memory (the statistics the
    evaluation sees are the memory's), outside it under running; the learner's statistics afterwards are
    the training's either way (the training is unchanged)."""
    from clsuite.core import callbacks

    learner = toy_learner(BNNet(), memory=toy_memory(TASKS9))
    bn = learner.net.body[1]
    learner.net.train()
    with torch.no_grad():
        learner.net(torch.randn(7, D, generator=torch.Generator().manual_seed(5)))
    stats = copy.deepcopy(bn.state_dict())
    seen = []
    monkeypatch.setattr(callbacks, "evaluate", lambda lrn, dm, split: seen.append(bn.running_mean.clone()) or (0, 0, 0))
    dm = type("DM", (), {"device": torch.device("cpu")})()
    callbacks.AccuracyMatrix(dm)._evaluate(learner)
    callbacks.AccuracyMatrix(dm, eval_bn="memory")._evaluate(learner)
    with torch.no_grad(), callbacks.bn_from_memory(learner):
        memory_mean = bn.running_mean.clone()
    assert torch.equal(seen[0], stats["running_mean"]) and torch.equal(seen[1], memory_mean)
    assert not torch.allclose(seen[0], seen[1])
    assert all(torch.equal(bn.state_dict()[k], v) for k, v in stats.items())
    with pytest.raises(ValueError, match="valid: running, memory"):
        callbacks.AccuracyMatrix(dm, eval_bn="batch")


# -- model.norm_groups: Continual Normalization in place of BatchNorm ------------------------------------
def test_continual_norm_is_group_norm_then_batch_norm_by_hand():
    """Pham et al. (ICLR 2022): per sample, G groups of channels normalised (no scale or shift), then BatchNorm
    with its own statistics and affine; in train mode the running averages move by momentum 0.1 with the
    unbiased variance of the GroupNorm's output."""
    x = torch.arange(48, dtype=torch.float32).reshape(2, 4, 3, 2) ** 1.5 / 10  # N=2, C=4, H=3, W=2
    w, b = torch.tensor([1.0, 2.0, 0.5, -1.0]), torch.tensor([0.0, 1.0, -1.0, 2.0])
    cn = ContinualNorm(4, groups=2)
    with torch.no_grad():
        cn.weight.copy_(w), cn.bias.copy_(b)
    out = cn(x)
    g = x.reshape(2, 2, -1)  # per sample: channels {0, 1} and {2, 3}, 12 values each
    gn = ((g - g.mean(-1, keepdim=True)) / torch.sqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)).reshape(x.shape)
    m, v = gn.mean((0, 2, 3)), gn.var((0, 2, 3), unbiased=False)
    c = lambda t: t[None, :, None, None]  # noqa: E731
    torch.testing.assert_close(out, (gn - c(m)) / torch.sqrt(c(v) + 1e-5) * c(w) + c(b), rtol=0, atol=1e-5)
    torch.testing.assert_close(cn.running_mean, 0.1 * m, rtol=0, atol=1e-6)
    torch.testing.assert_close(cn.running_var, 0.9 + 0.1 * gn.var((0, 2, 3), unbiased=True), rtol=0, atol=1e-6)
    cn.eval()  # evaluation: the running statistics, after the same GroupNorm
    rm, rv = cn.running_mean, cn.running_var
    torch.testing.assert_close(cn(x), (gn - c(rm)) / torch.sqrt(c(rv) + 1e-5) * c(w) + c(b), rtol=0, atol=1e-5)


RESNET = ["benchmark.synthetic.shape=[3,8,8]", "benchmark.backbone=resnet18", "model.nf=4", "benchmark.n_tasks=2",
          "benchmark.train_per_class=20", "memory=10", "method=er"]  # fmt: skip


def test_norm_groups_replaces_every_batchnorm_of_the_run_and_moves_its_result(tmp_path):
    """null: the paper's BatchNorm everywhere; G: every norm layer (stem, blocks, shortcuts: 20) is Continual
    Normalization with G groups, and the run's R changes."""
    norms = lambda net: [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]  # noqa: E731
    bn = norms(build(make_cfg(*RESNET))[1].net)
    cn = norms(build(make_cfg(*RESNET, "model.norm_groups=2"))[1].net)
    assert len(bn) == len(cn) == 20 and not any(isinstance(m, ContinualNorm) for m in bn)
    assert all(isinstance(m, ContinualNorm) and m.groups == 2 for m in cn)
    plain, cont = run_cfg(tmp_path / "bn", *RESNET), run_cfg(tmp_path / "cn", *RESNET, "model.norm_groups=2")
    assert cont["R"] != plain["R"] and cont["config"]["model"]["norm_groups"] == 2
