"""The paper's open choices, measured: each value of a choice against the reading's default,
paired by seed (``make fig-choices``). Steps of :func:`ledger`: docs/GUIDE.md, "The paper's open
choices"; the choices and their values: docs/PROTOCOL.md, section 8.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.contrast import contrast
from clsuite.analysis.load import Experiment, load_experiment, order_readings
from clsuite.analysis.open_choices import BY_EXPERIMENT, CHOICES, NO_DEFAULT, PREFIX, Choice, show  # noqa: F401 (read as choices.<name> too)
from clsuite.config.home import hint
from clsuite.core.errors import fail
from clsuite.run.io import Unreadable, os_error_line, write_bytes_atomic

QUANTITIES = ("acc", "forget")
ENV = ("code", "torch_threads", "device", "torch")


def command() -> str:
    """What runs the choices' sweeps, in the form that works here."""
    return hint("paper", "choices", "--launcher", "joblib")


@dataclass(frozen=True)
class Row:
    choice: Choice
    reading: str
    value: str
    default: str
    benchmark: str
    method: str
    default_acc: float  # mean over the paired seeds
    diffs: dict  # quantity -> stats.Paired (value - default)

    @property
    def n(self) -> int:
        return self.diffs["acc"].n


def choice_rows(choice: Choice, e: Experiment) -> list[Row]:
    """Every (non-default value, benchmark, method, reading, setting) of one choice's experiment."""
    if e.empty:
        return []
    runs = e.runs
    own = choice.own_keys({k for f in runs["flat"] for k in f})

    def setting(r) -> str:  # what must be equal for two runs to be paired: the config less the choice's keys, the env
        return json.dumps(
            [{k: v for k, v in r["flat"].items() if k not in own}, [str(r[k]) for k in ENV]],
            sort_keys=True,
            default=str,
        )

    runs = runs.assign(value=runs["flat"].map(lambda f: show(f.get(choice.key))), setting=runs.apply(setting, axis=1))

    def default(key) -> str | None:  # the base arm: the reading's default value (none: the group is not paired)
        d = choice.default(key[2], key[0], key[1])
        return None if d is NO_DEFAULT else show(d)

    frame = contrast(runs, "value", default, QUANTITIES, by=["benchmark", "method", "reading", "setting"])
    out = [Row(choice, r.reading, r.arm, r.base, r.benchmark, r.method, r.acc_base, {q: getattr(r, q) for q in QUANTITIES})
           for r in frame.itertuples()]  # fmt: skip
    readings = order_readings({r.reading for r in out})
    benches = pv.order_benchmarks({r.benchmark for r in out})
    methods = pv.order_methods([r.method for r in out])
    return sorted(
        out, key=lambda r: (readings.index(r.reading), r.value, benches.index(r.benchmark), methods.index(r.method))
    )


def ledger(experiments: dict[str, Experiment]) -> list[Row]:
    """Every choice's rows, in :data:`CHOICES` order."""
    return [row for c in CHOICES if c.experiment in experiments for row in choice_rows(c, experiments[c.experiment])]


def table(rows: list[Row]) -> tb.Table:
    t = tb.Table(
        "The paper's open choices: each value against the reading's default, paired by seed",
        ["choice", "reading", "value (default)", "benchmark", "method", "n", "Acc default (%)",
         "Δ Acc [95% CI]", "Δ Forget [95% CI]"],
        note="Δ = value − default, per seed, mean over the seeds both arms have (n), 95% Student-t interval. "
        "Acc higher is better, Forget lower is better. Everything but the choice is the reading's setting.",
    )  # fmt: skip
    for r in rows:
        t.add([r.choice.name, r.reading, f"{r.value} ({r.default})", pv.bench_label(r.benchmark),
               pv.method_label(r.method), r.n, f"{r.default_acc:.1f}", r.diffs["acc"].interval(),
               r.diffs["forget"].interval()], group=r.choice)  # fmt: skip
    return t


def markdown(experiments: dict[str, Experiment], level: int = 3) -> list[str]:
    """The report's section body: the ledger and, per choice, which way the paper's text points."""
    rows = ledger(experiments)
    ran = [c for c in CHOICES if c.experiment in experiments and not experiments[c.experiment].empty]
    out = [
        f"Each choice the paper leaves open (PROTOCOL section 8), measured alone: every other key at the "
        f"reading's value, the default's runs shared between the choices. Runs: `multirun/{PREFIX}<choice>/`; "
        f"fill or extend them: `{command()}` (sweeps/choices_*.yaml).",
        "",
    ]
    if not rows:
        return [*out, f"Not run: `{command()}`.", ""]
    out += [table(rows).markdown(level), "Which way the paper's text points:", ""]
    for c in CHOICES:
        to = f"`{c.paper_value}`" if c.paper_value is not None else "no value"
        run = "" if c in ran else f" (not run: `{command()}`)"
        out.append(f"- **{c.name}** (`{c.key}`), {c.title}: the text points to {to}; {c.paper}.{run}")
    return [*out, ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="The paper's open choices, paired by seed, from multirun/choices_*/.")
    ap.add_argument("--multirun-dir", default="multirun")
    ap.add_argument("--out", default="results/choices", help="writes <out>/choices.md")
    a = ap.parse_args(argv)
    root = Path(a.multirun_dir)
    try:
        experiments = {
            c.experiment: load_experiment(root / c.experiment) for c in CHOICES if (root / c.experiment).is_dir()
        }
    except Unreadable as e:  # a grid.json (clsuite.analysis.load.read_grid)
        return fail(str(e))
    if not experiments:
        return fail(f"no runs under {root}/{PREFIX}*/: run `{command()}` first")
    text = "\n".join(["# The paper's open choices", "", *markdown(experiments)])
    try:
        write_bytes_atomic(Path(a.out) / "choices.md", text.encode())
    except OSError as e:  # its folder cannot be written (read-only, a full disk): docs/INTEGRITY.md, section 7
        return fail(f"{os_error_line(e)}; nothing written", status=1)
    print(text)
    return 0
