"""Random replay (ER, Rolnick et al. 2019): |R| slots drawn uniformly from M."""

from __future__ import annotations


class RandomReplay:
    def select(self, learner, x, y, t, n: int):
        return learner.memory.sample(n)
