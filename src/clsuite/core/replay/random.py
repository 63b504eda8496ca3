"""Random replay (ER, Rolnick et al. 2019): |R| slots drawn uniformly from M.

``exclude_current_task``: draw only from past tasks' slots, as MIR's code does for
its ER baseline (``buffer.sample(..., exclude_task=task)``). ER follows the
reading's ``exclude_current_task``; A-GEM fixes it to true, GSS, HAL and iCaRL
to false (their own codes; conf/method/*.yaml).
"""

from __future__ import annotations

from typing import Annotated

from clsuite.core.replay.base import ReplayPolicy
from clsuite.core.spec import Flag


class RandomReplay(ReplayPolicy):
    def __init__(self, exclude_current_task: Annotated[bool, Flag("replay only from past tasks' slots")] = False):
        # MIR's code replays only past tasks' samples (``buffer.sample(..., exclude_task=task)``)
        self.exclude_current_task = exclude_current_task

    def select(self, learner, x, y, t, n: int):
        return learner.memory.sample(n, exclude_task=learner.current_task if self.exclude_current_task else None)
