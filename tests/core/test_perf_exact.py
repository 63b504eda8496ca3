"""The speed paths give the numbers of the paths they replace.

GSS's scores and oEWC's Fisher take per-sample gradients from one batched backward
(``clsuite.core.models.grads.per_sample_grads``) instead of ``torch.func.vmap``; dataset files are
decoded once per process. Each test compares with the slow path, forced, on real-shaped data.

Bit for bit where both paths run the same kernels in the same order whatever the CPU picks
(marker ``exact``: ``make test`` reruns them under other ATen / MKL kernel levels). oEWC's
blocked Fisher calls BLAS with another shape than the one-tensor sum, which some kernels (MKL's
AVX-512 branch) sum in another order: in-process it is compared within the rounding bound of a
sum of non-negative terms, and bit for bit only under pinned kernels (``trainer.numerics=portable``,
in a fresh process: ``tests.conftest.in_portable_process``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import clsuite.core.methods.oewc as oewc
from clsuite.core.data.files import load_mnist_like
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.gss_greedy import GSSGreedy, _vmap_grads, flat_grads
from clsuite.core.models.grads import per_sample_grads
from clsuite.core.models.nets import build_model
from tests.conftest import in_portable_process
from tests.core.test_data import fake_mnist


class Learner:
    """What the gradient code reads of a learner: the net and the scenario's logit mask."""

    def __init__(self, net, task_il=False):
        self.net, self.task_il = net, task_il

    def logit_mask(self, t):
        if not self.task_il:
            return torch.ones(len(t), 10, dtype=torch.bool)
        mask = torch.zeros(len(t), 10, dtype=torch.bool)
        return mask.scatter_(1, torch.stack([2 * t, 2 * t + 1], 1), True)


def trained_mlp(seed=0, n=64):
    """An MLP 784-400-400-10 after a few SGD steps (gradients of every size, no exact zeros)."""
    torch.manual_seed(seed)
    x, y = torch.rand(n, 1, 28, 28), torch.randint(0, 10, (n,))
    net = build_model("mlp", (1, 28, 28), 10)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    return net, x, y


@pytest.mark.exact
@pytest.mark.parametrize("task_il", [False, True])
@pytest.mark.parametrize("groups", [0, 7])
def test_gss_gradients_equal_vmap_bit_for_bit(task_il, groups):
    net, x, y = trained_mlp()
    x, y, t = x[:7], y[:7], torch.arange(7) % 5
    learner = Learner(net, task_il)
    fast = flat_grads(learner, x, y, t, groups=groups)
    slow = _vmap_grads(net.eval(), x, y, learner.logit_mask(t), groups)
    assert fast.shape == (7, sum(p.numel() for p in net.parameters()))
    assert torch.equal(fast, slow)
    net.train()
    flat_grads(learner, x, y, t)
    assert net.training  # flat_grads restores the training mode


@pytest.mark.exact
def test_gss_scores_unchanged_by_in_place_normalisation():
    net, x, y = trained_mlp(1)
    learner = Learner(net)
    mem = Memory(20, (1, 28, 28), 10)
    mem.append(x[:20], y[:20], torch.zeros(20, dtype=torch.long))
    torch.manual_seed(3)
    exact = GSSGreedy(n_mem_grads=10, cosines="exact")
    c, c_B = exact.scores(learner, mem, x[20:30], y[20:30], torch.zeros(10, dtype=torch.long))
    torch.manual_seed(3)
    idx = torch.randperm(mem.size)[:10]
    G = F.normalize(_vmap_grads(net.eval(), x[:20][idx], y[:20][idx], torch.ones(10, 10, dtype=torch.bool), 10), dim=1)
    g = _vmap_grads(net, x[20:30], y[20:30], torch.ones(10, 10, dtype=torch.bool), 0)
    g_B = F.normalize(g.mean(0, keepdim=True), dim=1)  # the batch's mean-loss gradient (the gate)
    g = F.normalize(g, dim=1)
    assert torch.equal(c, (g @ G.T).max(dim=1).values + 1.0)
    assert torch.equal(c_B, (g_B @ G.T).max() + 1.0)


def test_per_sample_grads_declines_other_networks():
    net = build_model("resnet18", (3, 32, 32), 10)
    assert per_sample_grads(net, torch.rand(2, 3, 32, 32), lambda out: out.sum(1)) is None


@pytest.mark.exact
def test_oewc_fisher_equals_vmap_path_bit_for_bit(monkeypatch):
    net, x, y = trained_mlp(2, n=150)
    learner = Learner(net)
    t = torch.zeros_like(y)
    fast = oewc.empirical_fisher(learner, x, y, t, chunk=64)  # chunks of 64, 64, 22
    monkeypatch.setattr(oewc, "linear_factors", lambda *a, **k: None)  # force the vmap path
    slow = oewc.empirical_fisher(learner, x, y, t, chunk=64)
    assert fast.abs().sum() > 0
    assert torch.equal(fast, slow)


def test_dataset_files_are_decoded_once_per_process(tmp_path):
    fake_mnist(tmp_path, "MNIST", per_class_train=5, per_class_test=2)
    a = load_mnist_like(tmp_path, "MNIST", verify=False)
    b = load_mnist_like(tmp_path, "MNIST", verify=False)
    assert all(u is v for u, v in zip(a, b, strict=True))  # the same arrays: no second decode
    assert not any(arr.flags.writeable for arr in a)  # shared read-only: no job can change another's
    fake_mnist(tmp_path / "other", "MNIST", per_class_train=6, per_class_test=2)
    c = load_mnist_like(tmp_path / "other", "MNIST", verify=False)
    assert len(c[1]) == 60 and len(a[1]) == 50  # other files: their own arrays
    np.testing.assert_array_equal(a[1], load_mnist_like(tmp_path, "MNIST", verify=False)[1])


BLOCKS = [1, 4 * 9 * 13 * 3, 1 << 30]  # one row, 3 rows (ragged tail), all


def _blocked_and_one_tensor(block_bytes):
    torch.manual_seed(4)
    w, a, d = torch.rand(9), torch.rand(9, 13), torch.randn(9, 7)
    acc = torch.rand(7 * 13)
    terms = w[:, None] * (d[:, :, None] * a[:, None, :]).reshape(9, -1).pow(2)  # 9 non-negative terms per entry
    expected = acc + w @ (d[:, :, None] * a[:, None, :]).reshape(9, -1).pow(2)
    bound = acc + terms.sum(0)  # the sum of the magnitudes: every term is >= 0
    oewc._add_weighted_squares(acc, w, a, d, block_bytes)
    return acc, expected, bound


@pytest.mark.parametrize("block_bytes", BLOCKS)
def test_fisher_blocks_sum_like_one_tensor(block_bytes):
    """Within float32's bound for two summation orders of 9 non-negative products and one add:
    each side is within (9 + 1) u of the exact sum (u = 2^-24), so they differ by at most 20 u of
    it; MKL's AVX-512 branch gives up to 2.4e-7 here (13 of 91 entries), a wrong block up to 100%."""
    acc, expected, bound = _blocked_and_one_tensor(block_bytes)
    assert ((acc - expected).abs() <= 20 * 2.0**-24 * bound).all()


@pytest.mark.exact
@pytest.mark.pinned  # its process pins portable kernels over any level `make test` sets: one run is every run
def test_fisher_blocks_bit_identical_under_portable_numerics():
    """Under pinned kernels (trainer.numerics=portable) the blocks sum exactly like the one tensor."""
    out = in_portable_process(
        "from tests.core.test_perf_exact import BLOCKS, _blocked_and_one_tensor\n"
        "import torch\n"
        "print([bool(torch.equal(*_blocked_and_one_tensor(b)[:2])) for b in BLOCKS])"
    )
    assert out.strip() == "[True, True, True]"


def test_gss_gram_cosines_match_exact_ones_and_draw_the_same_memory():
    net, x, y = trained_mlp(5)
    learner = Learner(net)
    mem = Memory(30, (1, 28, 28), 10)
    mem.append(x[:30], y[:30], torch.zeros(30, dtype=torch.long))
    t = torch.zeros(10, dtype=torch.long)
    scores = {}
    for cosines in ("exact", "gram"):
        torch.manual_seed(6)
        found = GSSGreedy(n_mem_grads=10, cosines=cosines).scores(learner, mem, x[30:40], y[30:40], t)
        scores[cosines], scores[cosines + " batch"] = found
        scores[cosines + " next draw"] = torch.rand(1)  # the same random stream consumed
    assert torch.equal(scores["exact next draw"], scores["gram next draw"])
    torch.testing.assert_close(scores["gram"], scores["exact"], rtol=0, atol=1e-5)
    torch.testing.assert_close(scores["gram batch"], scores["exact batch"], rtol=0, atol=1e-5)  # the gate too
    assert not torch.equal(scores["gram"], scores["exact"])  # another summation order: last bits differ


def test_gss_cosines_option_is_checked():
    with pytest.raises(ValueError, match="valid: exact, gram"):
        GSSGreedy(cosines="fast")


@pytest.mark.exact
@pytest.mark.parametrize("e_lambda", [100.0, 0.1 + 1e-9])  # (the second is not a float32: rounded as autograd does)
def test_oewc_penalty_gradient_added_directly_equals_autograd_bit_for_bit(e_lambda):
    net, x, y = trained_mlp(7)
    params = list(net.parameters())
    g = torch.Generator().manual_seed(8)
    theta = torch.cat([p.detach().flatten() for p in params])
    plugin = oewc.OnlineEWC(e_lambda=e_lambda)
    plugin.fisher = torch.rand(theta.numel(), generator=g) * 1e-3
    plugin.anchor = theta + 1e-2 * torch.randn(theta.numel(), generator=g)
    learner = Learner(net)

    def grads(loss):
        for p in params:
            p.grad = torch.full_like(p, 0.0)  # zeroed, not None: as the learner's zero_grad(set_to_none=False)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in params]

    flat = torch.cat([p.reshape(-1) for p in params])  # the autograd penalty this replaces
    old_loss, old = grads(F.cross_entropy(net(x), y) + e_lambda * (plugin.fisher * (flat - plugin.anchor) ** 2).sum())
    new_loss, new = grads(F.cross_entropy(net(x), y) + plugin.penalty(learner))
    plugin.before_step(learner, x, y, None, None)
    new = [p.grad.clone() for p in params]
    assert torch.equal(new_loss, old_loss)  # the logged loss too
    assert all(torch.equal(a, b) for a, b in zip(old, new, strict=True))
    assert "_diff" not in plugin.state_dict()  # the step's theta - theta* is not checkpointed
