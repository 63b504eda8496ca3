"""oEWC, SI, GEM, A-GEM: their equations on small hand-checkable cases, then whole runs."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.task_ring import TaskRingBuffer
from clsuite.core.methods.agem import AGEM, agem_project
from clsuite.core.methods.gem import GEM, gem_project
from clsuite.core.methods.oewc import OnlineEWC, empirical_fisher
from clsuite.core.methods.si import SI
from clsuite.core.models.grads import flat_grad, flat_params, grad_vector, write_grad
from tests.conftest import run_cfg


class TinyNet(nn.Module):
    def __init__(self, d_in=4, n_cls=3, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Sequential(nn.Linear(d_in, 5), nn.Tanh())
        self.head = nn.Linear(5, n_cls)

    def forward(self, x):
        return self.head(self.body(x))


def tiny_learner(net, memory=None, current_task=0):
    """The parts of ContinualLearner the plugins use (class-IL: logits = net output)."""
    return SimpleNamespace(
        net=net,
        memory=memory,
        current_task=current_task,
        logits=lambda x, t, net_out=None: net(x) if net_out is None else net_out,
        logit_mask=lambda t: torch.ones(len(t), net.head.out_features, dtype=torch.bool),
    )


# -- gradient vectors ---------------------------------------------------------
def test_flat_grad_and_write_grad_round_trip():
    net = TinyNet()
    params = list(net.parameters())
    F.cross_entropy(net(torch.randn(6, 4)), torch.randint(0, 3, (6,))).backward()
    g = flat_grad(params)
    assert g.numel() == sum(p.numel() for p in params)
    write_grad(params, 2 * g)
    assert torch.allclose(flat_grad(params), 2 * g)
    loss = F.cross_entropy(net(torch.randn(6, 4)), torch.randint(0, 3, (6,)))
    before = flat_grad(params)
    v = grad_vector(loss, params)
    assert torch.equal(flat_grad(params), before)  # grad_vector leaves .grad alone
    assert v.shape == g.shape


# -- GEM ------------------------------------------------------------------------
def brute_force_projection(g, G, tol=1e-9):
    """argmin_z ||z - g||^2 s.t. G z >= 0, by enumerating active sets (KKT: v >= 0, feasible)."""
    best = None
    for r in range(len(G) + 1):
        for S in itertools.combinations(range(len(G)), r):
            S = list(S)
            if S:
                GS = G[S]
                v = np.linalg.solve(GS @ GS.T, -GS @ g)
                if (v < -tol).any():
                    continue
                z = g + GS.T @ v
            else:
                z = g.copy()
            if (G @ z >= -1e-7).all() and (best is None or np.sum((z - g) ** 2) < np.sum((best - g) ** 2)):
                best = z
    return best


@pytest.mark.parametrize("seed", range(6))
def test_gem_projection_is_the_closest_feasible_gradient(seed):
    rng = np.random.default_rng(seed)
    d, k = 6, 3
    G = rng.normal(size=(k, d))
    g = -G[0] + 0.3 * rng.normal(size=d)  # conflicts with task 0 at least
    assert (G @ g < 0).any()
    out = gem_project(torch.tensor(g), torch.tensor(G), margin=0.0, eps=1e-10).numpy()
    assert (G @ out >= -1e-6).all()  # every past-task constraint <g~, g_k> >= 0
    np.testing.assert_allclose(out, brute_force_projection(g, G), atol=1e-6)


def test_gem_margin_projects_g_plus_margin_times_memory_gradients():
    # the code's memory_strength bounds the dual (v >= margin): g~ = proj(g + margin * sum_k g_k)
    rng = np.random.default_rng(7)
    G, g = rng.normal(size=(2, 5)), rng.normal(size=5)
    g = g - 2 * G[1]
    out = gem_project(torch.tensor(g), torch.tensor(G), margin=0.5, eps=1e-10).numpy()
    assert (G @ out >= -1e-6).all()
    np.testing.assert_allclose(out, brute_force_projection(g + 0.5 * G.sum(0), G), atol=1e-6)


def test_gem_plugin_enforces_one_constraint_per_past_task():
    net = TinyNet(seed=1)
    mem = Memory(30, (4,), 3)
    torch.manual_seed(0)
    for k in range(2):  # two past tasks in memory, 10 samples each
        mem.append(torch.randn(10, 4) + 3 * k, torch.full((10,), k), torch.full((10,), k))
    learner = tiny_learner(net, mem, current_task=2)
    params = list(net.parameters())
    mx, my, _ = mem.get(torch.arange(mem.size))
    # a current batch that pushes towards class 2 on the memory's own inputs: conflicts
    F.cross_entropy(net(mx), torch.full((len(my),), 2)).backward()
    g = flat_grad(params)
    slots = [(mem.t[: mem.size] == k).nonzero().squeeze(1) for k in range(2)]
    G = torch.stack([grad_vector(F.cross_entropy(net(mem.x[s]), mem.y[s]), params) for s in slots])
    assert (G @ g < 0).any()
    GEM(memory_strength=0.0, eps=1e-8).before_step(learner, None, None, None, None)
    g_new = flat_grad(params)
    assert (G @ g_new >= -1e-5 * G.norm(dim=1) * g_new.norm()).all()
    assert not torch.allclose(g_new, g)


def test_gem_plugin_leaves_gradient_alone_without_conflict_or_past_tasks():
    net = TinyNet(seed=2)
    mem = Memory(20, (4,), 3)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    mem.append(x, y, torch.zeros(10, dtype=torch.long))
    params = list(net.parameters())
    F.cross_entropy(net(x), y).backward()  # same data as task 0's memory: g . g_0 > 0
    g = flat_grad(params)
    GEM().before_step(tiny_learner(net, mem, current_task=1), None, None, None, None)
    assert torch.equal(flat_grad(params), g)
    GEM().before_step(tiny_learner(net, mem, current_task=0), None, None, None, None)  # task 0's own memory
    assert torch.equal(flat_grad(params), g)


def test_task_ring_buffer_keeps_the_last_m_over_t_of_each_task():
    mem = Memory(10, (1,), 4)
    ring = TaskRingBuffer(n_tasks=3)  # M // T = 3 slots per task (slots 0-2, 3-5, 6-8; 9 unused)
    for task, values in [(0, [0, 1, 2, 3]), (0, [10, 11, 12]), (1, [100, 101])]:
        n = len(values)
        ring.update(
            mem, torch.tensor(values, dtype=torch.float32)[:, None], torch.full((n,), task), torch.full((n,), task)
        )
    # task 0's 7 samples went to slots 0,1,2,0,1,2,0 in turn: the last three remain, in ring order
    assert mem.x[:3, 0].tolist() == [12.0, 10.0, 11.0]
    assert mem.t[:3].tolist() == [0, 0, 0]
    assert mem.size == 5 and mem.t[3:5].tolist() == [1, 1] and mem.x[3:5, 0].tolist() == [100.0, 101.0]
    assert mem.seen == 9


# -- A-GEM ----------------------------------------------------------------------
def test_agem_projection_formula_by_hand():
    g, g_ref = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    out = agem_project(g, g_ref)  # g.g_ref = -1, |g_ref|^2 = 2: g + 0.5 g_ref
    assert torch.allclose(out, torch.tensor([0.5, 0.5]))
    assert torch.dot(out, g_ref).abs() < 1e-7
    g2 = torch.tensor([1.0, 1.0])
    assert torch.equal(agem_project(g2, torch.tensor([1.0, 0.0])), g2)  # no conflict: unchanged
    assert torch.equal(agem_project(g2, torch.tensor([1.0, -1.0])), g2)  # orthogonal: unchanged
    g3 = torch.tensor([0.5, 1.0])
    assert torch.equal(agem_project(g3, torch.tensor([1.0, 0.0])), g3)  # a small positive g.g_ref: unchanged


def test_gem_projection_with_one_constraint_by_hand():
    """k = 1: the dual is min_v 1/2 (G G' + eps) v^2 + (G g) v subject to v >= margin, so
    v* = max(margin, -(G g) / (G G' + eps)) and g~ = G' v* + g (eps regularises, it does not subtract)."""
    G, g = torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.tensor([-1.0, 1.0], dtype=torch.float64)
    for margin, eps in ((0.0, 0.1), (0.0, 1e-3), (2.0, 0.1)):
        v = max(margin, 1.0 / (1.0 + eps))
        torch.testing.assert_close(
            gem_project(g, G, margin=margin, eps=eps), torch.tensor([-1.0 + v, 1.0], dtype=torch.float64)
        )


def test_agem_plugin_projects_against_the_memory_batch():
    net = TinyNet(seed=3)
    mem = Memory(10, (4,), 3)
    mx, my = torch.randn(10, 4), torch.zeros(10, dtype=torch.long)
    mem.append(mx, my, torch.zeros(10, dtype=torch.long))
    learner = tiny_learner(net, mem, current_task=1)
    plugin, params = AGEM(), list(net.parameters())
    plugin.loss(learner, mx, torch.ones(10, dtype=torch.long), None, None).backward()  # conflicts with memory
    g = flat_grad(params)
    g_ref = grad_vector(F.cross_entropy(net(mx), my), params)
    assert torch.dot(g, g_ref) < 0
    plugin.before_step(learner, None, None, None, torch.arange(10))
    assert torch.allclose(flat_grad(params), agem_project(g, g_ref), atol=1e-6)
    assert torch.dot(flat_grad(params), g_ref).abs() < 1e-5


# -- oEWC -----------------------------------------------------------------------
def fake_datamodule(n=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, 4, generator=gen), torch.randint(0, 3, (n,), generator=gen)
    return SimpleNamespace(split=lambda k, name: (x, y, torch.full_like(y, k)))


def test_oewc_fisher_matches_a_per_sample_loop():
    net = TinyNet(seed=4)
    x, y, t = fake_datamodule().split(0, "train")
    params = list(net.parameters())
    ref = torch.zeros(sum(p.numel() for p in params))
    for xi, yi in zip(x, y):
        logp = F.log_softmax(net(xi[None]), 1)[0, yi]
        ref += logp.exp().detach() * grad_vector(logp, params) ** 2  # Mammoth's weighting p(y|x)
    fisher = empirical_fisher(tiny_learner(net), x, y, t, chunk=7)
    assert torch.allclose(fisher, ref / len(y), rtol=1e-4, atol=1e-8)


def test_oewc_penalty_zero_at_anchor_and_quadratic():
    net = TinyNet(seed=5)
    learner, plugin = tiny_learner(net), OnlineEWC(e_lambda=3.0, gamma=0.5)
    assert plugin.penalty(learner) == 0.0  # no task ended yet
    plugin.on_task_end(learner, 0, fake_datamodule())
    assert float(plugin.penalty(learner).detach()) == 0.0  # at the anchor theta*
    params = list(net.parameters())
    theta0, direction = flat_params(params).detach().clone(), torch.randn(plugin.anchor.numel())

    def penalty_at(scale):
        torch.nn.utils.vector_to_parameters(theta0 + scale * direction, params)
        return float(plugin.penalty(learner).detach())

    p1, p2 = penalty_at(0.1), penalty_at(0.2)
    assert p1 > 0
    assert p2 == pytest.approx(4 * p1, rel=1e-4)  # x2 distance -> x4 penalty
    expected = 3.0 * (plugin.fisher * (0.1 * direction) ** 2).sum()
    assert penalty_at(0.1) == pytest.approx(float(expected), rel=1e-4)


def test_oewc_fisher_is_decayed_by_gamma_and_accumulated():
    net = TinyNet(seed=6)
    learner, plugin = tiny_learner(net), OnlineEWC(e_lambda=1.0, gamma=0.5)
    dm0, dm1 = fake_datamodule(seed=0), fake_datamodule(seed=1)
    plugin.on_task_end(learner, 0, dm0)
    f0 = plugin.fisher.clone()
    plugin.on_task_end(learner, 1, dm1)
    f1 = empirical_fisher(learner, *dm1.split(1, "train"))
    assert torch.allclose(plugin.fisher, 0.5 * f0 + f1, rtol=1e-5, atol=1e-10)


# -- SI -------------------------------------------------------------------------
def test_si_importances_non_negative_and_accumulate():
    torch.manual_seed(0)
    net = TinyNet(seed=7)
    learner, lr = tiny_learner(net), 0.1
    plugin = SI(c=0.5, xi=0.1, clip=None)
    plugin.setup(learner)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    params = list(net.parameters())
    omegas, path = [], torch.zeros(plugin.anchor.numel())
    for task in range(2):
        x, y = torch.randn(60, 4) + 2 * task, torch.randint(0, 3, (60,))
        for i in range(0, 60, 10):
            opt.zero_grad()
            F.cross_entropy(net(x[i : i + 10]), y[i : i + 10]).backward()
            g = flat_grad(params)
            plugin.before_step(learner, None, None, None, None)
            opt.step()
            plugin.after_step(learner)
            if task == 0:
                path += lr * g**2  # SGD on the task loss alone: -g . delta_theta = lr g^2
        if task == 0:
            assert torch.allclose(plugin.omega, path, rtol=1e-4, atol=1e-9)  # eq. 3
        plugin.on_task_end(learner, task, None)
        omegas.append(plugin.big_omega.clone())
    assert (omegas[0] >= 0).all() and (omegas[1] >= 0).all()
    assert omegas[0].sum() > 0
    assert (omegas[1] >= omegas[0]).all() and (omegas[1] > omegas[0]).any()  # Omega accumulates
    assert float(plugin.surrogate(learner).detach()) == 0.0  # at the new anchor theta~


def test_si_adds_the_surrogate_gradient():
    net = TinyNet(seed=8)
    learner = tiny_learner(net)
    plugin = SI(c=2.0, xi=0.1, clip=None)
    plugin.setup(learner)
    plugin.big_omega = torch.rand(plugin.anchor.numel())
    params = list(net.parameters())
    with torch.no_grad():
        for p in params:
            p.add_(0.05)
    F.cross_entropy(net(torch.randn(5, 4)), torch.randint(0, 3, (5,))).backward()
    g = flat_grad(params)
    expected = g + grad_vector(plugin.surrogate(learner), params)
    plugin.before_step(learner, None, None, None, None)
    assert torch.allclose(flat_grad(params), expected, atol=1e-6)


# -- whole runs (synthetic, 3 tasks x 2 classes) ------------------------------
@pytest.mark.parametrize("method", ["oewc", "si", "gem", "agem"])
def test_method_learns_every_task(tmp_path, method):
    res = run_cfg(tmp_path, f"method={method}")
    R = np.asarray(res["R"])
    assert R.shape == (3, 3)
    assert all(R[k, k] > 60 for k in range(3))  # chance is 1/6
    assert res["config"]["method"]["name"] == method
    assert res["memory_capacity"] == (0 if method in ("oewc", "si") else 600)  # mir_code: M = 100 per class, 6 classes
    if method == "gem":  # its constraints keep the past tasks (online/oEWC/SI/A-GEM forget them here)
        assert R[-1, :-1].mean() > 60
