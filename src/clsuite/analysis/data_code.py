"""What following MIR's CIFAR-10 data code moved (docs/METHODS.md, "Readings"): the CIFAR-10 row under
``mir_code`` with MIR's [-1, 1] inputs and 95% training split against the row made before them
(inputs in [0, 1], every training image), the same methods, paired by seed.

Steps of :func:`markdown`: the runs of each arm on the benchmark, told apart by ``data.input_range`` and
``data.val_fraction`` in their configs (the before arm has neither); per method, after − before for
Acc, Forget and BWT over the seeds both ran (95% t intervals). Both arms change together: the table
measures the two keys at once, as the reading sets them.
"""

from __future__ import annotations

import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.contrast import ACROSS, contrast, in_method_order, seeds_across

QUANTITIES = (("acc", "Acc"), ("forget", "Forget"), ("bwt", "BWT"))
ARMS = {"after": ("symmetric", 0.05), "before": ("unit", 0.0)}  # (data.input_range, data.val_fraction); null: unit, 0


def arm(flat: dict) -> str | None:
    """The arm of a run under mir_code's own loss and evaluation (the split loss, the running statistics: no
    BatchNorm variant), from its data keys; None for another setting."""
    if flat.get("replay_loss") != "split" or (flat.get("eval_bn") or "running") != "running":
        return None
    if flat.get("model.norm_groups") is not None:  # (Continual Normalization: a network of its own)
        return None
    data = (flat.get("data.input_range") or "unit", flat.get("data.val_fraction") or 0.0)
    return next((a for a, keys in ARMS.items() if keys == data), None)


def markdown(after: pd.DataFrame, before: pd.DataFrame, benchmark: str) -> list[str]:
    """The table for ``benchmark``'s runs of the reading ``mir_code``; empty when an arm has no runs."""
    arms = []
    for runs, which in ((after, "after"), (before, "before")):
        if runs.empty:
            return []
        runs = runs[(runs["benchmark"] == benchmark) & (runs["reading"] == "mir_code")]
        arms.append(runs[[arm(f) == which for f in runs["flat"]]].assign(arm=which))
    if any(a.empty for a in arms):
        return []
    name = pv.bench_label(benchmark)
    t = tb.Table(
        f"MIR's CIFAR-10 data code on {name}: [-1, 1] inputs and 95% of each task's images, against [0, 1] and all",
        ["method", *[q for _, q in QUANTITIES], "n", ACROSS],
        note="after − before per seed over the seeds both ran, then mean [95% t interval] (% points; for Forget, lower "
        "is better). after: data.input_range=symmetric, data.val_fraction=0.05 (mir_code on the CIFAR family now); "
        "before: the same reading's runs made before the two keys (the record this section was first made of). The "
        f"two keys change together, as the reading sets them. {ACROSS}: as in the BatchNorm tables.",
    )
    both = in_method_order(pd.concat(arms))
    for r in contrast(both, "arm", "before", [q for q, _ in QUANTITIES], by=["method"]).itertuples():
        after_m, before_m = (a[a["method"] == r.method] for a in arms)
        t.add([pv.method_label(r.method), *(getattr(r, q).interval() for q, _ in QUANTITIES), r.n,
               seeds_across(after_m, before_m)])  # fmt: skip
    return [t.markdown()] if t.rows else []
