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
from clsuite.analysis.contrast import contrast, in_method_order

QUANTITIES = (("acc", "Acc"), ("forget", "Forget"), ("bwt", "BWT"))


def _readings_loss(flat: dict) -> bool:
    """mir_code's own loss and evaluation (the split loss, the running statistics): no BatchNorm variant."""
    return flat.get("replay_loss") == "split" and (flat.get("eval_bn") or "running") == "running"


def follows_mirs_data_code(flat: dict) -> bool:
    """A run with MIR's CIFAR-10 inputs and split (``data.input_range=symmetric``, ``data.val_fraction=0.05``)."""
    return (
        flat.get("data.input_range") == "symmetric" and flat.get("data.val_fraction") == 0.05 and _readings_loss(flat)
    )


def _plain(flat: dict) -> bool:
    return flat.get("data.input_range") in (None, "unit") and not flat.get("data.val_fraction") and _readings_loss(flat)


def markdown(after: pd.DataFrame, before: pd.DataFrame, benchmark: str) -> list[str]:
    """The table for ``benchmark``'s runs of the reading ``mir_code``; empty when an arm has no runs."""
    arms = []
    for runs, keep in ((after, follows_mirs_data_code), (before, _plain)):
        if runs.empty:
            return []
        runs = runs[(runs["benchmark"] == benchmark) & (runs["reading"] == "mir_code")]
        arms.append(runs[[keep(f) for f in runs["flat"]]])
    new, old = arms
    if new.empty or old.empty:
        return []
    name = pv.bench_label(benchmark)
    t = tb.Table(
        f"MIR's CIFAR-10 data code on {name}: [-1, 1] inputs and 95% of each task's images, against [0, 1] and all",
        ["method", *[q for _, q in QUANTITIES], "n"],
        note="after − before per seed over the seeds both ran, then mean [95% t interval] (% points; for Forget, lower "
        "is better). after: data.input_range=symmetric, data.val_fraction=0.05 (mir_code on the CIFAR family now); "
        "before: the same reading's runs made before the two keys (the record this section was first made of). The "
        "two keys change together, as the reading sets them.",
    )
    both = in_method_order(pd.concat([new.assign(arm="after"), old.assign(arm="before")]))
    for r in contrast(both, "arm", "before", [q for q, _ in QUANTITIES], by=["method"]).itertuples():
        t.add([pv.method_label(r.method), *(getattr(r, q).interval() for q, _ in QUANTITIES), r.n])
    return [t.markdown()] if t.rows else []
