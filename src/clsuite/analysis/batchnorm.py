"""BatchNorm in the online class-IL protocol (docs/METHODS.md, "BatchNorm in this protocol"): what R's
diagonal, Forget and BWT measure on a network with BatchNorm, from the runs of one benchmark.

Steps of :func:`markdown`:
1. Each run's variant from its config: the reading's loss and evaluation (``replay_loss``, ``eval_bn``;
   :data:`VARIANTS`) or Continual Normalization in place of BatchNorm (``model.norm_groups``, with the
   reading's loss and evaluation), runs of any other setting of the three keys left out.
2. Per method and variant, means over seeds of, for each task j: R[j, j] (the task just trained), the
   best of R[i, j] over i >= j, and R[T, j] (after the last task), the last task's diagonal being its
   final accuracy too.
3. Per method, each variant against the default, paired by seed: Acc, Forget, BWT and the mean of
   R[j, j] over tasks 1..T-1 (a difference of the default and the variant; 95% t intervals).
4. Within each variant, each method against ER, paired by seed: whether a method's lead over ER (the
   paper's claims) survives the variant.
In 3 and 4, the seeds whose two runs ran on two machines (CPU model or kernels) are named.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.contrast import ACROSS, contrast, in_method_order, seeds_across

DEFAULT = "the reading's (split loss, running statistics)"
# (label, replay_loss, eval_bn): eval_bn null is the running statistics (the key's absence in older runs)
VARIANTS = (
    (DEFAULT, "split", "running"),
    ("one forward of B_t + R (replay_loss=concat)", "concat", "running"),
    ("statistics re-estimated over the memory (eval_bn=memory)", "split", "memory"),
)
QUANTITIES = (("acc", "Acc"), ("forget", "Forget"), ("bwt", "BWT"), ("diagonal", "mean R[j, j], j < T"))


def continual_norm(groups: int) -> str:
    return f"Continual Normalization, {groups} groups, in place of BatchNorm (model.norm_groups={groups})"


def variant(flat: dict) -> str | None:
    """The variant of a run's flattened config, or None for a setting this module does not name."""
    key = (flat.get("replay_loss"), flat.get("eval_bn") or "running")
    if (groups := flat.get("model.norm_groups")) is not None:
        return continual_norm(groups) if key == VARIANTS[0][1:] else None
    return next((label for label, loss, ev in VARIANTS if (loss, ev) == key), None)


def diagonal_profile(R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R[j, j], max over i >= j of R[i, j], R[T, j]) for every task j of a T x T matrix."""
    R = np.asarray(R, dtype=float)
    best = np.array([R[j:, j].max() for j in range(R.shape[1])])
    return np.diagonal(R).copy(), best, R[-1].copy()


def data_label(flat: dict) -> str:
    """The inputs a run saw: its range and its share of each task's training images."""
    sym = flat.get("data.input_range") == "symmetric"
    return f"{'[-1, 1]' if sym else '[0, 1]'}, {100 * (1 - (flat.get('data.val_fraction') or 0.0)):g}%"


def with_variants(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with a square R, a ``variant`` (rows of no named variant dropped), their ``data``
    (:func:`data_label`: arms are compared within one) and ``diagonal`` (the mean of R[j, j] over the tasks
    before the last, whose diagonal is also its final accuracy)."""
    if runs.empty:
        return runs
    df = runs[[np.asarray(R).ndim == 2 and np.asarray(R).shape[0] == np.asarray(R).shape[1] > 1 for R in runs["R"]]]
    df = df.assign(variant=[variant(f) for f in df["flat"]], data=[data_label(f) for f in df["flat"]])
    df = df.dropna(subset=["variant"])
    return df.assign(diagonal=[float(np.diagonal(np.asarray(R))[:-1].mean()) for R in df["R"]])


def _cells(values: list[np.ndarray]) -> str:
    return " / ".join(f"{v:.1f}" for v in np.mean(values, axis=0))


def markdown(runs: pd.DataFrame, benchmark: str) -> list[str]:
    """The section's tables for ``benchmark``'s runs of a network with BatchNorm (empty: no such runs)."""
    df = with_variants(runs[runs["benchmark"] == benchmark]) if not runs.empty else runs
    if df.empty:
        return []
    name = pv.bench_label(benchmark)
    order = [label for label, _, _ in VARIANTS] + sorted(set(df["variant"]) - {label for label, _, _ in VARIANTS})
    profile = tb.Table(
        f"BatchNorm: R's diagonal beside each task's best and final accuracy on {name}",
        ["method", "inputs", "variant", "n", "R[j, j], tasks 1..T", "best R[i, j], i >= j", "final R[T, j]"],
        note="Means over seeds, task by task (task 1 / task 2 / ...). inputs: their range and the share of each "
        "task's training images the runs trained on. R[j, j]: the accuracy on task j just after "
        "training on it; best: its highest over the rows from j on; final: after the last task. A diagonal below the "
        "same task's later accuracy is a task that gains from later training: under it a positive BWT measures the "
        "evaluation's statistics catching up, not backward transfer.",
    )
    pairs = tb.Table(
        f"BatchNorm variants against the reading's default on {name}, paired by seed",
        ["method", "inputs", "variant", *[q for _, q in QUANTITIES], "n", ACROSS],
        note="variant − default per seed over the seeds both ran, then mean [95% t interval] (% points; for Forget, "
        "lower is better). mean R[j, j], j < T: the accuracy on each task just after training on it, averaged "
        f"over the tasks before the last. {ACROSS}: the pairs whose two runs ran on machines of another CPU model "
        "or kernel set, which move native numbers as a new seed does (docs/notes/NUMERICS.md).",
    )
    df = in_method_order(df, "data")
    for (method, data), of in df.groupby(["method", "data"], sort=False):
        for label in [v for v in order if v in set(of["variant"])]:
            prof = [diagonal_profile(R) for R in of[of["variant"] == label]["R"]]
            cells = [_cells([p[i] for p in prof]) for i in range(3)]
            profile.add([pv.method_label(method), data, label, len(prof), *cells])
    qs = [q for q, _ in QUANTITIES]
    for r in contrast(df, "variant", DEFAULT, qs, by=["method", "data"], order=order).itertuples():
        of = df[(df["method"] == r.method) & (df["data"] == r.data)]
        across = seeds_across(of[of["variant"] == r.arm], of[of["variant"] == DEFAULT])
        pairs.add([pv.method_label(r.method), r.data, r.arm, *(getattr(r, q).interval() for q in qs), r.n, across])
    versus = tb.Table(
        f"Each method against ER within each BatchNorm variant on {name}, paired by seed",
        ["variant", "inputs", "comparison", *[q for _, q in QUANTITIES], "n", ACROSS],
        note="method − ER per seed over the seeds both ran under the same variant, then mean [95% t interval] (% "
        f"points; for Forget, lower is better): whether a method's lead over ER holds under each variant. {ACROSS}: "
        "as above.",
    )
    methods = pv.order_methods(df["method"])
    for label in [v for v in order if v in set(df["variant"])]:
        of = df[df["variant"] == label]
        for r in contrast(of, "method", "er", qs, by=["data"], order=methods).itertuples():
            arm, er = (of[(of["data"] == r.data) & (of["method"] == m)] for m in (r.arm, "er"))
            versus.add([label, r.data, f"{pv.method_label(r.arm)} − ER", *(getattr(r, q).interval() for q in qs), r.n,
                        seeds_across(arm, er)])  # fmt: skip
    return [profile.markdown()] + [t.markdown() for t in (pairs, versus) if t.rows]
