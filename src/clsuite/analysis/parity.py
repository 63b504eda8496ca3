"""Parity with Mammoth: the table of the parity record (``make parity``, scripts/parity/harness.py;
its form and checks: ``clsuite.run.records.parity_problem``). :func:`table` is what ``make parity`` prints
and the report shows (:func:`markdown`); the setting and the fixes: docs/notes/PARITY.md; how the record
is carried: docs/INTEGRITY.md, section 8.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clsuite.analysis import paper_values as pv
from clsuite.analysis.stats import paired
from clsuite.analysis.tables import Table, fmt, paper_number
from clsuite.config.numerics import label
from clsuite.run import records as rec
from clsuite.run.io import Unreadable, load_json

PINNED = "e75a491"  # github.com/aimagelab/mammoth, the commit the harness is made for
TITLE = "Parity with Mammoth (GSS, iCaRL, HAL)"
COMMAND = f"make parity MAMMOTH=<a Mammoth checkout at {PINNED}>"
RESULTS = f"parity/{rec.PARITY_FILE}"  # where make parity writes it, under the results folder


def _seeds(seeds: list[int]) -> str:
    """``0-4`` for a run of seeds, else ``0, 2, 3``."""
    s = sorted(seeds)
    return f"{s[0]}-{s[-1]}" if len(s) > 2 and s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


def _mean_sd(values) -> str:
    v = list(values)
    return fmt(np.mean(v), np.std(v, ddof=1) if len(v) > 1 else float("nan"))


def _note(record: dict) -> str:
    """Both codes, the kernels, the CPU; what was changed from the harness's setting; a stopped run."""
    p = record["provenance"]
    commit = f"commit {p['suite_commit'][:10]}" if p.get("suite_commit") else "no git commit"
    changed = sorted({o for r in record["rows"] for o in r.get("suite_overrides", ())
                      if not o.startswith("trainer.numerics=")})  # fmt: skip
    changes = [f"the suite's side with `{'`, `'.join(changed)}`"] if changed else []
    changes += [] if p.get("mammoth_flipped_means", True) else ["Mammoth's iCaRL without its flipped class means"]
    return (
        f"Mammoth at {p['mammoth_commit']}; the suite's code {p['suite_code']} ({commit}"
        f"{'+dirty' if p.get('suite_dirty') else ''}); CPU kernels {label(p['numerics'])}; {p['cpu']}. Paired by "
        "seed; *paper*: Table II."
        + (f" Changed from the harness's setting: {'; '.join(changes)}." if changes else "")
        + ("" if record["complete"] else " Incomplete: the harness was stopped before its last seed.")
    )


def table(record: dict) -> Table:
    """One line per (method, benchmark, reading): each side's Acc (mean ± sd over seeds), the paired
    difference suite − Mammoth with its 95% t interval, per seed, and the paper's Table II value."""
    t = Table(
        f"Acc (%) of the suite's classes and Mammoth's ({record['provenance']['mammoth_commit']}) on the same split, "
        "initial weights and batches",
        ["method", "benchmark", "reading", "seeds", "suite Acc", "Mammoth Acc", "suite − Mammoth, mean [95% CI]",
         "per seed", "paper"],
        note=_note(record),
    )  # fmt: skip
    for row in record["rows"]:
        suite = {s["seed"]: s["suite"]["acc"] for s in row["seeds"]}
        ref = {s["seed"]: s["mammoth"]["acc"] for s in row["seeds"]}
        paper = pv.table2_value(row["benchmark"], row["method"], "acc")
        t.add([pv.method_label(row["method"]), pv.bench_label(row["benchmark"]), row["reading"], _seeds(list(suite)),
               _mean_sd(suite.values()), _mean_sd(ref.values()), paired(suite, ref).interval(),
               ", ".join(f"{suite[k] - ref[k]:+.1f}" for k in sorted(suite)), paper_number(paper)])  # fmt: skip
    return t


def read(path: Path) -> dict | None:
    """The parity record at ``path`` (None when there is none); :class:`Unreadable` when it is not one."""
    try:
        record = load_json(path)
    except FileNotFoundError:
        return None
    except Unreadable as e:
        raise Unreadable(f"{path}: {e}") from None
    if why := rec.parity_problem(record):
        raise Unreadable(f"{path}: {why}")
    return record


def markdown(record: dict | None, where: str) -> list[str]:
    """The report's section: the table of ``record`` (read from ``where``), or how to fill it."""
    if record is None:
        return [f"Not run: `{COMMAND}` (writes `results/{RESULTS}`; `clsuite records pack --parity results/{RESULTS}` "
                "puts it in docs/records/).", ""]  # fmt: skip
    return [
        "The suite's GSS, iCaRL and HAL beside Mammoth's unmodified classes, driven by `make parity` on the suite's "
        f"split, initial weights and (GSS, HAL) batches, both under the same kernels. Every R and Acc, the settings "
        f"and both commits: `{where}`. The setting, and the fixes this check found: docs/notes/PARITY.md.",
        "",
        table(record).markdown(),
    ]
