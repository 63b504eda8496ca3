"""E-BRS memory update (Algorithm 2)."""

from __future__ import annotations

import math

import torch

from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.ebrs import EBRS
from clsuite.core.memory.reservoir import Reservoir


def filled(labels, scores):
    n = len(labels)
    mem = Memory(n, (1,), 10)
    mem.append(torch.arange(n, dtype=torch.float32)[:, None], torch.tensor(labels), torch.zeros(n, dtype=torch.long))
    mem.score[:n] = torch.tensor(scores, dtype=torch.float32)
    mem.seen = n
    return mem


def test_evicts_lowest_score_slot_of_most_frequent_class(monkeypatch):
    # class 3 is most frequent (3 slots); its lowest score is slot 4 (-2.0)
    mem = filled([1, 3, 2, 3, 3, 1], [0.0, 5.0, -9.0, 1.0, -2.0, -7.0])
    policy = EBRS()
    # force acceptance: the draw j is below M
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.zeros(n, dtype=torch.long)
    )
    policy.update(mem, torch.tensor([[100.0]]), torch.tensor([7]), torch.tensor([1]))
    assert mem.y.tolist() == [1, 3, 2, 3, 7, 1]
    assert mem.x[4, 0] == 100 and mem.t[4] == 1 and mem.score[4] == 0
    assert mem.seen == 7


def test_class_tie_goes_to_lowest_label_and_counts_update_within_a_batch(monkeypatch):
    mem = filled([5, 2, 5, 2], [1.0, 3.0, 0.0, 2.0])
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.zeros(n, dtype=torch.long)
    )
    EBRS().update(mem, torch.tensor([[50.0], [60.0]]), torch.tensor([8, 9]), torch.tensor([1, 1]))
    # 1st: tie 2 vs 5 -> class 2, lowest score slot 3; then class 5 (2 slots) vs 2 (1) -> class 5, slot 2
    assert mem.y.tolist() == [5, 2, 9, 8]


def test_rejected_samples_do_not_enter(monkeypatch):
    mem = filled([1, 1, 2], [0.0, 0.0, 0.0])
    monkeypatch.setattr("clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.full((n,), -1))
    EBRS().update(mem, torch.tensor([[9.0]]), torch.tensor([4]), torch.tensor([0]))
    assert mem.y.tolist() == [1, 1, 2] and mem.seen == 4


def entropy(counts):
    p = counts[counts > 0].double() / counts.sum()
    return float(-(p * p.log()).sum())


def test_ebrs_memory_is_more_balanced_than_reservoir_on_a_9_to_1_stream():
    """Classes arriving 9:1 (4,500 vs 500 samples, shuffled): the class entropy of
    M = 100 under E-BRS is near the maximum log 2, well above reservoir's."""
    gen = torch.Generator().manual_seed(0)
    y = torch.cat([torch.zeros(4500, dtype=torch.long), torch.ones(500, dtype=torch.long)])
    y = y[torch.randperm(len(y), generator=gen)]
    x, t = y.float()[:, None], torch.zeros_like(y)
    ent = {}
    for name, policy in [("reservoir", Reservoir()), ("ebrs", EBRS())]:
        torch.manual_seed(0)
        vals = []
        for _ in range(5):
            mem = Memory(100, (1,), 2)
            for i in range(0, len(y), 20):
                policy.update(mem, x[i : i + 20], y[i : i + 20], t[i : i + 20])
            vals.append(entropy(mem.class_counts()))
        ent[name] = sum(vals) / len(vals)
    assert ent["ebrs"] > 0.95 * math.log(2)
    assert ent["reservoir"] < 0.45  # about H(0.1) = 0.33
    assert ent["ebrs"] > ent["reservoir"] + 0.25


def accept_all(monkeypatch):
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.zeros(n, dtype=torch.long)
    )


def test_a_sample_placed_earlier_in_the_batch_has_score_0_for_the_next_victim(monkeypatch):
    """A (class 3) replaces slot 0 (score 0.5) and enters with score 0; B (class 3 again) then finds
    class 3 most frequent and A's slot (0.0 < 0.7) its lowest score: B replaces A, slot 1 stays."""
    mem = filled([3, 3, 1], [0.5, 0.7, 0.0])
    accept_all(monkeypatch)
    EBRS().update(mem, torch.tensor([[10.0], [20.0]]), torch.tensor([3, 3]), torch.tensor([1, 1]))
    assert mem.x[:, 0].tolist() == [20.0, 1.0, 2.0]
    torch.testing.assert_close(mem.score, torch.tensor([0.0, 0.7, 0.0]))


def test_an_accepted_sample_adds_exactly_one_to_its_class_count(monkeypatch):
    """Counts 1:4, 6:2. A (class 6) replaces class 1's lowest slot -> 1:3, 6:3: a tie, so B (class 9)
    evicts from class 1 (lowest label), not from class 6 (which a count of 6:4 would choose)."""
    mem = filled([1, 1, 1, 1, 6, 6], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    accept_all(monkeypatch)
    EBRS().update(mem, torch.tensor([[10.0], [20.0]]), torch.tensor([6, 9]), torch.tensor([1, 1]))
    assert mem.y.tolist() == [6, 9, 1, 1, 6, 6]
