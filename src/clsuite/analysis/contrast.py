"""The contrast engine: arms of runs against a base arm or in given pairs, paired by seed, one row per contrast.
A section declares its arms (a column of the runs), its base arm and its quantities, then renders the frame;
the statistics are ``clsuite.analysis.stats``'s (docs/GUIDE.md, "Statistics over seeds").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.stats import paired


def by_seed(arm: pd.DataFrame, quantity: str, per_seed: str = "last") -> dict:
    """``{seed: value}`` of ``quantity`` over the runs of one arm: each seed's last run, or with ``per_seed="mean"``
    the mean of its runs (seeds without a value left out)."""
    if per_seed == "mean":
        return arm.groupby("seed")[quantity].mean().dropna().to_dict()
    return dict(zip(arm["seed"], arm[quantity], strict=True))


def machine(runs: pd.DataFrame) -> pd.Series:
    """Each run's machine as far as its native numbers go: its CPU model and its kernel set (one model name
    comes with other kernels: EPYCs with and without AVX-512)."""
    kernels = runs.get("numerics", "unrecorded")
    return runs["cpu"].astype(str) + ", " + pd.Series(kernels, index=runs.index).astype(str)


def seeds_by_machine(*arms: pd.DataFrame) -> tuple[list[int], list[int]]:
    """(seeds whose runs in all ``arms`` are on one machine, seeds whose runs span two or more, :func:`machine`):
    native kernels differ per machine, so a pair across machines adds their numerical difference. ([], [])
    without a ``cpu``."""
    if any("cpu" not in a for a in arms):
        return [], []
    runs = pd.concat(arms)
    seeds = sorted(set.intersection(*(set(a["seed"]) for a in arms)))
    runs = runs[runs["seed"].isin(seeds)]
    machines = runs.assign(machine=machine(runs)).groupby("seed")["machine"].nunique()
    return [s for s in seeds if machines[s] == 1], [s for s in seeds if machines[s] > 1]


ACROSS = "seeds across machines"  # a pair of runs of two machines (CPU model or kernels): their numbers differ too


def seeds_across(arm: pd.DataFrame, base: pd.DataFrame) -> str:
    """The seeds whose pair joins runs of two machines (:func:`seeds_by_machine`), or "–"."""
    return ", ".join(map(str, seeds_by_machine(arm, base)[1])) or "–"


def machine_groups(runs: pd.DataFrame) -> tuple[list[list[str]], list[str]]:
    """(the methods of ``runs`` in groups whose runs share one machine (:func:`machine`) wherever two of them ran a
    seed of one benchmark and reading, in the paper's order; the methods with a seed on two machines). A paired
    difference within a group is taken on one machine, one between two groups may not be. ([], []) without a
    ``cpu``."""
    if "cpu" not in runs or runs.empty:
        return [], []
    keys = [k for k in ("benchmark", "reading") if k in runs] + ["seed"]
    on = runs.assign(machine=machine(runs)).groupby(["method", *keys])["machine"].agg(frozenset)
    on = {m: on[m].to_dict() for m in pv.order_methods(runs["method"])}  # method -> {(..., seed): its machines}
    split = [m for m, where in on.items() if any(len(v) > 1 for v in where.values())]

    def together(x: str, y: str) -> bool:
        return x not in split and y not in split and all(on[x][k] == on[y][k] for k in set(on[x]) & set(on[y]))

    groups: list[list[str]] = []
    for m in on:
        group = next((g for g in groups if all(together(m, x) for x in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(m)
    return groups, split


ORDERS = {"method": pv.order_methods, "benchmark": pv.order_benchmarks}  # columns sorted in the paper's order


def in_method_order(runs: pd.DataFrame, *then: str) -> pd.DataFrame:
    """The runs sorted by method in the paper's order, then by ``then`` (a benchmark in the paper's order too;
    stable: runs keep their order within)."""
    return runs.sort_values(
        ["method", *then], key=lambda c: c.map(ORDERS[c.name](c).index) if c.name in ORDERS else c, kind="stable"
    )


def contrast(
    runs: pd.DataFrame,
    arm: str,
    base: str | Callable[[tuple], str | None] | list[tuple],
    quantities: Sequence[str],
    by: Sequence[str] = (),
    order: Sequence[str] | None = None,
    per_seed: str = "last",
) -> pd.DataFrame:
    """Each arm (a value of the column ``arm``) against the base arm, within each group of ``by`` (groups in
    the order of their first row): arm − base per seed over the seeds both ran (``stats.paired``).

    ``base``: the base arm, or a function of the group's key (a tuple) giving it (None: the group is skipped,
    as is one without runs of its base), or a list of (arm, base) pairs: each one in every group, in that order,
    also without runs (n = 0); ``order``: the arms in the order of the rows (default: sorted); ``per_seed``: a
    seed's value in an arm (:func:`by_seed`).
    One row per (group, arm): the ``by`` columns, ``arm``, ``base``, ``n`` (the paired seeds of the first
    quantity), and per quantity ``q`` its ``stats.Paired``, ``q_arm`` and ``q_base``: each arm's mean over those seeds.
    """
    rows = []
    for key, g in runs.groupby(list(by), sort=False) if by else [((), runs)]:
        key = key if isinstance(key, tuple) else (key,)
        b = None if isinstance(base, list) else base(key) if callable(base) else base
        arms = set(g[arm]) - {b}
        if isinstance(base, list):
            pairs = base
        elif b is None or b not in set(g[arm]):
            continue
        else:
            pairs = [(a, b) for a in ([x for x in order if x in arms] if order is not None else sorted(arms))]
        for a, b in pairs:
            row = {**dict(zip(by, key, strict=True)), "arm": a, "base": b}
            for q in quantities:
                x, y = (by_seed(g[g[arm] == v], q, per_seed) for v in (a, b))
                row[q] = paired(x, y)
                seeds = sorted(set(x) & set(y))
                row[f"{q}_arm"], row[f"{q}_base"] = (
                    float(pd.Series([v[s] for s in seeds], dtype=float).mean()) for v in (x, y)
                )
            rows.append({**row, "n": row[quantities[0]].n})
    return pd.DataFrame(
        rows, columns=[*by, "arm", "base", "n", *[c for q in quantities for c in (q, f"{q}_arm", f"{q}_base")]]
    )
