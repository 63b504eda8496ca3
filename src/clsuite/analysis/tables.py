"""Tables from the summaries, written as Markdown and as LaTeX (booktabs): Table II, a quantity against a
condition, any other sweep, the claims judged by ``clsuite.analysis.claims`` and the paper's quoted numbers,
the runs' status; what each shows and why: docs/GUIDE.md ("Aggregation", "Report"). Cells:
:data:`NOTE`, ``N/A`` undefined, ``–`` no run.
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.claims import (
    ALPHA,
    CONTRADICTED,
    EQ_ALPHA,
    EQ_RAW_ONLY,
    EQUIVALENT,
    IDENTICAL,
    INCONCLUSIVE,
    MISSING,
    PARTLY,
    RAW_ONLY,
    SUPPORTED,
    TIED,
    UNRESOLVED,
    Comparison,
    Judged,
    QuoteCheck,
    sign_flip_floor_note,
)
from clsuite.analysis.contrast import by_seed, contrast, in_method_order
from clsuite.analysis.load import CONDITIONS, KEYS, order_readings, select, short, split_items
from clsuite.analysis.stats import COSTS, LEVEL, POWER, n_range, paired, seeds_for_equivalence, seeds_needed
from clsuite.core.metrics import FWT_CLASS_IL, METRICS, QUANTITIES

NOTE = (
    "Cells: mean ± std over seeds (sample std), the single run's value where n = 1; n: the seeds of the row's "
    "cells, (n=k) in a cell where fewer seeds finished than elsewhere; [x] and the *paper* columns: the "
    "paper's Table II at one decimal, as ours (its FWT has two: src/clsuite/analysis/paper_values.py)."
)


FWT_NOTE = f" FWT: {FWT_CLASS_IL}"  # beside every FWT column


OTHER_DATA_NOTE = (
    " *paper, official data*: the paper's {ref} values, measured on the official data set, not on the data of "
    "these runs ({bench}): beside them for scale, not as the same measurement."
)


def fmt(mean, std=float("nan"), n: int | None = None, n_all: int | None = None, digits: int = 1) -> str:
    """``86.1 ± 1.2``; ``86.1`` for one seed; ``N/A`` when undefined; `` (n=2)`` if n differs from n_all."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "N/A"
    s = f"{mean:.{digits}f}"
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        s += f" ± {std:.{digits}f}"
    if n is not None and n_all is not None and n != n_all:
        s += f" (n={n})"
    return s


def paper_number(v) -> str:
    """A paper value at the tables' one decimal, as ours (the paper prints FWT with two, -7.07 -> -7.1;
    its exact values: paper_values.py); N/A for None."""
    return "N/A" if v is None else f"{v:.1f}"


def paper_bracket(benchmark: str, method: str, quantity: str, cond: dict) -> str:
    """`` [x]``: the paper's Table II value when ``cond`` is Table II's condition, else ``""``."""
    if quantity not in METRICS or method not in pv.TABLE2.get(benchmark, {}) or cond.get("variant"):
        return ""
    return f" [{paper_number(pv.table2_value(benchmark, method, quantity))}]" if pv.under(cond) else ""


def _tex(s: str) -> str:
    for a, b in (("_", r"\_"), ("%", r"\%"), ("#", r"\#"), ("&", r"\&"), ("±", r"$\pm$"), ("λ", r"$\lambda$"),
                 ("τ", r"$\tau$"), ("→", r"$\to$"), ("−", "-")):  # fmt: skip
        s = s.replace(a, b)
    return s


class Table:
    """A table with optionally grouped columns, written as Markdown and as LaTeX (booktabs)."""

    def __init__(self, title: str, header: list[str], groups: list[tuple[str, int]] | None = None, note: str = ""):
        self.title, self.header, self.groups, self.note = title, header, groups, note
        self.rows: list[list[str]] = []
        self.rules: list[int] = []  # a \midrule before these row indices
        self._group = None

    def add(self, row: list, group=None) -> None:
        """A row; a rule before it where ``group`` (Table II's method group, a ledger's choice) changes."""
        if self.rows and group != self._group:
            self.rules.append(len(self.rows))
        self._group = group
        self.rows.append([str(c) for c in row])

    def markdown(self, level: int = 3) -> str:
        head = self.header
        if self.groups:
            names, i = [], 1
            for g, span in self.groups:
                names += [f"{g} {h}" for h in self.header[i : i + span]]
                i += span
            head = [self.header[0], *names]
        lines = [f"{'#' * level} {self.title}", "", "| " + " | ".join(head) + " |"]
        lines.append("|" + "|".join(["---"] + [":---:"] * (len(head) - 1)) + "|")
        lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in self.rows]
        return "\n".join(lines + (["", self.note] if self.note else [])) + "\n"

    def latex(self, caption: str = "") -> str:
        """The table; ``caption``: a sentence after the title in its caption (a key held for every run)."""
        out = [
            r"\begin{table*}[t]",
            r"\centering",
            r"\caption{" + _tex(f"{self.title} {caption}".strip()) + "}",
            r"\resizebox{\textwidth}{!}{%",
        ]
        out += [r"\begin{tabular}{l" + "c" * (len(self.header) - 1) + "}", r"\toprule"]
        if self.groups:
            cells, cmid, i = [""], [], 2
            for g, span in self.groups:
                cells.append(rf"\multicolumn{{{span}}}{{c}}{{{_tex(g)}}}")
                cmid.append(rf"\cmidrule(lr){{{i}-{i + span - 1}}}")
                i += span
            out += [" & ".join(cells) + r" \\", "".join(cmid)]
        out += [" & ".join(_tex(h) for h in self.header) + r" \\", r"\midrule"]
        for k, r in enumerate(self.rows):
            if k in self.rules:
                out.append(r"\midrule")
            out.append(" & ".join(_tex(c) for c in r) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}}"]
        if self.note:
            out.append(r"\par\smallskip{\footnotesize " + _tex(self.note.replace("`", "").replace("*", "")) + "}")
        return "\n".join([*out, r"\end{table*}"]) + "\n"


def _cell(s: pd.Series | None, q: str, n_all: int | None = None) -> str:
    return "–" if s is None else fmt(s[f"{q}_mean"], s[f"{q}_std"], int(s["n"]), n_all)


def _one(summary: pd.DataFrame, **where) -> pd.Series | None:
    s = select(summary, **where)
    return None if s.empty else s.iloc[0]


def table2(summary: pd.DataFrame, title: str = "Table II") -> list[Table]:
    """One table per benchmark: methods x (metric x reading, paper); Table II's conditions only."""
    s = select(summary[summary["variant"] == ""], **pv.TABLE2_CONDITIONS)
    readings = order_readings(s["reading"])
    n_all = int(s["n"].max()) if not s.empty else None
    group_of = {m: i for i, g in enumerate(pv.METHOD_GROUPS) for m in g}
    tables = []
    for b in pv.order_benchmarks(s["benchmark"]):
        sb = s[s["benchmark"] == b]
        ref = pv.OFFICIAL_OF.get(b, b)  # whose paper values sit beside (other data: the official data's)
        paper = ref in pv.TABLE2
        col = "paper" if ref == b else "paper, official data"
        header = ["Method", *(readings + ([col] if paper else [])) * len(METRICS), *readings]
        groups = [*((METRICS[q].label, len(readings) + paper) for q in METRICS), ("n", len(readings))]
        note = (
            NOTE
            + FWT_NOTE
            + ("" if ref == b else OTHER_DATA_NOTE.format(bench=pv.bench_label(b), ref=pv.bench_label(ref)))
        )
        t = Table(f"{title}: {pv.bench_label(b)}", header, groups, note)
        for m in pv.order_methods(sb["method"]):
            cells = [_one(sb, method=m, reading=r) for r in readings]  # a Series per reading, None: no run
            row = [pv.method_label(m)]
            for q in METRICS:
                row += [_cell(c, q, n_all) for c in cells]
                if paper:
                    row.append(paper_number(pv.table2_value(ref, m, q)) if m in pv.TABLE2[ref] else "")
            row += ["–" if c is None else str(int(c["n"])) for c in cells]
            t.add(row, group=group_of.get(m, len(pv.METHOD_GROUPS)))
        tables.append(t)
    return tables


# The paired differences that Table II's claims on a benchmark rest on: the replay methods against MIR and ER.
DIFFERENCES = (("mir", "er"), ("adaer", "mir"), ("adaer", "er"), ("ccmr", "mir"), ("ebrs", "mir"), ("ccmr", "er"),
               ("ebrs", "er"))  # fmt: skip
DIFFERENCES_NOTE = (
    "x − y per seed, over the seeds both ran (Table II's conditions), then mean [95% t interval]: positive = x "
    "higher (for Forget, higher is worse)."
)
PEERS_NOTE = (
    "*other code, official data*: each paper's own ER and MIR on the official split-CIFAR10 at 1,000 memory slots, "
    "as printed (src/clsuite/analysis/paper_values.yaml, `peers`), beside this suite's runs on {bench} for scale, "
    "not as the same measurement; their MIR − ER is a difference of published means, ours is paired by seed."
)


def differences(runs: pd.DataFrame, benchmark: str, title: str) -> Table:
    """:data:`DIFFERENCES` on ``benchmark`` under Table II's conditions, per reading: Acc, Forget, BWT, n."""
    qs = ("acc", "forget", "bwt")
    t = Table(title, ["comparison", "reading", *(METRICS[q].label for q in qs), "n"], note=DIFFERENCES_NOTE)
    r = select(runs[runs["variant"] == ""], benchmark=benchmark, **pv.TABLE2_CONDITIONS)  # variants: apart
    r = r.sort_values("reading", key=lambda s: s.map(order_readings(s).index), kind="stable")
    for d in contrast(r, "method", list(DIFFERENCES), qs, by=["reading"], per_seed="mean").to_dict("records"):
        if d["n"]:
            name = f"{pv.method_label(d['arm'])} − {pv.method_label(d['base'])}"
            t.add([name, d["reading"], *(d[q].interval() for q in qs), str(d["n"])], group=d["reading"])
    return t


def peers(runs: pd.DataFrame, benchmark: str, title: str) -> Table | None:
    """ER, MIR and MIR − ER (Acc) of this suite on ``benchmark`` beside the published ones of other papers
    on its official benchmark (:data:`clsuite.analysis.paper_values.PEERS`); None where none are known."""
    ref = pv.OFFICIAL_OF.get(benchmark, benchmark)
    if not pv.PEERS.get(ref):
        return None
    t = Table(
        title, ["source", "data", "ER", "MIR", "MIR − ER"], note=PEERS_NOTE.format(bench=pv.bench_label(benchmark))
    )
    r = select(runs[runs["variant"] == ""], benchmark=benchmark, **pv.TABLE2_CONDITIONS)  # variants: apart
    for reading in order_readings(r["reading"]):
        er, mir = (by_seed(select(r, method=m, reading=reading), "acc", "mean") for m in ("er", "mir"))
        d = paired(mir, er)
        level = [fmt(pd.Series(a).mean(), pd.Series(a).std()) if a else "–" for a in (er, mir)]
        t.add([f"this suite ({reading})", pv.bench_label(benchmark), *level, f"{d.interval()}, n={d.n}"], group=0)
    for pub in pv.PEERS[ref]:
        row = [
            pub["source"],
            f"{pv.bench_label(ref)}, official data, other code",
            f"{pub['er']:.1f}",
            f"{pub['mir']:.1f}",
        ]
        t.add([*row, f"{pub['mir'] - pub['er']:+.1f}"], group=1)
    return t


def pivot(summary: pd.DataFrame, title: str, quantity: str, col_key: str | None, row_key: str = "method") -> Table:
    """Rows: methods (or the values of ``row_key``); columns: benchmark x values of ``col_key``."""
    s = summary[summary["variant"] == ""]
    multi_reading = s["reading"].nunique() > 1
    n_all = int(s["n"].max()) if not s.empty else None
    header, groups, cols = ["Method" if row_key == "method" else short(row_key)], [], []
    for b in pv.order_benchmarks(s["benchmark"]):
        vals = sorted(s[s["benchmark"] == b][col_key].unique()) if col_key else [None]
        header += [f"{short(col_key)}={v:g}" if col_key else QUANTITIES[quantity].label for v in vals]
        groups.append((pv.bench_label(b), len(vals)))
        cols += [(b, v) for v in vals]
    header.append("seeds")
    groups.append(("n", 1))
    t = Table(title, header, groups, NOTE)
    rk = ["method", "reading"] if row_key == "method" else [row_key, "method", "reading"]
    rows = s[rk].drop_duplicates()
    rows = in_method_order(rows, "reading") if row_key == "method" else rows.sort_values(rk)
    for _, r in rows.iterrows():
        label = pv.method_label(r["method"]) if row_key == "method" else f"{r[row_key]:g}"
        if row_key != "method" and s["method"].nunique() > 1:
            label += f" {pv.method_label(r['method'])}"
        label += f" ({r['reading']})" if multi_reading else ""
        row, ns = [label], []
        for b, v in cols:
            where = {k: r[k] for k in rk} | {"benchmark": b} | ({col_key: v} if col_key else {})
            c = _one(s, **where)
            p = "" if c is None else paper_bracket(b, r["method"], quantity, {k: c[k] for k in CONDITIONS})
            row.append(_cell(c, quantity, n_all) + p)
            ns += [] if c is None else [int(c["n"])]
        t.add([*row, n_range(ns)])
    return t


def _axis_cell(axis: str, v) -> str:
    if axis == "method":
        return pv.method_label(v)
    if axis == "benchmark":
        return pv.bench_label(v)
    if axis == "overrides":
        return f"`{v}`" if isinstance(v, str) and v else "–"
    return f"{v:g}" if axis in CONDITIONS else v


ADHOC_NOTE = (
    "Cells: mean ± std over the row's n seeds (sample std) where n > 1, the single run's value where n = 1; "
    "[x]: the paper's Table II value, only in a cell under Table II's conditions (M = 100, τ = 0.5, λ = 0, "
    "no other key changed; src/clsuite/analysis/paper_values.py). task-IL Acc: the same scores, each task's "
    "logits masked to its classes (docs/PROTOCOL.md, section 5). Time and memory: the mean over the row's seeds; "
    "peak RAM: the run's peak resident memory, MB = 2^20 bytes."
)


def adhoc(summary: pd.DataFrame, title: str) -> Table:
    """A plain table: one row per setting of the swept axes (always with its benchmark and reading),
    the mean ± std of every quantity (the value alone for one seed), the paper's Table II value in
    [brackets] where the row is under Table II's conditions, and n."""
    items = [dict(p.split("=", 1) for p in split_items(v)) for v in summary["variant"]]  # {"lr": "0.05", ...}
    extra = list(dict.fromkeys(k for it in items for k in it))
    swept = [k for k in KEYS if k != "variant" and summary[k].astype(str).nunique() > 1]  # variants: extra
    axes = list(dict.fromkeys(["method", "benchmark", "reading", *swept]))
    if "overrides" in summary:  # what each job changed besides the grouping keys (report._adhoc)
        shown = set(extra)  # keys that already have a column of their own (variants)
        summary = summary.assign(overrides=[
            ",".join(i for i in split_items(str(o)) if i.split("=", 1)[0] not in shown)
            for o in summary["overrides"].fillna("")
        ])  # fmt: skip
        if summary["overrides"].str.len().any():
            axes.append("overrides")
    qs = [q for q in QUANTITIES if not summary[f"{q}_mean"].isna().all()]
    costs = [c for c in COSTS if not summary[f"{c}_mean"].isna().all()]  # peaks: none in files made before them
    t = Table(
        title,
        [*map(short, axes), *extra, *(QUANTITIES[q].axis_label for q in qs), *(COSTS[c] for c in costs), "n"],
        note=ADHOC_NOTE + (FWT_NOTE if "fwt" in qs else ""),
    )
    rows = summary.assign(_items=items).sort_values([*axes, "variant"])
    for _, r in rows.iterrows():
        lead = [_axis_cell(a, r[a]) for a in axes]
        lead += [{"None": "–"}.get(v, v) for v in (r["_items"].get(k, "None") for k in extra)]
        cond = {k: r[k] for k in CONDITIONS} | {"variant": r["variant"] or r.get("overrides", "")}
        cells = [fmt(r[f"{q}_mean"], r[f"{q}_std"]) + paper_bracket(r["benchmark"], r["method"], q, cond) for q in qs]
        t.add([*lead, *cells, *(fmt(r[f"{c}_mean"], digits=0) for c in costs), r["n"]])
    return t


# ----------------------------------------------------------------------------- claims


UNSEPARATED = "seeds cannot separate them"  # claim_details' word for UNRESOLVED (machines reads it back)


def _p(v: float) -> str:
    return "–" if math.isnan(v) else (f"{v:.3f}" if v >= 0.001 else "<0.001")


_COUNTED = (SUPPORTED, CONTRADICTED, RAW_ONLY, EQUIVALENT, EQ_RAW_ONLY, UNRESOLVED, IDENTICAL, MISSING)
EQ_LEVEL = 1 - 2 * EQ_ALPHA  # 0.90: the interval whose inside is TOST's equivalence


def margin(m: float) -> str:
    """An equivalence margin as the rules write it: 1.0, 1.25, 2.0."""
    t = f"{m:.2f}".rstrip("0")
    return t + "0" if t.endswith(".") else t


def within(c: Comparison, digits: int = 1) -> str:
    """``[-0.9, +0.8] inside ±1``: a comparison's 90% interval against its equivalence margin."""
    low, high = c.result.bounds(EQ_LEVEL)
    return f"{EQ_LEVEL:.0%} interval [{low:+.{digits}f}, {high:+.{digits}f}] within ±{margin(c.margin)}"


def decision(j: Judged, c: Comparison) -> str:
    """What rule 4 made of comparison ``c`` of claim ``j``, with its Holm-adjusted p."""
    i = j.index(c)
    o, p_adj = j.outcomes[i], j.p_adj[i]
    if o == CONTRADICTED:
        return f"contradicted after Holm (p_adj = {_p(p_adj)} < {ALPHA:g}, m = {j.m})"
    if o == RAW_ONLY:
        return f"contradicted raw, not after Holm (p_adj = {_p(p_adj)} ≥ {ALPHA:g}, m = {j.m})"
    if o in (EQUIVALENT, EQ_RAW_ONLY):
        after = "after Holm" if o == EQUIVALENT else "raw, not after Holm"
        sign = "<" if o == EQUIVALENT else "≥"
        return f"equivalent {after}: {within(c)} (TOST p_adj = {_p(j.p_eq_adj[i])} {sign} {EQ_ALPHA:g}, m = {j.m})"
    return f"{o} (its interval)" if o == SUPPORTED else o


def verdict_cell(j: Judged) -> str:
    """A claim's verdict; a tied one names its most clearly equivalent comparison (and how many more)."""
    if j.verdict != TIED:
        return j.verdict
    w, more = j.tied[0], len(j.tied) - 1
    extra = f"; {more} more equivalent" if more else ""
    return f"{j.verdict} ({w.label}, {pv.bench_label(w.benchmark)}: equivalent within ±{margin(w.margin)}{extra})"


def claims(judged: list[Judged]) -> Table:
    t = Table(
        "The paper's claims, checked with paired statistics over seeds (contradicted: Holm's step-down over "
        f"each claim's comparisons, one-sided, at {ALPHA:g}; equivalent: TOST within the quantity's margin, "
        f"Holm at {EQ_ALPHA:g})",
        ["claim", "source", "reading", "verdict", " / ".join(_COUNTED), "deciding comparison: mean difference [95% CI], n", "its decision"],
        note="Rules: `clsuite/analysis/claims.py` (and above). The deciding comparison: the most clearly contradicted one (lowest upper bound) when any is contradicted, else the most clearly equivalent (lowest TOST p), else the most clearly contradicted raw only, else the weakest (lowest lower bound). p_adj: Holm-adjusted one-sided p for d < 0 over the claim's m comparisons with an interval; TOST p_adj: the two one-sided tests' p against the margin (rule 5), Holm-adjusted over the same m.",
    )  # fmt: skip
    for j in judged:
        w = j.deciding
        weak = "–" if w is None else f"{w.label}, {pv.bench_label(w.benchmark)}: {w.result.interval()}, n={w.result.n}"
        counts = " / ".join(str(j.outcomes.count(o)) for o in _COUNTED)
        t.add([j.claim.text, j.claim.source, j.reading, f"**{verdict_cell(j)}**", counts if j.comparisons else "–", weak,
               "–" if w is None else decision(j, w)])  # fmt: skip
    return t


def verdicts(judged: list[Judged], fragile=(), where: str = "") -> Table:
    """One row per claim, one column per reading: the verdicts at a glance; a claim of ``fragile``
    (its mir_code verdict moves with the machine: ``clsuite.analysis.machines``) is marked, with
    its deciding comparison."""
    readings = order_readings(j.reading for j in judged if j.reading != "–")
    got = {(j.claim.key, j.reading): j for j in judged}
    note = (
        "not run: no run of the claim's experiment at all (its section names the command that fills it); "
        "–: the experiment has runs, none of that reading. not reproduced: tied: no comparison goes against the "
        "claim, but a rival is shown equivalent within the quantity's margin, so the claim's strict order does not "
        "hold against it (rule 5)."
    )
    if fragile:
        note += f" *fragile*: the verdict moves with the machine that runs it (mir_code; {where})."
    t = Table("Verdicts", ["claim", "source", *readings], note=note)
    for k, c in {j.claim.key: j.claim for j in judged}.items():
        cells = []
        for r in readings:
            j = got.get((k, r), got.get((k, "–")))
            cell = "–" if j is None else verdict_cell(j)
            if j is not None and k in fragile and r == "mir_code" and (w := j.deciding) is not None:
                cell += f" (*fragile*: decided by {w.label}, {pv.bench_label(w.benchmark)}, {w.result.interval()})"
            cells.append(cell)
        t.add([c.text, c.source, *cells])
    return t


def claim_details(j: Judged) -> Table:
    t = Table(
        f"{j.claim.text} ({j.reading})",
        ["benchmark", "comparison", "n", "mean d (> 0: the claim holds) [95% CI]", "p (paired t)",
         "p (sign-flip, exact)", "p (t, one-sided d < 0)", f"p_adj (Holm, m = {j.m})", "margin",
         "p (TOST)", "p_adj (TOST, Holm)", "outcome"],
    )  # fmt: skip
    for c, o, p_adj, p_eq, p_eq_adj in zip(j.comparisons, j.outcomes, j.p_adj, j.p_eq, j.p_eq_adj, strict=True):
        r = c.result
        o = UNSEPARATED if o == UNRESOLVED else o
        t.add([pv.bench_label(c.benchmark), c.label, r.n, r.interval(2), _p(r.p_t), _p(r.p_signflip), _p(r.p_below),
               _p(p_adj), "–" if math.isnan(c.margin) else f"±{margin(c.margin)}", _p(p_eq),
               _p(p_eq_adj) if not math.isnan(p_eq) else "–", o])  # fmt: skip
    return t


CAP = 1000  # seeds: the planning table's horizon
OPEN = (UNRESOLVED, RAW_ONLY, EQ_RAW_ONLY)  # a comparison more seeds may still decide


def _seeds(j: Judged, c: Comparison) -> tuple[int, int]:
    """(seeds to decide ``c`` its own way, seeds to show it equivalent) at its observed mean and sd, each with
    probability POWER: d > 0 supported (its 95% interval above 0), d <= 0 contradicted after Holm (Bonferroni's
    bound on Holm's first step, one-sided at ALPHA / m); equivalent after Holm (rule 5: TOST at EQ_ALPHA / m each
    side, reachable only while |mean| < margin; CAP without a margin)."""
    r, m = c.result, max(j.m, 1)
    n = seeds_needed(abs(r.mean), r.sd, level=LEVEL if r.mean > 0 else 1 - 2 * ALPHA / m, n_max=CAP)
    return n, seeds_for_equivalence(r.mean, r.sd, c.margin, alpha=EQ_ALPHA / m, n_max=CAP) if c.margin > 0 else CAP


def seeds_to_decide(j: Judged, w: Comparison) -> str:
    """The seeds that would decide one comparison ``w`` of ``j`` (:func:`_seeds`): the fewer of its own way and
    equivalence; beyond CAP seeds both ways, said so."""
    if j.outcomes[j.index(w)] == IDENTICAL:
        return "none: the two arms agree in every seed"
    (n, n_eq), r = _seeds(j, w), w.result
    goal = "support" if r.mean > 0 else f"contradict after Holm (m = {j.m})"
    eq_goal = f"show equivalence within ±{margin(w.margin)} after Holm (m = {j.m})"
    if n_eq < CAP and n_eq < n:
        return f"{n_eq} to {eq_goal}"
    if n < CAP:
        return f"{n} to {goal}"
    if not w.margin > 0:
        return f"over {CAP} to {goal}"
    if abs(r.mean) >= w.margin:
        return f"over {CAP} to {goal}; equivalence out of reach (|mean d| ≥ margin ±{margin(w.margin)})"
    return f"over {CAP} either way: to {goal} or to {eq_goal}"


def first_decision(j: Judged) -> tuple[Comparison, str] | None:
    """The comparison whose outcome would decide claim ``j`` with the fewest seeds, and the seeds (rule 2): one
    open comparison contradicted after Holm (not reproduced) or shown equivalent before it is supported (tied),
    or, where every open one is on the claim's side and no identical arms keep the claim from it, the last of
    them supported (reproduced; missing comparisons also need their runs). Nothing open: the deciding comparison
    of identical arms, a missing one's runs, else None."""
    opened = [c for c, o in zip(j.comparisons, j.outcomes, strict=True) if o in OPEN]
    missing = [c for c, o in zip(j.comparisons, j.outcomes, strict=True) if o == MISSING]
    runs = f"; the {len(missing)} missing also need runs" if missing else ""
    if not opened:
        w = j.deciding
        if w is not None and j.outcomes[j.index(w)] == IDENTICAL:
            return w, seeds_to_decide(j, w)
        return (missing[0], f"none open: runs of its {len(missing)} missing comparisons") if missing else None
    seeds = {c: _seeds(j, c) for c in opened}  # (its own way, equivalence)
    options = [(seeds[c][0], c, f"contradict after Holm (m = {j.m})") for c in opened if c.result.mean <= 0]
    options += [(seeds[c][1], c, f"show equivalence within ±{margin(c.margin)} after Holm (m = {j.m})")
                for c in opened if c.margin > 0 and (c.result.mean <= 0 or seeds[c][1] < seeds[c][0])]  # fmt: skip
    if all(c.result.mean > 0 for c in opened) and IDENTICAL not in j.outcomes:
        last = max(opened, key=lambda c: seeds[c][0])
        what = "support" if len(opened) == 1 else f"support it, the last of the claim's {len(opened)} open comparisons"
        options.append((seeds[last][0], last, what + runs))
    if not options:
        return opened[0], "none: identical arms keep the claim from being reproduced, and no comparison goes against it"
    n, c, goal = min(options, key=lambda o: o[0])
    if n < CAP:
        return c, f"{n} to {goal}"
    w = j.deciding  # beyond CAP every way: the deciding comparison's own words where they say so too
    return w, seeds_to_decide(j, w) if min(seeds.get(w, (0,))) >= CAP else f"over {CAP}: no outcome within {CAP} seeds"


def open_claims(judged: list[Judged]) -> Table | None:
    """Per claim left inconclusive or partly reproduced: the seeds that would decide it first (:func:`first_decision`)."""
    t = Table(
        "Seeds that would decide each open claim",
        ["claim", "reading", "verdict", "the comparison that would decide it first", "n", "mean d ± sd over seeds",
         "seeds it would need"],
        note=f"Seeds it would need: the smallest n whose paired t test decides a comparison with probability {POWER:g} "
        "if its true mean difference and per-seed sd are the ones observed (a planning estimate: the observed mean of "
        f"a comparison the seeds cannot separate is itself uncertain); d > 0 needs its 95% interval above 0 "
        f"(supported), d <= 0 a one-sided p below {ALPHA:g} / m (contradicted after Holm, Bonferroni's bound on "
        f"Holm's first step); equivalence: rule 5, |mean d| inside the margin, TOST at {EQ_ALPHA:g} / m each side, "
        "its exact power by one integral over the sample sd. Of the claim's open comparisons (unresolved, or "
        "contradicted or equivalent raw only), the one that decides the claim with the fewest seeds (rule 2): any "
        "one contradicted (not reproduced) or equivalent (not reproduced: tied), or, where every one is on the "
        "claim's side, the last one supported (reproduced; a claim with missing comparisons also needs their "
        f"runs). Over {CAP}: no outcome within {CAP} seeds at the observed means and sds.",
    )  # fmt: skip
    for j in judged:
        if j.verdict in (INCONCLUSIVE, PARTLY) and (plan := first_decision(j)) is not None:
            w, text = plan
            r = w.result
            t.add([j.claim.text, j.reading, j.verdict, f"{w.label}, {pv.bench_label(w.benchmark)}", r.n,
                   f"{r.mean:+.1f} ± {r.sd:.1f}" if r.defined else "–", text])  # fmt: skip
    return t if t.rows else None


def claims_markdown(judged: list[Judged]) -> str:
    """The verdict table, what the seeds cannot separate, and every comparison (folded)."""
    out = [claims(judged).markdown()]
    note = sign_flip_floor_note(judged)
    if note:
        out += [note, ""]

    def listed(j: Judged, what: str, cs: list[Comparison], show) -> str:  # the first 8 comparisons, with show(c)
        more = f"; and {len(cs) - 8} more" if len(cs) > 8 else ""
        shown = "; ".join(f"{c.label} on {pv.bench_label(c.benchmark)} ({show(c)})" for c in cs[:8])
        return f"- *{j.claim.text}* ({j.reading}): {what}{shown}{more}."

    for j in judged:
        if j.tied:
            out.append(listed(j, "tied (equivalent after Holm, rule 5): ", j.tied, within))
        unsep = [
            c for c, o in zip(j.comparisons, j.outcomes, strict=True) if c.outcome == UNRESOLVED and o != EQUIVALENT
        ]
        if missing := [c for c, o in zip(j.comparisons, j.outcomes, strict=True) if o == MISSING]:
            out.append(listed(j, "missing (under 2 seeds with both arms, or no runs of the rival): ", missing,
                              lambda c: f"n={c.result.n}"))  # fmt: skip
        if unsep:  # one count of seeds when every comparison has it, else each comparison's own
            ns = {c.result.n for c in unsep}
            what, show = (f"{ns.pop()} seeds cannot separate ", lambda c: c.result.interval()) if len(ns) == 1 else (
                "the seeds cannot separate ", lambda c: f"{c.result.interval()}, n={c.result.n}")  # fmt: skip
            out.append(listed(j, what, unsep, show))
    out.append("")
    if (t := open_claims(judged)) is not None:
        out.append(t.markdown())
    for j in judged:
        if j.comparisons:
            out += [f"<details><summary>{j.claim.text} ({j.reading}): {j.verdict}</summary>", ""]
            out += [claim_details(j).markdown(level=4), "</details>", ""]
    return "\n".join(out)


def quotes(checks: list[QuoteCheck]) -> Table:
    t = Table(
        "The paper's numbers quoted in its text, beside ours",
        ["where", "the paper says", "benchmark", "reading", "paper", "ours: mean [95% CI], n", "paper inside", "computed as"],
        note="Ours: per seed, then mean and t interval over seeds. Relative numbers: gain = 100 (x/ref - 1), "
        "decline = 100 (1 - x/ref); the paper does not always say which it means.",
    )  # fmt: skip
    for c in checks:
        q, o = c.quote, c.ours
        ci = f"{o.mean:.1f}" if not o.defined else f"{o.mean:.1f} [{o.low:.1f}, {o.high:.1f}]"
        t.add([q.where, q.quote, pv.bench_label(q.benchmark), c.reading, paper_number(q.value), f"{ci}, n={o.n}",
               c.inside, c.how])  # fmt: skip
    return t


# ----------------------------------------------------------------------------- status


def status_markdown(st: dict, where: str) -> str:
    lines = ["#### Runs", ""]
    if st["grid"]:
        g = st["grid"]
        inside = g["finished"]
        lines.append(f"- expected (the sweep's grid, `{where}/grid.json`, {g['created']}): {g['expected']}")
        line = f"- finished: {inside} of the grid"
        if st["outside_grid"]:
            line += f", + {len(st['outside_grid'])} outside it (earlier sweeps, included)"
        whys = Counter(s["why"] for s in st.get("outside_grid_skipped") or ())
        line += "".join(f"; {n} outside it skipped: {why}" for why, n in sorted(whys.items()))
        lines.append(line)
    else:
        lines.append(f"- finished: {st['finished']} (no `grid.json`: the expected runs are unknown)")
    lines.append(f"- failed: {len(st['failed'])}" + (" (rerun the same command to retry them)" if st["failed"] else ""))
    lines += [
        f"  - `{f['job']}`: {f['error']} (attempt {f['attempt']}, {f['time']}, {f['host']})" for f in st["failed"]
    ]
    if st["grid"]:
        lines.append(f"- missing (not run yet, killed, or still running): {len(st['missing'])}")
        lines += [f"  - `{d}`" for d in st["missing"][:50]]
        if len(st["missing"]) > 50:
            lines.append(f"  - ... and {len(st['missing']) - 50} more (status.json)")
    if st["duplicates"]:
        lines.append(f"- the same run reached twice (same identity, counted once): {len(st['duplicates'])}")
    if st.get("rejected"):
        lines.append(
            f"- **left out** (results files never counted: unsealed, edited, malformed, or not the grid's run): "
            f"{len(st['rejected'])}"
        )
        lines += [f"  - `{r['job']}`: {r['reason']}" for r in st["rejected"]]
    if st.get("seed_duplicates"):
        lines.append(
            f"- **other runs of a cell's seed** (different identity; one run per seed, never pooled): "
            f"{len(st['seed_duplicates'])}"
        )
        lines += [f"  - `{d['job']}`: left out, kept `{d['kept']}` ({d['why']})" for d in st["seed_duplicates"]]
    if st["stale_files"]:
        lines.append(f"- superseded results kept by the sweep (`results.stale-*.json`, not read): {st['stale_files']}")
    if len(st.get("code_versions", {})) > 1:
        lines.append(
            "- **mixed code versions** (content hash of the code): "
            + ", ".join(f"`{c}` ({v['runs']} runs; {', '.join(v['commits'])})" for c, v in st["code_versions"].items())
        )
    if len(st["environments"]) > 1:
        lines.append(
            "- **mixed environments** (device / torch threads / torch / CPU kernels; threads and kernels move results): "
            + ", ".join(f"{e} ({n} runs)" for e, n in st["environments"].items())
        )
    return "\n".join(lines) + "\n"  # fmt: skip
