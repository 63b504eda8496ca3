"""Tables and figures of one experiment, built only from its results files.

    python scripts/aggregate.py table2          # multirun/table2/**/results.json -> results/table2/

Reads every ``results.json`` (and ``failed.json``) under ``multirun/<experiment>/`` and the sweep's
``grid.json`` (the expected jobs, written when the sweep starts), and writes into
``results/<experiment>/``:

- ``<experiment>.md`` / ``<experiment>.tex``: the paper's tables, each cell ``mean ± std`` over
  seeds (sample std, ddof=1) with the paper's value in brackets where the paper states one
  (``clsuite.paper_values``), the paper's numbers quoted in its text beside ours, and the list of
  missing and failed runs;
- figures as PNG and PDF in the layout of the paper's figure for that experiment;
- ``runs.csv`` (one row per run), ``summary.csv`` (one row per condition), ``status.json``.

What is drawn depends on the recipe, by default the experiment's name (``table2``, ``memory``,
``first_task``, ``cifar100``, ``imbalance``, ``tau``, ``ablation``, ``ablation_cifar100``); any other
experiment gets the Table II layout and the accuracy-matrix heatmaps.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from clsuite import paper_values as pv
from clsuite.sweep import FAILED_FILE, GRID_FILE, RESULTS_FILE, normalize

METRICS = ("acc", "forget", "bwt", "fwt")
EXTRA = ("first_task_final", "first_task_drop")
CONDITIONS = ("memory", "tau", "lambda")
KEYS = ("benchmark", "method", *CONDITIONS, "variant")
SKIP_DIRS = {".submitit", "wandb", ".hydra", "csv"}


# ----------------------------------------------------------------------------- loading


def _flatten(d, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, list | dict) else v
    return out


def _files(exp_dir: Path, name: str) -> list[Path]:
    return sorted(p for p in exp_dir.rglob(name) if not (SKIP_DIRS & set(p.relative_to(exp_dir).parts[:-1])))


def load_runs(exp_dir) -> pd.DataFrame:
    """One row per finished run: keys, metrics, first-task numbers, R and b (objects)."""
    exp_dir = Path(exp_dir)
    rows, flats = [], []
    for path in _files(exp_dir, RESULTS_FILE):
        try:
            res = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        cfg = res.get("config", {})
        R = np.asarray(res.get("R", []), dtype=float)
        square = R.ndim == 2 and R.shape[0] == R.shape[1] and R.shape[0] > 1
        m = res.get("metrics", {})
        rows.append(
            {
                "job": str(path.parent.relative_to(exp_dir)),
                "benchmark": res.get("benchmark", cfg.get("benchmark", {}).get("name")),
                "method": res.get("method", cfg.get("method", {}).get("name")),
                "memory": int(res.get("memory", cfg.get("memory", 0))),
                "tau": float(cfg.get("tau", float("nan"))),
                "lambda": float(cfg.get("lambda", float("nan"))),
                "seed": int(res.get("seed", cfg.get("seed", 0))),
                **{k: _num(m.get(k)) for k in METRICS},
                "first_task_final": float(R[-1, 0]) if square else float("nan"),
                "first_task_drop": float(R[0, 0] - R[-1, 0]) if square else float("nan"),
                "wall_time_s": _num(res.get("wall_time_s")),
                "device": res.get("device"),
                "reused_from": res.get("reused_from"),
                "R": R,
                "b": np.asarray(res.get("b", []), dtype=float),
            }
        )
        flat = _flatten(normalize(cfg))
        for k in ("seed", "benchmark.name", "method.name", *CONDITIONS):
            flat.pop(k, None)
        flats.append(flat)
    df = pd.DataFrame(
        rows,
        columns=[
            "job",
            "benchmark",
            "method",
            "memory",
            "tau",
            "lambda",
            "seed",
            *METRICS,
            *EXTRA,
            "wall_time_s",
            "device",
            "reused_from",
            "R",
            "b",
        ],
    )
    df.insert(6, "variant", _variants(df, flats))
    return df


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _variants(df: pd.DataFrame, flats: list[dict]) -> list[str]:
    """Config keys (other than the standard ones) that take several values for one condition.

    E.g. two sweeps of the same experiment with ``memory_per_class=false`` and ``true``: their
    runs are kept apart, labelled ``memory_per_class=True``. Keys fixed by the benchmark and the
    method (network, replay policy, ...) do not count.
    """
    if df.empty:
        return []
    cond = df[["benchmark", "method", *CONDITIONS]].astype(str).agg("|".join, axis=1).tolist()
    keys = sorted({k for f in flats for k in f})
    varying = []
    for k in keys:
        seen: dict[str, set] = {}
        for c, f in zip(cond, flats):
            seen.setdefault(c, set()).add(json.dumps(f.get(k), sort_keys=True, default=str))
        if any(len(v) > 1 for v in seen.values()):
            varying.append(k)
    return [",".join(f"{k}={f.get(k)}" for k in varying) for f in flats]


def load_failures(exp_dir) -> list[dict]:
    """Jobs whose last attempt failed (a ``failed.json`` and no ``results.json``)."""
    exp_dir = Path(exp_dir)
    out = []
    for path in _files(exp_dir, FAILED_FILE):
        if (path.parent / RESULTS_FILE).is_file():
            continue
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            rec = {"error": "unreadable failed.json"}
        out.append(
            {
                "job": str(path.parent.relative_to(exp_dir)),
                "error": rec.get("error", ""),
                "attempt": rec.get("attempt", 1),
                "time": rec.get("time", ""),
                "host": rec.get("host", ""),
            }
        )
    return out


def load_grid(exp_dir) -> dict | None:
    path = Path(exp_dir) / GRID_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def status(runs: pd.DataFrame, failures: list[dict], grid: dict | None) -> dict:
    """Expected (the sweep's grid), finished, failed, missing (never finished nor failed)."""
    done = set(runs["job"]) if not runs.empty else set()
    failed = {f["job"] for f in failures}
    out = {"finished": len(done), "failed": failures, "grid": None, "missing": [], "outside_grid": 0}
    if grid is not None and all(j.get("dir") for j in grid.get("jobs", [])):
        expected = [j["dir"] for j in grid["jobs"]]
        out["grid"] = {"expected": len(expected), "created": grid.get("created"), "argv": grid.get("argv")}
        out["missing"] = [d for d in expected if d not in done and d not in failed]
        out["finished_in_grid"] = sum(d in done for d in expected)
        out["outside_grid"] = len(done - set(expected))
    return out


# ----------------------------------------------------------------------------- statistics


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std (ddof=1) and n of every metric per condition (seeds pooled)."""
    cols = [*METRICS, *EXTRA, "wall_time_s"]
    if runs.empty:
        return pd.DataFrame(columns=[*KEYS, "n", *[f"{c}_{s}" for c in cols for s in ("mean", "std")]])
    g = runs.groupby(list(KEYS), dropna=False, sort=False)
    out = g[cols].agg(["mean", "std"])
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out.insert(0, "n", g.size())
    return out.reset_index()


def mean_curves(runs: pd.DataFrame, **where) -> dict:
    """{key: (mean R[:, 0], std)} for runs matching ``where``; key = (benchmark, method, ...)."""
    out = {}
    sel = _select(runs, **where)
    for key, grp in sel.groupby(list(KEYS), dropna=False, sort=False):
        Rs = [R for R in grp["R"] if R.ndim == 2 and R.shape[0] == R.shape[1] and R.shape[0] > 1]
        if not Rs or len({R.shape for R in Rs}) > 1:
            continue
        col = np.stack([R[:, 0] for R in Rs])
        out[key] = (col.mean(0), col.std(0, ddof=1) if len(col) > 1 else np.zeros(col.shape[1]))
    return out


def mean_matrix(runs: pd.DataFrame, **where) -> dict:
    out = {}
    for key, grp in _select(runs, **where).groupby(list(KEYS), dropna=False, sort=False):
        Rs = [R for R in grp["R"] if R.ndim == 2]
        if Rs and len({R.shape for R in Rs}) == 1:
            out[key] = np.mean(np.stack(Rs), axis=0)
    return out


def _select(df: pd.DataFrame, **where) -> pd.DataFrame:
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        if v is None:
            continue
        col = df[k]
        mask &= np.isclose(col.astype(float), float(v)) if k in CONDITIONS else (col == v).to_numpy()
    return df[mask]


# ----------------------------------------------------------------------------- formatting


def fmt(mean, std=float("nan"), n: int | None = None, digits: int = 1, n_all: int | None = None) -> str:
    """``86.1 ± 1.2``; ``86.1`` for one seed; ``N/A`` when undefined; `` (n=2)`` if n differs from n_all."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "N/A"
    s = f"{mean:.{digits}f}"
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        s += f" ± {std:.{digits}f}"
    if n is not None and n_all is not None and n != n_all:
        s += f" (n={n})"
    return s


def fmt_paper(v) -> str:
    return "" if v is _NO_PAPER else f" [{'N/A' if v is None else _g(v)}]"


def _g(v: float) -> str:
    """A paper value as printed: one decimal, two where the paper gives two (-7.07)."""
    s = f"{v:.2f}"
    return s[:-1] if s.endswith("0") else s


_NO_PAPER = object()


def bench_label(b: str) -> str:
    return pv.BENCHMARK_LABELS.get(b, b)


def method_label(m: str) -> str:
    return pv.METHOD_LABELS.get(m, m)


def order_methods(methods) -> list[str]:
    methods = list(dict.fromkeys(methods))
    known = [m for m in pv.METHOD_ORDER if m in methods]
    return known + sorted(m for m in methods if m not in known)


def order_benchmarks(benchmarks) -> list[str]:
    order = list(pv.BENCHMARK_LABELS)
    return sorted(set(benchmarks), key=lambda b: (order.index(b) if b in order else len(order), b))


def paper_cell(benchmark: str, method: str, metric: str, memory, tau, lam, variant: str):
    """The paper's Table II value when the condition is Table II's, else the no-value marker."""
    c = pv.TABLE2_CONDITIONS
    if variant or metric not in METRICS or benchmark not in pv.TABLE2 or method not in pv.TABLE2[benchmark]:
        return _NO_PAPER
    if int(memory) != c["memory"] or not math.isclose(float(lam), c["lambda"]):
        return _NO_PAPER
    if method in ("ccmr", "adaer") and not math.isclose(float(tau), c["tau"]):
        return _NO_PAPER
    return pv.table2_value(benchmark, method, metric)


def _tex(s: str) -> str:
    for a, b in (
        ("_", r"\_"),
        ("%", r"\%"),
        ("#", r"\#"),
        ("&", r"\&"),
        ("±", r"$\pm$"),
        ("λ", r"$\lambda$"),
        ("τ", r"$\tau$"),
    ):
        s = s.replace(a, b)
    return s


def _tex_cell(cell: str) -> str:
    """``86.1 ± 1.2 [86.4]`` -> ``$86.1 \\pm 1.2$ {\\scriptsize[86.4]}``."""
    main, _, paper = cell.partition(" [")
    n = ""
    if " (n=" in main:
        main, _, n = main.partition(" (")
        n = rf" {{\scriptsize({_tex(n)}}}"
    out = main if main in ("N/A", "–", "") else "$" + main.replace(" ± ", r" \pm ") + "$"
    if paper:
        out += r" {\scriptsize[" + paper.rstrip("]") + "]}"
    return out + n


class Table:
    """A table with (optionally grouped) columns, written as Markdown and as LaTeX (booktabs)."""

    def __init__(
        self,
        title: str,
        header: list[str],
        groups: list[tuple[str, int]] | None = None,
        note: str = "",
        numeric: bool = True,
    ):
        self.title, self.header, self.groups, self.note, self.numeric = title, header, groups, note, numeric
        self.rows: list[list[str]] = []
        self.rules: list[int] = []  # a \midrule before these row indices

    def add(self, row: list[str]) -> None:
        self.rows.append(row)

    def rule(self) -> None:
        if self.rows:
            self.rules.append(len(self.rows))

    def markdown(self) -> str:
        head = self.header
        if self.groups:
            names, i = [], 1
            for g, span in self.groups:
                names += [f"{g} {h}" if h != "n" else f"n ({g})" for h in self.header[i : i + span]]
                i += span
            head = [self.header[0], *names]
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] + [":---:"] * (len(head) - 1)) + "|")
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines) + "\n"

    def latex(self) -> str:
        ncol = len(self.header)
        out = [
            r"\begin{table*}[t]",
            r"\centering",
            r"\caption{" + _tex(self.title) + "}",
            r"\resizebox{\textwidth}{!}{%",
            r"\begin{tabular}{l" + "c" * (ncol - 1) + "}",
            r"\toprule",
        ]
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
            cells = [_tex_cell(c) if self.numeric else _tex(c) for c in r[1:]]
            out.append(" & ".join([_tex(r[0]), *cells]) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}}"]
        if self.note:
            out.append(r"\par\smallskip{\footnotesize " + _tex(self.note.replace("`", "")) + "}")
        out.append(r"\end{table*}")
        return "\n".join(out) + "\n"


NOTE = (
    "Cells: mean ± std over seeds (sample std); [x] = the paper's value (Table II, {src}); "
    "(n=k) where fewer seeds finished than elsewhere."
).format(src="clsuite/paper_values.py")


def _row_label(r, show: set[str]) -> str:
    parts = [method_label(r["method"])]
    if "memory" in show:
        parts.append(f"M={r['memory']}")
    if "tau" in show:
        parts.append(f"tau={r['tau']:g}")
    if "lambda" in show:
        parts.append(f"lambda={r['lambda']:g}")
    if r.get("variant"):
        parts.append(str(r["variant"]))
    return parts[0] + (f" ({', '.join(parts[1:])})" if len(parts) > 1 else "")


def _varying(summary: pd.DataFrame, keys=CONDITIONS) -> set[str]:
    return {k for k in keys if summary[k].nunique(dropna=False) > 1}


def table2_layout(summary: pd.DataFrame, title: str) -> Table:
    """Paper Table II: methods x (benchmark x Acc/Forget/Bwt/Fwt), plus the seeds per benchmark."""
    benches = order_benchmarks(summary["benchmark"])
    show = _varying(summary)
    header = ["Method"]
    groups = []
    for b in benches:
        header += [*(pv.METRIC_LABELS[m] for m in METRICS), "n"]
        groups.append((bench_label(b), len(METRICS) + 1))
    t = Table(title, header, groups, NOTE)
    conds = summary[[*CONDITIONS, "variant", "method"]].drop_duplicates()
    order = order_methods(summary["method"])
    conds = conds.assign(_o=conds["method"].map(order.index)).sort_values(["_o", *CONDITIONS, "variant"])
    group_of = {m: i for i, g in enumerate(pv.METHOD_GROUPS) for m in g}
    last_group = None
    for _, c in conds.iterrows():
        grp = group_of.get(c["method"], len(pv.METHOD_GROUPS))
        if last_group is not None and grp != last_group:
            t.rule()
        last_group = grp
        row = [_row_label(c, show)]
        for b in benches:
            s = _select(
                summary, benchmark=b, method=c["method"], memory=c["memory"], tau=c["tau"], **{"lambda": c["lambda"]}
            )
            s = s[s["variant"] == c["variant"]]
            if s.empty:
                row += ["–"] * (len(METRICS) + 1)
                continue
            s = s.iloc[0]
            for m in METRICS:
                p = paper_cell(b, c["method"], m, c["memory"], c["tau"], c["lambda"], c["variant"])
                row.append(fmt(s[f"{m}_mean"], s[f"{m}_std"]) + fmt_paper(p))
            row.append(str(int(s["n"])))
        t.add(row)
    return t


def pivot_layout(
    summary: pd.DataFrame, title: str, metric: str, col_key: str, row_key: str = "method", digits: int = 1
) -> Table:
    """Rows: methods (or tau / lambda values); columns: benchmark x ``col_key`` values."""
    benches = order_benchmarks(summary["benchmark"])
    vals = sorted(summary[col_key].dropna().unique()) if col_key else [None]
    header, groups = [row_key.capitalize() if row_key != "method" else "Method"], []
    for b in benches:
        vs = [v for v in vals if col_key is None or not _select(summary, benchmark=b, **{col_key: v}).empty]
        short = {"memory": "M", "lambda": "λ", "tau": "τ"}.get(col_key, col_key)
        header += [f"{short}={v:g}" if col_key else pv.METRIC_LABELS.get(metric, metric) for v in vs]
        groups.append((bench_label(b), len(vs)))
    n_all = int(summary["n"].max()) if not summary.empty else 0
    other = _varying(summary) - {col_key, row_key}
    t = Table(title, header, groups, NOTE)
    if row_key == "method":
        rows = summary[["method", *CONDITIONS, "variant"]].drop_duplicates(subset=["method", *other, "variant"])
        order = order_methods(rows["method"])
        rows = rows.assign(_o=rows["method"].map(order.index)).sort_values(["_o", "variant"])
    else:
        rows = summary[[row_key, "method", "variant"]].drop_duplicates().sort_values([row_key, "method"])
    for _, r in rows.iterrows():
        if row_key == "method":
            label = _row_label(r, other)
            where = {"method": r["method"], **{k: r[k] for k in other}}
        else:
            label = f"{r[row_key]:g}" + ("" if summary["method"].nunique() == 1 else f" {method_label(r['method'])}")
            where = {row_key: r[row_key], "method": r["method"]}
        row = [label]
        for b in benches:
            for v in (
                [v for v in vals if not _select(summary, benchmark=b, **{col_key: v}).empty] if col_key else [None]
            ):
                w = {**where, "benchmark": b, **({col_key: v} if col_key else {})}
                s = _select(summary, **w)
                s = s[s["variant"] == r["variant"]]
                if s.empty:
                    row.append("–")
                    continue
                s = s.iloc[0]
                p = paper_cell(b, s["method"], metric, s["memory"], s["tau"], s["lambda"], s["variant"])
                row.append(fmt(s[f"{metric}_mean"], s[f"{metric}_std"], int(s["n"]), digits, n_all) + fmt_paper(p))
        t.add(row)
    return t


def claims_table(summary: pd.DataFrame, experiment: str) -> Table | None:
    claims = pv.claims_for(experiment)
    if not claims:
        return None
    t = Table(
        "The paper's numbers quoted in its text, beside ours",
        ["Where", "The paper says", "Benchmark", "Paper", "Ours", "Computed as"],
        note="Ours: from the means over seeds above. Relative numbers: gain = 100 (x/ref - 1), "
        "decline = 100 (1 - x/ref), x and ref as named; the paper does not always say which it means.",
        numeric=False,
    )
    for c in claims:
        ours, how = claim_value(summary, c)
        t.add(
            [
                c.where,
                c.quote.replace("|", "/"),
                bench_label(c.benchmark),
                _g(c.value),
                "–" if ours is None or math.isnan(ours) else f"{ours:.1f}",
                how,
            ]
        )
    return t


def claim_value(summary: pd.DataFrame, c: pv.Claim) -> tuple[float | None, str]:
    def get(over: dict):
        cond = {**pv.TABLE2_CONDITIONS, **c.at, **over}
        s = _select(
            summary[summary["variant"] == ""],
            benchmark=c.benchmark,
            method=cond.get("method", c.method),
            memory=cond["memory"],
            tau=cond["tau"],
            **{"lambda": cond["lambda"]},
        )
        if s.empty and "tau" not in c.at and "tau" not in over:  # methods without tau: any tau
            s = _select(
                summary[summary["variant"] == ""],
                benchmark=c.benchmark,
                method=cond.get("method", c.method),
                memory=cond["memory"],
                **{"lambda": cond["lambda"]},
            )
        return None if s.empty else float(s.iloc[0][f"{c.quantity}_mean"])

    x = get({})
    desc = f"{c.quantity} of {method_label(c.method)}" + "".join(f", {k}={v}" for k, v in c.at.items())
    if c.kind == "abs":
        return x, desc
    ref = get(c.vs or {})
    ref_desc = ", ".join(f"{k}={method_label(v) if k == 'method' else v}" for k, v in (c.vs or {}).items())
    if x is None or ref is None or ref == 0:
        return None, f"{c.kind} of {desc} vs {ref_desc}"
    val = 100 * (x / ref - 1) if c.kind == "gain" else 100 * (1 - x / ref)
    return val, f"{c.kind} of {desc} vs {ref_desc}"


# ----------------------------------------------------------------------------- figures


# A fixed colour per method in every figure; AdaER in red, its ablations in its shades.
METHOD_COLORS = {
    "adaer": "#d62728",
    "ccmr": "#ff7f0e",
    "ebrs": "#e377c2",
    "mir": "#1f77b4",
    "er": "#2ca02c",
    "gss": "#9467bd",
    "hal": "#8c564b",
    "gem": "#17becf",
    "agem": "#bcbd22",
    "icarl": "#7f7f7f",
    "oewc": "#aec7e8",
    "si": "#98df8a",
    "online": "#000000",
    "joint": "#c5b0d5",
}
TAU_VALUES = ("0.1", "0.3", "0.5", "0.7", "0.9")


def _style(method: str) -> dict:
    from clsuite.plots import series_style

    st = series_style(method, pv.METHOD_ORDER)
    if method in METHOD_COLORS:
        st["color"] = METHOD_COLORS[method]
    return st


def _err(std) -> list | None:
    std = np.nan_to_num(np.asarray(std, dtype=float))
    return None if not std.any() else list(std)


def _paper_points(benchmark: str, method: str, quantity: str, x_key: str | None, **at) -> list:
    """The paper's values for (benchmark, method, quantity) as (x, y) points, x = ``at[x_key]``."""
    pts = []
    cond = {**pv.TABLE2_CONDITIONS, **at}
    v = pv.table2_value(benchmark, method, quantity) if quantity in METRICS else None
    t2 = pv.TABLE2_CONDITIONS
    relevant = [k for k in CONDITIONS if k != "tau" or method in ("adaer", "ccmr")]
    if v is not None and all(k == x_key or math.isclose(float(cond[k]), float(t2[k])) for k in relevant):
        pts.append((t2[x_key] if x_key else None, v))
    for c in pv.CLAIMS:
        if c.kind != "abs" or c.benchmark != benchmark or c.method != method or c.quantity != quantity:
            continue
        cc = {**pv.TABLE2_CONDITIONS, **c.at}
        if all(k == x_key or math.isclose(float(cc[k]), float(cond[k])) for k in CONDITIONS):
            p = (cc[x_key] if x_key else None, c.value)
            if p not in pts:
                pts.append(p)
    return pts


def _axis_label(key: str) -> str:
    return {"memory": "memory size M", "lambda": "imbalance λ", "tau": "τ"}.get(key, key)


def panels_vs_condition(summary, metric: str, x_key: str, ylabel: str) -> list:
    """A panel per benchmark: ``metric`` against ``x_key`` (memory / lambda / tau), a line per method."""
    from clsuite.plots import Panel, Series

    panels = []
    for b in order_benchmarks(summary["benchmark"]):
        sb = summary[(summary["benchmark"] == b) & (summary["variant"] == "")]
        series = []
        for m in order_methods(sb["method"]):
            s = sb[sb["method"] == m].sort_values(x_key)
            st = _style(m)
            pts = [(x, y) for x, y in _paper_points(b, m, metric, x_key) if x in set(s[x_key])]
            series.append(
                Series(
                    method_label(m),
                    list(s[x_key]),
                    list(s[f"{metric}_mean"]),
                    _err(s[f"{metric}_std"]),
                    st["color"],
                    st["marker"],
                    pts,
                )
            )
        xt = sorted(sb[x_key].unique().tolist())
        panels.append(Panel(bench_label(b), series, "lines", _axis_label(x_key), ylabel, xticks=xt))
    return panels


def panels_first_task(runs, by: str = "method", benchmarks=None, **where) -> list:
    """A panel per benchmark: R[:, 0] (mean ± std over seeds) after each task, a curve per method (or tau)."""
    from clsuite.plots import Panel, Series, series_style

    curves = mean_curves(runs, **where)
    panels = []
    for b in benchmarks or order_benchmarks(runs["benchmark"]):
        keys = [k for k in curves if k[0] == b and k[-1] == ""]
        if by == "method":
            order = order_methods([kk[1] for kk in keys])
            keys.sort(key=lambda k: (order.index(k[1]), *k[2:5]))
        else:
            keys.sort(key=lambda k: (k[KEYS.index(by)], k[1]))
        series = []
        for k in keys:
            mean, std = curves[k]
            cond = dict(zip(CONDITIONS, k[2:5]))
            pts = [(len(mean), y) for _, y in _paper_points(b, k[1], "first_task_final", None, **cond)]
            if by == "method":
                st, label = _style(k[1]), method_label(k[1])
            else:
                v = k[KEYS.index(by)]
                st, label = series_style(f"{v:g}", TAU_VALUES), f"{by}={v:g}"
            series.append(
                Series(label, list(range(1, len(mean) + 1)), list(mean), _err(std), st["color"], st["marker"], pts)
            )
        T = max((len(s.x) for s in series), default=0)
        panels.append(
            Panel(
                f"{bench_label(b)}: first task",
                series,
                "curves",
                "after training task i",
                "accuracy on task 1 (%)",
                xticks=list(range(1, T + 1)) if T <= 10 else None,
                width=1.0 if T <= 10 else 2.0,
            )
        )
    return panels


def acc_bars(summary, metric: str = "acc", title: str = "averaged test accuracy", **where):
    """A bars panel: categories = benchmarks, one bar per method (mean ± std, paper markers)."""
    from clsuite.plots import Panel, Series

    s = _select(summary[summary["variant"] == ""], **where)
    series = []
    for m in order_methods(s["method"]):
        sm = s[s["method"] == m]
        bs = order_benchmarks(sm["benchmark"])
        sm = sm.drop_duplicates("benchmark").set_index("benchmark").loc[bs]
        st = _style(m)
        pts = []
        for b in bs:
            cond = {k: float(sm.loc[b, k]) for k in CONDITIONS}
            pts += [(bench_label(b), y) for _, y in _paper_points(b, m, metric, None, **cond)]
        series.append(
            Series(
                method_label(m),
                [bench_label(b) for b in bs],
                list(sm[f"{metric}_mean"]),
                _err(sm[f"{metric}_std"]),
                st["color"],
                st["marker"],
                pts,
            )
        )
    return Panel(title, series, "bars", "", "Acc (%)")


def fig_heatmaps(runs, out, prefix: str = "accuracy_matrix", **where) -> list[Path]:
    """The mean accuracy matrix of each method, one figure per benchmark."""
    from clsuite.plots import heatmap_grid

    mats = mean_matrix(runs, **where)
    paths = []
    show = _varying(runs) if not runs.empty else set()
    for b in order_benchmarks({k[0] for k in mats}):
        keys = [k for k in mats if k[0] == b]
        order = order_methods([k[1] for k in keys])
        keys.sort(key=lambda k: (order.index(k[1]), *k[2:5]))
        labelled = {_row_label(dict(zip(KEYS, k)), show): mats[k] for k in keys}
        title = f"{bench_label(b)}: mean accuracy matrix R[i, j] (%), row i = after task i"
        paths += heatmap_grid(labelled, out / f"{prefix}_{b}", title)
    return paths


# ----------------------------------------------------------------------------- recipes
# Each recipe: (runs, summary, out folder, experiment) -> (tables, figure paths). Figure files are
# named after the paper's figure numbers.


def recipe_table2(runs, summary, out, exp):
    return [table2_layout(summary, f"Table II ({exp}): Acc / Forget / Bwt / Fwt (%)")], fig_heatmaps(runs, out)


def recipe_memory(runs, summary, out, exp, stems=("fig5_memory_acc", "fig6_memory_bwt")):
    from clsuite.plots import draw

    tables = [
        pivot_layout(summary, f"Acc (%) against the memory size M ({exp})", "acc", "memory"),
        pivot_layout(summary, f"Bwt against the memory size M ({exp})", "bwt", "memory"),
    ]
    figs = draw(
        panels_vs_condition(summary, "acc", "memory", "Acc (%)"),
        out / stems[0],
        "Averaged test accuracy against the memory size",
    )
    figs += draw(
        panels_vs_condition(summary, "bwt", "memory", "Bwt"),
        out / stems[1],
        "Backward transfer against the memory size",
    )
    return tables, figs


def recipe_ablation(runs, summary, out, exp):
    return recipe_memory(runs, summary, out, exp, stems=("fig11_ablation_memory", "ablation_memory_bwt"))


def recipe_first_task(runs, summary, out, exp):
    from clsuite.plots import draw

    tables = [
        pivot_layout(
            summary, f"First-task accuracy after the last task, R[T-1, 0] (%) ({exp})", "first_task_final", None
        ),
        pivot_layout(summary, f"First-task drop R[0, 0] - R[T-1, 0] (points) ({exp})", "first_task_drop", None),
    ]
    figs = draw(
        panels_first_task(runs), out / "fig7_first_task", "Test accuracy of the first task as tasks are learned"
    )
    return tables, figs


def recipe_cifar100(runs, summary, out, exp, stem="fig8_cifar100"):
    from clsuite.plots import draw

    tables = [
        table2_layout(summary, f"split-CIFAR100 ({exp}): Acc / Forget / Bwt / Fwt (%)"),
        pivot_layout(
            summary, f"First-task accuracy after the last task, R[T-1, 0] (%) ({exp})", "first_task_final", None
        ),
    ]
    panels = [acc_bars(summary), *panels_first_task(runs)]
    figs = draw(panels, out / stem, "split-CIFAR100: (a) averaged test accuracy, (b) evolution of the first task")
    return tables, figs + fig_heatmaps(runs, out)


def recipe_ablation_cifar100(runs, summary, out, exp):
    return recipe_cifar100(runs, summary, out, exp, stem="fig12_ablation_cifar100")


def recipe_imbalance(runs, summary, out, exp):
    from clsuite.plots import draw

    tables = [pivot_layout(summary, f"Acc (%) against the imbalance λ ({exp})", "acc", "lambda")]
    panels = []
    if np.isclose(summary["lambda"], 0.5).any():
        panels.append(acc_bars(summary, title="averaged test accuracy, λ = 0.5", **{"lambda": 0.5}))
    panels += panels_vs_condition(summary, "acc", "lambda", "Acc (%)")
    figs = draw(panels, out / "fig9_imbalance", "Imbalanced tasks: (a) λ = 0.5, then Acc against λ")
    return tables, figs


def recipe_tau(runs, summary, out, exp):
    from clsuite.plots import Panel, Series, draw, series_style

    tables = [
        pivot_layout(summary, f"AdaER: Acc (%) against τ ({exp})", "acc", None, row_key="tau"),
        pivot_layout(
            summary,
            f"AdaER: first-task accuracy after the last task (%) against τ ({exp})",
            "first_task_final",
            None,
            row_key="tau",
        ),
    ]
    series = []
    s0 = summary[summary["variant"] == ""]
    for b in order_benchmarks(s0["benchmark"]):
        for m in order_methods(s0["method"]):
            s = s0[(s0["benchmark"] == b) & (s0["method"] == m)].sort_values("tau")
            if s.empty:
                continue
            st = series_style(b, list(pv.BENCHMARK_LABELS))
            label = bench_label(b) + ("" if s0["method"].nunique() == 1 else f" {method_label(m)}")
            pts = [(x, y) for x, y in _paper_points(b, m, "acc", "tau") if x in set(s["tau"])]
            series.append(
                Series(label, list(s["tau"]), list(s["acc_mean"]), _err(s["acc_std"]), st["color"], st["marker"], pts)
            )
    a = Panel("averaged test accuracy", series, "lines", "τ", "Acc (%)", xticks=sorted(s0["tau"].unique().tolist()))
    figs = draw(
        [a, *panels_first_task(runs, by="tau")],
        out / "fig10_tau",
        "AdaER against τ: (a) averaged test accuracy, then the first task through the stream",
    )
    return tables, figs


RECIPES: dict[str, Callable] = {
    "table2": recipe_table2,
    "memory": recipe_memory,
    "first_task": recipe_first_task,
    "cifar100": recipe_cifar100,
    "imbalance": recipe_imbalance,
    "tau": recipe_tau,
    "ablation": recipe_ablation,
    "ablation_cifar100": recipe_ablation_cifar100,
}


# ----------------------------------------------------------------------------- the report


def status_markdown(st: dict, exp_dir: Path) -> str:
    lines = ["### Runs", ""]
    if st["grid"]:
        g = st["grid"]
        lines.append(f"- expected (the sweep's grid, `{exp_dir}/{GRID_FILE}`, {g['created']}): {g['expected']}")
        lines.append(
            f"- finished: {st['finished_in_grid']} of the grid"
            + (
                f" (+ {st['outside_grid']} from earlier sweeps outside it, included above)"
                if st["outside_grid"]
                else ""
            )
        )
    else:
        lines.append(f"- finished: {st['finished']} (no `{GRID_FILE}`: the expected runs are unknown)")
    lines.append(f"- failed: {len(st['failed'])}" + (" (rerun the same command to retry them)" if st["failed"] else ""))
    for f in st["failed"]:
        lines.append(f"  - `{f['job']}`: {f['error']} (attempt {f['attempt']}, {f['time']}, {f['host']})")
    if st["grid"]:
        lines.append(
            f"- missing (never finished nor failed: not run yet, killed, or still running): {len(st['missing'])}"
        )
        for d in st["missing"][:200]:
            lines.append(f"  - `{d}`")
        if len(st["missing"]) > 200:
            lines.append(f"  - ... and {len(st['missing']) - 200} more (status.json)")
    return "\n".join(lines) + "\n"


def aggregate(
    experiment: str,
    multirun_dir="multirun",
    out_root="results",
    recipe: str | None = None,
    wandb_mode: str | None = None,
) -> dict:
    """Build every table and figure of ``experiment``; returns the paths and the status."""
    exp_dir = Path(multirun_dir) / experiment
    out = Path(out_root) / experiment
    if not exp_dir.is_dir():
        raise FileNotFoundError(f"no runs: {exp_dir} does not exist (run the sweep first, e.g. make {experiment})")
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(exp_dir)
    failures = load_failures(exp_dir)
    st = status(runs, failures, load_grid(exp_dir))
    summary = summarize(runs)
    tables, figs = [], []
    if not runs.empty:
        fn = RECIPES.get(recipe or experiment, recipe_table2)
        tables, figs = fn(runs, summary, out, experiment)
        ct = claims_table(summary, recipe or experiment)
        if ct is not None:
            tables.append(ct)
    runs.drop(columns=["R", "b"]).to_csv(out / "runs.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False, float_format="%.4f")
    (out / "status.json").write_text(json.dumps(st, indent=1, default=str))

    head = [
        f"# {experiment}: tables and figures",
        "",
        f"Built by `python scripts/aggregate.py {experiment}` from {len(runs)} results files in `{exp_dir}/` "
        "(one per run). Values in [brackets] are the paper's, transcribed in `src/clsuite/paper_values.py`; "
        "every other number is this suite's.",
        "",
    ]
    if not runs.empty:
        seeds = sorted(runs["seed"].unique().tolist())
        head.append(
            f"Seeds: {seeds}; total compute {runs['wall_time_s'].sum() / 3600:.2f} h "
            f"({int(runs['reused_from'].notna().sum())} results reused from other experiments)."
        )
        head.append("")
    md = head + [t.markdown() for t in tables]
    md += ["### Figures", ""] + [f"- [{p.name}]({p.name})" for p in figs if p.suffix == ".png"] + [""]
    md.append(status_markdown(st, exp_dir))
    if experiment == "table2" or (recipe or experiment) == "table2":
        md += ["### Notes on the paper's Table II", ""] + [f"- {n}" for n in pv.TABLE2_NOTES] + [""]
    (out / f"{experiment}.md").write_text("\n".join(md))
    tex = [
        f"% {experiment}: generated by scripts/aggregate.py from {exp_dir}/ -- [x] = the paper's value",
        "% needs \\usepackage{booktabs,graphicx}",
        "",
    ] + [t.latex() for t in tables]
    (out / f"{experiment}.tex").write_text("\n".join(tex))
    result = {
        "out": out,
        "tables": [out / f"{experiment}.md", out / f"{experiment}.tex"],
        "figures": figs,
        "status": st,
        "runs": len(runs),
    }
    if wandb_mode:
        log_to_wandb(experiment, out, tables, figs, summary, wandb_mode)
    return result


def log_to_wandb(experiment: str, out: Path, tables, figs, summary: pd.DataFrame, mode: str = "offline") -> None:
    """One W&B run per experiment (group = experiment, job_type = aggregate): figures + summary table."""
    import os

    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", "adaer-suite"),
        group=experiment,
        job_type="aggregate",
        name=f"{experiment}-aggregate",
        tags=[experiment, "aggregate"],
        dir=str(out),
        mode=mode,
        reinit="finish_previous",
    )
    try:
        run.log({p.stem: wandb.Image(str(p)) for p in figs if p.suffix == ".png"})
        run.log({"summary": wandb.Table(dataframe=summary.drop(columns=[], errors="ignore"))})
        for t in tables:
            run.log({f"table/{t.title[:60]}": wandb.Table(columns=t.header, data=t.rows)})
    finally:
        run.finish()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("experiments", nargs="+", help="experiment names (folders of multirun/), e.g. table2 memory")
    ap.add_argument("--multirun-dir", default="multirun", help="where the sweeps wrote their runs (default: multirun)")
    ap.add_argument("--out", default="results", help="output root; files go to <out>/<experiment>/ (default: results)")
    ap.add_argument(
        "--recipe", choices=sorted(RECIPES), help="tables/figures to build (default: the experiment's name)"
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 when a run of the grid is missing or failed")
    ap.add_argument(
        "--wandb",
        nargs="?",
        const="offline",
        choices=["offline", "online"],
        help="also log the figures and tables as one W&B run per experiment (default mode: offline)",
    )
    args = ap.parse_args(argv)
    incomplete = False
    for exp in args.experiments:
        try:
            res = aggregate(exp, args.multirun_dir, args.out, args.recipe, args.wandb)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        st = res["status"]
        exp_line = f"{exp}: {res['runs']} runs"
        if st["grid"]:
            exp_line += f" ({st['finished_in_grid']}/{st['grid']['expected']} of the grid)"
        exp_line += f", {len(st['failed'])} failed, {len(st['missing'])} missing -> {res['out']}/"
        print(exp_line)
        for p in res["tables"]:
            print(f"  {p}")
        for p in res["figures"]:
            print(f"  {p}")
        for f in st["failed"]:
            print(f"  failed: {f['job']}: {f['error']}", file=sys.stderr)
        if st["missing"]:
            print(f"  missing: {len(st['missing'])} runs (listed in {res['out']}/{exp}.md)", file=sys.stderr)
        incomplete |= bool(st["failed"] or st["missing"])
    return 1 if (args.strict and incomplete) else 0
