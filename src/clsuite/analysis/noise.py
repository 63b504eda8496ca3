"""Numerical noise: how far one seed's result moves with the CPU's kernels, beside the seeds'
spread (``make noise``). Steps: docs/GUIDE.md, "Numerical noise and machines"; what the
tables' columns mean: docs/notes/NUMERICS.md, "How loud is the noise?".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.claims import outcome
from clsuite.analysis.load import distinct_runs
from clsuite.analysis.stats import POWER, one_sample, seeds_needed
from clsuite.analysis.tables import Table

PAIRS = (("adaer", "mir"), ("adaer", "ccmr"), ("adaer", "ebrs"), ("adaer", "er"), ("mir", "er"))
DELTAS = (1.0, 2.0, 5.0)  # points of Acc


def noise_runs(experiments: dict) -> pd.DataFrame:
    """The runs of ``noise_*`` and ``machines_*`` experiments, one code (step 1), with a kernel-set column."""
    runs = distinct_runs(e for n, e in experiments.items() if n.startswith(("noise_", "machines_")))
    if runs.empty or (runs := runs[runs["numerics"] != "unrecorded"]).empty:
        return runs
    code = runs["code"].value_counts().index[0]
    return runs[runs["code"] == code]


def _complete(runs: pd.DataFrame) -> pd.DataFrame:
    """Acc as a seeds x kernel sets table per (benchmark, method), seeds that every set ran."""
    wide = runs.pivot_table(index=["benchmark", "method", "seed"], columns="numerics", values="acc", aggfunc="first")
    return wide.dropna()


def noise_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Step 2, one row per (benchmark, method)."""
    rows = []
    wide = _complete(runs)
    for (bench, method), acc in wide.groupby(level=["benchmark", "method"], sort=False):
        a = acc.to_numpy()  # seeds x kernel sets
        if a.shape[0] < 2 or a.shape[1] < 2:
            continue
        sd_num = math.sqrt(np.mean(np.var(a, axis=1, ddof=1)))
        sd_seed = math.sqrt(np.mean(np.var(a, axis=0, ddof=1)))
        rows.append({
            "benchmark": bench, "method": method, "kernel_sets": a.shape[1], "seeds": a.shape[0],
            "acc_mean": float(a.mean()), "sd_seed": sd_seed, "sd_num": sd_num,
            "ratio": sd_num / sd_seed if sd_seed else float("nan"),
            "max_move": float((a.max(axis=1) - a.min(axis=1)).max()),
            "identical_seeds": int((a.max(axis=1) == a.min(axis=1)).sum()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _differences(runs: pd.DataFrame, pairs):
    """(benchmark, "A vs B", per-seed differences as a seeds x kernel sets frame) per pair of methods,
    over the seeds that both methods ran under every kernel set (at least 2)."""
    wide = _complete(runs)
    for bench in wide.index.get_level_values("benchmark").unique():
        for a, b in pairs:
            try:
                d = (wide.loc[(bench, a)] - wide.loc[(bench, b)]).dropna()  # the seeds both ran
            except KeyError:
                continue
            if len(d) >= 2:
                yield bench, f"{pv.method_label(a)} vs {pv.method_label(b)}", d


def comparisons_table(runs: pd.DataFrame, pairs=PAIRS) -> pd.DataFrame:
    """Step 3, one row per (benchmark, pair of methods)."""
    rows = []
    for bench, pair, diff in _differences(runs, pairs):
        d = diff.to_numpy()  # seeds x kernel sets
        sd_d = math.sqrt(np.mean(np.var(d, axis=0, ddof=1)))
        flips = int(((d > 0).any(axis=1) & (d < 0).any(axis=1)).sum())
        rows.append({
            "benchmark": bench, "pair": pair, "seeds": d.shape[0],
            "kernel_sets": d.shape[1], "d_mean": float(d.mean()), "sd_d": sd_d,
            "sd_d_num": math.sqrt(np.mean(np.var(d, axis=1, ddof=1))), "sign_flips": flips,
            **{f"n_{delta:g}": seeds_needed(delta, sd_d) for delta in DELTAS},
        })  # fmt: skip
    return pd.DataFrame(rows)


def outcomes_table(runs: pd.DataFrame, pairs=PAIRS) -> pd.DataFrame:
    """Step 4, one row per (benchmark, pair, kernel set): the comparison over the seeds every kernel set ran."""
    rows = []
    for bench, pair, diff in _differences(runs, pairs):
        judged = {k: one_sample(diff[k].to_numpy()) for k in diff.columns}
        moves = len({outcome(p) for p in judged.values()}) > 1
        for kernels, p in judged.items():
            rows.append({"benchmark": bench, "pair": pair, "kernels": kernels, "seeds": p.n, "mean": p.mean,
                         "low": p.low, "high": p.high, "outcome": outcome(p), "moves": moves})  # fmt: skip
    return pd.DataFrame(rows)


def markdown(experiments: dict) -> list[str]:
    """The report's numerical-noise subsection (empty without noise runs)."""
    runs = noise_runs(experiments)
    noise = noise_table(runs) if not runs.empty else pd.DataFrame()
    if noise.empty:
        return []
    sets = sorted(runs["numerics"].unique())
    t = Table(
        "Numerical noise: Acc of one seed across CPU kernel sets, beside the spread across seeds",
        ["benchmark", "method", "kernel sets", "seeds", "Acc mean", "sd over seeds", "sd over kernel sets (noise)",
         "noise / seeds", "largest move of one seed", "seeds unmoved"],
        note="sd over seeds: per kernel set, pooled (rms); sd over kernel sets: per seed, pooled (rms). Kernel sets: "
        + "; ".join(sets) + f". Code {runs['code'].iloc[0]}, {runs['cpu'].iloc[0]}.",
    )  # fmt: skip
    for r in noise.itertuples():
        t.add([r.benchmark, pv.method_label(r.method), r.kernel_sets, r.seeds, f"{r.acc_mean:.1f}",
               f"{r.sd_seed:.2f}", f"{r.sd_num:.2f}", f"{r.ratio:.2f}", f"{r.max_move:.1f}", r.identical_seeds])  # fmt: skip
    comp = comparisons_table(runs)
    c = Table(
        "Paired comparisons on one machine: the per-seed difference's spread and the seeds a claim needs",
        ["benchmark", "comparison", "seeds", "mean d", "sd of d over seeds", "of which kernel noise (sd)",
         "seeds whose sign of d moves with the kernels", *[f"seeds for Δ = {d:g}" for d in DELTAS]],
        note=f"Seeds for Δ: the smallest n whose paired 95% t interval excludes 0 with probability {POWER:g} when "
        "the true difference is Δ points of Acc and the per-seed sd is the one measured here (seeds and kernel noise "
        "together, as one machine sees them).",
    )  # fmt: skip
    for r in comp.itertuples():
        c.add([r.benchmark, r.pair, r.seeds, f"{r.d_mean:+.2f}", f"{r.sd_d:.2f}", f"{r.sd_d_num:.2f}",
               f"{r.sign_flips} of {r.seeds}", *[getattr(r, f"n_{d:g}") for d in DELTAS]])  # fmt: skip
    out = outcomes_table(runs)
    o = Table(
        "The same comparisons judged under each kernel set alone: does the outcome move with the machine?",
        ["benchmark", "comparison", *sets, "outcome moves"],
        note="Each cell: mean d [95% t interval] over the seeds every kernel set ran, and rule 1's outcome "
        "(supported: the interval above 0; contradicted: below; unresolved: it straddles 0), before Holm. A kernel "
        "set stands for a machine: 'yes' means two machines running the same seeds can reach different outcomes.",
    )  # fmt: skip
    for (bench, pair), g in out.groupby(["benchmark", "pair"], sort=False) if not out.empty else []:
        by = {r.kernels: f"{r.mean:+.1f} [{r.low:+.1f}, {r.high:+.1f}] {r.outcome}" for r in g.itertuples()}
        o.add([bench, pair, *[by.get(k, "–") for k in sets], "yes" if g["moves"].iloc[0] else "no"])
    return [t.markdown(), c.markdown(), o.markdown()]
