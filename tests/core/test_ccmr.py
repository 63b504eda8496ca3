"""C-CMR replay selection (Algorithm 1, Eq. 5), with the scores fixed by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from clsuite.core.memory.buffer import Memory
from clsuite.core.replay import ccmr
from clsuite.core.replay.ccmr import CCMRReplay, largest_remainder, sample_per_group


def fake_learner(tasks, scores, monkeypatch):
    """A memory whose slot i has task tasks[i]; score_slots returns ``scores``."""
    n = len(tasks)
    mem = Memory(n, (2,), 10)
    mem.append(torch.zeros(n, 2), torch.arange(n) % 10, torch.tensor(tasks))
    scores = torch.as_tensor(scores, dtype=torch.float32)

    def fake_score(learner, x, y, t, slots, compare_to_old_logits=False, updates_bn=False):
        learner.memory.score[slots] = scores[slots]
        return scores[slots]

    monkeypatch.setattr(ccmr, "score_slots", fake_score)
    return SimpleNamespace(memory=mem, current_task=4)


def select(learner, tau, n=20, **kw):
    return CCMRReplay(tau=tau, **kw).select(learner, None, None, None, n)


def test_largest_remainder_sums_and_follows_weights():
    q = largest_remainder(torch.tensor([7, 2, 1]), 10)
    assert q.tolist() == [7, 2, 1]
    q = largest_remainder(torch.tensor([5, 3, 2]), 7)  # shares 3.5, 2.1, 1.4 -> 3+2+1, one more to task 0
    assert q.tolist() == [4, 2, 1]
    for total in range(0, 30):
        w = torch.tensor([3, 0, 5, 1])
        q = largest_remainder(w, total)
        assert int(q.sum()) == total and q[1] == 0
        assert ((q.double() - w * total / w.sum()).abs() < 1).all()


def test_sample_per_group_draws_exact_quotas_without_repeats():
    groups = torch.tensor([0] * 10 + [1] * 10 + [2] * 10)
    for _ in range(20):
        pick = sample_per_group(groups, torch.tensor([3, 0, 5]))
        assert len(set(pick.tolist())) == len(pick) == 8
        assert torch.bincount(groups[pick], minlength=3).tolist() == [3, 0, 5]


def test_R_e_is_the_top_p_and_R_t_follows_p_j(monkeypatch):
    torch.manual_seed(0)
    # 4 tasks x 25 slots; the 10 highest scores: 6 in task 0, 3 in task 1, 1 in task 2
    tasks = [0] * 25 + [1] * 25 + [2] * 25 + [3] * 25
    scores = torch.zeros(100)
    scores[[0, 1, 2, 3, 4, 5]] = torch.tensor([10.0, 9, 8, 7, 6, 5])
    scores[[25, 26, 27]] = torch.tensor([9.5, 8.5, 7.5])
    scores[50] = 6.5
    learner = fake_learner(tasks, scores, monkeypatch)
    R = select(learner, tau=0.5)  # p = 10, q = 10
    assert len(R) == 20 and len(set(R.tolist())) == 20
    R_e, R_t = R[:10], R[10:]
    assert set(R_e.tolist()) == {0, 1, 2, 3, 4, 5, 25, 26, 27, 50}
    assert not set(R_t.tolist()) & set(R_e.tolist())
    # q_j = q p_j / p = 10 * (6, 3, 1, 0) / 10
    assert torch.bincount(learner.memory.t[R_t], minlength=4).tolist() == [6, 3, 1, 0]


def test_tau_one_is_pure_top_R(monkeypatch):
    scores = torch.randn(100)
    learner = fake_learner([k // 25 for k in range(100)], scores, monkeypatch)
    R = select(learner, tau=1.0)
    assert set(R.tolist()) == set(scores.topk(20).indices.tolist())


def test_tau_zero_spreads_R_t_evenly_over_tasks(monkeypatch):
    learner = fake_learner([k // 25 for k in range(100)], torch.randn(100), monkeypatch)
    R = select(learner, tau=0.0)
    assert torch.bincount(learner.memory.t[R], minlength=4).tolist() == [5, 5, 5, 5]


@pytest.mark.parametrize("tau", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_sizes_follow_tau(tau, monkeypatch):
    scores = torch.randn(60)
    learner = fake_learner([k % 3 for k in range(60)], scores, monkeypatch)
    R = select(learner, tau=tau)
    p = int(tau * 20 + 0.5)
    assert len(R) == 20 and len(set(R.tolist())) == 20
    assert set(R[:p].tolist()) == set(scores.topk(p).indices.tolist())


def test_shortfall_is_filled_from_the_rest(monkeypatch):
    # every top-10 slot is in task 0, but task 0 has only 12 slots: q_0 = 10 > 2 left
    tasks = [0] * 12 + [1] * 20 + [2] * 20
    scores = torch.zeros(52)
    scores[:10] = torch.arange(10, 0, -1).float()
    learner = fake_learner(tasks, scores, monkeypatch)
    R = select(learner, tau=0.5)
    assert len(R) == 20 and len(set(R.tolist())) == 20
    counts = torch.bincount(learner.memory.t[R[10:]], minlength=3)
    assert counts[0] == 2 and counts.sum() == 10


def test_small_memory_replays_all_of_it(monkeypatch):
    learner = fake_learner([0, 0, 1, 1, 1], torch.randn(5), monkeypatch)
    assert sorted(select(learner, tau=0.5).tolist()) == [0, 1, 2, 3, 4]


def test_tau_outside_unit_interval_rejected():
    with pytest.raises(ValueError, match="tau"):
        CCMRReplay(tau=1.5)
