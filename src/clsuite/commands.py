"""The ``clsuite`` command's verbs, each a thin dispatch to the function that does the work.

    clsuite [run] [overrides]         one run (no verb = run): clsuite.cli.main
    clsuite sweep [overrides]         a sweep (Hydra multirun, = clsuite -m ...): clsuite.cli.main
    clsuite aggregate EXP [...]       tables and figures of multirun/EXP/: clsuite.analysis.report.main_aggregate
    clsuite report [--docs]           the reproduction report from multirun/: clsuite.analysis.report.main_report
    clsuite wandb EXP [...]           W&B runs and charts from results files: clsuite.wandb_sync.main

A checkout runs the same functions as ``python src/run.py [verb] ...`` and ``python scripts/<verb>.py``
(``scripts/aggregate.py``, ``report.py``, ``wandb_sync.py``). :func:`hint` names the form that
exists where the process runs: ``clsuite aggregate table2`` when the console command is on the
PATH (an installed package), else ``python scripts/aggregate.py table2`` (a checkout).

An argument that is a verb only counts as one in the first place; overrides always hold ``=``
(``method=mir``) and options start with ``-``, so neither is taken for a verb.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path


def _run(argv: list[str]) -> int:
    from clsuite.cli import main

    main(argv)  # exits with its own status on failure
    return 0


def _sweep(argv: list[str]) -> int:
    return _run(argv if {"-m", "--multirun"} & set(argv) else ["-m", *argv])


def _aggregate(argv: list[str]) -> int:
    from clsuite.analysis.report import main_aggregate

    return main_aggregate(argv)


def _report(argv: list[str]) -> int:
    from clsuite.analysis.report import main_report

    return main_report(argv, root=Path.cwd())


def _wandb(argv: list[str]) -> int:
    from clsuite.wandb_sync import main

    return main(argv)


VERBS: dict[str, Callable[[list[str]], int]] = {
    "run": _run,
    "sweep": _sweep,
    "aggregate": _aggregate,
    "report": _report,
    "wandb": _wandb,
}
SCRIPTS = {"aggregate": "aggregate.py", "report": "report.py", "wandb": "wandb_sync.py"}  # a checkout's scripts/
CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root when this file is src/clsuite/commands.py


def split_verb(argv: list[str]) -> tuple[str, list[str]]:
    """``(verb, the rest)``; no verb first means ``run``."""
    if argv and argv[0] in VERBS:
        return argv[0], argv[1:]
    return "run", argv


def hint(verb: str, *args: str) -> str:
    """The command line of ``verb`` that exists here: the console command, else the checkout's script."""
    script = CHECKOUT / "scripts" / SCRIPTS.get(verb, "")
    if shutil.which("clsuite") or verb not in SCRIPTS or not script.is_file():
        return " ".join(["clsuite", verb, *args])
    try:
        shown = script.relative_to(Path.cwd())
    except ValueError:
        shown = script
    return " ".join(["python", str(shown), *args])


def main(argv: list[str] | None = None) -> None:
    """``clsuite [verb] ...`` (the console script) and ``python src/run.py [verb] ...``."""
    verb, rest = split_verb(sys.argv[1:] if argv is None else list(argv))
    sys.exit(VERBS[verb](rest))


if __name__ == "__main__":
    main()
