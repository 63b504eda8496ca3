"""Continual-learning metrics on the accuracy matrix (PROTOCOL section 5).

``R[i, j]`` is the test accuracy (%) on task ``j`` after training task ``i``;
``b[j]`` is the accuracy of the randomly initialised model on task ``j``.
All functions are pure: numpy in, float out, NaN where undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _as_matrix(R) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    if R.ndim != 2 or R.shape[0] != R.shape[1]:
        raise ValueError(f"accuracy matrix must be square T x T, got shape {R.shape}")
    return R


def average_accuracy(R) -> float:
    """Acc = mean_j R[T-1, j] (accepts a 1 x T final row too, as Joint produces)."""
    R = np.asarray(R, dtype=float)
    return float(R[-1].mean())


def forgetting(R) -> float:
    """Forget = mean_{j<T-1} max_{l<T-1} R[l, j] - R[T-1, j] (Chaudhry et al. 2018)."""
    R = _as_matrix(R)
    T = R.shape[0]
    if T < 2:
        return float("nan")
    best = R[: T - 1, : T - 1].max(axis=0)
    return float((best - R[T - 1, : T - 1]).mean())


def backward_transfer(R) -> float:
    """BWT = mean_{j<T-1} R[T-1, j] - R[j, j] (Lopez-Paz & Ranzato 2017)."""
    R = _as_matrix(R)
    T = R.shape[0]
    if T < 2:
        return float("nan")
    return float((R[T - 1, : T - 1] - np.diag(R)[: T - 1]).mean())


def forward_transfer(R, b) -> float:
    """FWT = mean_{j>=1} R[j-1, j] - b[j] (GEM's definition; PROTOCOL section 5)."""
    R = _as_matrix(R)
    b = np.asarray(b, dtype=float)
    T = R.shape[0]
    if T < 2:
        return float("nan")
    j = np.arange(1, T)
    return float((R[j - 1, j] - b[j]).mean())


def all_metrics(R, b=None) -> dict[str, float]:
    """The four metrics of Table II; Joint (a single final row) has only Acc."""
    R = np.asarray(R, dtype=float)
    if R.shape[0] != R.shape[1]:
        nan = float("nan")
        return {"acc": average_accuracy(R), "forget": nan, "bwt": nan, "fwt": nan}
    return {
        "acc": average_accuracy(R),
        "forget": forgetting(R),
        "bwt": backward_transfer(R),
        "fwt": forward_transfer(R, b) if b is not None else float("nan"),
    }


TASK_IL = "_task_il"  # the suffix of the task-IL metrics' keys (results['metrics'])


def task_il_metrics(R_task_il) -> dict[str, float]:
    """Acc, Forget and BWT of the task-IL matrix (the logits masked to the evaluated task's
    classes), keyed ``acc_task_il``, ...; FWT is left out (it would need b under the mask)."""
    m = all_metrics(R_task_il)
    return {f"{k}{TASK_IL}": m[k] for k in ("acc", "forget", "bwt")}


@dataclass(frozen=True)
class Metric:
    """One metric of Table II: its key in ``results['metrics']``, its printed label, which way
    is better, and the formula (for tables' footnotes and the report)."""

    key: str
    label: str
    higher_is_better: bool
    formula: str
    unit: str = "%"  # axis and column unit: accuracies in %, differences of accuracies in points
    bounds: tuple[float, float] = (-100.0, 100.0)  # the values it can take (error bars are clipped to them)

    @property
    def axis_label(self) -> str:
        return f"{self.label} ({self.unit})"


# The one registry of metrics: the CLI summary, tables, figures and the report all read it.
METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("acc", "Acc", True, "mean_j R[T-1, j]", "%", (0.0, 100.0)),
        Metric("forget", "Forget", False, "mean_{j<T-1} max_{l<T-1} R[l, j] - R[T-1, j]", "% points"),
        Metric("bwt", "BWT", True, "mean_{j<T-1} R[T-1, j] - R[j, j]", "% points"),
        Metric("fwt", "FWT", True, "mean_{j>=1} R[j-1, j] - b[j]", "% points"),
    )
}


# Why FWT cannot rank methods here (tables' footnotes, the run summary, the report; PROTOCOL section 5).
FWT_CLASS_IL = (
    "In class-IL a model does not predict the classes of a task before it is trained on them, so its accuracy on "
    "task j just before task j is 0 and FWT = -(mean of b over tasks 2..T): it measures the initialisation (shared "
    "by the methods of one seed), not the method, and cannot rank methods."
)


def first_task_final(R) -> float:
    """R[T-1, 0]: accuracy on the first task after the last one (Fig. 7); NaN unless R is square, T > 1."""
    R = np.asarray(R, dtype=float)
    return float(R[-1, 0]) if R.ndim == 2 and R.shape[0] == R.shape[1] > 1 else float("nan")


def first_task_drop(R) -> float:
    """R[0, 0] - R[T-1, 0]: how much of the first task is lost by the end of the stream (Fig. 7)."""
    R = np.asarray(R, dtype=float)
    return float(R[0, 0] - R[-1, 0]) if R.ndim == 2 and R.shape[0] == R.shape[1] > 1 else float("nan")


# The metrics plus the first-task quantities of Figs. 7, 8, 10 (computed from R by the analysis) and
# the task-IL Acc (NaN for results files that predate the task-IL matrix).
QUANTITIES: dict[str, Metric] = {
    **METRICS,
    "acc_task_il": Metric("acc_task_il", "task-IL Acc", True, "mean_j R_task_il[T-1, j]", "%", (0.0, 100.0)),
    "first_task_final": Metric("first_task_final", "task-1 Acc at the end", True, "R[T-1, 0]", "%", (0.0, 100.0)),
    "first_task_drop": Metric("first_task_drop", "task-1 drop", False, "R[0, 0] - R[T-1, 0]", "% points"),
}
