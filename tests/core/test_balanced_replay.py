"""Class-balanced random replay (the "Adding a method" example of docs/DEVELOPING.md)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from clsuite.core.memory.buffer import Memory
from clsuite.core.replay.balanced import BalancedReplay
from clsuite.core.replay.random import RandomReplay
from clsuite.core.train import build
from tests.conftest import make_cfg


def skewed_memory(counts: list[int], tasks: list[int]) -> Memory:
    """A memory holding counts[c] samples of class c (task tasks[c]); x = the slot number."""
    y = torch.cat([torch.full((k,), c) for c, k in enumerate(counts)])
    t = torch.tensor(tasks)[y]
    mem = Memory(len(y), (1,), len(counts))
    mem.append(torch.arange(len(y), dtype=torch.float).unsqueeze(1), y, t)
    return mem


def test_equal_shares_per_class_where_random_replay_follows_the_skew():
    torch.manual_seed(0)
    mem = skewed_memory([90, 6, 4], tasks=[0, 0, 1])
    learner = SimpleNamespace(memory=mem, current_task=1)
    for _ in range(20):
        R = BalancedReplay().select(learner, None, None, None, 9)
        assert len(R.unique()) == 9
        assert torch.bincount(mem.y[R], minlength=3).tolist() == [3, 3, 3]
    random_counts = sum(
        torch.bincount(mem.y[RandomReplay().select(learner, None, None, None, 9)], minlength=3) for _ in range(20)
    )
    assert random_counts[0] > 120  # random replay draws class 0 about 90% of the time


def test_a_short_class_is_filled_from_the_rest_and_past_tasks_only_is_respected():
    torch.manual_seed(0)
    mem = skewed_memory([50, 2, 50], tasks=[0, 0, 1])
    learner = SimpleNamespace(memory=mem, current_task=1)
    R = BalancedReplay().select(learner, None, None, None, 12)
    assert len(R.unique()) == 12 and torch.bincount(mem.y[R], minlength=3)[1] == 2  # 4 + 2 + 4, shortfall 2
    R = BalancedReplay(exclude_current_task=True).select(learner, None, None, None, 12)
    assert (mem.t[R] == 0).all() and torch.bincount(mem.y[R], minlength=3).tolist() == [10, 2, 0]


def test_the_config_group_option_reaches_the_learner():
    _, learner, _ = build(make_cfg("method=er", "replay@method.replay=balanced", "reading=mir_code"))
    assert type(learner.replay) is BalancedReplay and learner.replay.exclude_current_task is True


def test_by_task_gives_equal_shares_per_task_where_by_class_balances_classes():
    """Avalanche's A-GEM reference batch (conf/replay/task_balanced.yaml): equal shares per task.
    Task 0 holds classes 0-1 (60 + 30 slots), task 1 class 2 (10): per class 4 + 4 + 4, per task
    6 + 6 (fails when ``by`` is ignored)."""
    torch.manual_seed(0)
    mem = skewed_memory([60, 30, 10], tasks=[0, 0, 1])
    learner = SimpleNamespace(memory=mem, current_task=2)
    for _ in range(10):
        by_task = BalancedReplay(by="task").select(learner, None, None, None, 12)
        assert len(by_task.unique()) == 12 and torch.bincount(mem.t[by_task], minlength=2).tolist() == [6, 6]
        by_class = BalancedReplay(by="class").select(learner, None, None, None, 12)
        assert torch.bincount(mem.y[by_class], minlength=3).tolist() == [4, 4, 4]


def test_task_balanced_option_reaches_agem_with_its_past_tasks_only():
    _, learner, _ = build(make_cfg("method=agem", "replay@method.replay=task_balanced", "reading=paper_text"))
    r = learner.replay
    assert type(r) is BalancedReplay and r.by == "task" and r.exclude_current_task is True  # A-GEM's own
    assert learner.replay_size == 256
