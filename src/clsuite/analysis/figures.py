"""Figures (matplotlib, headless), written as PNG and PDF, one panel per benchmark.
Conventions, the same in every figure: docs/GUIDE.md, "Figures".
"""

from __future__ import annotations

import contextlib
import contextvars
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from clsuite.analysis import paper_values as pv
from clsuite.analysis.load import CONDITIONS, select, short
from clsuite.analysis.stats import n_range
from clsuite.core.metrics import QUANTITIES

METHOD_STYLE = {
    "adaer": ("#d62728", "o"), "ccmr": ("#ff7f0e", "s"), "ebrs": ("#e377c2", "D"), "mir": ("#1f77b4", "^"),
    "er": ("#2ca02c", "v"), "gss": ("#9467bd", "P"), "hal": ("#8c564b", "X"), "gem": ("#17becf", "*"),
    "agem": ("#bcbd22", "h"), "icarl": ("#7f7f7f", "<"), "oewc": ("#393b79", ">"), "si": ("#637939", "p"),
    "online": ("#000000", "d"), "joint": ("#555555", "_"),
}  # fmt: skip
_EXTRA_MARKERS = "12348+x|"
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (1, 1)))
AXIS = {
    "memory": "memory size M (samples)",
    "lambda": "imbalance λ (minority class keeps (1 − λ) of its samples)",
    "tau": "τ = p / |R| (share of R_e in the replayed batch)",
}
PAPER_HANDLE = Line2D([], [], ls="none", marker="o", mfc="none", mec="k", ms=7, label="paper (hollow, black edge)")
JOINT_HANDLE = Line2D([], [], ls="--", color=METHOD_STYLE["joint"][0], label="Joint (one model on all tasks)")


_SUBTITLE = contextvars.ContextVar("subtitle", default="")


@contextlib.contextmanager
def subtitle(text: str):
    """Every figure drawn inside gets ``text`` as a last line of its title."""
    token = _SUBTITLE.set(text)
    try:
        yield
    finally:
        _SUBTITLE.reset(token)


def _title(title: str) -> str:
    return f"{title}\n{_SUBTITLE.get()}" if _SUBTITLE.get() else title


def method_style(method: str) -> tuple[str, str]:
    """(colour, marker) of a method, fixed across figures; unknown methods: grey and a marker of their own."""
    if method in METHOD_STYLE:
        return METHOD_STYLE[method]
    i = sum(map(ord, method))
    return (str(0.25 + 0.1 * (i % 5)), _EXTRA_MARKERS[i % len(_EXTRA_MARKERS)])


def _clip(quantity: str, mean, std) -> np.ndarray:
    """Error-bar lengths (2 x n) of mean ± std clipped to the quantity's range."""
    lo, hi = QUANTITIES[quantity].bounds
    mean, std = np.asarray(mean, float), np.nan_to_num(np.asarray(std, float))
    return np.vstack([mean - np.clip(mean - std, lo, hi), np.clip(mean + std, lo, hi) - mean])


FORMATS = ("png", "pdf")  # the paper's figures; the accuracy-matrix heatmaps are PNG only


def _save(fig, stem: Path, formats=None, dpi: int = 150) -> list[Path]:
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(f".{f}") for f in (formats or FORMATS)]
    for p in paths:
        fig.savefig(p, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return paths


def _panels(n: int, width: float = 4.6):
    fig, axes = plt.subplots(1, n, figsize=(width * n, 3.8), squeeze=False)
    return fig, list(axes[0])


def _finish(fig, axes, title: str, handles: list, ns, stem: Path) -> list[Path]:
    seen: dict[str, object] = {}
    for h in handles:
        seen.setdefault(h.get_label(), h)
    fig.suptitle(_title(title), fontsize=11)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(len(seen), 7), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, -0.01))  # fmt: skip
    n = n_range(ns)
    fig.text(0.99, 0.005 + 0.06 * (1 + (len(seen) - 1) // 7),
             "ours: 1 seed (no std)" if n == "1" else f"ours: mean ± 1 std over {n} seeds",
             ha="right", fontsize=8, color="0.3")  # fmt: skip
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout(rect=(0, 0.07 + 0.05 * ((len(seen) - 1) // 7), 1, 1))
    return _save(fig, stem)


def _paper_points(benchmark: str, method: str, quantity: str, cond: dict) -> list[float]:
    """The paper's values of ``quantity`` for this method under ``cond``: Table II, then its text."""
    v = pv.table2_value(benchmark, method, quantity) if pv.under(cond) else None
    out = [] if v is None else [v]
    for q in pv.QUOTES:
        if (q.kind, q.benchmark, q.method, q.quantity) == ("abs", benchmark, method, quantity) and pv.under(cond, q.at):
            out += [q.value] if q.value not in out else []
    return out


def _paper_markers(ax, x: float, benchmark: str, method: str, quantity: str, row, marker: str, colour) -> list:
    """The paper's values for the setting of ``row`` (its conditions): hollow markers in the series'
    colour inside a black edge at ``x``; their legend handles."""
    ys = _paper_points(benchmark, method, quantity, {k: row[k] for k in CONDITIONS})
    for y in ys:
        ax.plot([x], [y], ls="none", marker=marker, ms=9, mfc="none", mec="k", mew=1.0)
        ax.plot([x], [y], ls="none", marker=marker, ms=6, mfc="none", mec=colour, mew=1.2)
    return [PAPER_HANDLE] * len(ys)


def _bounds_ylim(ax, quantity: str) -> None:
    lo, hi = QUANTITIES[quantity].bounds
    a, b = ax.get_ylim()
    ax.set_ylim(max(a, lo - 2), min(b, hi + 2))


def vs_condition(
    summary: pd.DataFrame, quantity: str, x_key: str, title: str, stem: Path, xlabel: str | None = None
) -> list[Path]:
    """``quantity`` against M or lambda, a line per method, a panel per benchmark (one reading)."""
    s = summary[summary["variant"] == ""]
    if s.empty:
        return []
    benches = pv.order_benchmarks(s["benchmark"])  # a panel per benchmark, in the paper's order
    fig, axes = _panels(len(benches))
    handles = []
    for ax, b in zip(axes, benches):
        sb = s[s["benchmark"] == b]
        xs = sorted(sb[x_key].unique())
        methods = [m for m in pv.order_methods(sb["method"]) if m != "joint"]
        log = x_key == "memory"  # M doubles from value to value: a log2 axis spaces them evenly
        t = np.log2(xs) if log else np.asarray(xs, float)
        width = 0.8 * min(np.diff(t), default=1.0) / max(len(methods), 1)  # methods dodge sideways
        for k, m in enumerate(methods):
            sm = sb[sb["method"] == m].sort_values(x_key)
            colour, marker = method_style(m)
            off = (k - (len(methods) - 1) / 2) * width
            v = sm[x_key].to_numpy(float)
            x = 2 ** (np.log2(v) + off) if log else v + off
            y = sm[f"{quantity}_mean"].to_numpy()
            ax.errorbar(x, y, yerr=_clip(quantity, y, sm[f"{quantity}_std"]), color=colour, marker=marker, ms=5,
                        capsize=2, lw=1.2, label=pv.method_label(m))  # fmt: skip
            for xi, (_, r) in zip(x, sm.iterrows()):
                handles += _paper_markers(ax, xi, b, m, quantity, r, marker, colour)
        j = sb.loc[sb["method"] == "joint", f"{quantity}_mean"]
        if not j.isna().all():  # Joint: one final accuracy, a horizontal line
            ax.axhline(float(j.iloc[0]), ls="--", color=METHOD_STYLE["joint"][0], lw=1.2)
            handles.append(JOINT_HANDLE)
        if log:
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.set(title=pv.bench_label(b), xlabel=xlabel or AXIS[x_key], ylabel=QUANTITIES[quantity].axis_label)
        _bounds_ylim(ax, quantity)
        handles = [*ax.get_legend_handles_labels()[0], *handles]
    return _finish(fig, axes, title, handles, s["n"], stem)


def levels(
    summary: pd.DataFrame, quantity: str, x_key: str, title: str, stem: Path, method: str = "adaer"
) -> list[Path]:
    """One method's ``quantity`` against tau (or another level), a line per benchmark in the level colours."""
    s = select(summary[summary["variant"] == ""], method=method)
    if s.empty:
        return []
    fig, axes = _panels(1, 5.5)
    ax, paper = axes[0], False
    for k, b in enumerate(pv.order_benchmarks(s["benchmark"])):
        sb = s[s["benchmark"] == b].sort_values(x_key)
        colour = plt.get_cmap("tab10")(k)
        y = sb[f"{quantity}_mean"].to_numpy()
        ax.errorbar(sb[x_key], y, yerr=_clip(quantity, y, sb[f"{quantity}_std"]), color=colour,
                    ls=LINESTYLES[k % len(LINESTYLES)], marker="o", capsize=2, label=pv.bench_label(b))  # fmt: skip
        for _, r in sb.iterrows():
            paper |= bool(_paper_markers(ax, r[x_key], b, method, quantity, r, "o", colour))
    ax.set_xticks(sorted(s[x_key].unique()))
    ax.set(xlabel=AXIS[x_key], ylabel=QUANTITIES[quantity].axis_label, title=pv.method_label(method))
    _bounds_ylim(ax, quantity)
    handles = ax.get_legend_handles_labels()[0] + ([PAPER_HANDLE] if paper else [])
    return _finish(fig, axes, title, handles, s["n"], stem)


def first_task(runs: pd.DataFrame, title: str, stem: Path, by: str = "method") -> list[Path]:
    """R[i, 0] after each task i = 1..T: mean ± 1 std band per method (or per level of ``by``)."""
    r = runs[runs["variant"] == ""]
    if r.empty:
        return []
    benches = pv.order_benchmarks(r["benchmark"])  # a panel per benchmark, in the paper's order
    fig, axes = _panels(len(benches))
    handles, ns = [], []
    for ax, b in zip(axes, benches):
        rb = r[r["benchmark"] == b]
        groups = pv.order_methods(rb["method"]) if by == "method" else sorted(rb[by].unique())
        dodge = 0.25 / max(len(groups), 1)
        for k, g in enumerate(groups):
            rg = rb[rb[by] == g]
            Rs = [R for R in rg["R"] if R.ndim == 2]
            if not Rs:
                continue
            if by == "method" and g == "joint":  # one final accuracy: a horizontal reference
                ax.axhline(np.mean([R[-1, 0] for R in Rs]), ls="--", color=METHOD_STYLE["joint"][0], lw=1.2)
                handles.append(JOINT_HANDLE)
                continue
            Rs = [R for R in Rs if R.shape[0] == R.shape[1] == Rs[0].shape[0] > 1]
            if not Rs:
                continue
            col = np.stack([R[:, 0] for R in Rs])
            mean, std = col.mean(0), col.std(0, ddof=1) if len(col) > 1 else np.zeros(col.shape[1])
            lo, hi = mean - _clip("first_task_final", mean, std)[0], mean + _clip("first_task_final", mean, std)[1]
            x = np.arange(1, len(mean) + 1)
            if by == "method":
                colour, marker = method_style(g)
                ls, label = "-", pv.method_label(g)
            else:
                colour = plt.get_cmap("viridis")(k / max(len(groups) - 1, 1) * 0.9)  # a level: low to high
                ls, marker, label = LINESTYLES[k % len(LINESTYLES)], "o", f"{by.replace('tau', 'τ')} = {g:g}"
            ax.plot(x, mean, color=colour, ls=ls, marker=marker, ms=3.5, label=label)
            ax.fill_between(x, lo, hi, color=colour, alpha=0.12, lw=0)
            ns.append(len(col))
            method = g if by == "method" else rg["method"].iloc[0]
            x_paper = len(mean) + (k - (len(groups) - 1) / 2) * dodge
            handles += _paper_markers(ax, x_paper, b, method, "first_task_final", rg.iloc[0], marker, colour)
        T = max((R.shape[1] for R in rb["R"] if R.ndim == 2), default=1)
        ax.set_xticks(range(1, T + 1) if T <= 10 else range(1, T + 1, max(1, T // 10)))
        ax.set(title=pv.bench_label(b), xlabel="after training task i (tasks numbered 1..T)",
               ylabel="accuracy on task 1 (%)", ylim=(-2, 102))  # fmt: skip
        handles = [*ax.get_legend_handles_labels()[0], *handles]
    return _finish(fig, axes, title, handles, ns or [0], stem)


def bars(summary: pd.DataFrame, quantity: str, title: str, stem: Path, **where) -> list[Path]:
    """Grouped bars: a group per benchmark, a bar per method (mean ± 1 std), the paper's value as a black tick."""
    s = select(summary[summary["variant"] == ""], **where)
    if s.empty:
        return []
    benches = pv.order_benchmarks(s["benchmark"])
    methods = pv.order_methods(s["method"])
    fig, axes = _panels(1, 1.2 + 0.5 * len(methods) * len(benches))
    ax, w, ticks = axes[0], 0.8 / len(methods), []
    for k, m in enumerate(methods):
        sm = s[s["method"] == m].set_index("benchmark")
        bs = [b for b in benches if b in sm.index]
        x = np.array([benches.index(b) for b in bs]) - 0.4 + w * (k + 0.5)
        y = sm.loc[bs, f"{quantity}_mean"].to_numpy()
        ax.bar(x, y, w, yerr=_clip(quantity, y, sm.loc[bs, f"{quantity}_std"]), color=method_style(m)[0],
               capsize=2, label=pv.method_label(m))  # fmt: skip
        for xi, b in zip(x, bs):
            for v in _paper_points(b, m, quantity, {c: sm.loc[b, c] for c in CONDITIONS}):
                ticks += ax.plot([xi - w / 2, xi + w / 2], [v, v], color="k", lw=2, label="paper (black tick)")
    ax.set_xticks(range(len(benches)), [pv.bench_label(b) for b in benches])
    ax.set(ylabel=QUANTITIES[quantity].axis_label)
    _bounds_ylim(ax, quantity)
    return _finish(fig, axes, title, ax.get_legend_handles_labels()[0], s["n"], stem)


def heatmaps(runs: pd.DataFrame, title: str, stem: Path) -> list[Path]:
    """The mean accuracy matrix R[i, j] per method and per setting of every swept condition (never
    averaged over one: docs/GUIDE.md, "Aggregation"), tasks 1..T; each panel says its setting and n.

    ``runs``: one benchmark and one reading (the caller splits them). Rows of panels: methods;
    columns: the settings of the swept conditions (wrapped at 7 panels when nothing else is swept).
    """
    r = runs[(runs["variant"] == "") & (runs["method"] != "joint")]
    swept = [k for k in CONDITIONS if r[k].nunique() > 1]
    mats = {}
    for key, g in r.groupby(["method", *swept], sort=False):
        Rs = [R for R in g["R"] if R.ndim == 2 and R.shape[0] == R.shape[1]]
        if Rs and len({R.shape for R in Rs}) == 1:
            mats[key] = (np.mean(Rs, axis=0), len(Rs))
    if not mats:
        return []
    methods = pv.order_methods({k[0] for k in mats})
    settings = sorted({k[1:] for k in mats})
    if len(settings) > 1:
        nrow, ncol = len(methods), len(settings)
        cells = {(m, *c): (i, j) for i, m in enumerate(methods) for j, c in enumerate(settings)}
    else:
        ncol = min(len(methods), 7)
        nrow = -(-len(methods) // ncol)
        cells = {(m, *settings[0]): divmod(i, ncol) for i, m in enumerate(methods)}
    T = next(iter(mats.values()))[0].shape[0]
    # at least 7.5 x 3.8 inches: the two-line title and the colorbar's label fit above and beside one panel
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(2.1 * ncol + 1, 7.5), max(2.1 * nrow + 1.1, 3.8)), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    im = None
    for key, (i, j) in cells.items():
        if key not in mats:
            continue
        (R, n), ax = mats[key], axes[i, j]
        ax.axis("on")
        im = ax.imshow(R, vmin=0, vmax=100, cmap="viridis")
        if R.size <= 100:
            for (a, b), v in np.ndenumerate(R):
                ax.text(b, a, f"{v:.0f}", ha="center", va="center", color="w" if v < 60 else "k", fontsize=6)
        ticks = range(T) if T <= 10 else range(0, T, max(1, T // 5))
        ax.set_xticks(ticks, [t + 1 for t in ticks], fontsize=6)
        ax.set_yticks(ticks, [t + 1 for t in ticks], fontsize=6)
        setting = "".join(f", {short(k)}={v:g}" for k, v in zip(swept, key[1:]))
        ax.set_title(f"{pv.method_label(key[0])}{setting}, n={n}", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("after training task i", fontsize=7)
    for ax in axes[-1, :]:
        ax.set_xlabel("evaluated on task j", fontsize=7)
    per = " x ".join(["method", *(short(k) for k in swept)])
    fig.subplots_adjust(top=1 - 0.8 / fig.get_figheight())  # the two title lines sit above the panels' titles
    fig.suptitle(_title(f"{title}\none panel per {per}"), fontsize=10)
    bar = fig.colorbar(im, ax=axes, fraction=0.02)
    bar.set_label("accuracy (%), mean over the panel's n seeds", fontsize=7)
    return _save(fig, stem, ("png",), dpi=110)
