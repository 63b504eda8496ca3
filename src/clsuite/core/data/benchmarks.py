"""Split benchmarks (PROTOCOL section 1): raw arrays -> one tensor set per task.

A benchmark config names its source files, the number of tasks, classes per
task and training samples per class (``null`` = all). The split is a pure
function of the arrays, the config and the seed, so it is tested on synthetic
arrays of the real shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class TaskData:
    """The tensors of one task: train / val / test, and its classes."""

    classes: list[int]
    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


def class_order(num_classes: int, order: str, seed: int) -> list[int]:
    if order == "natural":
        return list(range(num_classes))
    if order == "random":
        return np.random.default_rng(seed).permutation(num_classes).tolist()
    raise ValueError(f"unknown class_order {order!r}; valid: natural, random")


def imbalanced_counts(n: int, classes: list[int], lam: float, rng, semantics: str = "keep") -> dict[int, int]:
    """PROTOCOL section 6: one class per task (chosen with the seed) keeps
    round((1 - lam) * n) samples ("keep"); "ratio" keeps round(lam * n) of it
    for lam > 0 (the paper's ambiguous 'class 1 to class 2 ratio' wording)."""
    counts = {c: n for c in classes}
    if lam > 0:
        minority = classes[int(rng.integers(len(classes)))]
        counts[minority] = max(1, round((1 - lam) * n) if semantics == "keep" else round(lam * n))
    return counts


def split_tasks(
    arrays,
    n_tasks: int,
    classes_per_task: int,
    train_per_class,
    seed: int,
    order="natural",
    val_fraction: float = 0.0,
    imbalance: float = 0.0,
    imbalance_semantics: str = "keep",
):
    """Split (xtr, ytr, xte, yte) uint8/int64 arrays into ``n_tasks`` TaskData.

    Per task and class: ``train_per_class`` training samples drawn with the
    seed (all when null), minus the minority class's share under imbalance;
    ``val_fraction`` of them held out as validation; all test samples of the
    task's classes as its test set. Inputs scaled to [0, 1].
    """
    xtr, ytr, xte, yte = arrays
    n_classes = n_tasks * classes_per_task
    order_ = class_order(int(max(ytr.max(), yte.max())) + 1, order, seed)[:n_classes]
    rng = np.random.default_rng(seed)
    tasks = []
    for k in range(n_tasks):
        classes = order_[k * classes_per_task : (k + 1) * classes_per_task]
        tr_idx, va_idx = [], []
        n_avail = {c: int((ytr == c).sum()) for c in classes}
        base = min(n_avail.values()) if train_per_class is None else int(train_per_class)
        counts = imbalanced_counts(base, classes, imbalance, rng, imbalance_semantics)
        for c in classes:
            pool = np.flatnonzero(ytr == c)
            if counts[c] > len(pool):
                raise ValueError(f"class {c} has {len(pool)} training samples, {counts[c]} requested")
            pick = rng.choice(pool, counts[c], replace=False)  # a seeded random subset, shuffled
            n_val = round(val_fraction * len(pick))
            va_idx.append(pick[:n_val])
            tr_idx.append(pick[n_val:])
        tr_idx, va_idx = np.concatenate(tr_idx), np.concatenate(va_idx)
        te_idx = np.flatnonzero(np.isin(yte, classes))
        tasks.append(
            TaskData(
                classes=[int(c) for c in classes],
                train=_tensors(xtr[tr_idx], ytr[tr_idx]),
                val=_tensors(xtr[va_idx], ytr[va_idx]),
                test=_tensors(xte[te_idx], yte[te_idx]),
            )
        )
    return tasks


def _tensors(x: np.ndarray, y: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(x)).float().div_(255.0), torch.from_numpy(
        np.ascontiguousarray(y)
    ).long()
