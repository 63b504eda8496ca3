"""The paper's tables and figures, one command each: ``clsuite paper <target>`` (= ``make <target>``;
docs/REPRODUCING.md lists the targets and options).

A target is one sweep, ``<sweeps>/<name>.yaml`` (``clsuite.config.SWEEPS_DIR``: the repository's
``sweeps/``, or the copy an installed package carries), then the aggregation of the folder it wrote
with the target's layout. The Makefile's paper targets call this verb: one home for both. Steps of
:func:`plan` and :func:`main`:

1. the target: a sweep name (``first_task``) or its Make name (``fig-first-task``); any other sweep of
   the sweeps folder runs the same way, its folder aggregated as an ad-hoc sweep (``cells_joint``);
2. the sweep's command line: ``--config-dir <sweeps> --config-name <name>``, then the options as
   overrides (:func:`sweep_args`; ``seed=range(0,<seeds>)``; defaults :data:`DEFAULTS`; the options:
   docs/REPRODUCING.md), then the user's overrides;
3. the folder: ``--experiment``, else the last ``experiment=`` override, else the sweep's name;
4. the sweep runs in a child process with this interpreter (``python -m clsuite``), then the
   aggregation runs whatever the sweep's outcome; the exit status is the aggregation's when it
   failed, else the sweep's (1: a job failed, 2: bad input, 130 / 143: stopped), as in the Makefile.

``all`` runs the targets in :data:`TARGETS` order and stops at the first that fails, as ``make paper``.
``choices`` runs the six open-choice sweeps (10 seeds unless ``--seeds``; each writes its own folder,
so ``--experiment`` is refused), goes on past a sweep whose jobs failed, then aggregates them and
writes the paired ledger (``clsuite.analysis.choices``).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys

from clsuite.analysis.paper_values import TARGETS
from clsuite.config import SWEEPS_DIR
from clsuite.home import child_env, hint

GROUPS = {
    "all": "every target above, in order (= make paper)",
    "choices": "the paper's open choices (= make fig-choices)",
}
DEFAULTS = {"seeds": 5, "choice_seeds": 10, "reading": "mir_code", "launcher": "basic"}
LISTS = {"benchmarks": "benchmark", "methods": "method", "memories": "memory", "taus": "tau", "lambdas": "lambda"}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="clsuite paper",
        description="Run a paper target's sweep, then its tables and figures (results/<experiment>/).",
        epilog="targets: "
        + "; ".join(f"{k}: {v}" for k, v in {**TARGETS, **GROUPS}.items())
        + ". Make's names work too (fig-memory).",
    )
    ap.add_argument("target", help=", ".join(TARGETS) + ", all or choices")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every job (logger=none batch_size=10)")
    ap.add_argument("--seeds", type=int, help=f"seeds 0..n-1 (default {DEFAULTS['seeds']}; choices: 10)")
    ap.add_argument("--reading", default=DEFAULTS["reading"], help="paper_text | mir_code (default: mir_code)")
    ap.add_argument("--launcher", default=DEFAULTS["launcher"], help="basic | joblib | slurm | submitit_local")
    ap.add_argument("--jobs", type=int, help="joblib workers (hydra.launcher.n_jobs)")
    for opt, key in LISTS.items():
        ap.add_argument(f"--{opt}", metavar="A,B", help=f"{key}=A,B instead of the sweep's own list")
    ap.add_argument("--experiment", help="the folder: multirun/<experiment>/, results/<experiment>/")
    ap.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    return ap


def sweep_args(a: argparse.Namespace, seeds: int, experiment: bool = True) -> list[str]:
    """The overrides every sweep of the target gets (step 2)."""
    out = [f"reading={a.reading}", f"launcher={a.launcher}", f"seed=range(0,{seeds})"]
    out += [f"{key}={getattr(a, opt)}" for opt, key in LISTS.items() if getattr(a, opt)]
    out += [f"hydra.launcher.n_jobs={a.jobs}"] if a.jobs is not None else []
    out += [f"experiment={a.experiment}"] if a.experiment and experiment else []
    return out + list(a.overrides)


def folder(a: argparse.Namespace, name: str) -> str:
    """Step 3: where the target's runs go and are aggregated from."""
    given = [o.split("=", 1)[1] for o in a.overrides if o.split("=", 1)[0].lstrip("+") == "experiment"]
    return a.experiment or (given[-1] if given else name)


def sweep_command(name: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "clsuite", "--config-dir", str(SWEEPS_DIR), "--config-name", name, *args]


def plan(argv: list[str]) -> list[tuple[str, list[str]]]:
    """``[(kind, argv)]``: ``("sweep", command line)``, ``("aggregate", main_aggregate's argv)``,
    ``("choices", clsuite.analysis.choices.main's argv)``, in order. ``ValueError``: bad input."""
    a = parser().parse_intermixed_args(argv)
    target = a.target.removeprefix("fig-").replace("-", "_")  # a Make target's name: fig-first-task
    if a.seeds is not None and a.seeds < 1:
        raise ValueError(f"--seeds must be a whole number >= 1, got {a.seeds}")
    if target == "choices":
        from clsuite.analysis.choices import CHOICES

        if a.experiment or any(o.split("=", 1)[0].lstrip("+") == "experiment" for o in a.overrides):
            raise ValueError("choices writes one folder per choice (multirun/choices_<name>/): no --experiment")
        args = sweep_args(a, a.seeds or DEFAULTS["choice_seeds"])
        steps = [("sweep", sweep_command(c.experiment, args)) for c in CHOICES]
        return [*steps, ("aggregate", [c.experiment for c in CHOICES]), ("choices", [])]
    names = list(TARGETS) if target == "all" else [target]
    if names[0] not in TARGETS and names[0] not in other_sweeps():
        valid = ", ".join([*TARGETS, *GROUPS])
        raise ValueError(
            f"unknown paper target {a.target!r}; valid choices: {valid}, or another sweep of {SWEEPS_DIR}: "
            + ", ".join(other_sweeps())
        )
    steps = []
    for name in names:
        layout = ["--layout", name] if name in TARGETS else []  # another sweep: an ad-hoc table
        steps += [("sweep", sweep_command(name, sweep_args(a, a.seeds or DEFAULTS["seeds"]))),
                  ("aggregate", [folder(a, name), *layout])]  # fmt: skip
    return steps


def other_sweeps() -> list[str]:
    """The sweeps of :data:`SWEEPS_DIR` that are no paper target (the Makefile's cell checks, one open
    choice): ``clsuite paper <name>`` runs one and aggregates its folder as an ad-hoc sweep."""
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml") if not p.stem.startswith("_") and p.stem not in TARGETS)


def _sweep(cmd: list[str]) -> int:
    """The sweep in a child process with this interpreter; a stop (Ctrl-C) is the child's to report."""
    child = subprocess.Popen(cmd, env=child_env())  # the child imports this very clsuite
    try:
        return child.wait()
    except KeyboardInterrupt:
        return child.wait()


def main(argv: list[str]) -> int:
    """``clsuite paper <target> [options] [overrides]``: the exit status of the first step that failed."""
    try:
        steps = plan(argv)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if "--dry-run" in argv:
        ledger = "then the paired ledger: results/choices/choices.md (clsuite.analysis.choices)"
        for kind, args in steps:
            print({"sweep": shlex.join(args), "aggregate": hint("aggregate", *args), "choices": ledger}[kind])
        return 0
    from clsuite.analysis.choices import main as ledger
    from clsuite.analysis.report import main_aggregate

    status = 0
    if steps[-1][0] == "choices":  # (the Makefile's fig-choices loop)
        for _, cmd in steps[:-2]:
            s = _sweep(cmd)
            if s not in (0, 1):
                return s  # bad input or a stop: the other choices would meet it too
            status = status or s  # a failed job: the other choices still run
        tables, paired = main_aggregate(steps[-2][1]), ledger(steps[-1][1])
        return paired or tables or status
    for (_, cmd), (_, agg) in zip(steps[::2], steps[1::2]):
        s = _sweep(cmd)
        status = main_aggregate(agg) or s  # the tables whatever the sweep's outcome
        if status:
            return status  # `all`: the first target that failed stops it, as make does
    return 0
