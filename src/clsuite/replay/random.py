"""Random replay (ER, Rolnick et al. 2019): |R| slots drawn uniformly from M."""

from __future__ import annotations


class RandomReplay:
    def __init__(self, exclude_current_task: bool = False):
        # MIR's code replays only past tasks' samples (``buffer.sample(..., exclude_task=task)``)
        self.exclude_current_task = exclude_current_task

    def select(self, learner, x, y, t, n: int):
        return learner.memory.sample(n, exclude_task=learner.current_task if self.exclude_current_task else None)
