"""Parity with the reference codes (Mammoth, MIR): the tables of the parity record (``make parity``,
scripts/parity/harness.py; its form and checks: ``clsuite.run.archive.parity_problem``). :func:`tables` is
what ``make parity`` prints and the report shows (:func:`markdown`); the setting and the fixes:
docs/notes/PARITY.md; how the record is carried: docs/INTEGRITY.md, section 8.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from clsuite.analysis import paper_values as pv
from clsuite.analysis.stats import paired
from clsuite.analysis.tables import Table, fmt, paper_number
from clsuite.config.numerics import label
from clsuite.core.metrics import backward_transfer
from clsuite.run import archive as rec
from clsuite.run.io import Unreadable, load_json

PINNED = "e75a491"  # github.com/aimagelab/mammoth, the commit the harness is made for
MIR_PINNED = "35eda78"  # github.com/optimass/Maximally_Interfered_Retrieval (scripts/parity/mir_side.py)
TITLE = "Parity with the reference codes (Mammoth: GSS, iCaRL, HAL; MIR: ER, MIR)"
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
    for row in _rows(record, "mammoth"):
        suite = {s["seed"]: s["suite"]["acc"] for s in row["seeds"]}
        ref = {s["seed"]: s["mammoth"]["acc"] for s in row["seeds"]}
        paper = pv.table2_value(row["benchmark"], row["method"], "acc")
        t.add([pv.method_label(row["method"]), pv.bench_label(row["benchmark"]), row["reading"], _seeds(list(suite)),
               _mean_sd(suite.values()), _mean_sd(ref.values()), paired(suite, ref).interval(),
               ", ".join(f"{suite[k] - ref[k]:+.1f}" for k in sorted(suite)), paper_number(paper)])  # fmt: skip
    return t


def _rows(record: dict, reference: str) -> list[dict]:
    return [r for r in record["rows"] if rec.reference_of(r) == reference]


def welch(x, y) -> str:
    """mean(x) − mean(y) with its 95% Welch interval (unpaired: the two sides share no split)."""
    x, y = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    d = x.mean() - y.mean()
    if len(x) < 2 or len(y) < 2 or (x.std() == 0 and y.std() == 0):
        return f"{d:+.1f} (n={len(x)}, {len(y)}: no interval)"
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    return f"{d:+.1f} [{ci.low:+.1f}, {ci.high:+.1f}]"


def _per_task_mean(Rs, cells) -> str:
    """``cells(R)`` (a value per task: R's final row, its diagonal) per task, mean over seeds."""
    return " / ".join(f"{v:.0f}" for v in np.mean([cells(np.asarray(R)) for R in Rs], axis=0))


def mir_table(record: dict) -> Table | None:
    """The rows beside MIR's own code (``make parity MIR=``), one line per (method, benchmark, reading): each
    side's Acc and BWT (mean ± sd over seeds), the difference of the means with its Welch interval (not paired:
    MIR's split and stream come from its own RNG use), R's diagonal and final row per task (means over seeds);
    None when the record has none."""
    rows = _rows(record, "mir")
    if not rows:
        return None
    p = record["provenance"]
    commit = f"commit {p['suite_commit'][:10]}" if p.get("suite_commit") else "no git commit"
    changed = sorted({o for r in rows for o in r.get("suite_overrides", ()) if not o.startswith("trainer.numerics=")})
    small = sorted({r["settings"]["train_per_class"] for r in rows if (r.get("settings") or {}).get("train_per_class")})
    read = [s["suite"]["from"] for r in rows for s in r["seeds"] if "from" in s["suite"]]  # (harness --suite-from)
    records, codes = ", ".join(sorted({f["record"] for f in read})), ", ".join(sorted({f["code"] for f in read}))
    where = "; ".join(sorted({f"{f['cpu']}, {f['numerics']}" for f in read}))
    note = (
        f"MIR's er_main.py at {p['mir_commit']} with the patches of scripts/parity/mir_side.py "
        f"({len(p.get('mir_patches', []))}: torchvision, torch 2.x; docs/notes/PARITY.md), its CIFAR-10 script line; "
        f"the suite's code {p['suite_code']} ({commit}{'+dirty' if p.get('suite_dirty') else ''}); CPU kernels "
        f"{label(p['numerics'])}; {p['cpu']}."
        + (
            f" The suite's side not trained here but read from the sealed runs of the record {records} (code "
            f"{codes}; {where}): the code, kernels and CPU above are MIR's side's."
            if read
            else ""
        )
        + " Not paired: each side's own class split, validation cut and stream "
        "(the comparison is of the distributions over seeds); *diagonal*: R[j, j], task j just after its training, "
        "and *final row*: R[T, j], per task j, means over seeds; "
        "*paper*: Table II (official CIFAR-10)."
        + (f" Changed from the harness's setting: the suite's side with `{'`, `'.join(changed)}`." if changed else "")
        + (f" SMOKE: {', '.join(map(str, small))} training images per class, not the real row." if small else "")
        + ("" if record["complete"] else " Incomplete: the harness was stopped before its last seed.")
    )
    t = Table(
        f"Acc and BWT (%) of the suite's ER and MIR and MIR's own code ({p['mir_commit']}) on the CIFAR-10 JPEG copy",
        ["method", "benchmark", "reading", "seeds", "suite Acc", "MIR code Acc", "suite − MIR code [95% Welch]",
         "suite BWT", "MIR code BWT", "suite diagonal", "MIR code diagonal", "suite final row", "MIR code final row",
         "paper"],
        note=note,
    )  # fmt: skip
    for row in rows:
        suite = {s["seed"]: s["suite"] for s in row["seeds"]}
        ref = {s["seed"]: s["mir"] for s in row["seeds"]}
        acc = lambda side: [v["acc"] for v in side.values()]  # noqa: E731
        bwt = lambda side: [backward_transfer(v["R"]) for v in side.values()]  # noqa: E731
        paper = pv.table2_value(pv.OFFICIAL_OF.get(row["benchmark"], row["benchmark"]), row["method"], "acc")
        t.add([pv.method_label(row["method"]), pv.bench_label(row["benchmark"]), row["reading"], _seeds(list(suite)),
               _mean_sd(acc(suite)), _mean_sd(acc(ref)), welch(acc(suite), acc(ref)), _mean_sd(bwt(suite)),
               _mean_sd(bwt(ref)), *(_per_task_mean([v["R"] for v in side.values()], cells)
                                     for cells in (np.diag, lambda R: R[-1]) for side in (suite, ref)),
               paper_number(paper)])  # fmt: skip
    return t


def _part(record: dict, reference: str) -> dict | None:
    """The harness record (a part of ``record``, or itself) that holds ``reference``'s rows; None when none."""
    return next((p for p in rec.parity_parts(record) if reference in rec.parity_references(p)), None)


def tables(record: dict) -> list[Table]:
    """What ``make parity`` prints: the Mammoth table when the record has Mammoth rows, the MIR table when MIR
    rows (each from its own part of a merged record, with that part's provenance)."""
    mammoth, mir = _part(record, "mammoth"), _part(record, "mir")
    return ([table(mammoth)] if mammoth else []) + ([mir_table(mir)] if mir else [])


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
    out, mammoth, mir = [], _part(record, "mammoth"), _part(record, "mir")
    if mammoth:
        out += [
            "The suite's GSS, iCaRL and HAL beside Mammoth's unmodified classes, driven by `make parity` on the "
            "suite's split, initial weights and (GSS, HAL) batches, both under the same kernels. Every R and Acc, the "
            f"settings and both commits: `{where}`. The setting, and the fixes this check found: docs/notes/PARITY.md.",
            "",
            table(mammoth).markdown(),
        ]
    if mir:
        out += [
            "The suite's ER and MIR beside MIR's own code (`make parity MIR=<checkout>`, its CIFAR-10 script line on "
            f"the CIFAR-10 JPEG copy; patched only to run on torch 2.x without torchvision), every R in `{where}`; "
            """what the patches are and why: docs/notes/PARITY.md, "MIR's code".""",
            "",
            mir_table(mir).markdown(),
        ]
    return out
