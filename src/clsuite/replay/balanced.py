"""Class-balanced random replay: |R| slots drawn uniformly within each class, equal shares per class.

Steps, for every update once the memory holds samples:
1. pool = the filled slots (only past tasks' with ``exclude_current_task``);
2. the classes present in the pool share |R| equally (largest remainder, ties at random);
3. each class's share is drawn uniformly from its slots;
4. a class with fewer slots than its share leaves a shortfall, filled uniformly from the
   pool's other slots. A pool no larger than |R| is replayed whole.

Not a method of the paper: the worked example of docs/EXTENDING.md "Adding a method" (one .py and one
conf/replay/balanced.yaml). Use it with any method that replays, e.g.
``python src/run.py method=er replay@method.replay=balanced``.
"""

from __future__ import annotations

import torch

from clsuite.replay.base import ReplayPolicy
from clsuite.replay.ccmr import largest_remainder, sample_per_group


class BalancedReplay(ReplayPolicy):
    def __init__(self, exclude_current_task: bool = False):
        self.exclude_current_task = exclude_current_task

    def select(self, learner, x, y, t, n: int) -> torch.Tensor:
        mem = learner.memory
        pool = mem.slots(learner.current_task if self.exclude_current_task else None)
        if len(pool) <= n:
            return pool
        classes = mem.y[pool]
        present = (torch.bincount(classes, minlength=mem.num_classes) > 0).long()
        chosen = pool[sample_per_group(classes, largest_remainder(present, n))]
        short = n - len(chosen)
        if short > 0:  # a class had fewer slots than its share
            rest = pool[~torch.isin(pool, chosen)]
            chosen = torch.cat([chosen, rest[torch.randperm(len(rest), device=rest.device)[:short]]])
        return chosen
