"""The memory store and reservoir sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.reservoir import Reservoir


def stream(n, d=3, classes=10):
    x = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, d)  # x[i] = i identifies the sample
    return x, torch.arange(n) % classes, torch.zeros(n, dtype=torch.long)


def test_reservoir_keeps_each_sample_with_probability_M_over_N():
    """Every one of N stream samples is in memory with probability M/N.

    3,000 seeded repetitions of a 100-sample stream in batches of 20 into M = 10:
    each sample's inclusion count is Binomial(3,000, 0.1), and the counts over
    all 100 positions must pass a chi-square goodness-of-fit test (the
    sequential algorithm's exact law) and show no trend with arrival time.
    """
    torch.manual_seed(0)
    N, M, reps, bs = 100, 10, 3_000, 20
    x, y, t = stream(N)
    hits = np.zeros(N)
    policy = Reservoir()
    for _ in range(reps):
        mem = Memory(M, (3,), 10)
        for i in range(0, N, bs):
            policy.update(mem, x[i : i + bs], y[i : i + bs], t[i : i + bs])
        assert mem.size == M and mem.seen == N
        ids = mem.x[:, 0].long().numpy()
        assert len(set(ids)) == M  # no sample stored twice
        hits[ids] += 1
    expected = reps * M / N
    chi2 = ((hits - expected) ** 2 / (expected * (1 - M / N))).sum()
    # chi-square with N - 1 = 99 dof: the 99.9% quantile is about 148
    assert chi2 < 148, chi2
    early, late = hits[: N // 2].mean(), hits[N // 2 :].mean()
    assert abs(early - late) / expected < 0.03


def test_reservoir_rejects_the_first_sample_when_biased_code_would_keep_it():
    # A guard against "keep the first M forever": after many samples the first ones mostly leave.
    torch.manual_seed(1)
    mem, policy = Memory(10, (3,), 10), Reservoir()
    x, y, t = stream(1000)
    for i in range(0, 1000, 20):
        policy.update(mem, x[i : i + 20], y[i : i + 20], t[i : i + 20])
    assert (mem.x[:, 0] < 10).sum() <= 2


def test_append_sample_and_replace():
    mem = Memory(5, (3,), 10)
    x, y, t = stream(3)
    mem.append(x, y, t)
    assert len(mem) == 3 and not mem.full
    s = mem.sample(10)
    assert sorted(s.tolist()) == [0, 1, 2]  # never more than is filled, no repeats
    mem.score[:3] = 7.0
    mem.replace(torch.tensor([1]), x[:1] + 100, torch.tensor([9]), torch.tensor([4]))
    assert mem.y[1] == 9 and mem.t[1] == 4 and mem.score[1] == 0 and mem.x[1, 0] == 100


def test_sample_can_exclude_a_task():
    mem = Memory(6, (3,), 10)
    x, y, _ = stream(6)
    mem.append(x, y, torch.tensor([0, 0, 1, 1, 2, 2]))
    s = mem.sample(6, exclude_task=1)
    assert sorted(s.tolist()) == [0, 1, 4, 5]


def test_negative_memory_rejected():
    with pytest.raises(ValueError, match="memory size"):
        Memory(-1, (3,), 10)


def test_zero_memory_stays_empty():
    mem, policy = Memory(0, (3,), 10), Reservoir()
    x, y, t = stream(20)
    policy.update(mem, x, y, t)
    assert len(mem) == 0 and mem.seen == 20


# -- TaskReservoir: a uniform random subset of each task (A-GEM's task-end memory of Avalanche) ----
def two_task_stream(n_per_task=60):
    x, y, _ = stream(2 * n_per_task)
    return x, y, (torch.arange(2 * n_per_task) >= n_per_task).long()


def test_task_reservoir_keeps_each_sample_of_a_task_with_probability_n_over_its_count():
    """M = 20, T = 2: task k owns 10 slots, in which each of its 60 samples sits with probability
    10 / 60, whatever the other task does; the regions never mix (chi-square per task, as above)."""
    from clsuite.core.memory.task_reservoir import TaskReservoir

    torch.manual_seed(0)
    reps, bs = 2_000, 20
    x, y, t = two_task_stream()
    hits = np.zeros(120)
    for _ in range(reps):
        mem, policy = Memory(20, (3,), 10), TaskReservoir(n_tasks=2)
        for i in range(0, 120, bs):
            policy.update(mem, x[i : i + bs], y[i : i + bs], t[i : i + bs])
        ids = mem.x[:, 0].long()
        assert mem.size == 20 and mem.seen == 120 and len(set(ids.tolist())) == 20
        assert (ids[:10] < 60).all() and (ids[10:] >= 60).all()  # task 0's slots, then task 1's
        assert torch.equal(mem.t[:20], (ids >= 60).long())
        hits[ids.numpy()] += 1
    expected = reps * 10 / 60
    for part in (hits[:60], hits[60:]):
        chi2 = ((part - expected) ** 2 / (expected * (1 - 10 / 60))).sum()
        assert chi2 < 100, chi2  # chi-square with 59 dof: the 99.9% quantile is about 98.3 (+ margin)


def test_task_reservoir_per_task_is_the_size_of_each_tasks_share():
    """per_task = 5 (Mammoth's one batch per task): 5 + 5 slots filled of M = 20; per_task = null:
    M // T = 10 each (fails when per_task is ignored)."""
    from clsuite.core.memory.task_reservoir import TaskReservoir

    torch.manual_seed(0)
    x, y, t = two_task_stream()
    for per_task, size in ((5, 10), (None, 20)):
        mem, policy = Memory(20, (3,), 10), TaskReservoir(per_task=per_task, n_tasks=2)
        for i in range(0, 120, 20):
            policy.update(mem, x[i : i + 20], y[i : i + 20], t[i : i + 20])
        share = size // 2
        assert mem.size == size and mem.t[:size].tolist() == [0] * share + [1] * share
    with pytest.raises(ValueError, match="tasks in turn"):  # task 0 (3 of 5 filled) back after task 1 began
        mem, policy = Memory(20, (3,), 10), TaskReservoir(per_task=5, n_tasks=2)
        for k in (0, 1, 0):
            policy.update(mem, x[:3], y[:3], torch.full((3,), k))
