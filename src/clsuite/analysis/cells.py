"""Table II cells checked by measurement: each variant against the default, paired by seed,
and whether it explains the distance to the paper. Steps of :func:`markdown`: docs/GUIDE.md,
"Table II cells"; the measured table: docs/REPRODUCTION.md, "Table II cells checked by measurement".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clsuite.analysis import open_choices as ch
from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.contrast import contrast, in_method_order
from clsuite.analysis.load import Experiment, distinct_runs, experiment_names, load_experiment, read_grid, varying_keys
from clsuite.analysis.stats import Paired

MNISTS = ("split_mnist", "split_fmnist")  # where a cell runs unless it says otherwise (Table II's section's)
ENV = ("code", "torch_threads", "device", "torch", "numerics")
NO_EFFECT, EXPLAINS, PART, OVERSHOOTS, AWAY = (
    "no measured effect", "explains the gap", "explains part", "overshoots", "away from the paper",
)  # fmt: skip


def _reading_value(choice: str) -> Callable[[dict, str], bool]:
    """Default = the reading's own value of an open choice (``clsuite.analysis.open_choices.Choice.default``)."""
    c = ch.BY_EXPERIMENT[ch.PREFIX + choice]
    return lambda flat, reading: (
        (d := c.default(reading, flat.get("benchmark.name"), flat.get("method.name"))) is not ch.NO_DEFAULT
        and flat.get(c.key) == d
    )


def _agem_default(flat: dict, reading: str) -> bool:
    """conf/method/agem.yaml as it is: |R| 256, uniform draw over past tasks, reservoir."""
    return (
        flat.get("method.replay_size") == 256
        and flat.get("method.replay._target_") == "clsuite.core.replay.random.RandomReplay"
        and flat.get("method.replay.exclude_current_task") is True
        and flat.get("method.update._target_") == "clsuite.core.memory.reservoir.Reservoir"
    )


@dataclass(frozen=True)
class Cell:
    name: str
    title: str
    methods: tuple[str, ...]
    sweeps: tuple[str, ...]
    command: str
    is_default: Callable[[dict, str], bool]
    default_label: str
    labels: dict = field(default_factory=dict)  # variant label -> what it is and whose it is
    benchmarks: tuple[str, ...] = MNISTS  # those its sweeps run


CELLS = (
    Cell("joint", "Joint", ("joint",), ("cells_joint",), "make cell-joint",
         lambda flat, reading: flat.get("method.epochs", 1) == 1, "1 pass (the protocol's)",
         {f"method.epochs={k}": f"{k} passes over the union" for k in (2, 5, 10)}),
    Cell("agem", "A-GEM", ("agem",),
         ("cells_agem_batch", "cells_agem_draw", "cells_agem_pool", "cells_agem_layout", "cells_agem_per_task"),
         "make cell-agem", _agem_default,
         "|R| 256 uniform over past tasks, reservoir (A-GEM's code's batch, online memory)",
         {"method.replay_size=128": "|R| 128 (Mammoth best_args)",
          "method.replay_size=null": "|R| = the reading's (10)",
          "method.replay._target_=BalancedReplay, method.replay.by=task": "equal shares per past task (Avalanche)",
          "method.replay.exclude_current_task=false": "R from the whole memory, current task too (Mammoth agem_r)",
          "method.update._target_=ClassRingBuffer": "ring buffer per class, filled during the task (A-GEM's code)",
          # (a label names only the keys whose value differs from the default's: per_task=null is the default's)
          "method.update._target_=TaskReservoir": "a random M // T of each task (Avalanche)",
          "method.update._target_=TaskReservoir, method.update.per_task=10":
              "one batch (10) per task (Mammoth agem's end_task)"}),
    Cell("stored_logits", "MIR's stored logits", ("mir", "ccmr", "ebrs", "adaer"),
         ("choices_logits_on_overwrite",), "make cell-logits", _reading_value("logits_on_overwrite"),
         "the reading's logits_on_overwrite",
         {"logits_on_overwrite=keep": "keep the previous occupant's logits (MIR's code)",
          "logits_on_overwrite=reset": "reset an overwritten slot's logits to 0"}),
    Cell("icarl_update", "iCaRL's exemplar update", ("icarl",), ("cells_icarl_update",), "make cell-icarl",
         lambda flat, reading: flat.get("method.update._target_") == "clsuite.core.memory.herding.HerdingMemory",
         "herding at each task end over the task's kept stream (iCaRL's Alg. 4-5)",
         {"method.update._target_=Reservoir": "reservoir, each image seen once (online iCaRL, Mai et al. 2021)"},
         ("split_cifar10_jpeg",)),
    Cell("icarl_classifier", "iCaRL's classifier", ("icarl",), ("cells_icarl_classifier",), "make cell-icarl",
         lambda flat, reading: flat.get("method.plugin.classifier") is None,
         "nearest mean of exemplars (iCaRL's Alg. 1)",
         {"method.plugin.classifier=head": "the network's own outputs, trained the same (the paper's hybrid1)"},
         ("split_cifar10_jpeg",)),
)  # fmt: skip
BY_NAME = {c.name: c for c in CELLS}
DEFAULT = "\0default"  # the default's arm (no variant label is empty of keys)


def _sweep_of(grid: dict) -> str | None:
    """The sweep (``--config-name``) that made an experiment, from its grid's command line."""
    argv = (grid or {}).get("argv") or []
    for i, a in enumerate(argv):
        if a in ("--config-name", "-cn") and i + 1 < len(argv):
            return str(argv[i + 1])
        if str(a).startswith("--config-name="):
            return str(a).split("=", 1)[1]
    return None


def owner(e: Experiment) -> Cell | None:
    """The cell whose sweep made ``e`` (or whose sweep bears its name), if any."""
    sweep = _sweep_of((e.status or {}).get("grid"))
    return next((c for c in CELLS if e.name in c.sweeps or sweep in c.sweeps), None)


def find(multirun) -> dict[str, Experiment]:
    """The experiments of ``multirun`` that belong to a cell, loaded (the others are not read)."""
    root, out = Path(multirun), {}
    sweeps = {s for c in CELLS for s in c.sweeps}
    for name in experiment_names(root):
        if name in sweeps or _sweep_of(read_grid(root / name)) in sweeps:
            out[name] = load_experiment(root / name)
    return out


@dataclass(frozen=True)
class Row:
    cell: Cell
    benchmark: str
    method: str
    reading: str
    variant: str
    default_acc: float
    variant_acc: float
    diff: Paired
    paper: float | None

    @property
    def gap(self) -> float | None:
        return None if self.paper is None else self.paper - self.default_acc

    @property
    def verdict(self) -> str:
        return verdict(self.diff, self.gap)

    @property
    def name(self) -> str:
        return self.cell.labels.get(self.variant, self.variant)


def verdict(d: Paired, gap: float | None) -> str:
    """Step 4: what the variant's paired difference says about the gap to the paper."""
    if not d.defined or d.low <= 0 <= d.high:
        return NO_EFFECT
    if gap is None:
        return "moves Acc"
    if d.low <= gap <= d.high:
        return EXPLAINS
    if (d.mean > 0) != (gap > 0):
        return AWAY
    return PART if abs(d.high if gap > 0 else d.low) < abs(gap) else OVERSHOOTS


def rows(cell: Cell, runs: pd.DataFrame) -> list[Row]:
    """Steps 2-3 for one cell."""
    if runs.empty:
        return []
    arms = []
    runs = runs.assign(env=runs[list(ENV)].astype(str).agg("|".join, axis=1))
    for (_, _, reading), g in runs.groupby(["benchmark", "method", "reading"], sort=False):
        g = g[g["env"] == g["env"].value_counts().index[0]]  # one environment: the one with most runs
        keys = sorted(varying_keys(g["flat"]))
        is_def = g["flat"].map(lambda f, r=reading: bool(cell.is_default(f, r)))
        if not is_def.any():
            continue
        ref = g[is_def]["flat"].iloc[0]  # a variant is named by the keys whose value differs from the default's
        labels = g["flat"].map(
            lambda f, r=ref, ks=keys: ", ".join(f"{k}={ch.show(f.get(k))}" for k in ks if f.get(k) != r.get(k))
        )
        arms.append(g.assign(arm=labels.where(~is_def, DEFAULT)))
    if not arms:
        return []
    frame = contrast(pd.concat(arms), "arm", DEFAULT, ["acc"], by=["benchmark", "method", "reading"])
    return [Row(cell, r.benchmark, r.method, r.reading, r.arm, r.acc_base, r.acc_arm, r.acc,
                pv.table2_value(pv.OFFICIAL_OF.get(r.benchmark, r.benchmark), r.method, "acc"))
            for r in in_method_order(frame, "arm", "benchmark").itertuples()]  # fmt: skip


def table(all_rows: list[Row]) -> tb.Table:
    t = tb.Table(
        "Table II cells checked by measurement: each variant against the default, paired by seed",
        ["cell", "method", "variant", "benchmark", "reading", "n", "Acc default (%)", "Acc variant (%)",
         "Δ Acc [95% CI]", "paper − default", "verdict"],
        note="Δ = variant − default per seed, mean over the seeds both have (n), 95% Student-t interval. Verdict: "
        "whether the interval holds 0 (no measured effect), the gap to the paper (explains the gap), lies short of "
        "it (explains part), beyond it (overshoots), or on the other side (away from the paper). paper: Table II's value, "
        "on the official data where the runs' benchmark is a copy of it (the CIFAR-10 JPEG copy).",
    )  # fmt: skip
    for r in all_rows:
        t.add([r.cell.title, pv.method_label(r.method), r.name, pv.bench_label(r.benchmark), r.reading, r.diff.n,
               f"{r.default_acc:.1f}", f"{r.variant_acc:.1f}", r.diff.interval(),
               "" if r.gap is None else f"{r.gap:+.1f}", r.verdict], group=r.cell)  # fmt: skip
    return t


def summary(cell: Cell, cell_rows: list[Row], folders: list[str]) -> str:
    """Step 5: one note for the cell."""
    sweeps = ", ".join(f"sweeps/{s}.yaml" for s in cell.sweeps)
    if not cell_rows:
        return f"**{cell.title}**: not measured here: `{cell.command}` ({sweeps}, 10 seeds)."
    benches = {r.benchmark for r in cell_rows}
    by_variant: dict[tuple[str, str], list[Row]] = {}
    for r in cell_rows:
        by_variant.setdefault((r.method, r.name), []).append(r)
    full = [k for k, rs in by_variant.items() if {r.benchmark for r in rs if r.verdict == EXPLAINS} == benches]
    some = [(k, r) for k, rs in by_variant.items() if k not in full for r in rs if r.verdict == EXPLAINS]

    def who(k):
        return f"{pv.method_label(k[0])}: {k[1]}" if len(cell.methods) > 1 else k[1]

    if full:
        what = "explained on every benchmark measured by " + "; ".join(who(k) for k in full)
    elif some:
        what = "explained on one benchmark only by " + "; ".join(
            f"{who(k)} ({pv.bench_label(r.benchmark)})" for k, r in some
        )
    else:
        what = "none of the measured variants explains the distance to the paper (a measured none)"
    moved = sorted({f"{who((r.method, r.name))} {r.diff.interval()} on {pv.bench_label(r.benchmark)}"
                    for r in cell_rows if r.verdict != NO_EFFECT})  # fmt: skip
    n = max(r.diff.n for r in cell_rows)
    ran = pv.order_benchmarks(benches)
    official = [pv.OFFICIAL_OF.get(b, b) for b in ran]  # the paper's, of the data the runs were on
    paper = f"paper ({'/'.join(pv.bench_label(b) for b in official)}"
    paper += ", official data) " if official != ran else ") "
    paper += ", ".join(
        f"{pv.method_label(m)} {'/'.join(str(pv.table2_value(b, m, 'acc')) for b in official)}" for m in cell.methods
    )
    return (
        f"**{cell.title}** ({paper}; default: {cell.default_label}): {what}. "
        f"Variants that move Acc (Δ [95% CI], paired): {'; '.join(moved) if moved else 'none'}. "
        f"{n} seeds, runs in {', '.join(f'multirun/{f}/' for f in folders)}; rerun: `{cell.command}`."
    )


def measured(experiments: dict[str, Experiment], on=None) -> dict[str, tuple[list[Row], list[str]]]:
    """Per cell: its rows (steps 2-3) on the benchmarks ``on`` (None: all) and the folders of its runs (step 1:
    distinct by identity)."""
    out = {}
    for c in CELLS:
        mine = [e for e in experiments.values() if not e.empty and owner(e) is c]
        runs = distinct_runs(mine)
        runs = runs[runs["method"].isin(c.methods)] if mine else runs
        out[c.name] = ([r for r in rows(c, runs) if on is None or r.benchmark in on], sorted(e.name for e in mine))
    return out


def markdown(experiments: dict[str, Experiment], level: int = 3, on=MNISTS) -> list[str]:
    """The notes of the cells made for the benchmarks ``on`` or measured on them, from their runs on ``on`` only
    (None: every cell, every run), as a list, then the table of every variant (when any of them has runs there)."""
    m = measured(experiments, on)
    cells = [c for c in CELLS if on is None or set(c.benchmarks) & set(on) or m[c.name][0]]
    out = [f"- {summary(c, *m[c.name])}" for c in cells] + [""]
    all_rows = [r for c in cells for r in m[c.name][0]]
    return out + ([table(all_rows).markdown(level)] if all_rows else [])
