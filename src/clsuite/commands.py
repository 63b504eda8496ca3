"""The ``clsuite`` command's verbs, each a thin dispatch to the function that does the work.

    clsuite [run] [overrides]         one run (no verb = run): clsuite.cli.main
    clsuite sweep [overrides]         a sweep (Hydra multirun, = clsuite -m ...): clsuite.cli.main
    clsuite paper TARGET [...]        a paper table or figure, sweep + tables (= make TARGET): clsuite.paper.main
    clsuite aggregate EXP [...]       tables and figures of multirun/EXP/: clsuite.analysis.report.main_aggregate
    clsuite report [--docs]           the reproduction report from multirun/: clsuite.analysis.report.main_report
    clsuite wandb EXP [...]           W&B runs and charts from results files: clsuite.wandb_sync.main
    clsuite help [VERB]               the verbs and the config keys (= clsuite --help), or one verb's options

A checkout runs the same functions as ``python src/run.py [verb] ...`` and ``python scripts/<verb>.py``
(``scripts/aggregate.py``, ``report.py``, ``wandb_sync.py``); ``python -m clsuite [verb] ...`` works
wherever the package is importable. ``clsuite.home.hint`` names the form that works where the process
runs.

An argument that is a verb only counts as one in the first place; overrides always hold ``=``
(``method=mir``) and options start with ``-``, so neither is taken for a verb.
"""

from __future__ import annotations

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


def _paper(argv: list[str]) -> int:
    from clsuite.paper import main

    return main(argv)


def _help(argv: list[str]) -> int:
    """``clsuite help``: what ``clsuite --help`` prints; ``clsuite help VERB``: that verb's own help."""
    if not argv or argv[0] in ("run", "sweep"):
        from clsuite.confighelp import help_text

        print(help_text())
        return 0
    if argv[0] not in VERBS:
        print(f"error: unknown verb {argv[0]!r}; valid choices: {', '.join(VERBS)}", file=sys.stderr)
        return 2
    try:
        return VERBS[argv[0]](["--help"])
    except SystemExit as e:  # argparse's --help
        return int(e.code or 0)


VERBS: dict[str, Callable[[list[str]], int]] = {
    "run": _run,
    "sweep": _sweep,
    "paper": _paper,
    "aggregate": _aggregate,
    "report": _report,
    "wandb": _wandb,
    "help": _help,
}


def split_verb(argv: list[str]) -> tuple[str, list[str]]:
    """``(verb, the rest)``; no verb first means ``run``."""
    if argv and argv[0] in VERBS:
        return argv[0], argv[1:]
    return "run", argv


def main(argv: list[str] | None = None) -> None:
    """``clsuite [verb] ...`` (the console script) and ``python src/run.py [verb] ...``."""
    verb, rest = split_verb(sys.argv[1:] if argv is None else list(argv))
    sys.exit(VERBS[verb](rest))


if __name__ == "__main__":
    main()
