"""The contrast engine: arms of runs against a base arm, paired by seed, one row per contrast in a DataFrame.
A section declares its arms (a column of the runs), its base arm and its quantities, then renders the frame;
the statistics are ``clsuite.analysis.stats``'s (docs/GUIDE.md, "Statistics over seeds").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.stats import paired


def by_seed(arm: pd.DataFrame, quantity: str) -> dict:
    """``{seed: value}`` of ``quantity`` over the runs of one arm (one run per seed)."""
    return dict(zip(arm["seed"], arm[quantity], strict=True))


def in_method_order(runs: pd.DataFrame, *then: str) -> pd.DataFrame:
    """The runs sorted by method in the paper's order, then by ``then`` (stable: runs keep their order within)."""
    rank = runs["method"].map(pv.order_methods(runs["method"]).index)
    return runs.assign(_rank=rank).sort_values(["_rank", *then], kind="stable").drop(columns="_rank")


def contrast(
    runs: pd.DataFrame,
    arm: str,
    base: str | Callable[[tuple], str | None],
    quantities: Sequence[str],
    by: Sequence[str] = (),
    order: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Each arm (a value of the column ``arm``) against the base arm, within each group of ``by`` (groups in
    the order of their first row): arm − base per seed over the seeds both ran (``stats.paired``).

    ``base``: the base arm, or a function of the group's key (a tuple) giving it (None: the group is skipped,
    as is one without runs of its base); ``order``: the arms in the order of the rows (default: sorted).
    One row per (group, arm): the ``by`` columns, ``arm``, ``base``, ``n`` (the paired seeds of the first
    quantity), and per quantity ``q`` its ``stats.Paired``, ``q_arm`` and ``q_base``: each arm's mean over those seeds.
    """
    rows = []
    for key, g in runs.groupby(list(by), sort=False) if by else [((), runs)]:
        key = key if isinstance(key, tuple) else (key,)
        b = base(key) if callable(base) else base
        ref = g[g[arm] == b]
        if b is None or ref.empty:
            continue
        arms = set(g[arm]) - {b}
        for a in [x for x in order if x in arms] if order is not None else sorted(arms):
            row = {**dict(zip(by, key, strict=True)), "arm": a, "base": b}
            for q in quantities:
                x, y = by_seed(g[g[arm] == a], q), by_seed(ref, q)
                row[q] = paired(x, y)
                seeds = sorted(set(x) & set(y))
                row[f"{q}_arm"], row[f"{q}_base"] = (
                    float(pd.Series([v[s] for s in seeds], dtype=float).mean()) for v in (x, y)
                )
            rows.append({**row, "n": row[quantities[0]].n})
    return pd.DataFrame(
        rows, columns=[*by, "arm", "base", "n", *[c for q in quantities for c in (q, f"{q}_arm", f"{q}_base")]]
    )
