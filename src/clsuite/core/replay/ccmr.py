"""C-CMR: contextually-cued memory recall (AdaER paper, Sec. IV-A, Algorithm 1).

For each incoming batch B_t once memory holds samples (PROTOCOL section 3):
  1. virtual step theta' (Eq. 3) and scores s(m) (Eq. 4) for all of M (or C random candidates);
  2. p = round(tau |R|), q = |R| - p;
  3. R_e = the p slots with the highest s (example-interfered buffer);
  4. p_j = #R_e samples of task j, q_j = q p_j / p by largest remainder (Eq. 5);
     R_t = q_j slots of task j drawn uniformly from M - R_e (task-associated
     buffer), a shortfall filled uniformly from the rest of M - R_e;
  5. R = R_e + R_t (the learner then updates on R + B_t, Alg. 1 line 10).
tau = 1: q = 0, pure top-|R| (MIR-like). tau = 0: no p_j, R_t is drawn with
equal quotas over the tasks in memory. Memory smaller than |R| (or than the
scored pool): all of it.

Scores: MIR's function (``clsuite.core.replay.virtual.score_slots``) with the reading's
``compare_to_old_logits`` and ``scoring_updates_bn``, since the paper builds C-CMR on MIR
(Sec. IV-A; PROTOCOL section 8); AdaER's E-BRS evicts by these scores.

The paper's open choices, each a key (conf/replay/ccmr.yaml; values: PROTOCOL section 8):
``candidates`` (null = all of M | C random, mir_code C = 50), ``R_t_from`` (``candidates`` =
the scored pool minus R_e | ``memory`` = M - R_e, the paper's words), ``exclude_current_task``.
|B_t|, |R|, the replay loss and the memory budget come from the reading.
"""

from __future__ import annotations

import math
from typing import Annotated

import torch

from clsuite.core.replay.base import ReplayPolicy
from clsuite.core.replay.virtual import BN_DOC, score_slots
from clsuite.core.spec import Flag, OneOf, Real, Whole


def largest_remainder(weights: torch.Tensor, total: int) -> torch.Tensor:
    """Integers proportional to ``weights`` summing to ``total`` (Hamilton's method;
    equal remainders are broken at random)."""
    share = weights.double() * total / weights.sum()
    base = share.floor().long()
    left = total - int(base.sum())
    if left > 0:
        rem = share - base.double()
        rem = rem + 1e-9 * torch.rand_like(rem)  # random tie-break among equal remainders
        base[rem.topk(left).indices] += 1
    return base


def sample_per_group(groups: torch.Tensor, quota: torch.Tensor) -> torch.Tensor:
    """Positions i with ``rank of i within groups[i]`` < quota[groups[i]], ranks in a
    uniformly random order: a uniform draw of quota[j] members of each group j."""
    n = len(groups)
    order = torch.randperm(n, device=groups.device)
    g = groups[order]
    g_sorted, perm = torch.sort(g, stable=True)  # random order within each group
    start = torch.searchsorted(g_sorted, g_sorted, right=False)
    rank = torch.arange(n, device=groups.device) - start
    keep = rank < quota[g_sorted]
    return order[perm[keep]]


def round_half_up(v: float) -> int:
    return math.floor(v + 0.5)


R_T_FROM = ("candidates", "memory")


class CCMRReplay(ReplayPolicy):
    def __init__(
        self,
        tau: Annotated[
            float, Real(0, 1, "p = round(tau |R|) interfered (R_e), q = |R| - p task-associated (R_t)")
        ] = 0.5,
        candidates: Annotated[
            int | None, Whole(1, None, "null = score all of M | C random candidates", null=True)
        ] = None,
        exclude_current_task: Annotated[bool, Flag("score and replay only past tasks' slots")] = False,
        compare_to_old_logits: Annotated[
            bool, Flag("score against the logits stored with the sample (as MIR)")
        ] = False,
        scoring_updates_bn: Annotated[bool, Flag(BN_DOC)] = False,
        R_t_from: Annotated[
            str, OneOf(*R_T_FROM, doc="R_t from the scored pool - R_e | all of M - R_e")
        ] = "candidates",
    ):
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {tau}")
        if R_t_from not in R_T_FROM:
            raise ValueError(f"unknown R_t_from {R_t_from!r}; valid choices: {', '.join(R_T_FROM)}")
        self.tau, self.candidates, self.exclude_current_task = tau, candidates, exclude_current_task
        self.compare_to_old_logits, self.scoring_updates_bn = compare_to_old_logits, scoring_updates_bn
        self.R_t_from = R_t_from

    def select(self, learner, x, y, t, n: int):
        mem = learner.memory
        exclude = learner.current_task if self.exclude_current_task else None
        pool = mem.slots(exclude) if self.candidates is None else mem.sample(self.candidates, exclude)
        if len(pool) == 0:
            return pool
        s = score_slots(learner, x, y, t, pool, self.compare_to_old_logits, self.scoring_updates_bn)  # Alg. 1 l. 4, 6
        if len(pool) <= n:
            return pool  # memory smaller than |R|: replay all of it
        p = round_half_up(self.tau * n)
        q = n - p
        top = s.topk(p).indices  # R_e: the p most interfered (Alg. 1 line 7)
        R_e = pool[top]
        if q == 0:
            return R_e
        if self.R_t_from == "memory" and self.candidates is not None:
            pool = mem.slots(exclude)  # R_t from M - R_e, not only from the scored candidates
            in_top = torch.isin(pool, R_e).to(torch.uint8)
        else:
            in_top = torch.zeros(len(pool), dtype=torch.uint8, device=pool.device)
            in_top[top] = 1
        rest = pool[in_top.argsort(stable=True)[: len(pool) - p]]  # pool - R_e, in pool order (no host sync)
        n_tasks = int(mem.t[pool].max()) + 1
        per_task = torch.zeros(n_tasks, dtype=torch.long, device=pool.device)  # bincount, without its sync on a GPU
        if p > 0:
            p_j = per_task.index_add_(0, mem.t[R_e], torch.ones_like(R_e))
        else:  # tau = 0: equal weight to every task present in memory
            p_j = (per_task.index_add_(0, mem.t[rest], torch.ones_like(rest)) > 0).long()
        q_j = largest_remainder(p_j, q)  # Eq. 5, sum q_j = q
        R_t = rest[sample_per_group(mem.t[rest], q_j)]
        short = q - len(R_t)
        if short > 0:  # task j has fewer than q_j slots left: fill uniformly from the rest
            left = torch.ones(len(rest), dtype=torch.bool, device=pool.device)
            left[torch.isin(rest, R_t)] = False
            others = rest[left]
            R_t = torch.cat([R_t, others[torch.randperm(len(others), device=pool.device)[:short]]])
        return torch.cat([R_e, R_t])  # R = R_e + R_t (Alg. 1 line 9)
