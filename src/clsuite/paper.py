"""The paper's tables and figures, one command each: ``clsuite paper <target>`` (= ``make <target>``), a
sweep then the aggregation of its folder; also ``all``, ``choices`` and ``records`` (docs/GUIDE.md,
"Reproducing the paper").
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from clsuite.analysis.paper_values import BENCHMARK_LABELS, OFFICIAL_OF, TARGETS
from clsuite.config.check import SWEEPS_DIR
from clsuite.config.home import child_env, hint
from clsuite.core.errors import fail

GROUPS = {
    "all": "every target above, in order (= make paper)",
    "choices": "the paper's open choices (= make fig-choices)",
    "records": "every split-MNIST/FMNIST run of the report under portable kernels, packed into docs/records/ "
    "(= make records)",
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
        from clsuite.analysis.open_choices import CHOICES

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


def _benchmarks(cmd: list[str]) -> list[str]:
    """The benchmarks a sweep command runs: its last ``benchmark=`` override, else its sweep file's list
    (none when neither is a plain list: the sweep's own checks speak for them)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    given = [o.split("=", 1)[1] for o in cmd if o.split("=", 1)[0].lstrip("+") == "benchmark"]
    sweep = OmegaConf.load(SWEEPS_DIR / f"{cmd[cmd.index('--config-name') + 1]}.yaml")
    value = given[-1] if given else OmegaConf.select(sweep, "hydra.sweeper.params.benchmark")
    try:
        o = OverridesParser.create().parse_override(f"benchmark={value}")
        return list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(o.value())]
    except Exception:  # (glob(...), range(...): not a list of names)
        return []


def _data_problem(benchmark: str, overrides: list[str]) -> str | None:
    """Why ``benchmark`` cannot run here with the data overrides among ``overrides`` (its data is
    missing: ``clsuite.config.check.validate``'s line), else None."""
    from clsuite.api import ConfigError, compose
    from clsuite.core.data.files import DataError

    keep = [o for o in overrides if o.lstrip("+").startswith(("data.", "hydra.searchpath="))]
    try:
        compose([f"benchmark={benchmark}", *keep])
    except (ConfigError, DataError) as e:
        return str(e)
    return None


def missing_data(steps: list[tuple[str, list[str]]]) -> str | None:
    """The error line of the first benchmark of the sweeps in ``steps`` whose data is missing, with the
    way out: the same benchmarks without it (``--benchmarks``), or its copy where that is here
    (``OFFICIAL_OF``: the CIFAR-10 JPEG copy); None when every benchmark has its data."""
    problems: dict[str, str | None] = {}
    for cmd in (cmd for kind, cmd in steps if kind == "sweep"):
        listed = _benchmarks(cmd)
        for b in listed:
            if b not in problems:
                problems[b] = _data_problem(b, cmd)
        if not (bad := [b for b in listed if problems[b]]):
            continue
        copies = {b: c for c, b in OFFICIAL_OF.items()}
        ways = [",".join(rest) + " without it"] if (rest := [b for b in listed if not problems[b]]) else []
        if (copy := copies.get(bad[0])) and not _data_problem(copy, cmd):
            both = ",".join(copy if b == bad[0] else b for b in listed if b == bad[0] or not problems[b])
            ways.append(f"{both} with {BENCHMARK_LABELS[copy]}, which is here")
        way = f"; or pass --benchmarks (make: BENCHMARKS=) {', or '.join(ways)}" if ways else ""
        return f"{bad[0]} has no data: {problems[bad[0]]}{way}"
    return None


def _sweep(cmd: list[str]) -> int:
    """The sweep in a child process with this interpreter; a stop (Ctrl-C) is the child's to report."""
    child = subprocess.Popen(cmd, env=child_env())  # the child imports this very clsuite
    try:
        return child.wait()
    except KeyboardInterrupt:
        return child.wait()


def records_plan() -> list[list[str]]:
    """The report's records (docs/INTEGRITY.md, section 8), one ``clsuite paper`` argv per part: Table II
    under both readings at 10 seeds and the claims' six methods at 40 seeds under mir_code, this machine's
    Table II for the report's Numerics section (copies of Table II's runs), the sweeps of Figs. 5-7 and 9-11,
    the open choices and the cell checks at 10 seeds; split-MNIST and split-FMNIST (Fig. 9: split-FMNIST, the
    paper's other benchmark there being CIFAR-10), portable kernels."""
    from clsuite.analysis.cells import CELLS, MNISTS
    from clsuite.analysis.open_choices import CHOICES

    both = ("--benchmarks", "split_mnist,split_fmnist")
    choices = {c.experiment for c in CHOICES}
    parts = [
        ["table2", "--seeds", "40", "--methods", "er,mir,ccmr,ebrs,adaer,gem", *both],  # first: the grid is the next's
        ["table2", "--seeds", "10", "--reading", "paper_text,mir_code", *both],
        ["table2", "--seeds", "10", *both, "--experiment", "machines_portable"],  # (= make machines NUMERICS=portable)
        *([t, "--seeds", "10", *both] for t in ("memory", "first_task", "tau", "ablation")),
        ["imbalance", "--seeds", "10", "--benchmarks", "split_fmnist"],
        ["choices", "--seeds", "10"],
        *(
            [s, "--seeds", "10"]
            for c in CELLS
            if set(c.benchmarks) <= set(MNISTS)
            for s in c.sweeps
            if s not in choices
        ),
    ]
    return [[*p, "trainer.numerics=portable"] for p in parts]


def experiments(parts: list[list[str]]) -> list[str]:
    """The experiment folders the parts write, in order, each once."""
    # an aggregation step's args: [folder, --layout, target] or [folder, ...]
    steps = [args for p in parts for kind, args in plan(p) if kind == "aggregate"]
    return list(dict.fromkeys(n for args in steps for n in (args[:1] if "--layout" in args else args)))


def count(parts: list[list[str]], multirun: Path) -> tuple[int, int, int]:
    """(jobs, distinct runs, runs finished in ``multirun`` by this code) of the parts' sweeps: each sweep
    expanded and validated as it will be (``clsuite.sweep.grid``), runs told apart by config hash (a run
    several sweeps share is trained once), a run finished when a sealed results file of its config hash
    and this code's hash is there (its data and threads not compared: an estimate)."""
    from hydra import initialize_config_dir
    from hydra.types import RunMode

    from clsuite.config.check import CONF_DIR
    from clsuite.config.compose import compose
    from clsuite.run.identity import code_identity, config_hash
    from clsuite.run.results import read_run
    from clsuite.sweep.grid import expand_grid, validate_grid

    jobs, hashes = 0, set()
    for part in parts:
        for _, cmd in [s for s in plan(part) if s[0] == "sweep"]:
            cfg = compose([*cmd[3:], f"hydra.searchpath=[file://{CONF_DIR}]"], RunMode.MULTIRUN)
            grid = expand_grid(cfg)
            with initialize_config_dir(config_dir=str(SWEEPS_DIR), version_base="1.3"):
                validate_grid(cfg, grid)
            jobs += len(grid)
            hashes |= {j["config_hash"] for j in grid}
    code, done = code_identity()["hash"], set()
    for path in Path(multirun).glob("*/*/results.json"):
        run = read_run(path)
        if run.ok and (run.data["identity"].get("code") or {}).get("hash") == code:
            done.add(config_hash(run.data["config"]))
    return jobs, len(hashes), len(hashes & done)


def records(argv: list[str]) -> int:
    """``clsuite paper records [--launcher L] [--jobs N] [--dry-run] [overrides]`` (the module's opening)."""
    a = parser().parse_intermixed_args(argv)
    fixed = [f"--{o}" for o in ("seeds", *LISTS, "experiment") if getattr(a, o) is not None]
    if a.reading != DEFAULTS["reading"]:
        fixed.append("--reading")
    if fixed:
        return fail(f"records fixes its seeds, readings, benchmarks and methods: no {', '.join(fixed)}")
    launcher = "joblib" if a.jobs is not None and a.launcher == DEFAULTS["launcher"] else a.launcher  # --jobs: workers
    extra = ["--launcher", launcher, *(["--jobs", str(a.jobs)] if a.jobs is not None else []), *a.overrides]
    parts = [[*p, *extra] for p in records_plan()]
    names = experiments(parts)
    pack = ["pack", *names, "--multirun-dir", "multirun", "--replace"]  # the records remade from these runs
    if problem := missing_data([s for p in parts for s in plan(p)]):  # before counting or any sweep
        return fail(problem)
    if a.dry_run:
        for p in parts:
            print(hint("paper", *p))
        print(hint("records", *pack))
        jobs, runs, done = count(parts, Path("multirun"))
        print(f"{jobs} jobs in its sweeps, {runs} distinct runs (a run several sweeps share is trained once), "
              f"{done} of them finished in multirun/ by this code: {runs - done} to train")  # fmt: skip
        return 0
    failed = []
    for p in parts:
        status = main(p)
        if status not in (0, 1):
            return status  # bad input or a stop
        failed += [p[0]] if status else []
    if failed:
        return fail(
            f"jobs failed in {', '.join(failed)}: not packed; rerun to retry them (finished runs are skipped)", 1
        )
    from clsuite.analysis.records import main as records_main

    return records_main(pack)


def main(argv: list[str]) -> int:
    """``clsuite paper <target> [options] [overrides]``: the exit status of the first step that failed."""
    if parser().parse_intermixed_args(argv).target == "records":
        return records(argv)
    try:
        steps = plan(argv)
    except ValueError as e:
        return fail(str(e))
    if "--dry-run" in argv:
        ledger = "then the paired ledger: results/choices/choices.md (clsuite.analysis.choices)"
        for kind, args in steps:
            print({"sweep": shlex.join(args), "aggregate": hint("aggregate", *args), "choices": ledger}[kind])
        return 0
    if problem := missing_data(steps):
        return fail(problem)
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
        if s == 2:
            return s  # the sweep refused its input before any job (its line says why): nothing to aggregate
        status = main_aggregate(agg) or s  # the tables whatever the sweep's outcome
        if status:
            return status  # `all`: the first target that failed stops it, as make does
    return 0
