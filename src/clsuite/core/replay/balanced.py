"""Balanced random replay: |R| slots drawn uniformly within each class (or task), equal shares.

Steps, for every update once the memory holds samples:
1. pool = the filled slots (only past tasks' with ``exclude_current_task``);
2. the groups present in the pool, classes (``by: class``) or tasks (``by: task``), share |R|
   equally (largest remainder, ties at random);
3. each group's share is drawn uniformly from its slots;
4. a group with fewer slots than its share leaves a shortfall, filled uniformly from the
   pool's other slots. A pool no larger than |R| is replayed whole.

Not a method of the paper. ``by: class`` is the worked example of docs/DEVELOPING.md "Adding a
method" (``python src/run.py method=er replay@method.replay=balanced``). ``by: task``
(conf/replay/task_balanced.yaml) is Avalanche's A-GEM reference batch (``AGEMPlugin``:
``GroupBalancedInfiniteDataLoader`` over one buffer per experience, ``sample_size //
n_experiences`` from each); Avalanche drops the remainder (255 of 256 with 3 past tasks) and
cycles a group smaller than its share, where this draws exactly |R| and fills the shortfall
from the other groups.
"""

from __future__ import annotations

from typing import Annotated

import torch

from clsuite.core.replay.base import ReplayPolicy
from clsuite.core.replay.ccmr import largest_remainder, sample_per_group
from clsuite.core.spec import Flag, OneOf

GROUPS = ("class", "task")


class BalancedReplay(ReplayPolicy):
    def __init__(
        self,
        exclude_current_task: Annotated[bool, Flag("replay only from past tasks' slots")] = False,
        by: Annotated[str, OneOf(*GROUPS, doc="equal shares of |R| per class | per task")] = "class",
    ):
        if by not in GROUPS:
            raise ValueError(f"unknown by {by!r}; valid choices: {', '.join(GROUPS)}")
        self.exclude_current_task, self.by = exclude_current_task, by

    def select(self, learner, x, y, t, n: int) -> torch.Tensor:
        mem = learner.memory
        pool = mem.slots(learner.current_task if self.exclude_current_task else None)
        if len(pool) <= n:
            return pool
        groups = (mem.y if self.by == "class" else mem.t)[pool]
        present = (torch.bincount(groups) > 0).long()
        chosen = pool[sample_per_group(groups, largest_remainder(present, n))]
        short = n - len(chosen)
        if short > 0:  # a group had fewer slots than its share
            rest = pool[~torch.isin(pool, chosen)]
            chosen = torch.cat([chosen, rest[torch.randperm(len(rest), device=rest.device)[:short]]])
        return chosen
