"""Per-experiment tables and figures (``clsuite aggregate``) and the reproduction report (``clsuite
report [--docs]``), built only from results files; what each writes and when it may write docs/:
docs/GUIDE.md ("Aggregation", "Report"). ``clsuite report`` exits 1 also with no run at all, or
with ``--docs`` when a run fails the docs gate (``clsuite.analysis.docs_gate``; docs/ untouched).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from clsuite.analysis import batchnorm as bn
from clsuite.analysis import cells as cl
from clsuite.analysis import choices as ch
from clsuite.analysis import claims
from clsuite.analysis import data_code as dc
from clsuite.analysis import figures as fg
from clsuite.analysis import machines as mc
from clsuite.analysis import noise as nz
from clsuite.analysis import paper_values as pv
from clsuite.analysis import parity as par
from clsuite.analysis import tables as tb
from clsuite.analysis.claims import CLAIMS, check_quotes, judge, judge_all
from clsuite.analysis.contrast import machine, machine_groups
from clsuite.analysis.defaults import caption, fixed_settings
from clsuite.analysis.docs_gate import committed_code, ungated
from clsuite.analysis.load import (
    CONDITIONS,
    KEYS,
    Experiment,
    distinct_runs,
    experiment_names,
    job_overrides,
    load_experiment,
    order_readings,
    select,
)
from clsuite.analysis.paper_values import TARGETS
from clsuite.analysis.stats import summarize
from clsuite.config.check import ConfigError
from clsuite.config.home import for_readers, hint
from clsuite.config.paths import safe_name
from clsuite.core.errors import fail
from clsuite.core.metrics import FWT_CLASS_IL
from clsuite.run import archive as rec
from clsuite.run.io import Unreadable, os_error_line, probe_folder, scratch_dir, write_bytes_atomic, write_json_atomic

Built = tuple[list[tb.Table], list[Path]]


# ----------------------------------------------------------------------------- per experiment


def _table2(e: Experiment, out: Path, s: pd.DataFrame) -> Built:
    t2 = select(s, **pv.TABLE2_CONDITIONS)
    off = s[~s.index.isin(t2.index) & (s["variant"] == "")]  # M, tau or lambda other than Table II's
    extra = [tb.adhoc(off, f"{e.name}: runs under other conditions than Table II's")] if not off.empty else []
    return tb.table2(s, f"Table II ({e.name})") + extra, _heatmaps(e, out, "Table II runs")


def _table2_other_data(e: Experiment, out: Path, s: pd.DataFrame) -> Built:
    """Table II on a benchmark on other data than the paper's: :func:`_table2`, then per benchmark the paired
    differences of the replay methods and ER's and MIR's Acc beside other papers' published ones."""
    tables, figures = _table2(e, out, s)
    for b in pv.order_benchmarks(e.runs["benchmark"]):
        label = pv.bench_label(b)
        tables.append(tb.differences(e.runs, b, f"Paired differences on {label} ({e.name}), Table II's conditions"))
        if (t := tb.peers(e.runs, b, f"ER and MIR on {label} beside published split-CIFAR10 numbers")) is not None:
            tables.append(t)
    return tables, figures


def _heatmaps(e: Experiment, out: Path, what: str) -> list[Path]:
    """One heatmap figure per (benchmark, reading)."""
    figs = []
    for (b, r), g in e.runs.groupby(["benchmark", "reading"]):
        title = f"{pv.bench_label(b)}: accuracy matrix R[i, j] (%) ({what}; {reading_label(g)})"
        figs += fg.heatmaps(g, title, out / f"accuracy_matrix_{b}_{r}")
    return figs


def memory_unit(runs: pd.DataFrame) -> str:
    """The unit of M in these runs: ``per class`` (``memory_per_class``, as mir_code) or ``in total``."""
    units = set(runs["memory_per_class"]) if "memory_per_class" in runs else {False}
    return "per class" if units == {True} else "in total" if units == {False} else "per class or in total"


def memory_axis(runs: pd.DataFrame) -> str:
    """The M axis in the unit the runs used."""
    return f"memory size M (samples {memory_unit(runs)})"


def reading_label(runs: pd.DataFrame) -> str:
    """What every table and figure of these runs names: ``reading mir_code, M per class``, or
    ``readings paper_text: M in total; mir_code: M per class``."""
    rs = order_readings(runs["reading"].unique())
    if len(rs) == 1:
        return f"reading {rs[0]}, M {memory_unit(runs)}"
    return "readings " + "; ".join(f"{r}: M {memory_unit(runs[runs['reading'] == r])}" for r in rs)


def _adhoc(e: Experiment, out: Path, s: pd.DataFrame) -> Built:
    """A plain table of the swept settings, with each row's overrides (an ad-hoc sweep may change a
    different key per method, which no grouping key shows); its heatmaps, and Acc against M when M is
    the one condition swept."""
    keys = [k for k in KEYS if k in s]
    ov = e.runs.assign(overrides=e.runs["job"].map(job_overrides)).groupby(keys, dropna=False, sort=False)
    s = s.merge(ov["overrides"].agg(lambda v: "; ".join(sorted(set(v)))).reset_index(), on=keys, how="left")
    tables = [tb.adhoc(s, f"{e.name}: every swept setting")]
    if not e.runs["variant"].eq("").all():
        return tables, []
    title = f"{e.name}: averaged test accuracy against the memory size M"
    m_alone = [k for k in CONDITIONS if e.runs[k].nunique() > 1] == ["memory"]
    plots = [Plot(fg.vs_condition, title, "acc_against_memory", ("acc", "memory"))] if m_alone else []
    return tables, _heatmaps(e, out, e.name) + _draw(e, out, s, plots)


@dataclass(frozen=True)
class Pivot:
    """A table of one quantity against a condition (``tables.pivot``)."""

    title: str
    quantity: str
    col_key: str | None = None
    row_key: str = "method"


@dataclass(frozen=True)
class Plot:
    """A figure per reading (:func:`_draw`): ``draw(that reading's summary, *args, title, stem, **kw)``;
    ``figures.first_task`` draws from the runs. An M axis says the unit of M in the reading's runs."""

    draw: Callable[..., list[Path]]
    title: str
    stem: str  # the file name, less the reading and the format
    args: tuple = ()
    kw: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Section:
    experiment: str  # its folder: multirun/<experiment>/
    title: str
    tables: tuple[Pivot | str, ...] = ()  # a str: a plain table of every setting (tables.adhoc), so titled
    figures: tuple[Plot, ...] = ()
    layout: Callable[[Experiment, Path, pd.DataFrame], Built] | None = None  # one of its own instead (Table II's)
    optional: bool = False  # not needed for docs/ (data this machine may lack, or days of CPU)
    needs: str = ""  # why it is optional: said where it has no runs
    extra: Callable[[Experiment | None, Page], list[str]] | None = None  # after its tables (e None: no runs)
    run: tuple[tuple[str, ...], ...] = ()  # what fills it: clsuite paper <args>, each in turn (default: <experiment>
    # --seeds 5 --launcher joblib)
    nice: bool = False  # hours of CPU: at a low priority

    @property
    def command(self) -> str:
        """What fills it, in the form that works where this process runs (``clsuite.config.home.hint``)."""
        runs = self.run or ((self.experiment, "--seeds", "5", "--launcher", "joblib"),)
        return " && ".join(("nice -n 10 " if self.nice else "") + hint("paper", *r) for r in runs)

    @property
    def key(self) -> str:
        return self.experiment

    def body(self, p: Page) -> list[str]:
        """Its part of the report: its runs, figures and tables, then its :attr:`extra`."""
        e = p.experiments.get(self.experiment)
        extra = self.extra or (lambda e, p: [])
        if e is None or e.empty:
            return [f"Not run: `{self.command}`" + (f" (needs {self.needs})" if self.needs else "") + ".", "",
                    *extra(None, p)]  # fmt: skip
        seeds = sorted(e.runs["seed"].unique().tolist())
        md = [f"{len(e.runs)} distinct runs, seeds {seeds}, readings {', '.join(order_readings(e.runs['reading']))} "
              f"(seeds per cell: the tables' n). To extend or rerun them: `{self.command}`. Tables (also LaTeX) and "
              f"PDFs: `results/{self.experiment}/`.", ""]  # fmt: skip
        md += _figure_lines(p.built[e.name]["figures"], e.name, p.figdir)
        return md + [t.markdown() for t in p.built[e.name]["tables"]] + extra(e, p)

    def build(self, e: Experiment, out: Path, s: pd.DataFrame) -> Built:
        """Its tables, then its figures: those of the summary for each reading in turn, then those of the runs."""
        if self.layout:
            return self.layout(e, out, s)
        tables = [
            tb.adhoc(s, t) if isinstance(t, str) else tb.pivot(s, t.title, t.quantity, t.col_key, t.row_key)
            for t in self.tables
        ]
        return tables, _draw(e, out, s, self.figures)


def _draw(e: Experiment, out: Path, s: pd.DataFrame, plots) -> list[Path]:
    """The figures of ``plots`` for each reading in turn, since a figure draws one line per method (the tables put
    the readings side by side instead): those of the summary ``s``, then those of the runs. The title names the
    reading and M's unit; the file name names the reading only when there are several."""
    rs = order_readings(e.runs["reading"].unique())
    figs = []
    for of_runs in (False, True):
        df = e.runs if of_runs else s
        for r in rs if len(rs) > 1 else [None]:
            data, runs = (df, e.runs) if r is None else (df[df["reading"] == r], e.runs[e.runs["reading"] == r])
            x = "" if r is None else f"_{r}"
            for p in [p for p in plots if (p.draw is fg.first_task) == of_runs]:
                m = {"xlabel": memory_axis(runs)} if "memory" in p.args else {}
                figs += p.draw(data, *p.args, f"{p.title} ({reading_label(runs)})", out / f"{p.stem}{x}", **p.kw, **m)
    return figs


def _memory(fig5: str, fig6: str, what: str, stem: str) -> dict:
    """Figs. 5, 6 and 11: Acc and BWT against M."""
    return {
        "tables": (Pivot(f"{fig5}{what}: Acc (%) against M", "acc", "memory"),
                   Pivot(f"{fig6}{what}: BWT (% points) against M", "bwt", "memory")),
        "figures": tuple(Plot(fg.vs_condition, f"{f}{what}: {name} against the memory size M", f"{stem}_{q}", (q, "memory"))
                         for q, name, f in (("acc", "averaged test accuracy", fig5), ("bwt", "backward transfer", fig6))),
    }  # fmt: skip


def _cifar100(fig: str, stem: str) -> dict:
    """Figs. 8 and 12: Acc and task 1 on split-CIFAR100."""
    return {
        "tables": (f"{fig}: split-CIFAR100", Pivot(f"{fig}: task-1 accuracy after the last task (%)", "first_task_final")),
        "figures": (Plot(fg.bars, f"{fig}a: averaged test accuracy on split-CIFAR100", f"{stem}a_cifar100_acc", ("acc",)),
                    Plot(fg.first_task, f"{fig}b: accuracy on task 1 of split-CIFAR100", f"{stem}b_cifar100_first_task")),
    }  # fmt: skip


def _table2_notes(e: Experiment | None, p: Page) -> list[str]:
    """Table II's section after its tables: which reading fits, FWT, the paper's notes; the cells checked."""
    cells = [CELLS_HEAD, "", *cl.markdown(p.experiments, on=pv.BENCHMARKS)]  # (runs on the paper's data)
    if e is None:
        return cells
    fit = reading_fit(p.built["table2"]["summary"])
    md = ([fit.markdown()] if fit.rows else []) + [fwt_note(e.runs), "", "Notes on the paper's Table II:", ""]
    return md + [f"- {n}" for n in pv.TABLE2_NOTES] + [""] + cells


def _other_data_notes(e: Experiment | None, p: Page, bench: str = "split_cifar10_jpeg") -> list[str]:
    """A benchmark on other data than the paper's, after its tables: its claims judged apart
    (:func:`other_data`), its cells checked, the BatchNorm variants and MIR's data code against the row before it."""
    cells = cl.markdown(p.experiments, on=(bench,))  # the row's cells, after its claims (runs of its own too)
    cells = [CELLS_HEAD, "", *cells] if len(cells) > 1 else []
    if e is None:  # no row: its cells still, where one has runs here
        return cells if any(rows for rows, _ in cl.measured(p.experiments, (bench,)).values()) else []
    md = other_data(e, bench, p.built[e.name]["summary"]) + cells
    names = dict.fromkeys((e.name, BATCHNORM, CIFAR10_JPEG_BEFORE))  # (each once, in order)
    with_bn = [p.experiments[n] for n in names if n in p.experiments]
    md += bn.markdown(distinct_runs(with_bn), bench)
    if (before := p.experiments.get(CIFAR10_JPEG_BEFORE)) is not None:  # (the BatchNorm experiment's default arm
        after = [x for x in with_bn if x.name != CIFAR10_JPEG_BEFORE]  # is the new row's: a run of both, once)
        md += dc.markdown(distinct_runs(after), before.runs, bench)
    return md


# Table II's CIFAR-10 row on the JPEG copy: its folder, and the command that fills it. The row under MIR's CIFAR-10
# data code ([-1, 1] inputs, 95% of each task's images: conf/reading_family/); the row made before it (the same
# reading otherwise, five methods, five seeds) is data_code's other arm and one of the report's other experiments,
# as is the first row (three seeds, older code), cifar10_jpeg_first_row.
CIFAR10_JPEG = "cifar10_jpeg_row"  # the row the section is made of, judges and fills (data_code: after)
CIFAR10_JPEG_BEFORE = "cifar10_jpeg_row_before_mir_data"  # [0, 1] inputs, every image (data_code: before)
_JPEG_ARGS = ("table2", "--benchmarks", "split_cifar10_jpeg", "--experiment", CIFAR10_JPEG)
# the family at 15 seeds; GEM and A-GEM at 3, each run over two CPU-hours (docs/notes/PERFORMANCE.md); the rest at 5
_JPEG_RUN = ((*_JPEG_ARGS, "--methods", "er,mir,ccmr,ebrs,adaer", "--seeds", "15"),
             (*_JPEG_ARGS, "--methods", "online,joint,oewc,si,icarl,hal,gss", "--seeds", "5"),
             (*_JPEG_ARGS, "--methods", "gem,agem", "--seeds", "3"))  # fmt: skip
BATCHNORM = "cifar10_jpeg_bn"  # the BatchNorm variants of the CIFAR-10 row (clsuite.analysis.batchnorm), read with it
_CIFAR100 = "the CIFAR-100 files"
SECTIONS = (
    Section("table2", "Table II", layout=_table2,
            run=(("table2", "--seeds", "5", "--launcher", "joblib", "--reading", "paper_text,mir_code"),),
            extra=_table2_notes),
    Section("memory", "Memory size M (Figs. 5, 6)", **_memory("Fig. 5", "Fig. 6", "", "fig5_fig6_memory")),
    Section("first_task", "The first task through the stream (Fig. 7)",
            (Pivot("Fig. 7: accuracy on task 1 after the last task (%)", "first_task_final"),
             Pivot("Fig. 7: drop of the accuracy on task 1, after task 1 minus after the last task (% points)",
                   "first_task_drop")),
            (Plot(fg.first_task, "Fig. 7: accuracy on task 1 as the tasks are learned", "fig7_first_task"),)),
    Section("tau", "τ (Fig. 10)",
            (Pivot("Fig. 10a: AdaER's Acc (%) against τ", "acc", row_key="tau"),
             Pivot("Fig. 10b-c: AdaER's task-1 accuracy after the last task (%) against τ", "first_task_final",
                   row_key="tau")),
            (Plot(fg.levels, "Fig. 10a: AdaER's averaged test accuracy against τ", "fig10a_tau_acc", ("acc", "tau")),
             Plot(fg.first_task, "Fig. 10b-c: AdaER's accuracy on task 1 for each τ", "fig10bc_tau_first_task",
                  kw={"by": "tau"}))),
    Section("imbalance", "Imbalance λ (Fig. 9)", (Pivot("Fig. 9: Acc (%) against the imbalance λ", "acc", "lambda"),),
            (Plot(fg.bars, "Fig. 9a: averaged test accuracy at λ = 0.5", "fig9a_imbalance_05", ("acc",), {"lambda": 0.5}),
             Plot(fg.vs_condition, "Fig. 9b-c: averaged test accuracy against λ", "fig9bc_imbalance", ("acc", "lambda")))),
    Section("ablation", "Ablation: C-CMR and E-BRS over M (Fig. 11)",
            **_memory("Fig. 11 (ablation)", "Ablation", ", C-CMR and E-BRS against ER, MIR, AdaER", "fig11_ablation")),
    Section("cifar100", "split-CIFAR100 (Fig. 8)", **_cifar100("Fig. 8", "fig8"), optional=True, needs=_CIFAR100),
    Section("ablation_cifar100", "Ablation on split-CIFAR100 (Fig. 12)",
            **_cifar100("Fig. 12 (ablation)", "fig12_(ablation)"), optional=True, needs=_CIFAR100),
    Section(CIFAR10_JPEG, "Table II's CIFAR-10 row on CIFAR-10 (JPEG copy), not the official data",
            layout=_table2_other_data,
            optional=True, needs="the CIFAR-10 JPEG copy and about 15-60 CPU-minutes per run",
            extra=_other_data_notes, run=_JPEG_RUN, nice=True),
)  # fmt: skip
BY_NAME = {s.experiment: s for s in SECTIONS}
CELLS_HEAD = (
    "Cells checked by measurement (clsuite.analysis.cells): the suite's cells farther from the paper than the "
    "reading explains, each variant of what the paper and the references leave open against the default, paired by seed:"
)


def experiment_dir(multirun, experiment: str) -> Path:
    """``multirun/experiment``; ``FileNotFoundError`` saying what fills it when it is not there."""
    exp_dir = Path(multirun) / experiment
    if not exp_dir.is_dir():
        first = hint("paper", experiment) if experiment in TARGETS else "its sweep"
        raise FileNotFoundError(f"no runs: {exp_dir} does not exist (run {first} first)")
    return exp_dir


def aggregate(experiment: str, multirun="multirun", out_root="results", layout: str | None = None) -> dict:
    """Tables, figures, CSVs and status of one experiment -> ``out_root/experiment/``."""
    exp_dir = experiment_dir(multirun, experiment)
    out = Path(out_root) / experiment
    probe_folder(out)  # (a folder that cannot be written: one line, before anything is built)
    e = load_experiment(exp_dir)
    s = summarize(e.runs)
    section = BY_NAME.get(layout or experiment)
    held = caption(fixed_settings(e.runs))  # a key off its default for every run: in every caption and title
    with fg.subtitle(held):
        tables, figs = (section.build if section else _adhoc)(e, out, s) if not e.empty else ([], [])
    rest = s[s["variant"] != ""]  # settings the paper's layouts leave out: shown, never pooled
    if section and not rest.empty:
        tables.append(tb.adhoc(rest, f"{experiment}: runs with other settings (variants), not in the tables above"))
    for t in tables:
        t.title = f"{t.title} ({reading_label(e.runs)})"
        t.note = " ".join(x for x in (held, t.note) if x)
    _write(out / "runs.csv", e.runs.drop(columns=["R", "b", "flat", "versions"]).to_csv(index=False))
    _write(out / "summary.csv", s.to_csv(index=False, float_format="%.4f"))
    write_json_atomic(out / "status.json", e.status)
    head = [f"# {experiment}", "", f"Built by `{hint('aggregate', experiment)}` from {len(e.runs)} distinct "
            f"runs in `{exp_dir}/`. [x] and *paper* columns: the paper's values; every other number is this suite's.",
            *(["", held] if held else []), ""]  # fmt: skip
    md = head + [t.markdown() for t in tables] + ["### Figures", ""]
    md += [f"- [{p.name}]({p.name})" for p in figs if p.suffix == ".png"]
    md += ["", tb.status_markdown(e.status, str(exp_dir))]
    if section and section.experiment == "table2":
        md += ["### Notes on the paper's Table II", "", *[f"- {n}" for n in pv.TABLE2_NOTES], ""]
        md += [CELLS_HEAD, "", *cl.markdown(cl.find(multirun), on=None)]  # (every cell, every benchmark)
    _write(out / f"{experiment}.md", "\n".join(md))
    tex = [
        f"% {experiment}: generated by clsuite aggregate from {exp_dir}/",
        "% needs \\usepackage{booktabs,graphicx}",
        "",
    ]
    _write(out / f"{experiment}.tex", "\n".join(tex + [t.latex(held) for t in tables]))
    return {"experiment": e, "out": out, "tables": tables, "figures": figs, "summary": s, "runs": len(e.runs),
            "status": e.status}  # fmt: skip


def _write(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())  # (whole or not at all: a full disk leaves no torn table)


# ----------------------------------------------------------------------------- the report


def provenance(experiments: dict[str, Experiment]) -> list[str]:
    """Machines, versions, code and compute, read from the results files (each distinct run once)."""
    runs = distinct_runs(experiments.values())

    def counts(col) -> str:
        return ", ".join(f"{k} ({v} runs)" for k, v in runs[col].value_counts().items())

    versions = runs["versions"].apply(
        lambda v: ", ".join(f"{k} {v[k]}" for k in ("python", "torch", "lightning") if k in v)
    )
    return [
        f"- runs: {len(runs)} distinct (by identity) in {sum(not e.empty for e in experiments.values())} experiments; "
        f"compute {runs['wall_time_s'].sum() / 3600:.2f} job-hours (a run reused by several experiments counted once)",
        f"- devices: {counts('device')}; torch threads: {counts('torch_threads')}",
        f"- machines: {counts('cpu')}",
        "- CPU kernels (`trainer.numerics`), machine and benchmarks: " + "; ".join(
            f"{k} on {c} ({len(g)} runs: {', '.join(sorted(g['benchmark'].unique()))})"
            for (k, c), g in sorted(runs.groupby(["numerics", "cpu"]), key=lambda x: (-len(x[1]), x[0]))),
        "- versions: " + ", ".join(f"{k or 'unknown'} ({v} runs)" for k, v in versions.value_counts().items()),
        f"- code: {counts('commit')}",
    ]  # fmt: skip


def reading_fit(s: pd.DataFrame) -> tb.Table:
    """Per reading and benchmark: mean |ours - paper| of Acc over the methods the paper reports."""
    t = tb.Table("Which reading is closer to the paper's Table II", ["reading", "benchmark", "methods", "mean |ours − paper| Acc (points)", "ours below the paper"])  # fmt: skip
    s = select(s[s["variant"] == ""], **pv.TABLE2_CONDITIONS)
    for (r, b), g in s.groupby(["reading", "benchmark"]):
        paper = g["method"].map(lambda m, b=b: pv.table2_value(b, m, "acc"))
        ok = paper.notna()
        if ok.any():
            gap, n = g.loc[ok, "acc_mean"] - paper[ok].astype(float), int(ok.sum())
            t.add([r, pv.bench_label(b), n, f"{gap.abs().mean():.1f}", f"{int((gap < 0).sum())} of {n}"])
    return t


OTHER_DATA_CLAIMS = ("table2_acc", "table2_forget", "table2_bwt", "table2_fwt", "ablation", "first_task")


def other_data(e: Experiment, bench: str, s: pd.DataFrame) -> list[str]:
    """A benchmark on other data than the paper's (docs/GUIDE.md, "CIFAR-10 (JPEG copy)"): n and
    time per cell, the claims of :data:`OTHER_DATA_CLAIMS` judged on its runs alone with the main claims'
    rules, and the paper's numbers quoted for the official data beside ours."""
    ref = pv.OFFICIAL_OF.get(bench, bench)
    label, ref_label = pv.bench_label(bench), pv.bench_label(ref)
    runs = e.runs[e.runs["benchmark"] == bench]
    out = [
        f"These runs are on {label}: {ref_label}'s protocol on images that are not the official pixels. Every "
        f"*paper* value here was measured by the paper on the official {ref_label}; the verdicts below are judged "
        "on these runs alone and never enter the summary of the paper's claims above.",
        "",
        _cells(select(s, benchmark=bench), runs).markdown(),
    ]
    judged = [
        j for c in CLAIMS if c.key in OTHER_DATA_CLAIMS for j in judge(c, runs, benchmarks=(bench,)) if j.comparisons
    ]
    if judged:
        out += [f"The paper's claims on {label} (paired by seed, 95% t intervals; the rules of section "
                f"{number('claims')}):", "", tb.claims_markdown(judged)]  # fmt: skip
    table2_like = [  # quoted for the official data, from runs of Table II's conditions
        replace(q, benchmark=bench, experiment=e.name) for q in pv.QUOTES
        if q.benchmark == ref and q.experiment in ("table2", "first_task", "ablation") and set(q.at) <= {"memory"}
        and q.at.get("memory", 100) == 100 and set(q.vs or {}) <= {"method"}
    ]  # fmt: skip
    if checks := check_quotes({e.name: e}, table2_like):
        t = tb.quotes(checks)
        t.title = f"The paper's numbers quoted for {ref_label} (official data), beside ours on {label}"
        out.append(t.markdown())
    return out


def _cells(s: pd.DataFrame, runs: pd.DataFrame) -> tb.Table:
    """n, seeds and time per run of each Table II cell, per machine (CPU model and kernels): times are one
    machine's, and a seed's methods on one machine keep its paired comparisons within that machine."""
    t2 = select(s, **pv.TABLE2_CONDITIONS)
    base = select(runs, **pv.TABLE2_CONDITIONS)
    groups, split = machine_groups(base[base["variant"] == ""])
    together = "; ".join(", ".join(map(pv.method_label, g)) for g in groups)
    split_note = f" {', '.join(map(pv.method_label, split))}: a seed's runs on two machines." if split else ""
    t = tb.Table("Runs per cell", ["method", "reading", "machine (CPU model, kernels)", "n", "seeds", "wall time per run (s)",
                                   "training per run (s)", "CPU per run (s)"],
                 note="Times: mean over the cell's runs on that machine (one torch thread); wall and training times move "
                      "with the machine's load, CPU (the run's own process; N/A where a run did not record it) much less. " + (
                      f"Methods whose runs share one machine in every seed: {together}. A paired difference within one of "
                      "these groups is taken on one machine; one between two groups may pair runs of two machines, whose "
                      "native numbers differ as a new seed's do (docs/notes/NUMERICS.md)." + split_note if len(groups) > 1 or split
                      else "Each seed's runs are on one machine: every paired difference is taken within one."))  # fmt: skip
    for m in pv.order_methods(t2["method"]):
        for r in order_readings(t2[t2["method"] == m]["reading"]):
            g = select(runs, method=m, reading=r, **pv.TABLE2_CONDITIONS)
            g = g[g["variant"] == ""]
            for where, c in g.assign(machine=machine(g)).groupby("machine", sort=True):
                seeds = ", ".join(str(x) for x in sorted(c["seed"].unique()))
                t.add([pv.method_label(m), r, where, c["seed"].nunique(), seeds, tb.fmt(c["wall_time_s"].mean(), digits=0),
                       tb.fmt(c["train_time_s"].mean(), digits=0), tb.fmt(c["cpu_time_s"].mean(skipna=False), digits=0)])  # fmt: skip
    return t


def fwt_note(runs: pd.DataFrame) -> str:
    """FWT in class-IL: the same for every method of one (benchmark, reading, seed)?"""
    r = runs[runs["fwt"].notna()]
    if r.empty:
        return ""
    spread = r.groupby(["benchmark", "reading", "seed"])["fwt"].agg(lambda v: v.max() - v.min()).max()
    return (
        f"FWT differs between the methods of one (benchmark, reading, seed) by at most {spread:.2g} points. "
        + FWT_CLASS_IL
        if spread < 1e-6
        else f"FWT differs between the methods of one (benchmark, reading, seed) by up to {spread:.2g} points."
    )


def _figure_lines(paths: list[Path], exp: str, figdir: Path) -> list[str]:
    out = []
    for p in paths:
        if p.suffix == ".png":
            shutil.copyfile(p, figdir / f"{exp}_{p.name}")
            out += [f"![{exp}: {p.stem}](figures/{exp}_{p.name})", ""]
    return out


HISTORY = "[docs/history/](history/)"  # the docs/ copy's link to the measured history, relative to docs/


def history_link(history: Path | None, out: Path) -> str:
    """The link to ``docs/history/`` from the folder ``out`` (results/report/): relative, when it exists."""
    if history is None or not Path(history).is_dir():
        return "`docs/history/` of the repository"
    return f"[docs/history/]({Path(os.path.relpath(Path(history).resolve(), Path(out).resolve())).as_posix()}/)"


def build_report(
    multirun="multirun",
    results="results",
    docs: Path | None = None,
    crossmachine: Path | None = None,
    history: Path | None = None,
    records: Path | None = None,
) -> dict:
    """Write ``results/report/``; with ``docs``, also ``docs/`` when every required section has runs.
    ``crossmachine``: the other machines' Table II (``clsuite.analysis.machines``; default docs/crossmachine);
    ``history``: the measured history folder (``docs/history``) the report links to; ``records``: a
    records folder (``clsuite.run.archive``) read instead of ``multirun``, whose manifest's codes the docs
    gate takes (``RecordsError`` when a record fails its checks). With ``docs``, every command the
    page names is in the installed form (``clsuite.config.home.for_readers``): the page is the same wherever
    it is built."""
    with for_readers() if docs is not None else contextlib.nullcontext():
        if records is None:
            return _build(Path(multirun), Path(results), docs, crossmachine, history, None)
        with scratch_dir("clsuite-records-") as tmp:
            found = rec.extract(Path(records), Path(tmp))
            return _build(Path(tmp), Path(results), docs, crossmachine, history, found)


@dataclass
class Page:
    """What every section of the report reads: each experiment built by :func:`aggregate`, the claims judged
    once, the other machines' Table II, the parity results and the figures' folder."""

    names: list[str]
    built: dict
    experiments: dict[str, Experiment]
    judged: list
    machines: list
    fragile: set
    parity: dict | None
    parity_at: str
    figdir: Path


@dataclass(frozen=True)
class Part:
    """A section of the report after the experiments': its title and its body from the page."""

    key: str
    title: str
    body: Callable[[Page], list[str]]


def _quotes_part(p: Page) -> list[str]:
    quotes = check_quotes(p.experiments)
    return [tb.quotes(quotes).markdown() if quotes else "No run matches a quoted number yet.", ""]


def _numerics_part(p: Page) -> list[str]:
    numerics = nz.markdown(p.experiments) + mc.markdown(p.machines)
    return [NUMERICS_INTRO, "", *(numerics or ["Not run: `make noise` (numerical noise) and `make machines` "
                                               "(this machine's Table II).", ""])]  # fmt: skip


def _others_part(p: Page) -> list[str]:
    """The experiments no other section shows: ad-hoc sweeps."""
    md = []
    for n in [n for n in p.names if n not in BY_NAME and n != BATCHNORM
              and n not in ch.BY_EXPERIMENT and not n.startswith(NUMERICS_EXPS)
              and cl.owner(p.experiments[n]) is None]:  # fmt: skip
        md += [f"### {n}", "", *_figure_lines(p.built[n]["figures"], n, p.figdir)]
        md += [t.markdown(4) for t in p.built[n]["tables"]]
    return md or ["None.", ""]


# The report's sections after the experiments' (SECTIONS), in order: every section is numbered by its place.
PARTS = (
    Part("claims", "The paper's claims, checked", lambda p: [_rules(), "", tb.claims_markdown(p.judged)]),
    Part("quotes", "The paper's quoted numbers, beside ours", _quotes_part),
    Part("choices", "The paper's open choices", lambda p: ch.markdown(p.experiments)),
    Part("numerics", "Numerics: the CPU's kernels, noise and machines", _numerics_part),
    Part("parity", par.TITLE, lambda p: par.markdown(p.parity, p.parity_at)),
    Part("others", "Other experiments (ad-hoc sweeps)", _others_part),
    Part("runs", "Runs: finished, failed, missing", lambda p: [
        x for n in p.names for x in (f"### {n}", "", tb.status_markdown(p.experiments[n].status, f"multirun/{n}"))]),
)  # fmt: skip


def number(key: str) -> int:
    """The number of a section of the report: an experiment's (its folder) or a :data:`PARTS` key's."""
    return [s.key for s in (*SECTIONS, *PARTS)].index(key) + 1


def _build(multirun: Path, results: Path, docs, crossmachine, history, records: rec.Records | None) -> dict:
    names = experiment_names(multirun)
    if not names:
        return {"written": False, "missing": [s for s in SECTIONS if not s.optional], "docs": False}
    out = results / "report"
    figdir = out / "figures"
    probe_folder(figdir)
    parity, parity_at = ((records.parity, f"docs/records/{rec.PARITY_FILE}") if records is not None
                         else (par.read(results / par.RESULTS), f"results/{par.RESULTS}"))  # fmt: skip
    built = {n: aggregate(n, multirun, results) for n in names}
    experiments = {n: b["experiment"] for n, b in built.items()}
    missing = [s for s in SECTIONS if experiments.get(s.experiment) is None or experiments[s.experiment].empty]
    judged = judge_all(experiments)
    machines = mc.sources(experiments, crossmachine)  # the other machines' Table II, read once
    page = Page(names, built, experiments, judged, machines, mc.fragile(machines), parity, parity_at, figdir)

    made, source, rebuild = ORIGIN[records is not None]
    held = [] if records is None else [
        f"- records: archives of {len(records.manifest['archives'])} experiments, {records.size:,} bytes; "
        f"`docs/records/{rec.MANIFEST_FILE}` sha256 `{records.sha256}`"]  # fmt: skip
    md = ["# Reproduction report: AdaER and its baselines, measured", "",
          f"<!-- GENERATED by {made} (clsuite.analysis.report): do not edit -->", "",
          f"Every number is read from {source}; the paper's numbers "
          "(`src/clsuite/analysis/paper_values.py`) appear only in [brackets] or in columns named *paper*. "
          "Cells: mean ± sample std over seeds. Comparisons between methods are paired by seed (same split and "
          "initialisation) with 95% t intervals. Tasks are numbered 1..T everywhere (task 1 is the first). "
          f"{rebuild}. Measured history (earlier reports, kept as they were): {HISTORY}.", "",
          "## Provenance (from the results files)", "", *provenance(experiments), *held, "",
          "## Summary: the paper's claims", "",
          tb.verdicts(judged, page.fragile, f"section {number('numerics')}").markdown(),
          f"Rules, intervals and every comparison: section {number('claims')}.", ""]  # fmt: skip
    for i, part in enumerate((*SECTIONS, *PARTS), 1):
        md += [f"## {i}. {part.title}", "", *part.body(page)]
    text = "\n".join(md).rstrip() + "\n"
    _write(out / "REPRODUCTION.md", text.replace(HISTORY, history_link(history, out), 1))
    write_json_atomic(out / "claims.json", [_claim_json(j) for j in judged])
    recorded = records.codes if records is not None else None  # the records' codes, else the committed one
    code = committed_code() if docs is not None and recorded is None else None
    gate = ungated(experiments, Path(docs), code, recorded) if docs is not None else []
    result = {"written": out / "REPRODUCTION.md", "missing": missing, "docs": False, "judged": judged, "ungated": gate}
    if docs is not None and not [s for s in missing if not s.optional] and not gate:
        probe_folder(Path(docs) / "figures")
        for p in figdir.glob("*.png"):
            if f"figures/{p.name}" in text:  # this report's figures only, not those of earlier builds
                shutil.copyfile(p, Path(docs) / "figures" / p.name)
        _write(Path(docs) / "REPRODUCTION.md", text)
        result["docs"] = True
        result["unreferenced"] = sorted(
            p for p in (Path(docs) / "figures").iterdir() if f"figures/{p.name}" not in text
        )
    return result


# (who made the page, where its numbers are read, how to rebuild it): from multirun/, from records
ORIGIN = {
    False: ("`make report` from multirun/**/results.json", "a `results.json` under `multirun/<experiment>/`",
            "Rebuild: `make report` (here: `results/report/`) or `make report DOCS=1` (this page)"),
    True: ("`make report-docs` from docs/records/",
           "a `results.json` of the records in `docs/records/` (`<experiment>.tar.gz`: an experiment's sealed "
           "results files as its sweep wrote them; `MANIFEST.json`: each archive's sha256)",
           "Rebuild this page from the records, without training: `make report-docs`; rerun a sample of their "
           "portable runs on your machine and compare R and b bit for bit: `make replay` (README, \"Checking the report\")"),
}  # fmt: skip
NUMERICS_EXPS = ("noise_", "machines_")  # clsuite.analysis.noise / machines read these experiments
NUMERICS_INTRO = (
    "One seed's result moves with the CPU kernels that do its arithmetic (docs/notes/NUMERICS.md): the numerical noise "
    "against the seeds' spread (`make noise`), and Table II of this code on other machines (`make machines`; "
    "the other machines' tables: docs/crossmachine/). `trainer.numerics=portable` pins the kernels."
)


def _rules() -> str:
    """The verdict rules, as stated in clsuite.analysis.claims."""
    rules = claims.__doc__[claims.__doc__.index("Rules") : claims.__doc__.index("The paper's numbers quoted")]
    return rules.strip().replace("``", "`").replace(":func:", "")


def _claim_json(j) -> dict:
    comparisons = [
        {"benchmark": c.benchmark, "label": c.label, "outcome": o, "outcome_raw": c.outcome,
         "p_below": c.result.p_below, "p_adj": p, "margin": c.margin, "p_equivalent": pe, "p_equivalent_adj": pea,
         **c.result.__dict__}
        for c, o, p, pe, pea in zip(j.comparisons, j.outcomes, j.p_adj, j.p_eq, j.p_eq_adj, strict=True)
    ]  # fmt: skip
    return {"claim": j.claim.key, "reading": j.reading, "verdict": j.verdict, "comparisons": comparisons}


# ----------------------------------------------------------------------------- entry points


def main_aggregate(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Tables and figures of experiments from their results files.")
    ap.add_argument("experiments", nargs="+", help="folders of multirun/, e.g. table2 memory")
    ap.add_argument("--multirun-dir", default="multirun")
    ap.add_argument("--out", default="results", help="output root: <out>/<experiment>/ (default: results)")
    ap.add_argument("--layout", choices=sorted(BY_NAME), help="a paper section's layout (default: by the name)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a run is missing, failed or left out")
    args = ap.parse_args(argv)
    incomplete = False
    for exp in args.experiments:
        try:
            safe_name(exp, "experiment")  # a folder of multirun/ and of results/: never a path
            res = aggregate(exp, args.multirun_dir, args.out, args.layout)
        except (FileNotFoundError, ConfigError, Unreadable) as e:
            return fail(str(e))
        except OSError as e:  # its output folder cannot be written (read-only, a full disk): exit 1
            return fail(f"{os_error_line(e)}; the tables of {exp} are not written", status=1)
        st = res["experiment"].status
        grid = f" ({st['grid']['finished']}/{st['grid']['expected']} of the grid)" if st["grid"] else ""
        left = f", {len(st['rejected'])} left out" if st["rejected"] else ""
        print(
            f"{exp}: {st['finished']} runs{grid}, {len(st['failed'])} failed, {len(st['missing'])} missing{left} "
            f"-> {res['out']}/"
        )
        for f in st["failed"]:
            print(f"  failed: {f['job']}: {f['error']}", file=sys.stderr)
        for r in st["rejected"]:
            print(f"  left out: {r['job']}: {r['reason']}", file=sys.stderr)
        for d in st["seed_duplicates"]:
            print(f"  left out: {d['job']}: another run of its seed, kept {d['kept']} ({d['why']})", file=sys.stderr)
        incomplete |= bool(st["failed"] or st["missing"] or st["rejected"])
    return 1 if (args.strict and incomplete) else 0


def main_claims(argv=None) -> int:
    """``clsuite claims``: the report's claims table (docs/GUIDE.md, "How the claims are judged"), printed."""
    ap = argparse.ArgumentParser(description="The paper's claims from multirun/**/results.json (writes nothing).")
    ap.add_argument("--multirun-dir", default="multirun")
    ap.add_argument("--details", action="store_true", help="also every comparison of every claim")
    a = ap.parse_args(argv)
    root = Path(a.multirun_dir)
    names = experiment_names(root)
    if not names:
        return fail(f"--multirun-dir {root}: no experiment folder with runs in it")
    try:
        experiments = {n: load_experiment(root / n) for n in names}
    except Unreadable as e:
        return fail(str(e))
    judged = judge_all(experiments)
    print(tb.claims_markdown(judged) if a.details else tb.claims(judged).markdown())
    return 0


def main_report(argv=None, root: Path | None = None) -> int:
    root = root or Path.cwd()
    ap = argparse.ArgumentParser(description="The reproduction report from multirun/**/results.json (trains nothing).")
    ap.add_argument("--multirun-dir", default=str(root / "multirun"))
    ap.add_argument("--results-dir", default=str(root / "results"))
    ap.add_argument("--docs", nargs="?", const=str(root / "docs"), default=None,
                    help="also update docs/REPRODUCTION.md and docs/figures/ (only when every required section has runs)")  # fmt: skip
    ap.add_argument("--crossmachine", default=str(root / "docs" / "crossmachine"),
                    help="other machines' Table II (runs tables, report extracts): the cross-machine comparison")  # fmt: skip
    ap.add_argument("--records", nargs="?", const=str(root / "docs" / "records"), default=None,
                    help="read the records of this folder (default docs/records) instead of --multirun-dir")  # fmt: skip
    a = ap.parse_args(argv)
    if a.records and not Path(a.records).is_dir():
        return fail(f"--records {a.records}: not a folder (a records folder holds {rec.MANIFEST_FILE} and "
                    f"<experiment>{rec.SUFFIX} archives: clsuite records pack)")  # fmt: skip
    where = (lambda e: f"{a.records}/{e}{rec.SUFFIX}") if a.records else (lambda e: f"{a.multirun_dir}/{e}/")
    try:
        res = build_report(a.multirun_dir, a.results_dir, Path(a.docs) if a.docs else None, Path(a.crossmachine),
                           root / "docs" / "history", Path(a.records) if a.records else None)  # fmt: skip
    except rec.RecordsError as e:
        return fail(f"{e}; nothing written, docs/ untouched", status=1)
    except Unreadable as e:  # a grid.json (clsuite.analysis.load.read_grid)
        return fail(f"{e}; the report is not built")
    except OSError as e:  # an output folder cannot be written (read-only, a full disk)
        return fail(f"{os_error_line(e)}; the report is not written", status=1)
    for s in res["missing"]:
        print(f"{'note' if s.optional else 'missing'}: section '{s.title}' has no runs in "
              f"{where(s.experiment)} (fill it: {s.command})", file=sys.stderr)  # fmt: skip
    if not res["written"]:
        return fail(f"no runs under {a.records or a.multirun_dir}/: nothing written; docs/ untouched", status=1)
    print(res["written"])
    for line in res["ungated"][:50]:
        print(f"refused: {line}", file=sys.stderr)
    if len(res["ungated"]) > 50:
        print(f"refused: ... and {len(res['ungated']) - 50} more", file=sys.stderr)
    if a.docs and not res["docs"]:
        why = (
            f"{len(res['ungated'])} runs are not sealed, from the committed (or an accepted) code and on the real "
            f"data (listed above; docs_gate in src/clsuite/analysis/docs_gate.py, docs/INTEGRITY.md)"
            if res["ungated"]
            else "required sections have no runs (listed above)"
        )
        return fail(f"{a.docs}/ not updated: {why}", status=1)
    if res["docs"]:
        print(Path(a.docs) / "REPRODUCTION.md")
        for p in res["unreferenced"]:
            print(f"note: {p} is not in the new report; kept (git rm it if it is obsolete)", file=sys.stderr)
    return 0
