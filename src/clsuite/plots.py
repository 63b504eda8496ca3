"""Figures built from results files (matplotlib, headless)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def heatmap(R, path, title: str = "") -> Path:
    """The accuracy matrix as an annotated heatmap (PNG)."""
    R = np.asarray(R, dtype=float)
    fig, ax = plt.subplots(figsize=(1 + 0.6 * R.shape[1], 1 + 0.5 * R.shape[0]))
    im = ax.imshow(R, vmin=0, vmax=100, cmap="viridis")
    if R.size <= 100:
        for (i, j), v in np.ndenumerate(R):
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", color="w" if v < 60 else "k", fontsize=8)
    ax.set_xlabel("task evaluated (j)")
    ax.set_ylabel("after training task (i)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- paper figures
# Multi-panel figures in the layout of the paper's Figs. 5-12, written as PNG and PDF.
# A figure is a row of panels; a panel holds series (one per method, tau, ...) drawn as lines
# with error bars, as curves with a +-std band, or as grouped bars. Paper values, where the paper
# states them, are drawn as black-edged hollow markers labelled "paper".

_MARKERS = "osD^vP*Xh<>p"


def series_style(key: str, order: list[str] | tuple[str, ...] = ()) -> dict:
    """A fixed colour and marker per method (or any key), the same in every figure."""
    order = list(order)
    i = order.index(key) if key in order else len(order) + (sum(map(ord, str(key))) % 7)
    return {"color": plt.get_cmap("tab20")(i % 20), "marker": _MARKERS[i % len(_MARKERS)]}


@dataclass
class Series:
    label: str
    x: list
    y: list
    err: list | None = None
    color: object = None
    marker: str = "o"
    paper: list = field(default_factory=list)  # [(x, y)] the paper's values for this series


@dataclass
class Panel:
    title: str
    series: list[Series]
    kind: str = "lines"  # lines | curves | bars
    xlabel: str = ""
    ylabel: str = ""
    xticks: list | None = None
    width: float = 1.0  # relative panel width


def save_figure(fig, stem) -> list[Path]:
    """``stem``.png and ``stem``.pdf."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".pdf")]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def _draw_lines(ax, panel: Panel) -> None:
    for s in panel.series:
        x, y = np.asarray(s.x, dtype=float), np.asarray(s.y, dtype=float)
        err = None if s.err is None else np.nan_to_num(np.asarray(s.err, dtype=float))
        if panel.kind == "curves":
            ax.plot(x, y, color=s.color, marker=s.marker, markersize=3, label=s.label)
            if err is not None:
                ax.fill_between(x, y - err, y + err, color=s.color, alpha=0.15, linewidth=0)
        else:
            ax.errorbar(x, y, yerr=err, color=s.color, marker=s.marker, markersize=5, capsize=3, label=s.label)
        for px, py in s.paper:
            ax.plot(
                [px],
                [py],
                linestyle="none",
                marker=s.marker,
                markersize=9,
                markerfacecolor="none",
                markeredgecolor="k",
                markeredgewidth=1.2,
            )
    if panel.xticks is not None:
        ax.set_xticks(panel.xticks)


def _draw_bars(ax, panel: Panel) -> None:
    cats = list(dict.fromkeys(c for s in panel.series for c in s.x))
    n = max(len(panel.series), 1)
    w = 0.8 / n
    for k, s in enumerate(panel.series):
        pos = {c: i - 0.4 + w * (k + 0.5) for i, c in enumerate(cats)}
        xs = [pos[c] for c in s.x]
        ax.bar(
            xs,
            s.y,
            width=w,
            yerr=None if s.err is None else np.nan_to_num(np.asarray(s.err, dtype=float)),
            color=s.color,
            capsize=3,
            label=s.label,
        )
        for px, py in s.paper:
            if px in pos:
                ax.plot(
                    [pos[px]],
                    [py],
                    linestyle="none",
                    marker="_",
                    markersize=max(6, 60 * w),
                    markeredgecolor="k",
                    markeredgewidth=2,
                )
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats, fontsize=8)


def draw(panels: list[Panel], stem, title: str = "", note: str = "") -> list[Path]:
    """One row of panels -> ``stem``.png / .pdf, one legend below (paper markers explained)."""
    panels = [p for p in panels if p.series]
    if not panels:
        return []
    widths = [p.width for p in panels]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(sum(4.2 * w for w in widths), 3.6), squeeze=False, gridspec_kw={"width_ratios": widths}
    )
    handles: dict[str, object] = {}
    has_paper = False
    for ax, p in zip(axes[0], panels):
        (_draw_bars if p.kind == "bars" else _draw_lines)(ax, p)
        ax.set_title(p.title, fontsize=10)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.grid(alpha=0.3)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
        has_paper |= any(s.paper for s in p.series)
    if has_paper:
        handles["paper (its text / Table II)"] = plt.Line2D(
            [], [], linestyle="none", marker="o", markerfacecolor="none", markeredgecolor="k", markersize=8
        )
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="lower center",
        ncol=min(len(handles), 8),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, -0.02),
    )
    if title:
        fig.suptitle(title, fontsize=11)
    if note:
        fig.text(0.01, -0.08, note, fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return save_figure(fig, stem)


def heatmap_grid(matrices: dict[str, np.ndarray], stem, title: str = "") -> list[Path]:
    """Mean accuracy matrices side by side (one panel per method), one colour scale."""
    items = [(k, np.asarray(v, dtype=float)) for k, v in matrices.items() if np.asarray(v).ndim == 2]
    if not items:
        return []
    ncol = min(len(items), 5)
    nrow = -(-len(items) // ncol)
    T = max(m.shape[1] for _, m in items)
    size = 2.2 if T <= 10 else 3.2
    fig, axes = plt.subplots(nrow, ncol, figsize=(size * ncol + 1, size * nrow + 0.6), squeeze=False)
    im = None
    for ax in axes.flat:
        ax.axis("off")
    for ax, (label, R) in zip(axes.flat, items):
        ax.axis("on")
        im = ax.imshow(R, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        if R.size <= 100:
            for (i, j), v in np.ndenumerate(R):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", color="w" if v < 60 else "k", fontsize=6)
        ax.set_title(label, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[:, 0]:
        ax.set_ylabel("after task i", fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("task j", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.colorbar(im, ax=axes, fraction=0.02, label="accuracy (%)")
    return save_figure(fig, stem)
