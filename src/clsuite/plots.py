"""Figures built from results files (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


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
