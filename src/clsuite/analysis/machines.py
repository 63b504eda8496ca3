"""Table II across machines: the same code on several CPUs (or kernel sets), and which cells
and verdicts the machine moves (:func:`compare`): docs/GUIDE.md, "Numerical noise and
machines"; the findings: docs/notes/NUMERICS.md, "Did the machine move the report?".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.claims import CLAIMS, UNRESOLVED, judge
from clsuite.analysis.load import select
from clsuite.analysis.tables import UNSEPARATED, Table
from clsuite.core.metrics import METRICS

READING = "mir_code"
QUANTITIES = ("acc", "forget", "bwt")
KEY = ["benchmark", "method", "quantity"]  # a cell
TABLE2_CLAIMS = tuple(c for c in CLAIMS if c.experiment == "table2")


@dataclass
class Source:
    name: str
    cells: pd.DataFrame  # benchmark, method, quantity, mean, std, n
    comparisons: pd.DataFrame  # claim, benchmark, label, mean, low, high, n, outcome
    verdicts: dict[str, str]  # claim key -> verdict
    runs: pd.DataFrame | None = field(default=None)  # per-run sources: benchmark, method, seed, quantities
    resolution: float = 0.0  # half the last digit of its numbers (a report's are rounded to 0.1: 0.05)


# ----------------------------------------------------------------------------- reading sources


def from_runs(name: str, runs: pd.DataFrame) -> Source | None:
    """A source from per-run rows (an experiment's runs, or a runs table); None without Table II runs."""
    if runs.empty:
        return None
    base = runs[
        (runs["variant"].fillna("") == "") & (runs["reading"] == READING) & runs["benchmark"].isin(pv.BENCHMARKS)
    ]
    base = select(base, **TABLE2_CLAIMS[0].at)
    if base.empty:
        return None
    cells = []
    for (b, m), g in base.groupby(["benchmark", "method"], sort=False):
        for q in QUANTITIES:
            v = g[q].astype(float)
            cells.append({"benchmark": b, "method": m, "quantity": q, "mean": v.mean(), "std": v.std(), "n": len(v)})
    comps, verdicts = [], {}
    for claim in TABLE2_CLAIMS:
        for j in judge(claim, base):
            if j.reading != READING:
                continue
            verdicts[claim.key] = j.verdict
            for c, o in zip(j.comparisons, j.outcomes, strict=True):
                r = c.result
                comps.append({"claim": claim.key, "benchmark": c.benchmark, "label": c.label, "mean": r.mean,
                              "low": r.low, "high": r.high, "n": r.n, "outcome": o})  # fmt: skip
    keep = ["benchmark", "method", "seed", *QUANTITIES]
    return Source(name, pd.DataFrame(cells), pd.DataFrame(comps), verdicts, base[keep].reset_index(drop=True))


def read_runs_table(path: Path) -> pd.DataFrame:
    """A ``runs.csv`` (``make aggregate``) as run rows."""
    df = pd.read_csv(path)
    return df.assign(variant=df["variant"].fillna("") if "variant" in df else "")


_CELL = re.compile(r"^(-?[\d.]+)(?: ± ([\d.]+))?(?: \(n=(\d+)\))?")


def read_report(path: Path) -> Source:
    """A report written by this suite (``REPRODUCTION.md``, or its Table II extract): the Table II
    cells of ``mir_code`` and the Table II claims' comparisons under ``mir_code``."""
    text = Path(path).read_text()
    machines = re.search(r"^- machines: (.+?) \(", text, re.M)
    seeds = re.search(r"^## 1\. Table II\s+\d+ distinct runs, seeds \[([\d, ]+)\]", text, re.M)
    n_all = len(seeds.group(1).split(",")) if seeds else None
    by_label = {pv.method_label(m): m for m in pv.METHOD_ORDER}
    by_bench = {pv.bench_label(b): b for b in pv.BENCHMARKS}
    cells = []
    for bench_label, table in re.findall(r"^### Table II \(table2\): (\S+)\n\n(.*?)\n\n", text, re.M | re.S):
        lines = [line.strip("|").split("|") for line in table.splitlines()]
        header = [h.strip() for h in lines[0]]
        for row in lines[2:]:
            row = [c.strip() for c in row]
            for q in QUANTITIES:
                col = f"{METRICS[q].label} {READING}"
                if col not in header or not (m := _CELL.match(row[header.index(col)])):
                    continue
                mean, std, n = m.groups()
                cells.append({"benchmark": by_bench[bench_label], "method": by_label[row[0]], "quantity": q,
                              "mean": float(mean), "std": float(std) if std else float("nan"),
                              "n": int(n) if n else n_all})  # fmt: skip
    comps, verdicts = [], {}
    for claim in TABLE2_CLAIMS:
        block = re.search(
            rf"<details><summary>{re.escape(claim.text)} \({READING}\): ([^<]+)</summary>(.*?)</details>", text, re.S
        )
        if not block:
            continue
        verdicts[claim.key] = block.group(1).strip()
        for row in re.findall(r"^\| (split-\S+) \| (.+?) \| (\d+) \| ([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\] \|.*\| ([^|]+) \|$",
                              block.group(2), re.M):  # fmt: skip
            bench, label, n, mean, low, high, outcome = row
            outcome = outcome.strip()
            comps.append({"claim": claim.key, "benchmark": by_bench[bench], "label": label, "mean": float(mean),
                          "low": float(low), "high": float(high), "n": int(n),
                          "outcome": UNRESOLVED if outcome == UNSEPARATED else outcome})  # fmt: skip
    name = f"{machines.group(1) if machines else 'unknown machine'}, native (report {Path(path).stem})"
    return Source(name, pd.DataFrame(cells), pd.DataFrame(comps), verdicts, resolution=0.05)


def sources(experiments: dict, crossmachine: Path | None) -> list[Source]:
    """Every source: the reports and runs tables of ``crossmachine`` (reports first: the reference),
    then the ``machines_*`` experiments; read once, for :func:`fragile` and :func:`markdown`."""
    files = sorted(Path(crossmachine).glob("*"), key=lambda p: (p.suffix != ".md", p.name)) if crossmachine else []
    out = [read_report(p) for p in files if p.suffix == ".md" and p.name != "README.md"]
    for p in (p for p in files if p.suffix == ".csv"):
        runs = read_runs_table(p)
        cpu = runs["cpu"].mode().iloc[0] if "cpu" in runs and not runs.empty else "unknown machine"
        if s := from_runs(f"{cpu}, native (runs table {p.stem})", runs):
            out.append(s)
    for n, e in sorted(experiments.items()):
        if n.startswith("machines_") and not e.empty:
            cpu, kernels = e.runs["cpu"].mode().iloc[0], e.runs["numerics"].mode().iloc[0]
            if s := from_runs(f"{cpu}, {kernels} (multirun/{n})", e.runs):
                out.append(s)
    return out


# ----------------------------------------------------------------------------- comparing them


def moved_cells(srcs: list[Source]) -> pd.DataFrame:
    """Steps 1-2: the cells of every source against the reference (the first), flagged when moved."""
    if len(srcs) < 2:
        return pd.DataFrame()

    def se(c):  # the standard error std / sqrt(n); NaN for n < 2
        return c["std"] / np.sqrt(pd.to_numeric(c["n"]).where(lambda n: n > 1))

    ref = srcs[0].cells.assign(ref_se=se).rename(columns={"mean": "ref_mean"})
    frames = []
    for s in srcs[1:]:
        m = s.cells.assign(source=s.name, se=se).merge(ref[[*KEY, "ref_mean", "ref_se"]], on=KEY)
        m["diff"], m["se_diff"] = m["mean"] - m["ref_mean"], np.sqrt(m["ref_se"] ** 2 + m["se"] ** 2)
        frames.append(m.assign(moved=m["diff"].abs() > m["se_diff"] + srcs[0].resolution + s.resolution))
    cols = ["source", *KEY, "ref_mean", "ref_se", "mean", "se", "diff", "se_diff", "moved"]
    return pd.concat(frames, ignore_index=True)[cols]


def same_runs(srcs: list[Source]) -> list[tuple[str, str, int, int]]:
    """Step 3: (source a, source b, runs of both, runs equal in every quantity) for per-run sources."""
    out = []
    per_run = [s for s in srcs if s.runs is not None]
    for i, a in enumerate(per_run):
        for b in per_run[i + 1 :]:
            m = a.runs.merge(b.runs, on=["benchmark", "method", "seed"], suffixes=("_a", "_b"))
            if m.empty:
                continue
            x, y = (m[[f"{q}_{s}" for q in QUANTITIES]].to_numpy(dtype=float) for s in "ab")
            same = (x == y) | (np.isnan(x) & np.isnan(y))  # Joint has no Forget / BWT
            out.append((a.name, b.name, len(m), int(same.all(axis=1).sum())))
    return out


def changed_comparisons(srcs: list[Source]) -> list[dict]:
    """Step 4: the comparisons whose outcome differs between sources, each with every source's
    (outcome, mean, low, high, n)."""
    rows: dict[tuple, dict] = {}
    for s in srcs:
        for r in s.comparisons.itertuples() if not s.comparisons.empty else ():
            rows.setdefault((r.claim, r.benchmark, r.label), {})[s.name] = (r.outcome, r.mean, r.low, r.high, r.n)
    return [
        {"claim": c, "benchmark": b, "label": lab, "by_source": by}
        for (c, b, lab), by in rows.items()
        if len({o for o, *_ in by.values()}) > 1
    ]


def fragile(srcs: list[Source]) -> dict[str, dict[str, str]]:
    """Step 4: claim key -> {source: verdict} for the claims whose verdict differs between sources."""
    out = {}
    for claim in TABLE2_CLAIMS:
        verdicts = {s.name: s.verdicts[claim.key] for s in srcs if claim.key in s.verdicts}
        if len(set(verdicts.values())) > 1:
            out[claim.key] = verdicts
    return out


def markdown(srcs: list[Source]) -> list[str]:
    """The report's cross-machine subsection of :func:`sources` (empty with fewer than two)."""
    if len(srcs) < 2:
        return []
    names = [s.name for s in srcs]
    letter = {n: chr(65 + i) for i, n in enumerate(names)}
    out = ["Sources (the first is the reference): " + "; ".join(f"**{letter[n]}** {n}" for n in names) + ".", ""]
    cells = moved_cells(srcs)
    t = Table(
        f"Table II cells ({READING}) whose mean moved with the machine by more than its standard error",
        ["benchmark", "method", "quantity", "A: mean ± se", "source", "its mean ± se", "difference", "se of the difference"],
        note="Moved: |difference| > sqrt(se_A² + se²), se = std / sqrt(n) over seeds. "
        + "; ".join(f"{letter[s]}: {int(g['moved'].sum())} of {len(g)} cells moved" for s, g in cells.groupby("source", sort=False))
        + ".",
    )  # fmt: skip
    for r in cells[cells["moved"]].itertuples():
        t.add([pv.bench_label(r.benchmark), pv.method_label(r.method), METRICS[r.quantity].label,
               f"{r.ref_mean:.1f} ± {r.ref_se:.1f}", letter[r.source], f"{r.mean:.1f} ± {r.se:.1f}",
               f"{r.diff:+.1f}", f"{r.se_diff:.1f}"])  # fmt: skip
    out.append(t.markdown())
    same = same_runs(srcs)
    if same:
        out += ["Runs equal seed by seed (Acc, Forget and BWT): " + "; ".join(
            f"{letter[a]} and {letter[b]}: {k} of {n}" for a, b, n, k in same) + ".", ""]  # fmt: skip
    v = Table("Table II verdicts per machine", ["claim", *[letter[n] for n in names], "fragile"])
    fr = fragile(srcs)
    for claim in TABLE2_CLAIMS:
        v.add([claim.text, *[s.verdicts.get(claim.key, "–") for s in srcs], "**fragile**" if claim.key in fr else "no"])
    out.append(v.markdown())
    changed = changed_comparisons(srcs)
    if changed:
        c = Table("Comparisons whose outcome moves with the machine: outcome and mean [95% CI] per machine",
                  ["claim", "benchmark", "comparison", *[letter[n] for n in names]],
                  note="Outcomes after Holm within each claim's family (section 'The paper's claims, checked'); "
                  "a claim whose verdict moves is fragile.")  # fmt: skip
        text = {cl.key: cl.text for cl in TABLE2_CLAIMS}
        for r in changed:
            cols = []
            for n in names:
                o = r["by_source"].get(n)
                cols.append("–" if o is None else f"{o[0]}: {o[1]:+.1f} [{o[2]:+.1f}, {o[3]:+.1f}], n={o[4]}")
            flag = " (**fragile**)" if r["claim"] in fr else ""
            c.add([text[r["claim"]] + flag, pv.bench_label(r["benchmark"]), r["label"], *cols])
        out.append(c.markdown())
    return out
