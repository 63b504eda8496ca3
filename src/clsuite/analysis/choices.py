"""The paper's open choices, measured: each value of a choice against the reading's default,
paired by seed (``make fig-choices``). Steps of :func:`ledger`: docs/GUIDE.md, "The paper's open
choices"; the choices and their values: docs/PROTOCOL.md, section 8.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from clsuite.analysis import paper_values as pv
from clsuite.analysis import tables as tb
from clsuite.analysis.defaults import default_of
from clsuite.analysis.load import Experiment, load_experiment, order_readings
from clsuite.analysis.stats import paired
from clsuite.home import CONF_DIR, hint
from clsuite.io import Unreadable, os_error_line, write_bytes_atomic

PREFIX = "choices_"
QUANTITIES = ("acc", "forget")
ENV = ("code", "torch_threads", "device", "torch")


def command() -> str:
    """What runs the choices' sweeps, in the form that works here."""
    return hint("paper", "choices", "--launcher", "joblib")


NO_DEFAULT = object()  # a reading without a file (unlabelled runs): nothing to pair with


@dataclass(frozen=True)
class Choice:
    name: str  # experiment multirun/choices_<name>/, sweep sweeps/choices_<name>.yaml
    title: str
    key: str  # the config key, as in the results file's config
    paper_value: str | None  # the value the paper's words point to (None: they do not say)
    paper: str  # the paper's words

    @property
    def experiment(self) -> str:
        return PREFIX + self.name

    def default(self, reading: str, benchmark: str, method: str):
        """The reading's default value of the choice for this benchmark and method (step 2);
        :data:`NO_DEFAULT` when the reading has no file."""
        if not (Path(CONF_DIR) / "reading" / f"{reading}.yaml").is_file():
            return NO_DEFAULT
        return default_of(benchmark, method, reading)[0].get(self.key)

    def own_keys(self, flat_keys) -> set:
        """The config keys that carry the choice: the key and the policy keys interpolating it."""
        leaf = self.key.split(".")[-1]
        return {k for k in flat_keys if k == self.key or k.endswith("." + leaf)}


CHOICES = (
    Choice("unscored", "E-BRS: stored score of a sample never scored", "method.update.unscored",
           None, "silent: Alg. 2 writes M[N] <- (x, y) and evicts by argmin s(m); no score is given to a new sample"),
    Choice("victim", "E-BRS: the victim in the most frequent class", "method.update.victim",
           "lowest_score", "Alg. 2 line 8, \"m = argmin_m (s(m) | y_m = ỹ)\"; Sec. IV-B: \"By removing the least "
           "important memory examples in Line 8, E-BRS prevents the most forgotten memory example from being replaced\""),
    Choice("R_t_from", "C-CMR: where R_t is drawn from", "method.replay.R_t_from", "memory",
           "Sec. IV-A: \"the number of training memories from M − R_e captured in R_t\" (memory = M − R_e)"),
    Choice("candidates", "C-CMR: C = 50 candidates or all of M", "candidates", "null",
           "Eq. 4: \"where s ∈ R^{M×1}\": every memory sample is scored (null = all of M)"),
    Choice("replay_loss", "The replay loss: split or concat", "replay_loss", "concat",
           "Alg. 1 line 10: \"θ = θ − α∇_θ l(f_θ; (R + B_t))\": one loss over R and B_t together"),
    Choice("stored_logits", "Scores against stored logits (MIR's code)", "compare_to_old_logits",
           "false", "Eq. 4: \"s(m) = l(f_θ'(x_m), y_m) − l(f_θ(x_m), y_m)\": no stored logits"),
    Choice("logits_on_overwrite", "Stored logits of an overwritten slot: reset or the previous occupant's (MIR's code)",
           "logits_on_overwrite", None,
           "silent: Eq. 4 has no stored logits (MIR's code keeps the previous occupant's: buffer.py add_reservoir)"),
)  # fmt: skip
BY_EXPERIMENT = {c.experiment: c for c in CHOICES}


def show(v) -> str:
    """A value as the command line writes it: null, true/false, 0, inf, 50, insertion; a class by its name."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str) and v.startswith("clsuite."):
        return v.rsplit(".", 1)[1]
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == int(v):
            return str(int(v))
    return str(v)


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
    out = []
    for (bench, method, reading, _), g in runs.groupby(["benchmark", "method", "reading", "setting"], sort=False):
        default = choice.default(reading, bench, method)
        if default is NO_DEFAULT:
            continue
        d = show(default)
        base = g[g["value"] == d]
        if base.empty:
            continue
        for value in sorted(set(g["value"]) - {d}):
            arm = g[g["value"] == value]
            diffs = {q: paired(dict(zip(arm["seed"], arm[q])), dict(zip(base["seed"], base[q]))) for q in QUANTITIES}
            seeds = set(arm["seed"]) & set(base["seed"])
            out.append(Row(choice, reading, value, d, bench, method,
                           float(base[base["seed"].isin(seeds)]["acc"].mean()), diffs))  # fmt: skip
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
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not experiments:
        print(f"error: no runs under {root}/{PREFIX}*/: run `{command()}` first", file=sys.stderr)
        return 2
    text = "\n".join(["# The paper's open choices", "", *markdown(experiments)])
    try:
        write_bytes_atomic(Path(a.out) / "choices.md", text.encode())
    except OSError as e:  # its folder cannot be written (read-only, a full disk): docs/INTEGRITY.md, section 7
        print(f"error: {os_error_line(e)}; nothing written", file=sys.stderr)
        return 1
    print(text)
    return 0
