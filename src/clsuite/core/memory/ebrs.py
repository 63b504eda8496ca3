"""E-BRS: entropy-balanced reservoir sampling (AdaER paper, Sec. IV-B, Algorithm 2).

Per incoming sample (x, y) with N samples seen (PROTOCOL section 3):
  - memory not full: append it (its stored score is `unscored`, 0 by default, until scored);
  - else draw j ~ U[0, N); if j < M (classic reservoir acceptance, probability M/N):
    y~ = the most frequent class in memory (ties: lowest label, or random),
    m  = the slot of class y~ with the lowest stored score s(m) (ties: random),
    and (x, y, t) replaces slot m.
Acceptances are drawn vectorised over the batch (``fill_then_draw``, shared with reservoir);
the accepted samples are placed one by one (each placement changes the class counts that
choose the next victim), on the host, on a copy of the labels and scores, the survivors
written in one batch (on a GPU: no host-device sync for a batch without an acceptance).

Scores: the replay policy's (C-CMR for AdaER, MIR for the E-BRS ablation), both from
``clsuite.core.replay.virtual.score_slots``. Under a reading (PROTOCOL 8) only the capacity changes.

The paper's open choices, each a key (conf/update/ebrs.yaml; values: PROTOCOL section 8):
``victim`` (``lowest_score``, Alg. 2 line 8 | ``random`` slot of that class), ``unscored``
(``0`` | ``inf``: never evicted before scored, unless the whole class is unscored: a random one
| ``insertion``: its s under one virtual step on its own batch, ``virtual.insertion_scores``),
``class_ties`` (``lowest`` label | ``random``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Annotated

import torch

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.reservoir import fill_then_draw
from clsuite.core.replay.virtual import insertion_scores
from clsuite.core.spec import OneOf

VICTIMS = ("lowest_score", "random")
UNSCORED = (0, "inf", "insertion")


class EBRS(UpdatePolicy):
    def __init__(
        self,
        class_ties: Annotated[
            str, OneOf("lowest", "random", doc="most frequent classes tied: lowest label | random")
        ] = "lowest",
        victim: Annotated[
            str, OneOf(*VICTIMS, doc="lowest-score slot of the class (Alg. 2) | a random one")
        ] = "lowest_score",
        unscored: Annotated[int | str, OneOf(*UNSCORED, math.inf, doc="s(m) of a sample until first scored")] = 0,
    ):
        if class_ties not in ("lowest", "random"):
            raise ValueError(f"unknown class_ties {class_ties!r}; valid: lowest, random")
        if victim not in VICTIMS:
            raise ValueError(f"unknown victim {victim!r}; valid choices: {', '.join(VICTIMS)}")
        if unscored == float("inf"):
            unscored = "inf"  # `unscored=inf` on the command line is Hydra's float inf
        if isinstance(unscored, bool) or unscored not in UNSCORED:
            raise ValueError(f"unknown unscored {unscored!r}; valid choices: {', '.join(map(str, UNSCORED))}")
        self.class_ties, self.victim_rule, self.unscored = class_ties, victim, unscored

    def new_scores(self, x, y, t, learner) -> torch.Tensor | None:
        """The s(m) each incoming sample is stored with; None: 0, as ``Memory`` writes it."""
        if self.unscored == "inf":
            return torch.full((len(y),), float("inf"), device=y.device)
        if self.unscored == "insertion":
            if learner is None:
                raise ValueError("unscored=insertion scores a sample with the learner's network: pass the learner")
            return insertion_scores(learner, x, y, t, getattr(learner.replay, "compare_to_old_logits", False))
        return None

    def victim(self, memory: Memory, counts: torch.Tensor) -> int:
        """Alg. 2 lines 7-8: lowest-score slot of the most frequent class (``victim=random``: any slot
        of that class, uniformly)."""
        top = counts.max()
        if self.class_ties == "lowest":
            y_tilde = int(torch.argmax((counts == top).int()))  # first (lowest) label at the max
        else:
            tied = (counts == top).nonzero().squeeze(1)
            y_tilde = int(tied[torch.randint(len(tied), (1,), device=tied.device)])
        slots = (memory.y[: memory.size] == y_tilde).nonzero().squeeze(1)
        if self.victim_rule == "random":
            return int(slots[torch.randint(len(slots), (1,), device=slots.device)])
        s = memory.score[slots]
        lowest = slots[s == s.min()]
        return int(lowest[torch.randint(len(lowest), (1,), device=lowest.device)])

    def update(self, memory: Memory, x, y, t, learner=None) -> None:
        before = memory.size
        drawn = fill_then_draw(memory, x, y, t, draw_device="cpu")  # Alg. 2 lines 2-3 (append), 5 (j ~ U[0, N))
        accepted = [] if drawn is None else ((drawn[1] >= 0).nonzero().squeeze(1) + drawn[0]).tolist()  # j < M
        appended = memory.size - before
        if not appended and not accepted:
            return
        new = self.new_scores(x, y, t, learner)
        if new is not None and appended:
            memory.score[before : memory.size] = new[:appended]
        if not accepted:
            return
        new_host = None if new is None else new.cpu()
        labels = torch.cat([memory.y[: memory.size], y]).cpu()
        host = SimpleNamespace(y=labels[: memory.size], score=memory.score[: memory.size].to("cpu", copy=True))
        host.size, y_host = memory.size, labels[memory.size :]
        counts = torch.bincount(host.y, minlength=memory.num_classes)
        placed = {}  # slot -> the sample that ends there (a later one in the same slot wins)
        for i in accepted:
            m = self.victim(host, counts)
            counts[host.y[m]] -= 1
            counts[y_host[i]] += 1
            host.y[m], host.score[m] = y_host[i], 0.0 if new_host is None else new_host[i]  # its unscored s
            placed[m] = i
        idx, src = torch.tensor([list(placed), list(placed.values())]).to(memory.device)
        memory.replace(idx, x[src], y[src], t[src])  # writes s = 0
        if new is not None:
            memory.score[idx] = new[src]
